"""RMSNorm of long rows with the row's first chunks kept in registers between the passes (bf16
4096 x 131072, one program per SM), against main's looped kernel in the same rounds.

Main's looped kernel reads each row twice, and the profile put the second read's L2 hit rate at
57% (`ncu-rmsnorm-long.csv`): 132 rows of 256 KB in flight do not stay in L2. Here pass 1 loads
the row's first KEEP chunks at once and holds them, so pass 2 re-reads only the chunks after
them, which pass 1 read last (the likeliest still in L2), and each program's L2 working set
shrinks by KEEP chunks.

    python3 keep_rows.py OUT.json

Variants are those that compile without spills for sm_90a under Triton 3.6 (the H200's), checked
with `--check-spills` on a machine with that Triton and no GPU.
"""
import json
import os
import sys

import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py beside it
from rows_common import nvidia_resources, row_timer  # noqa: E402

# (BLOCK, KEEP, num_warps): those that spill at most 8 bytes a thread under Triton 3.6 for sm_90a
# (`--check-spills`, keep-rows-spills-triton36.jsonl; 32768-column chunks, 16 warps and KEEP = 3
# of 16384 spilled 48 to 448 bytes); KEEP x BLOCK = 16384 to 49152 of the row's 131072 columns
VARIANTS = [(16384, 1, 32), (16384, 2, 32), (8192, 4, 32), (8192, 5, 32), (8192, 6, 32)]


@triton.jit
def _group_squares(x):
    """Sum of squares of each 8-element (16-byte) group of a chunk: within the thread that loaded
    it, so the row's state costs BLOCK / 8 lanes instead of BLOCK."""
    f = x.to(tl.float32)
    return tl.sum(tl.reshape(f * f, (x.shape[0] // 8, 8)), axis=1)


@triton.jit
def _fresh(x, zero):
    """x as fp32, converted anew (xor with a zero the compiler cannot see): else the conversion
    pass 1 made stays alive across the loops, a register per element instead of half of one."""
    return (x.to(tl.int16, bitcast=True) ^ zero).to(tl.bfloat16, bitcast=True).to(tl.float32)


@triton.jit
def rms_keep_kernel(x_ptr, y_ptr, n_rows, n_cols, stride, eps, BLOCK: tl.constexpr, KEEP: tl.constexpr):
    """Persistent: program p takes rows p, p + P, ... Needs n_cols >= KEEP * BLOCK."""
    cols = tl.arange(0, BLOCK)
    zero = (tl.program_id(0) >= n_rows).to(tl.int16)   # 0 in every program that has a row
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + tl.cast(row, tl.int64) * stride
        y_row = y_ptr + tl.cast(row, tl.int64) * stride
        k0 = tl.load(x_row + cols, eviction_policy="evict_first")
        if KEEP >= 2:
            k1 = tl.load(x_row + BLOCK + cols, eviction_policy="evict_first")
        if KEEP >= 3:
            k2 = tl.load(x_row + 2 * BLOCK + cols, eviction_policy="evict_first")
        if KEEP >= 4:
            k3 = tl.load(x_row + 3 * BLOCK + cols, eviction_policy="evict_first")
        if KEEP >= 5:
            k4 = tl.load(x_row + 4 * BLOCK + cols, eviction_policy="evict_first")
        if KEEP >= 6:
            k5 = tl.load(x_row + 5 * BLOCK + cols, eviction_policy="evict_first")
        first = KEEP * BLOCK
        nxt = tl.load(x_row + first + cols, mask=first + cols < n_cols, other=0.0, eviction_policy="evict_last")
        squares = _group_squares(k0)
        if KEEP >= 2:
            squares += _group_squares(k1)
        if KEEP >= 3:
            squares += _group_squares(k2)
        if KEEP >= 4:
            squares += _group_squares(k3)
        if KEEP >= 5:
            squares += _group_squares(k4)
        if KEEP >= 6:
            squares += _group_squares(k5)
        for start in range(first, n_cols, BLOCK):
            x = nxt
            ahead = start + BLOCK + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_last")
            squares += _group_squares(x)
        rstd = tl.math.rsqrt(tl.sum(squares, axis=0) / n_cols + eps)
        # pass 2: the chunks read last first (they are the likeliest in L2), then the kept ones
        nxt = tl.load(x_row + first + cols, mask=first + cols < n_cols, other=0.0, eviction_policy="evict_first")
        for start in range(first, n_cols, BLOCK):
            ok = start + cols < n_cols
            y = nxt.to(tl.float32) * rstd
            ahead = start + BLOCK + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_first")
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=ok, eviction_policy="evict_first")
        tl.store(y_row + cols, (_fresh(k0, zero) * rstd).to(y_ptr.dtype.element_ty))
        if KEEP >= 2:
            tl.store(y_row + BLOCK + cols, (_fresh(k1, zero) * rstd).to(y_ptr.dtype.element_ty))
        if KEEP >= 3:
            tl.store(y_row + 2 * BLOCK + cols, (_fresh(k2, zero) * rstd).to(y_ptr.dtype.element_ty))
        if KEEP >= 4:
            tl.store(y_row + 3 * BLOCK + cols, (_fresh(k3, zero) * rstd).to(y_ptr.dtype.element_ty))
        if KEEP >= 5:
            tl.store(y_row + 4 * BLOCK + cols, (_fresh(k4, zero) * rstd).to(y_ptr.dtype.element_ty))
        if KEEP >= 6:
            tl.store(y_row + 5 * BLOCK + cols, (_fresh(k5, zero) * rstd).to(y_ptr.dtype.element_ty))



def check_spills() -> None:
    """Cross-compile every variant for sm_90a with this machine's Triton: registers and stack
    (spill) bytes (portcheck.compile.binary.nvidia_resources)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    sig = {"x_ptr": "*bf16", "y_ptr": "*bf16", "n_rows": "i32", "n_cols": "i32", "stride": "i32", "eps": "fp32",
           "BLOCK": "constexpr", "KEEP": "constexpr"}
    for block, keep, warps in VARIANTS:
        out = triton.compile(ASTSource(rms_keep_kernel, sig, {"BLOCK": block, "KEEP": keep},
                                       {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]],
                                        (4,): [["tt.divisibility", 16]]}),
                             target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
        print(json.dumps({"triton": triton.__version__, "block": block, "keep": keep, "warps": warps,
                          **nvidia_resources(out.asm["cubin"])}))


def main(path: str) -> None:
    import torch
    from portcheck.kernels import rmsnorm
    from portcheck.speed.ceilings import measure_copy
    copy = measure_copy()["gbs"]
    n_rows, n_cols = 4096, 131072
    x = torch.randn(n_rows, n_cols, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    t = row_timer(x, y, copy, rows)
    for _ in range(2):
        t("rmsnorm main (looped)", lambda: rmsnorm.rms_norm(x, out=y, long_rows=True))
        ref = y.float().clone()
        for block, keep, warps in VARIANTS:
            t(f"keep {keep} x {block} w{warps}", lambda b=block, k=keep, w=warps: rms_keep_kernel[(sms,)](
                x, y, n_rows, n_cols, n_cols, 1e-6, BLOCK=b, KEEP=k, num_warps=w), ref)
    json.dump({"copy_gbs": copy, "rows": rows}, open(path, "w"), indent=1)

if __name__ == "__main__":
    if sys.argv[1] == "--check-spills":
        check_spills()
    else:
        main(sys.argv[1])
