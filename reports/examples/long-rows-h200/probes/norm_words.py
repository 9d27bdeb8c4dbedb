"""LayerNorm long rows (bf16 4096 x 131072, rows of whole chunks: EVEN): main's looped kernel
against copies of its source that read x, the weight and the bias (or x only, or the weight and
the bias only) as int32 words of two bf16,
widened as softmax's WORDS does (one shift or mask an element, tl.interleave back into column
order, so the same bits), ten rounds alternating in one process, both launched as the bench
launches main's (one program an SM, no stagger); "of copy" against this process's copy bandwidth.

    python3 norm_words.py OUT.json           (after pip install -e . at the repository root)
    python3 norm_words.py --check            (interpreter: the copy's bits against main's)
"""
import importlib.util
import inspect
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py beside it

HEADER = '''
from portcheck.kernels._rows import all_or_none
from portcheck.kernels._stagger import idle_before_first_row


@triton.jit
def _widen(w):
    return tl.interleave((w << 16).to(tl.float32, bitcast=True), (w & -65536).to(tl.float32, bitcast=True))
'''

WORDS = "tl.pointer_type(tl.int32)"
LN_EDITS = [   # (old, new, times): main's EVEN code, every x, weight and bias load as words
    ("cols = tl.arange(0, BLOCK)\n", "cols = tl.arange(0, BLOCK)\n    pairs = tl.arange(0, BLOCK // 2)\n", 1),
    ("x = nxt.to(tl.float32)", "x = _widen(nxt)", 2),
    ("nxt = tl.load(x_row + cols, mask=first, other=zero, eviction_policy=",
     f"nxt = tl.load(x_row.to({WORDS}) + pairs, eviction_policy=", 2),
    ("nxt = tl.load(x_row + start + BLOCK + cols, mask=all_or_none(start + BLOCK < n_cols, BLOCK),",
     f"nxt = tl.load(x_row.to({WORDS}) + (start + BLOCK) // 2 + pairs, mask=all_or_none(start + BLOCK < n_cols, BLOCK // 2),", 2),
    ("y = y * tl.load(w_ptr + start + cols, mask=ok, other=zero).to(tl.float32)",
     f"y = y * _widen(tl.load(w_ptr.to({WORDS}) + start // 2 + pairs))", 1),
    ("y = y + tl.load(b_ptr + start + cols, mask=ok, other=zero).to(tl.float32)",
     f"y = y + _widen(tl.load(b_ptr.to({WORDS}) + start // 2 + pairs))", 1),
]

# sm_90a, Triton 3.6, cross-compiled: main 736 instructions, 64 registers, no spills; all words
# 664 instructions (no PRMT), 16 bytes of stack; x only or weight and bias only, no spills
VARIANTS = {"words": LN_EDITS, "x words": LN_EDITS[:4], "w b words": LN_EDITS[:1] + LN_EDITS[4:]}


def patched(fn, edits):
    """fn's source (a @triton.jit kernel) with each old text replaced the given number of times."""
    src = inspect.getsource(fn.fn)
    src = src[src.index("def "):]
    for old, new, times in edits:
        if src.count(old) != times:
            raise ValueError(f"{old!r} found {src.count(old)} times, expected {times}")
        src = src.replace(old, new)
    path = os.path.join(tempfile.mkdtemp(), "norm_words_kernel.py")
    with open(path, "w") as f:
        f.write("import triton\nimport triton.language as tl\n" + HEADER + "\n\n@triton.jit\n" + src)
    spec = importlib.util.spec_from_file_location("norm_words_kernel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, fn.fn.__name__)


def check():
    """On any device (the interpreter too): the copy writes main's bits on EVEN bf16 rows."""
    import torch
    from portcheck.kernels import layernorm as LN
    kern = patched(LN.layernorm_looped_kernel, LN_EDITS)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(5, 256, generator=g) * 3 + 1).to(dev, torch.bfloat16)
    w, b = (torch.randn(256, generator=g).to(dev, torch.bfloat16) for _ in range(2))
    outs = []
    for k in (LN.layernorm_looped_kernel, kern):
        y, mean, rstd = torch.empty_like(x), torch.empty(5, device=dev), torch.empty(5, device=dev)
        k[(2,)](x, w, b, y, mean, rstd, 5, 256, 256, 256, 1e-5, HAS_W=True, HAS_B=True, BLOCK=64, EVEN=True,
                num_warps=2)
        outs.append((y, mean, rstd))
    assert all(torch.equal(a, b) for a, b in zip(*outs)), "the words copy changed a bit"
    print("norm_words: the copy writes main's bits")


def main(path: str) -> None:
    import triton
    import torch
    from rows_common import bench_rows, launchers, row_timer
    from portcheck.kernels import layernorm as LN
    r = bench_rows()
    launch = launchers(r)
    kernels = [("elements", LN.layernorm_looped_kernel)] + [(label, patched(LN.layernorm_looped_kernel, edits))
                                                            for label, edits in VARIANTS.items()]
    rows = []
    t = row_timer(r.x, r.y, r.copy, rows)
    launch.layernorm(LN.layernorm_looped_kernel)()
    ref = r.y.float().clone()
    for round_ in range(10):
        for label, k in kernels[::1 if round_ % 2 == 0 else -1]:
            t(f"round {round_} layernorm {label}", launch.layernorm(k), ref)
    json.dump({"copy_gbs": r.copy, "sms": r.sms, "rows": rows, "torch": torch.__version__,
               "triton": triton.__version__}, open(path, "w"), indent=1)


if __name__ == "__main__":
    check() if sys.argv[1] == "--check" else main(sys.argv[1])
