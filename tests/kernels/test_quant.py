"""Quantization launchers: bad input refused before launch; the fp8 kernels checked bit for bit on
inputs where the interpreter's faulty fp8 casts cannot show (values on the format's grid, finite
codes), so CI checks their algorithm although the full cases are strict xfails there; the int8
per-tensor path and the arch -> fp8 format rule."""
import pytest
import torch
from triton.backends.compiler import GPUTarget

from tests.support.launching import DEVICE, forbid_launches, needs_device
from portcheck import strategies as S
from portcheck.kernels import quant as Q
from portcheck.kernels.quant import launcher as Q_launcher
from portcheck.oracles import fp8 as fp8_ref
from portcheck.oracles import quant as quant_ref
from portcheck.facts.archs import ARCHS

FP8 = [torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2, torch.float8_e5m2fnuz]


@pytest.fixture
def no_launch(monkeypatch):
    forbid_launches(monkeypatch, Q_launcher, "quant_rows_kernel", "quant_long_rows_kernel", "amax_kernel",
                    "quant_tensor_kernel", "dequant_kernel")


def _x(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape).to(dtype)


@pytest.mark.parametrize("call,words", [
    (lambda: Q.quant_per_token(_x(2, 3, 4)), ["x must be 2-D", "(2, 3, 4)"]),
    (lambda: Q.quant_per_token(_x(4, 8, dtype=torch.float64)), ["torch.float64", "this kernel takes"]),
    (lambda: Q.quant_per_token(_x(4, 8).t()), ["unit stride"]),
    (lambda: Q.quant_per_token(_x(4, 8), torch.float16), ["torch.float16 is not int8 or an fp8 format"]),
    (lambda: Q.quant_per_token(_x(4, 8), q=torch.empty(4, 9, dtype=torch.int8)), ["q has shape (4, 9)", "(4, 8)"]),
    (lambda: Q.quant_per_token(_x(4, 8), q=torch.empty(4, 8, dtype=torch.uint8)), ["q has dtype torch.uint8"]),
    (lambda: Q.quant_per_token(_x(4, 8), scale=torch.empty(5, 1)), ["scale must be a contiguous [rows, 1]"]),
    (lambda: Q.quant_per_token(_x(4, 8), scale=torch.empty(4, 1, dtype=torch.float16)), ["scale must be float32"]),
    (lambda: Q.quant_per_tensor(_x(4, 8), torch.int8, scale=torch.ones(2)), ["scale must be a contiguous one-element"]),
    (lambda: Q.quant_per_tensor(_x(4, 8), torch.int8, scale=torch.ones(1), scale_out=torch.empty(1)),
     ["scale_out is for dynamic quantization"]),
    (lambda: Q.quant_per_tensor(_x(8), torch.int8), ["x must be 2-D"]),
    (lambda: Q.dequant(torch.zeros(4, 8, dtype=torch.int8), torch.ones(3, 1)), ["scale has shape (3, 1)", "[4, 1]"]),
    (lambda: Q.dequant(torch.zeros(4, 8, dtype=torch.int8), torch.ones(4, 1, dtype=torch.float64)),
     ["scale must be a contiguous float32"]),
    (lambda: Q.dequant(torch.zeros(4, 8, dtype=torch.int16), torch.ones(1)), ["q has dtype torch.int16"]),
    (lambda: Q.dequant(torch.zeros(4, 8, dtype=torch.int8), torch.ones(1), torch.float64), ["out_dtype torch.float64"]),
    (lambda: Q.dequant(torch.zeros(4, 8, dtype=torch.int8), torch.ones(1), out=torch.empty(4, 8)),
     ["out has dtype torch.float32, expected torch.bfloat16"]),
])
def test_bad_input_is_refused_before_launch(no_launch, call, words):
    with pytest.raises(ValueError) as info:
        call()
    for w in words:
        assert w in str(info.value), str(info.value)


@pytest.mark.parametrize("arch,dtype,refused", [
    ("sm_80", torch.float8_e4m3fn, True),       # Triton has no e4m3 conversion before sm_89
    ("sm_80", torch.float8_e5m2, False),
    ("sm_90a", torch.float8_e4m3fnuz, True),    # FNUZ is AMD's
    ("sm_90a", torch.float8_e4m3fn, False),
    ("gfx942", torch.float8_e4m3fnuz, False),
    ("gfx942", torch.float8_e4m3fn, False),     # accepted (emulated) by Triton on AMD
])
def test_fp8_format_the_target_cannot_run_is_refused(no_launch, monkeypatch, arch, dtype, refused):
    a = ARCHS[arch]
    names = Q.fp8_names_for(GPUTarget(a.backend, a.triton_arch, a.warp_size))
    monkeypatch.setattr(Q_launcher, "target_fp8_names", lambda: names)
    monkeypatch.setattr(Q_launcher, "_device_label", lambda: arch)
    calls = [lambda: Q.quant_per_token(_x(4, 8), dtype), lambda: Q.quant_per_tensor(_x(4, 8), dtype),
             lambda: Q.dequant(torch.zeros(4, 8, dtype=torch.uint8).view(dtype), torch.ones(1))]
    for call in calls:
        if refused:
            with pytest.raises(ValueError, match=f"cannot be produced on {arch}"):
                call()
        else:
            with pytest.raises(AssertionError, match="launched a kernel"):   # accepted: it got to launch
                call()


@pytest.mark.parametrize("arch,expected", [
    ("sm_80", torch.float8_e5m2), ("sm_89", torch.float8_e4m3fn), ("sm_90a", torch.float8_e4m3fn),
    ("sm_100a", torch.float8_e4m3fn), ("sm_120", torch.float8_e4m3fn), ("gfx90a", torch.float8_e4m3fn),
    ("gfx942", torch.float8_e4m3fnuz), ("gfx950", torch.float8_e4m3fn), ("gfx1100", torch.float8_e4m3fn),
    ("gfx1201", torch.float8_e4m3fn),
])
def test_case_fp8_format_per_arch(arch, expected):
    a = ARCHS[arch]
    got = Q.fp8_for(a)
    assert got == expected
    assert Q.FP8_DTYPES[got] in Q.fp8_names_for(GPUTarget(a.backend, a.triton_arch, a.warp_size))
    native = a.fp8_formats()
    if native is not None:   # where the arch has fp8 hardware, the cases use its e4m3
        assert Q.FP8_DTYPES[got] == native[0]


def _on_grid(dtype: torch.dtype, rows: int, cols: int, in_dtype, seed: int, per_row: bool = True) -> torch.Tensor:
    """Rows (or a tensor) whose amax is qmax * 2^k and whose values are grid values * 2^k (some
    +-inf): scaled they are exactly representable, so even a truncating fp8 cast is right."""
    g = torch.Generator().manual_seed(seed)
    grid = fp8_ref.decode(torch.arange(256, dtype=torch.uint8), fp8_ref.fp8_format(dtype))
    grid = grid[torch.isfinite(grid)]
    qmax = grid.max().item()
    k = torch.randint(-3, 2, (rows if per_row else 1, 1), generator=g).double().expand(rows, 1)
    x = grid[torch.randint(0, grid.numel(), (rows, cols), generator=g)] * torch.exp2(k)
    x[:, 0] = qmax * torch.exp2(k[:, 0])
    x[0, 1 % cols] = float("inf")
    if rows > 1:
        x[1, cols - 1] = -float("inf")
    return x.to(in_dtype)


def _available(dtypes):
    return [d for d in dtypes if Q.FP8_DTYPES[d] in Q.target_fp8_names()] if DEVICE else dtypes


@needs_device
@pytest.mark.parametrize("dtype", _available(FP8))
@pytest.mark.parametrize("in_dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("long_rows", [False, True])
def test_fp8_per_token_on_grid_values(dtype, in_dtype, long_rows):
    if in_dtype == torch.float16 and dtype in (torch.float8_e5m2, torch.float8_e5m2fnuz):
        in_dtype = torch.float32          # 57344 * 2 is past fp16's max
    x = _on_grid(dtype, 5, 300, in_dtype, seed=1).to(DEVICE)
    q, scale = Q.quant_per_token(x, dtype, long_rows=long_rows, chunk=64 if long_rows else None)
    ref = quant_ref.quantize_per_token(x.double(), Q.FP8_DTYPES[dtype])
    assert torch.equal(q.cpu().view(torch.uint8), ref["q"].view(torch.uint8))
    assert torch.equal(scale.cpu().double(), ref["scale"])          # powers of two: exact


@needs_device
@pytest.mark.parametrize("dtype", _available(FP8))
@pytest.mark.parametrize("static", [False, True])
def test_fp8_per_tensor_on_grid_values(dtype, static):
    x = _on_grid(dtype, 7, 200, torch.float32, seed=2, per_row=False).to(DEVICE)
    qmax = torch.finfo(dtype).max
    given = torch.tensor([x[0, 0].item() / qmax], dtype=torch.float32, device=DEVICE) if static else None
    q, scale = Q.quant_per_tensor(x, dtype, given)
    ref = quant_ref.quantize_per_tensor(x.double(), Q.FP8_DTYPES[dtype], given)
    assert torch.equal(q.cpu().view(torch.uint8), ref["q"].view(torch.uint8))
    if not static:
        assert torch.equal(scale.cpu().double(), ref["scale"])


@needs_device
@pytest.mark.parametrize("dtype", _available(FP8))
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.float16])
def test_dequant_fp8_on_finite_codes(dtype, out_dtype):
    f = fp8_ref.fp8_format(dtype)
    codes = torch.arange(256, dtype=torch.uint8)
    codes = codes[torch.isfinite(fp8_ref.decode(codes, f))].repeat(3).reshape(3, -1)
    scale = torch.tensor([[0.75], [2.0 ** -20], [3.0]], dtype=torch.float32)
    for s in (scale, scale[2:3, 0].contiguous()):
        out = Q.dequant(codes.view(dtype).to(DEVICE), s.to(DEVICE), out_dtype)
        ref = quant_ref.dequantize(codes.view(dtype), s, out_dtype)
        assert torch.equal(out.cpu().view(torch.uint8), ref.view(torch.uint8))


@needs_device
@pytest.mark.parametrize("static", [False, True])
def test_int8_per_tensor(static):
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(33, 257, generator=g) * 3).to(torch.float16)
    x[3, 5] = float("nan")
    x[4, 6] = -float("inf")
    x = x.to(DEVICE)
    given = torch.tensor([0.02], device=DEVICE) if static else None
    q, scale = Q.quant_per_tensor(x, torch.int8, given)
    ref = quant_ref.quantize_per_tensor(x.double(), "int8", given)
    assert torch.equal(q.cpu(), ref["q"])
    assert q[3, 5].item() == 0 and q[4, 6].item() == -127          # NaN -> 0, -inf saturates
    if not static:
        assert abs(scale.item() - ref["scale"].item()) <= ref["scale"].item() * 2.0 ** -24


@needs_device
def test_empty_inputs_launch_nothing():
    x = torch.empty(0, 16, dtype=torch.bfloat16, device=DEVICE)
    q, s = Q.quant_per_token(x)
    assert q.shape == (0, 16) and s.shape == (0, 1)
    q, s = Q.quant_per_tensor(torch.empty(4, 0, device=DEVICE), torch.int8)
    assert q.shape == (4, 0) and s.item() == Q.min_scale_of(torch.int8)
    q, s = Q.quant_per_token(torch.empty(3, 0, device=DEVICE))
    assert q.shape == (3, 0) and s.flatten().tolist() == [Q.min_scale_of(torch.int8)] * 3


def test_tie_regime_exercises_round_half_to_even():
    """The 'ties' inputs really sit on midpoints: half-away-from-zero rounding would differ."""
    x = S.tie_values((8, 300), "bf16", (torch.int8,), torch.Generator().manual_seed(5)).to(torch.bfloat16)
    ref = quant_ref.quantize_per_token(x.double(), "int8")
    scaled = x.double() / ref["scale"]
    away = torch.sign(scaled) * torch.floor(scaled.abs() + 0.5)
    assert (scaled - scaled.trunc()).abs().eq(0.5).float().mean() > 0.3
    assert not torch.equal(away.to(torch.int8), ref["q"])
    assert torch.equal(torch.round(scaled).to(torch.int8), ref["q"])
