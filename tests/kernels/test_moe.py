"""The MoE kernels' contracts beyond the generated cases: bad input refused before any launch,
the routing tie rule and the alignment order on hand-worked examples, the oracles against
numbers worked out by hand, unplaced (expert-parallel) rows left alone, bf16 routing on the
interpreter, and the GEMM's tile configs against each arch's shared memory / LDS."""
import os

import pytest
import torch

from portcheck import cases
from portcheck.kernels import moe_align as A
from portcheck.kernels import moe_gemm as G
from portcheck.kernels import moe_routing as R
from portcheck.oracles import moe as O
from portcheck.facts.archs import ARCHS

INTERPRETER = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
DEVICE = "cpu" if INTERPRETER else "cuda"
needs_device = pytest.mark.skipif(not INTERPRETER and not torch.cuda.is_available(),
                                  reason="no GPU and not in interpreter mode")


class _NoLaunch:
    """Stands in for a kernel: any launch attempt fails the test."""

    def __getitem__(self, grid):
        raise AssertionError("the launcher launched a kernel for bad input")


@pytest.fixture
def no_launch(monkeypatch):
    for mod, names in ((R, ["topk_softmax_kernel"]),
                       (A, ["moe_count_kernel", "moe_offsets_kernel", "moe_place_kernel"]),
                       (G, ["moe_gemm_kernel"])):
        for name in names:
            monkeypatch.setattr(mod, name, _NoLaunch())


def ids(rows, dtype=torch.int32):
    return torch.tensor(rows, dtype=dtype)


X8 = torch.randn(4, 8)
A16, W16 = torch.randn(3, 16).half(), torch.randn(4, 8, 16).half()
IDS3 = ids([[0, 1], [2, 3], [1, 2]])
RW3 = torch.rand(3, 2)


@pytest.mark.parametrize("call,words", [
    (lambda: R.topk_softmax(X8, 9), ["top_k=9 is larger than the expert count 8"]),
    (lambda: R.topk_softmax(X8, 0), ["top_k must be a positive int, got 0"]),
    (lambda: R.topk_softmax(X8, True), ["top_k must be a positive int"]),
    (lambda: R.topk_softmax(torch.randn(8), 2), ["logits must be 2-D"]),
    (lambda: R.topk_softmax(X8.double(), 2), ["torch.float64"]),
    (lambda: R.topk_softmax(X8.t(), 2), ["unit stride"]),
    (lambda: R.topk_softmax(torch.randn(2, 2048), 2), ["2048 experts", "at most 1024"]),
    (lambda: R.topk_softmax(X8, 2, weights=torch.empty(4, 3)), ["weights has shape (4, 3), expected (4, 2)"]),
    (lambda: R.topk_softmax(X8, 2, ids=torch.empty(4, 2)), ["ids has dtype torch.float32"]),
    (lambda: A.moe_align_block_size(ids([[0, 1, 2]]), 2, 16), ["top_k=3 is larger than the expert count 2"]),
    (lambda: A.moe_align_block_size(ids([0, 1]), 2, 16), ["topk_ids must be a 2-D tensor"]),
    (lambda: A.moe_align_block_size(torch.zeros(2, 2), 2, 16), ["torch.float32", "int32 or torch.int64"]),
    (lambda: A.moe_align_block_size(ids([[0, 1], [1, 0]]).t(), 2, 16), ["contiguous"]),
    (lambda: A.moe_align_block_size(IDS3, 4, 48), ["block_m must be a power of two", "48"]),
    (lambda: A.moe_align_block_size(IDS3, 4, 512), ["block_m must be a power of two in [1, 256]"]),
    (lambda: A.moe_align_block_size(IDS3, 0, 16), ["num_experts must be an int in [1, 1024]"]),
    (lambda: A.moe_align_block_size(IDS3, 4, 16, chunk=100), ["chunk must be a power of two"]),
    (lambda: A.moe_align_block_size(IDS3, 4, 16, out=(torch.empty(5, dtype=torch.int32),) * 3),
     ["sorted_token_ids must be a contiguous int32 tensor of shape (66,)"]),
    (lambda: G.moe_gemm(A16, W16, ids([[0, 1, 2, 3, 0]] * 3), torch.rand(3, 5)),
     ["top_k=5 is larger than the expert count 4"]),
    (lambda: G.moe_gemm(A16, W16[:, :, :8], IDS3, RW3), ["w has K = 8, a has K = 16"]),
    (lambda: G.moe_gemm(A16, W16[0], IDS3, RW3), ["w must be 3-D"]),
    (lambda: G.moe_gemm(A16[None], W16, IDS3, RW3), ["a must be 2-D"]),
    (lambda: G.moe_gemm(A16, W16.float(), IDS3, RW3), ["w has dtype torch.float32; expected torch.float16"]),
    (lambda: G.moe_gemm(A16.double(), W16.double(), IDS3, RW3), ["a has dtype torch.float64"]),
    (lambda: G.moe_gemm(A16, W16, IDS3[:2], RW3), ["topk_ids has 2 rows, a has 3 tokens"]),
    (lambda: G.moe_gemm(A16, W16, IDS3.float(), RW3), ["topk_ids has dtype torch.float32"]),
    (lambda: G.moe_gemm(A16, W16, IDS3, None), ["mul_routed_weight needs topk_weights"]),
    (lambda: G.moe_gemm(A16, W16, IDS3, RW3.double()), ["topk_weights has dtype torch.float64"]),
    (lambda: G.moe_gemm(A16, W16, IDS3, torch.rand(3, 3)), ["topk_weights must be a contiguous (3, 2) tensor"]),
    (lambda: G.moe_gemm(A16, W16, IDS3, RW3, out=torch.empty(6, 4).half()), ["out has shape (6, 4), expected (6, 8)"]),
    (lambda: G.moe_gemm(A16, W16, IDS3, RW3, out=torch.empty(6, 8)), ["out has dtype torch.float32"]),
])
def test_bad_input_is_refused_before_launch(no_launch, call, words):
    with pytest.raises(ValueError) as info:
        call()
    for w in words:
        assert w in str(info.value), str(info.value)


# ---- routing: the tie rule ----------------------------------------------------------------------

NEG = float("-inf")
TIES = [[1.0, 3.0, 3.0, 0.0, 3.0],     # three-way tie for first: lowest indices first
        [2.0, 2.0, 2.0, 2.0, 2.0],     # all equal: experts 0, 1, 2
        [0.0, 5.0, 1.0, 5.0, 5.0],
        [NEG, NEG, 0.0, NEG, NEG]]     # -inf logits are still ranked, by index
TIE_IDS = [[1, 2, 4], [0, 1, 2], [1, 3, 4], [2, 0, 1]]


@needs_device
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_routing_ties_go_to_the_lower_expert(dtype):
    x = torch.tensor(TIES, dtype=dtype, device=DEVICE)
    w, got = R.topk_softmax(x, 3, renormalize=True)
    assert got.cpu().tolist() == TIE_IDS
    third = 1.0 / 3.0
    want = torch.tensor([[third] * 3, [third] * 3, [third] * 3, [1.0, 0.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(w.cpu().double(), want, rtol=4e-7, atol=0.0)
    ref_w, ref_ids = O.topk_softmax(torch.tensor(TIES, dtype=torch.float64), 3, renormalize=True)
    assert ref_ids.tolist() == TIE_IDS
    torch.testing.assert_close(ref_w, want, rtol=1e-15, atol=0.0)


def test_routing_oracle_by_hand():
    w, i = O.topk_softmax(torch.tensor([[0.0, 2.0, 1.0]], dtype=torch.float64), 2, renormalize=False)
    e = torch.exp(torch.tensor([0.0, 2.0, 1.0], dtype=torch.float64))
    assert i.tolist() == [[1, 2]]
    torch.testing.assert_close(w, (e[[1, 2]] / e.sum())[None], rtol=1e-15, atol=0.0)


# ---- alignment: the order the contract fixes ------------------------------------------------------

# assignments i = t*k + j: 0->2, 1->0, 2->0, 3->2, 4->1, 5->0; E = 4 (expert 3 unused), BLOCK_M = 4
HAND_IDS = [[2, 0], [0, 2], [1, 0]]
HAND_SORTED = [1, 2, 5, 6, 4, 6, 6, 6, 0, 3, 6, 6] + [6] * 6    # length 6 + 4 * 3 = 18
HAND_EXPERTS = [0, 1, 2, -1, -1]
HAND_USED = [12]


def _as_lists(out):
    return [t.cpu().tolist() for t in out]


def test_alignment_oracle_and_torch_baseline_by_hand():
    want = [HAND_SORTED, HAND_EXPERTS, HAND_USED]
    assert _as_lists(O.align_block_size(ids(HAND_IDS), 4, 4)) == want
    assert _as_lists(A.torch_align(ids(HAND_IDS), 4, 4)) == want


@needs_device
@pytest.mark.parametrize("chunk", [1, 2, 128])
def test_alignment_kernel_by_hand(chunk):
    out = A.moe_align_block_size(ids(HAND_IDS).to(DEVICE), 4, 4, chunk=chunk)
    assert _as_lists(out) == [HAND_SORTED, HAND_EXPERTS, HAND_USED]


@needs_device
def test_alignment_leaves_remote_experts_out():
    rows = [[0, -1], [5, 1], [1, 0]]       # -1 and 5 are outside [0, 4): not placed
    want = [[0, 5, 6, 6, 3, 4, 6, 6] + [6] * 10, [0, 1, -1, -1, -1], [8]]
    assert _as_lists(O.align_block_size(ids(rows), 4, 4)) == want
    assert _as_lists(A.moe_align_block_size(ids(rows).to(DEVICE), 4, 4, chunk=2)) == want


# ---- grouped GEMM ---------------------------------------------------------------------------------

def test_grouped_gemm_oracle_by_hand():
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    w = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]],       # expert 0: a -> (a0, a1, a0 + a1)
                      [[2.0, 0.0], [0.0, 0.0], [0.0, -1.0]]], dtype=torch.float64)   # (2 a0, 0, -a1)
    rw = torch.tensor([[0.5, 0.25], [1.0, 2.0]], dtype=torch.float64)
    out = O.grouped_gemm(a, w, ids([[1, 0], [0, 1]]), rw)
    want = torch.tensor([[1.0, 0.0, -1.0],      # t0 -> e1, x0.5
                         [0.25, 0.5, 0.75],     # t0 -> e0, x0.25
                         [3.0, 4.0, 7.0],       # t1 -> e0, x1
                         [12.0, 0.0, -8.0]], dtype=torch.float64)   # t1 -> e1, x2
    assert torch.equal(out, want)


@needs_device
def test_gemm_rows_of_unplaced_ids_are_left_alone():
    torch.manual_seed(0)
    a = torch.randn(5, 32).half().to(DEVICE)
    w = (torch.randn(3, 40, 32) / 6).half().to(DEVICE)
    topk = ids([[0, -1], [2, 1], [-1, 0], [1, 2], [0, 1]]).to(DEVICE)
    rw = torch.rand(5, 2).to(DEVICE)
    out = torch.full((10, 40), 7.0, dtype=torch.float16, device=DEVICE)
    G.moe_gemm(a, w, topk, rw, out=out)
    flat = topk.flatten().cpu()
    got = out.float().cpu()
    assert torch.all(got[flat < 0] == 7.0)
    ref = O.grouped_gemm(a.cpu(), w.cpu(), topk.cpu(), rw.cpu())
    placed = flat >= 0
    torch.testing.assert_close(got[placed].double(), ref[placed], rtol=2e-3, atol=2e-3)


@pytest.mark.skipif(not INTERPRETER, reason="the case matrix checks bf16 routing on GPU targets")
@pytest.mark.parametrize("regime", ["normal", "ties", "equal", "large"])
def test_bf16_routing_on_the_interpreter(regime):
    """matrices/overrides.toml skips moe_topk_softmax bf16 on the interpreter (its weights are
    fp32, so the bf16-cast xfail would pass strictly); the same check runs here instead."""
    from portcheck.runner import evaluate
    case = cases.get("moe_topk_softmax")
    for renorm, (t, e, k) in zip((False, True), ((37, 64, 8), (5, 13, 13))):
        spec = {"dtype": "bf16", "tokens": t, "experts": e, "top_k": k, "renormalize": renorm,
                "regime": regime, "layout": "padded", "seed": 11}
        for c in evaluate(case, "interpreter", spec):
            assert c.ok, c.message


# ---- tile configs ---------------------------------------------------------------------------------

def test_every_arch_has_a_config_family():
    for name, arch in ARCHS.items():
        family = arch.config_family
        for dtype in (torch.float16, torch.float32):
            for run in (1, 16, 17, 96, 97, 10**6):
                cfg = G.config(family, dtype, run)
                assert cfg["BLOCK_M"] >= 16 and cfg["BLOCK_M"] <= A.MAX_BLOCK_M, (name, cfg)
                for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K"):
                    assert cfg[key] & (cfg[key] - 1) == 0, (name, key, cfg)
                if arch.vendor == "nvidia":
                    assert not cfg["options"], (name, cfg)
    assert G.config("sm_90", torch.bfloat16, 16)["BLOCK_M"] == 16
    assert G.config("sm_90", torch.bfloat16, 512)["BLOCK_M"] == 128


# the largest tile of each family, on the archs whose shared memory / LDS is tightest
LIMIT_SAMPLE = ["sm_90a", "sm_89", "sm_120", "gfx90a", "gfx942", "gfx950", "gfx1100"]


def test_largest_tiles_fit_shared_memory():
    """Triton does not check shared memory / LDS at compile time (FACTS.md): read it from the
    cross-compiled kernel. PORTCHECK_MOE_ALL_VARIANTS=1 compiles every variant of the three cases."""
    from portcheck.compile.plan import CompileSettings, variant_task
    from portcheck.compile.records import compile_tasks
    chosen = []
    if os.environ.get("PORTCHECK_MOE_ALL_VARIANTS") == "1":
        for case in ("moe_topk_softmax", "moe_align", "moe_gemm"):
            chosen += [(a, case, v) for a in ARCHS for v in cases.get(case).variants(ARCHS[a])]
    else:
        for a in LIMIT_SAMPLE:
            big = [v for v in G._variants(ARCHS[a]) if v.label.startswith("bf16") and "runs<=any" in v.label]
            assert big, f"no bf16 long-run variant on {a}"
            chosen.append((a, "moe_gemm", big[0]))
    tasks = [variant_task(v, a, case, "moe", v.label.split()[0]) for a, case, v in chosen]
    results = compile_tasks(tasks, CompileSettings(jobs=2, timeout=600))
    problems = []
    for (a, case, v), r in zip(chosen, results):
        shared = r.metrics.get("shared")
        if r.verdict != "pass" or shared is None or shared > ARCHS[a].shared_per_block:
            problems.append(f"{case} [{v.label}] on {a}: {r.verdict} {r.message} shared={shared} "
                            f"limit={ARCHS[a].shared_per_block}")
    assert not problems, "\n".join(problems)
