"""matmul on a real GPU (skipped elsewhere): the autotuned path at bench sizes against float64,
and the fp8 accumulation model on the device's own matrix units.

    pytest tests/kernels/test_matmul_gpu.py --target=cuda --require-device -q
"""
import os

import pytest
import torch
from triton import cdiv as triton_cdiv

from portcheck.dtypes import fmt
from portcheck.facts.device import current_arch, dot_fp32_precision
from portcheck.kernels import _launch
from portcheck.kernels import matmul as mm
from portcheck.oracles.matmul import abs_product
from portcheck.oracles.matmul import matmul as matmul_ref
from tests.support.launching import tma_launches

pytestmark = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET", "0") not in ("", "0") or not torch.cuda.is_available(),
    reason="needs a GPU target (--target=cuda or rocm)")

ROWS = 64   # rows of C compared against float64 at bench sizes (the whole product is costly)


def _bound(a, b, c, dtype, cfg_block_k=None, scale=1.0):
    k = a.shape[1]
    coef, text = mm.accumulation_bound(dtype, k, cfg_block_k, dot_fp32_precision(current_arch()),
                                       current_arch().fp8_accumulation if dtype in mm.FP8_DTYPES else None)
    u_out = fmt(c.dtype).unit_roundoff
    ref = matmul_ref(a.double(), b.double(), scale=scale)
    s = scale * abs_product(a, b)
    bound = coef * s + u_out * ref.abs() + 2.0 ** -130
    if scale != 1.0:   # acc * (scale_a * scale_b): up to two fp32 roundings
        bound = bound + 2 * 2.0 ** -24 * s
    return ref, bound, text


@pytest.mark.parametrize("dtype,n", [("fp16", 4096), ("bf16", 4096), ("fp16", 8192), ("fp32", 4096)])
def test_autotuned_bench_shapes_agree_with_float64(dtype, n):
    g = torch.Generator(device="cuda").manual_seed(n)
    a = torch.randn(n, n, device="cuda", generator=g).to(mm.FLOAT_DTYPES[dtype])
    b = torch.randn(n, n, device="cuda", generator=g).to(mm.FLOAT_DTYPES[dtype])
    c = mm.matmul(a, b)
    ref, bound, text = _bound(a[:ROWS], b, c[:ROWS], dtype)
    err = (c[:ROWS].double() - ref).abs()
    assert (err <= bound).all(), f"worst err/bound {float((err / bound).max()):.3g}; {text}"


@pytest.mark.parametrize("dtype", ["fp8e4nv", "fp8e4b8"])
def test_autotuned_fp8_at_bench_size(dtype):
    if dtype not in current_arch().fp8_native:
        pytest.skip(f"{dtype} does not run on {current_arch().name}")
    n = 4096
    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randn(n, n, device="cuda", generator=g).to(mm.FP8_DTYPES[dtype])
    b = torch.randn(n, n, device="cuda", generator=g).to(mm.FP8_DTYPES[dtype]).t().contiguous().t()
    sa, sb = torch.tensor([0.75], device="cuda"), torch.tensor([1.25], device="cuda")
    c = mm.matmul(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.float32)
    ref, bound, text = _bound(a[:ROWS], b, c[:ROWS], dtype, 128, scale=0.9375)
    err = (c[:ROWS].double() - ref).abs()
    assert (err <= bound).all(), f"worst err/bound {float((err / bound).max()):.3g}; {text}"


def test_fp8_accumulation_model_on_the_device():
    """Same-sign equal products at K = 8192, where every truncation loses in one direction:
    each configuration stays within the promoted FP22 bound (sm_89 / sm_90 / sm_120) or the fp32
    one, and the error it does make is printed for the record."""
    arch = current_arch()
    fmt8 = next(iter(arch.fp8_native), None)
    if fmt8 is None:
        pytest.skip(f"{arch.name} runs no fp8")
    dt = mm.FP8_DTYPES[fmt8]
    k = 8192
    a = torch.full((128, k), 0.234375, device="cuda").to(dt)     # 1.875 * 2^-3
    b = torch.full((k, 128), 1.875, device="cuda").to(dt).t().contiguous().t()
    one = torch.tensor([1.0], device="cuda")
    exact = k * 0.234375 * 1.875
    for cfg in mm.configs(fmt8):
        c = mm.matmul(a, b, scale_a=one, scale_b=one, out_dtype=torch.float32, config=cfg)
        coef, text = mm.accumulation_bound(fmt8, k, cfg.block_k, None, arch.fp8_accumulation)
        err = float((c.double() - exact).abs().max())
        print(f"{arch.name} {fmt8} {cfg.label}: max error {err:.4g} = {err / exact:.3g} relative; "
              f"bound {coef:.3g} relative ({text})")
        assert err <= coef * exact, (cfg.label, err, coef * exact)


@pytest.mark.parametrize("m,n,k,dtype,bias", [(1, 4104, 4104, "bf16", False), (16, 4104, 4104, "fp16", True),
                                             (300, 200, 96, "fp16", True), (4000, 4104, 4104, "bf16", False),
                                             (16, 64, 1000, "int8", False)])
def test_planned_launches_equal_the_first_launch_bit_for_bit(m, n, k, dtype, bias):
    """The second launch of a metadata key goes straight to the compiled kernel (launcher plans):
    new tensors of the same metadata give what the checked path gives, split-K included. (fp32
    on sm_90a relays B K-major first, and a launch that copies an operand is not planned.)"""
    from portcheck.kernels.matmul import launcher
    torch.manual_seed(m + n + k)
    t = torch.int8 if dtype == "int8" else mm.FLOAT_DTYPES[dtype]
    out_t = torch.int32 if dtype == "int8" else t

    def operands():
        if dtype == "int8":
            return (torch.randint(-128, 128, (m, k), device="cuda", dtype=t),
                    torch.randint(-128, 128, (k, n), device="cuda", dtype=t))
        return torch.randn(m, k, device="cuda").to(t), torch.randn(k, n, device="cuda").to(t)
    bias_t = torch.randn(n, device="cuda").to(out_t) if bias else None
    a, b = operands()
    before = len(launcher._PLANS)
    first = mm.matmul(a, b, bias=bias_t)
    assert len(launcher._PLANS) == before + 1
    a2, b2 = operands()
    planned = mm.matmul(a2, b2, bias=bias_t)
    launcher._PLANS.clear()
    checked = mm.matmul(a2, b2, bias=bias_t)
    assert torch.equal(planned, checked) and not torch.equal(planned, first)
    assert all(not locks.any() for locks in _launch._COUNTERS.values())
    # a view one element in has other alignment: a key of its own, not the aligned plan
    shifted = torch.empty(m * k + 1, device="cuda", dtype=t)[1:].view(m, k)
    assert shifted.stride() == a.stride()
    assert launcher._plan_key(shifted, b, None, bias_t, "none", None, None, None, None) != \
        launcher._plan_key(a, b, None, bias_t, "none", None, None, None, None)


def test_split_k_launches_captured_in_graphs_share_the_captures_counters_and_replay_right():
    """Skinny (split-K) launches captured into CUDA / HIP graphs: the driver names the capture, so
    its launches share one zeroed set of arrival counters instead of a fill kernel each; two
    graphs of the same launches replay, in any order, bitwise what eager launches give, and leave
    every counter re-armed."""
    torch.manual_seed(3)
    a = [torch.randn(m, 4104, device="cuda").to(torch.bfloat16) for m in (1, 16)]
    b = torch.randn(4104, 4104, device="cuda").to(torch.bfloat16)
    eager = [mm.matmul(x, b) for x in a]      # autotuned and planned here, not under capture
    outs, graphs, counters = [], [], []
    for _ in range(2):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            stream = _launch.current_stream(b.device)
            capture = _launch._capture_id(stream)
            assert capture is not None, "the driver could not name the capture"
            outs.append([mm.matmul(x, b) for x in a])
            held = _launch._CAPTURED.get((id(_launch._COUNTERS), b.device, stream, torch.int32))
            assert held is not None and held[0] == capture, "the launches took no counters of this capture"
            counters.append(held[1])
        graphs.append(graph)
    assert counters[0] is not counters[1]
    for i in (1, 0, 0, 1):
        for o in outs[i]:
            o.zero_()
        graphs[i].replay()
        torch.cuda.synchronize()
        assert all(torch.equal(o, e) for o, e in zip(outs[i], eager)), f"graph {i}"
    assert not any(c.any() for c in counters)


@pytest.mark.parametrize("m,n,k,dtype,b_kmajor", [(4000, 4104, 4104, "bf16", False), (4096, 4104, 4096, "fp16", True),
                                                   (333, 200, 96, "bf16", False), (4096, 4096, 4104, "bf16", True)])
def test_tma_launches_agree_with_float64(monkeypatch, m, n, k, dtype, b_kmajor):
    """Where the arch reads tiles through tensor descriptors (sm_90a, sm_100a), aligned wide
    16-bit launches take matmul_tma_kernel (M, N, K tails zero-filled by the copy engine) and
    stay within the accumulation bound of float64."""
    from portcheck.kernels.matmul import launcher
    if not launcher.tma_arch(current_arch()):
        pytest.skip(f"{current_arch().name} runs no TMA matmul")
    seen = tma_launches(monkeypatch)
    g = torch.Generator(device="cuda").manual_seed(m + n + k)
    t = mm.FLOAT_DTYPES[dtype]
    a = torch.randn(m, k, device="cuda", generator=g).to(t)
    b = (torch.randn(n, k, device="cuda", generator=g).to(t).t() if b_kmajor
         else torch.randn(k, n, device="cuda", generator=g).to(t))
    c = mm.matmul(a, b)
    assert seen == [mm.TmaLayout(b_kmajor, True)]
    rows = slice(m - ROWS, m)   # the last rows: the tile the descriptors zero-fill past M
    ref, bound, text = _bound(a[rows], b, c[rows], dtype)
    err = (c[rows].double() - ref).abs()
    assert (err <= bound).all(), f"worst err/bound {float((err / bound).max()):.3g}; {text}"


@pytest.mark.parametrize("c_aligned", [True, False])
def test_every_tile_of_a_persistent_tma_launch_is_written_and_right(monkeypatch, c_aligned):
    """matmul_tma_kernel's programs each walk several C tiles (at most one program per SM): with
    every wide configuration, on M and N that end mid-tile and many more tiles than SMs, the whole
    of C, filled with NaN first, is within the float64 bound: no tile skipped, written twice with
    another's values or cut at its halves; C through a descriptor and through masked pointers
    (rows 16-byte misaligned)."""
    from portcheck.kernels.matmul import launcher
    if not launcher.tma_arch(current_arch()):
        pytest.skip(f"{current_arch().name} runs no TMA matmul")
    seen = tma_launches(monkeypatch)
    m, n, k = 4000, 3000, 256
    g = torch.Generator(device="cuda").manual_seed(7)
    a = torch.randn(m, k, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(k, n, device="cuda", generator=g).to(torch.bfloat16)
    ref, bound, text = _bound(a, b, torch.empty(0, dtype=torch.bfloat16), "bf16")
    wide = [c for c in mm.configs("bf16") if c.block_m > mm.NARROW_M]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert wide
    for cfg in wide:
        assert triton_cdiv(m, cfg.block_m) * triton_cdiv(n, cfg.block_n) > 2 * sms, cfg.label
        out = torch.full((m, n if c_aligned else n + 1), float("nan"), device="cuda", dtype=torch.bfloat16)
        c = mm.matmul(a, b, out=out[:, :n], config=cfg)
        assert seen[-1] == mm.TmaLayout(False, c_aligned), cfg.label
        ratio = ((c.double() - ref).abs() / bound).nan_to_num(float("inf"))   # NaN: a tile never written
        assert (ratio <= 1).all(), f"{cfg.label}: worst err/bound {float(ratio.max()):.3g}; {text}"
