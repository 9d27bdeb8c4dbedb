"""The interpreter numerics layer (portcheck/targets/interpreter_numerics.py): bf16 and fp8
conversions bit for bit against torch through interpreted kernels, bf16 / fp8 dots within the
fp32-accumulation bound of a float64 reference, float scalar arguments, libdevice, and a bf16
bug that the layer shows for what it is.

Runs on the interpreter only: the pytest plugin sets TRITON_INTERPRET (--target=interpreter, or
auto without a GPU) before this module's kernels are decorated.
"""
import inspect
import math
import os
import re
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from portcheck import tolerance
from portcheck.cases import Case, Cost
from portcheck.runner import evaluate
from portcheck.targets import interpreter_numerics as N

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET", "0") in ("", "0"),
                                reason="the numerics layer is for the interpreter (--target=interpreter)")

FP8 = {"fp8e4nv": torch.float8_e4m3fn, "fp8e5": torch.float8_e5m2,
       "fp8e4b8": torch.float8_e4m3fnuz, "fp8e5b16": torch.float8_e5m2fnuz}
# Triton 3.6's interpreter cannot name the FNUZ types at all (its dtype.to_ir lacks them): nothing
# to correct there, so those parameters skip
_to_ir = inspect.getsource(__import__("triton.runtime.interpreter", fromlist=["_"])._patch_lang_core)
FNUZ = pytest.mark.skipif("fp8e4b8" not in _to_ir, reason=f"Triton {triton.__version__}'s interpreter has no FNUZ fp8 types")
FORMATS = {"bf16": torch.bfloat16, **FP8}
FORMAT_PARAMS = [pytest.param(n, marks=FNUZ if n in ("fp8e4b8", "fp8e5b16") else ()) for n in FORMATS]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def layer_on():
    with N.active(True):
        yield


@triton.jit
def convert_kernel(x_ptr, y_ptr, n, RTZ: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    x = tl.load(x_ptr + offs, mask=ok)
    if RTZ:
        y = x.to(y_ptr.dtype.element_ty, fp_downcast_rounding="rtz")
    else:
        y = x.to(y_ptr.dtype.element_ty)
    tl.store(y_ptr + offs, y, mask=ok)


def convert(x: torch.Tensor, dtype: torch.dtype, rtz: bool = False) -> torch.Tensor:
    y = torch.empty(x.shape, dtype=dtype)
    convert_kernel[(1,)](x, y, x.numel(), RTZ=rtz, BLOCK=triton.next_power_of_2(x.numel()))
    return y


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()])


def same_bits_or_both_nan(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (bits(a) == bits(b)) | (a.float().isnan() & b.float().isnan())


def every_code(dtype: torch.dtype) -> torch.Tensor:
    n = 1 << (8 * torch.empty(0, dtype=dtype).element_size())
    return torch.arange(n, dtype=torch.int32).to(torch.int16 if n > 256 else torch.uint8).view(dtype)


@pytest.mark.parametrize("name", FORMAT_PARAMS)
def test_every_code_widens_to_fp32_as_torch_does(name):
    codes = every_code(FORMATS[name])
    got = convert(codes, torch.float32)
    bad = ~same_bits_or_both_nan(got, codes.float())
    assert not bad.any(), f"{name}: {int(bad.sum())} codes differ, e.g. {bits(codes)[bad][:4].tolist()}"


def fp32_sample(dtype: torch.dtype) -> torch.Tensor:
    """Every finite code of the format, the midpoints between neighbours (ties) and one fp32 ulp
    either side of them, values beyond the largest finite one, fp32 subnormals, +-0, +-inf, NaN
    and random fp32 across the whole exponent range."""
    v = every_code(dtype).float()
    v = v[v.isfinite()].unique()
    mid = ((v[1:].double() + v[:-1].double()) / 2).float()     # exact in fp32 for these formats
    top = v.max().double().item()
    beyond = torch.tensor([top * f for f in (1.01, 1.0625, 1.1, 1.5, 2.0, 1e3)] + [3e38], dtype=torch.float32)
    gen = torch.Generator().manual_seed(0)
    rand = torch.randint(0, 1 << 31, (20000,), generator=gen, dtype=torch.int64).to(torch.int32).view(torch.float32)
    special = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1e-45, 1.1754942e-38, 2 ** -126])
    parts = [v, mid, mid.nextafter(torch.tensor(math.inf)), mid.nextafter(torch.tensor(-math.inf)),
             beyond, special, rand[rand.isfinite()]]
    x = torch.cat(parts)
    return torch.cat([x, -x])


@pytest.mark.parametrize("name", [*FORMAT_PARAMS, "fp16"])
def test_fp32_narrows_as_torch_does_and_fp8_saturates(name):
    dtype = FORMATS.get(name, torch.float16)
    x = fp32_sample(dtype)
    got, want = convert(x, dtype), x.to(dtype)
    if name in FP8:
        # beyond the largest finite value (inf included) cvt.rn.satfinite gives +-max; torch 2.13
        # does so for e4m3fn only (e5m2 gives inf, FNUZ NaN)
        top = torch.finfo(dtype).max
        overflow = x.abs() > top
        want = torch.where(overflow, torch.where(x < 0, -top, top), want.float()).to(dtype)
        assert overflow.sum() >= 14, "the sample must reach past the largest finite value"
    bad = ~same_bits_or_both_nan(got, want)
    assert not bad.any(), f"{name}: {int(bad.sum())} of {x.numel()} differ, e.g. x = {x[bad][:4].tolist()}"


@pytest.mark.parametrize("name", FORMAT_PARAMS)
def test_round_toward_zero_gives_the_largest_code_not_above_the_value(name):
    dtype = FORMATS[name]
    x = fp32_sample(dtype)
    x = x[x.isfinite()]
    table = every_code(dtype).double()
    table = table[table.isfinite() & (table >= 0)].unique()     # sorted magnitudes
    below = table[torch.searchsorted(table, x.double().abs(), right=True) - 1]
    got = convert(x, dtype, rtz=True).double()
    bad = got != torch.where(x < 0, -below, below)
    assert not bad.any(), f"{name}: {int(bad.sum())} differ, e.g. x = {x[bad][:4].tolist()}"


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))


@pytest.mark.parametrize("name", FORMAT_PARAMS)
def test_dot_is_within_fp32_accumulation_of_the_exact_product(name):
    dtype, (M, N_, K) = FORMATS[name], (16, 16, 32)
    gen = torch.Generator().manual_seed(1)
    if name == "bf16":
        a, b = (torch.randn(s, generator=gen).to(dtype) for s in ((M, K), (K, N_)))
    else:   # random finite codes: subnormals and the largest values included
        codes = every_code(dtype)
        finite = codes[codes.float().isfinite()]
        a, b = (finite[torch.randint(0, finite.numel(), s, generator=gen)] for s in ((M, K), (K, N_)))
    c = torch.empty(M, N_)
    dot_kernel[(1,)](a, b, c, M=M, N=N_, K=K)
    exact = a.double() @ b.double()
    bound = K * 2.0 ** -24 * (a.double().abs() @ b.double().abs())
    assert ((c.double() - exact).abs() <= bound).all(), (c.double() - exact).abs().max()


@triton.jit
def scale_kernel(x_ptr, y_ptr, eps, n, BLOCK: tl.constexpr):
    tl.static_assert(eps.dtype == tl.float32)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, x * eps.to(tl.float32), mask=offs < n)


def test_a_float_scalar_argument_is_an_fp32_scalar_as_in_the_jit():
    x, y = torch.randn(8), torch.empty(8)
    scale_kernel[(1,)](x, y, 0.1, 8, BLOCK=8)
    assert torch.equal(y, x * torch.tensor(0.1, dtype=torch.float32))


@triton.jit
def bf16_ops_kernel(x_ptr, y_ptr, add_ptr, mul_ptr, neg_ptr, max_ptr, sum_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x, y = tl.load(x_ptr + offs), tl.load(y_ptr + offs)
    tl.store(add_ptr + offs, x + y)
    tl.store(mul_ptr + offs, x * y)
    tl.store(neg_ptr + offs, -x)
    tl.store(max_ptr, tl.max(x, axis=0))
    tl.store(sum_ptr, tl.sum(x, axis=0))


def test_bf16_arithmetic_rounds_like_torch():
    gen = torch.Generator().manual_seed(2)
    x, y = (torch.randn(256, generator=gen).to(torch.bfloat16) for _ in range(2))
    outs = [torch.empty(256, dtype=torch.bfloat16) for _ in range(3)] + [torch.empty(1, dtype=torch.bfloat16)
                                                                        for _ in range(2)]
    bf16_ops_kernel[(1,)](x, y, *outs, BLOCK=256)
    add, mul, neg, mx, total = outs
    assert torch.equal(bits(add), bits(x + y)) and torch.equal(bits(mul), bits(x * y))
    assert torch.equal(bits(neg), bits(-x)) and mx.item() == x.max().item()
    # a bf16 sum: one bf16 rounding per tree level (8 here) on top of the exact sum
    exact = x.double().sum().item()
    assert abs(total.double().item() - exact) <= 8 * 2.0 ** -8 * x.double().abs().sum().item()


@triton.jit
def sum_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    tl.store(out_ptr, tl.sum(tl.load(x_ptr + tl.arange(0, BLOCK)), axis=0))


def test_an_fp16_sum_rounds_at_every_tree_level_as_a_gpu_does_not_once():
    # 1024 and 2047 quarters (exact sum 1535.75): in a tree of fp16 adds the 1024 meets 0.25 and
    # then 0.5, each lost to rounding (the ulp at 1024 is 1), then the rest exactly: 1535; numpy's
    # own fp16 sum (Triton's interpreter's) accumulates in fp32 and rounds once: 1536
    x = torch.cat([torch.tensor([1024.0]), torch.full((2047,), 0.25)]).to(torch.float16)
    total = torch.empty(1, dtype=torch.float16)
    sum_kernel[(1,)](x, total, BLOCK=2048)
    assert float(x.numpy().sum()) == 1536.0
    assert float(total.item()) == 1535.0


@triton.jit
def fp32_dot_kernel(a_ptr, b_ptr, c_ptr, PRECISION: tl.constexpr):
    i = tl.arange(0, 16)
    a = tl.load(a_ptr + i[:, None] * 16 + i[None, :])
    b = tl.load(b_ptr + i[:, None] * 16 + i[None, :])
    if PRECISION == "default":
        c = tl.dot(a, b)
    else:
        c = tl.dot(a, b, input_precision=PRECISION)
    tl.store(c_ptr + i[:, None] * 16 + i[None, :], c)


@pytest.mark.parametrize("precision", ["default", "tf32", "ieee", "tf32x3"])
def test_an_fp32_dot_at_tf32_rounds_its_operands_to_tf32(precision):
    a = torch.full((16, 16), 1 + 2.0 ** -12)   # 1 + 2^-12: not a tf32 value (ties to 1.0)
    b = torch.eye(16) * (1 + 2.0 ** -10)       # a tf32 value
    c = torch.empty(16, 16)
    fp32_dot_kernel[(1,)](a, b, c, PRECISION=precision)
    tf32 = precision in ("default", "tf32")
    want = (1.0 if tf32 else 1 + 2.0 ** -12) * (1 + 2.0 ** -10)
    assert torch.equal(c, torch.full((16, 16), want, dtype=torch.float64).float())


@triton.jit
def argmax_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(out_ptr, tl.argmax(x, 0, tie_break_left=True))
    tl.store(out_ptr + 1, tl.argmax(x, 0, tie_break_left=False))
    tl.store(out_ptr + 2, tl.argmin(x, 0, tie_break_left=True))
    tl.store(out_ptr + 3, tl.argmin(x, 0, tie_break_left=False))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_argmax_without_tie_break_left_takes_a_later_index_as_a_gpu_may(dtype):
    x = torch.tensor([1, 3, 0, 3, 2, 0, 3, 1], dtype=dtype)
    out = torch.empty(4, dtype=torch.int32)
    argmax_kernel[(1,)](x, out, BLOCK=8)
    assert out.tolist() == [1, 6, 2, 5]


@triton.jit
def _then(a, b, c, d):
    """The affine maps v -> a v + b, then v -> c v + d: associative, not commutative."""
    return a * c, b * c + d


@triton.jit
def affine_kernel(a_ptr, b_ptr, out_ptr, ROWS: tl.constexpr, COLS: tl.constexpr):
    o = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
    a, b = tl.load(a_ptr + o), tl.load(b_ptr + o)
    ra, rb = tl.reduce((a, b), 1, _then)
    ka, kb = tl.reduce((a, b), 1, _then, keep_dims=True)
    wa, wb = tl.reduce((a, b), None, _then)
    r = tl.arange(0, ROWS)
    tl.store(out_ptr + r, ra)
    tl.store(out_ptr + ROWS + r, rb)
    tl.store(out_ptr + 2 * ROWS + r[:, None], kb)
    tl.store(out_ptr + 3 * ROWS, wa)
    tl.store(out_ptr + 3 * ROWS + 1, wb)


def test_a_reduce_with_its_own_combine_keeps_the_order_of_its_operands():
    """The layer combines pairwise in a tree (log2 n calls, not n): a combine that does not
    commute (composing affine maps) gives what the left fold gives, along an axis, with keep_dims
    and over the whole block (where Triton's own interpreter flattens only the first operand)."""
    gen = torch.Generator().manual_seed(5)
    a = torch.randint(0, 2, (4, 8), generator=gen, dtype=torch.int32) * 2 - 1
    b = torch.randint(-9, 10, (4, 8), generator=gen, dtype=torch.int32)

    def fold(pairs):
        ca, cb = 1, 0
        for x, y in pairs:
            ca, cb = ca * x, cb * x + y
        return ca, cb
    rows = [fold(zip(a[i].tolist(), b[i].tolist())) for i in range(4)]
    whole = fold(zip(a.flatten().tolist(), b.flatten().tolist()))
    want = [r[0] for r in rows] + [r[1] for r in rows] + [r[1] for r in rows] + list(whole)
    out = torch.zeros(3 * 4 + 2, dtype=torch.int32)
    affine_kernel[(1,)](a, b, out, ROWS=4, COLS=8)
    assert out.tolist() == want


def test_a_launch_leaves_triton_language_as_it_found_it():
    """Helper calls inside a launch patch triton.language once (the layer skips the repeats); the
    launch's own scope still restores it after, and a second launch patches it again."""
    x = torch.tensor([1, 3, 0, 3, 2, 0, 3, 1], dtype=torch.float32)
    out = torch.empty(4, dtype=torch.int32)
    for _ in range(2):
        argmax_kernel[(1,)](x, out, BLOCK=8)   # tl.argmax: a @triton.jit helper calling others
        assert out.tolist() == [1, 6, 2, 5]
        assert tl.core.is_builtin(tl.load) and tl.core.is_builtin(tl.math.exp)


@triton.jit
def nan_minmax_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    o = tl.arange(0, BLOCK)
    tl.store(out_ptr + o, tl.maximum(x, 0.0))
    tl.store(out_ptr + BLOCK + o, tl.minimum(x, 0.0))
    tl.store(out_ptr + 2 * BLOCK + o, tl.clamp(x, -1.0, 1.0))
    tl.store(out_ptr + 3 * BLOCK + o, tl.maximum(x, 0.0, propagate_nan=tl.PropagateNan.ALL))
    tl.store(out_ptr + 4 * BLOCK + o, tl.clamp(x, -1.0, 1.0, propagate_nan=tl.PropagateNan.ALL))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_maximum_minimum_and_clamp_drop_a_nan_unless_asked_to_propagate_it(dtype):
    """maxnum / minnum on both vendors (PTX max.f32, v_max_f32): relu(NaN) is 0 on a GPU."""
    x = torch.tensor([float("nan"), -2.0, 0.5, 3.0], dtype=dtype)
    out = torch.empty(5, 4, dtype=dtype)
    nan_minmax_kernel[(1,)](x, out, BLOCK=4)
    got = [[None if v != v else v for v in row] for row in out.float().tolist()]
    assert got == [[0.0, 0.0, 0.5, 3.0], [0.0, -2.0, 0.0, 0.0], [-1.0, -1.0, 0.5, 1.0],
                   [None, 0.0, 0.5, 3.0], [None, -1.0, 0.5, 1.0]]


@triton.jit
def histogram_kernel(x_ptr, out_ptr, n, BINS: tl.constexpr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o, mask=o < n, other=0)
    tl.store(out_ptr + tl.arange(0, BINS), tl.histogram(x, BINS, mask=o < n))


def test_histogram_counts_what_lies_in_its_bins_and_the_mask_keeps_in_int32():
    """A value equal to the bin count, or negative, falls outside (3.6 counted bins in the last)."""
    x = torch.tensor([0, 3, 4, -1, 3, 1, 2, 2], dtype=torch.int32)   # the last two masked off
    out = torch.zeros(4, dtype=torch.int32)
    histogram_kernel[(1,)](x, out, 6, BINS=4, BLOCK=8)
    assert out.tolist() == [1, 1, 0, 2]


@triton.jit
def fma_kernel(x_ptr, y_ptr, z_ptr, out_ptr, BLOCK: tl.constexpr, LIBDEVICE: tl.constexpr = True):
    o = tl.arange(0, BLOCK)
    tl.store(out_ptr + o, tl.fma(tl.load(x_ptr + o), tl.load(y_ptr + o), tl.load(z_ptr + o)))
    if LIBDEVICE:   # fp32 and fp64 only, as on the GPU
        tl.store(out_ptr + BLOCK + o, libdevice.fma(tl.load(x_ptr + o), tl.load(y_ptr + o), tl.load(z_ptr + o)))


# x * y + z, exact, in three places a rounding apart goes wrong: the fp32 product (1 - 2^-46
# rounds to 1); the float64 sum (1 + 2^-24 + 2^-54 rounds to 1 + 2^-24, the midpoint of two fp32
# neighbours, then half to even to 1: x * y = 2^-24 (1 + 2^-30) = 13325 * 80581 * 2^-54); and
# the same with both signs turned.
FMA_CASES = [((1 + 2**-23), (1 - 2**-23), -1.0, -(2**-46)),
             (13325 * 2**-27, 80581 * 2**-27, 1.0, 1 + 2**-23),
             (-13325 * 2**-27, 80581 * 2**-27, -1.0, -(1 + 2**-23)),
             (3.0, 0.5, 0.25, 1.75)]


def test_fp32_fma_rounds_once_as_on_a_gpu():
    """fma.rn.f32 (NVIDIA) and v_fma_f32 (AMD) round x * y + z once; Triton 3.6's interpreter
    rounded the product and the sum apart, and a float64 sum alone rounds twice."""
    x, y, z, want = (torch.tensor([c[i] for c in FMA_CASES], dtype=torch.float32) for i in range(4))
    assert torch.equal(torch.from_numpy(N.fma_fp32(x.numpy(), y.numpy(), z.numpy())), want)
    out = torch.empty(8, dtype=torch.float32)
    fma_kernel[(1,)](x, y, z, out, BLOCK=4)
    assert torch.equal(out[:4], want) and torch.equal(out[4:], want)


def test_fp16_fma_rounds_once():
    """(1 + 2^-10)(1 - 2^-10) - 1 = -2^-20: an fp16 product rounds to 1 first (Triton 3.6)."""
    x, y, z = (torch.tensor([v], dtype=torch.float16) for v in (1 + 2**-10, 1 - 2**-10, -1.0))
    out = torch.empty(1, dtype=torch.float16)
    fma_kernel[(1,)](x, y, z, out, BLOCK=1, LIBDEVICE=False)
    assert out[0].item() == -(2**-20)


def test_fp32_fma_keeps_infinities_nans_overflow_and_subnormals():
    big, tiny = torch.finfo(torch.float32).max, 2.0**-149
    x = torch.tensor([float("inf"), float("inf"), float("nan"), big, 2.0**-75, 3 * 2.0**-76, 1.0], dtype=torch.float32)
    y = torch.tensor([0.0, 1.0, 1.0, 2.0, 2.0**-75, 2.0**-75, tiny], dtype=torch.float32)
    z = torch.tensor([1.0, float("-inf"), 0.0, 0.0, 0.0, 0.0, tiny], dtype=torch.float32)
    got = torch.from_numpy(N.fma_fp32(x.numpy(), y.numpy(), z.numpy())).tolist()
    assert [v != v for v in got[:3]] == [True, True, True]
    # 2^-150 is a tie between 0 and the least subnormal (to even: 0); 3 * 2^-151 rounds up to it
    assert got[3:] == [float("inf"), 0.0, tiny, 2 * tiny]


# x * y + z, exact, where two roundings go wrong in float64: the product (1 - 2^-104 rounds to 1);
# the sum (x * y = 2^-53 (1 + 2^-60) = (2^20 + 1)(2^40 - 2^20 + 1) 2^-113 rounds to 2^-53, and 1 +
# 2^-53 is a midpoint, to even: 1); an exact zero's sign (-0 only from -0 + -0); a product
# below the least subnormal whose sum with it is 2^-1073; a product over the largest double that
# z brings back; z's infinity against an overflowing product (no NaN).
BIG = torch.finfo(torch.float64).max
FMA64_CASES = [((1 + 2**-52), (1 - 2**-52), -1.0, -(2**-104)),
               (1048577 * 2.0**-60, 1099510579201 * 2.0**-53, 1.0, 1 + 2**-52),
               (-0.0, 1.0, -0.0, -0.0),
               (0.0, -1.0, 0.0, 0.0),
               (3 * 2.0**-538, 2.0**-537, 2.0**-1074, 2.0**-1073),
               (3.0, 2.0**1023, -BIG, 2.0**1023 + 2.0**971),
               (2.0**600, 2.0**500, float("-inf"), float("-inf"))]


def _exact_fma64(x: float, y: float, z: float) -> float:
    """The test's own reference: the rational x * y + z rounded once (Python's int division)."""
    from fractions import Fraction
    import math
    if not (math.isfinite(x) and math.isfinite(y)):
        return x * y + z
    if not math.isfinite(z):
        return z
    exact = Fraction(x) * Fraction(y) + Fraction(z)
    return x * y + z if exact == 0 else float(exact)


def test_fp64_fma_rounds_once_as_on_a_gpu():
    """fma.rn.f64 and v_fma_f64 round x * y + z once; Triton 3.6's interpreter rounded the product
    first ((1 + 2^-52)(1 - 2^-52) - 1 gave 0). The cases above and 4089 near-cancellations, against
    the exact rational result."""
    rng = torch.Generator().manual_seed(0)
    n = 4096 - len(FMA64_CASES)     # a power of two in all, for tl.arange
    m = 1 + torch.rand(3, n, generator=rng, dtype=torch.float64)
    x, y = m[0] * 2.0 ** torch.randint(-40, 40, (n,), generator=rng), m[1]
    z = -(x * y) * (1 + (m[2] - 1.5) * 2.0**-50)      # a product's neighbourhood: cancellation
    fixed = [(a, b, c) for a, b, c, _ in FMA64_CASES]
    x = torch.cat([torch.tensor([c[0] for c in fixed], dtype=torch.float64), x])
    y = torch.cat([torch.tensor([c[1] for c in fixed], dtype=torch.float64), y])
    z = torch.cat([torch.tensor([c[2] for c in fixed], dtype=torch.float64), z])
    want = torch.tensor([_exact_fma64(*v) for v in zip(x.tolist(), y.tolist(), z.tolist())], dtype=torch.float64)
    assert want[:len(FMA64_CASES)].tolist() == [c[3] for c in FMA64_CASES]

    def same(got):
        return bool(((got == want) & (torch.signbit(got) == torch.signbit(want))).all())

    assert same(torch.from_numpy(N.fma_fp64(x.numpy(), y.numpy(), z.numpy())))
    assert not same(x * y + z)      # the inputs do tell one rounding from two
    out = torch.empty(2 * len(x), dtype=torch.float64)
    fma_kernel[(1,)](x, y, z, out, BLOCK=len(x))
    assert same(out[:len(x)]) and same(out[len(x):])


# ---- libdevice ------------------------------------------------------------------------------------

@triton.jit
def libdevice_kernel(x_ptr, y_ptr, z_ptr, out_ptr, n, FN: tl.constexpr, NARGS: tl.constexpr,
                     BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    ok = offs < n
    x = tl.load(x_ptr + offs, mask=ok)
    fn = getattr(libdevice, FN)     # interpreter only: the JIT would need the name spelled out
    if NARGS == 1:
        r = fn(x)
    elif NARGS == 2:
        r = fn(x, tl.load(y_ptr + offs, mask=ok))
    else:
        r = fn(x, tl.load(y_ptr + offs, mask=ok), tl.load(z_ptr + offs, mask=ok))
    tl.store(out_ptr + offs, r, mask=ok)


# name -> (float64 reference from torch / math, input range); an independent spelling of each
REFERENCE = {
    "abs": (torch.abs, (-4, 4)), "floor": (torch.floor, (-4, 4)), "ceil": (torch.ceil, (-4, 4)),
    "trunc": (torch.trunc, (-4, 4)), "rint": (torch.round, (-4, 4)), "nearbyint": (torch.round, (-4, 4)),
    "round": (lambda x: torch.sign(x) * torch.floor(x.abs() + 0.5), (-4, 4)),
    "sqrt": (torch.sqrt, (0, 9)), "sqrt_rn": (torch.sqrt, (0, 9)), "rsqrt": (torch.rsqrt, (0.01, 9)),
    "rsqrt_rn": (torch.rsqrt, (0.01, 9)), "rcp_rn": (torch.reciprocal, (0.1, 9)),
    "cbrt": (lambda x: torch.sign(x) * x.abs() ** (1 / 3), (-8, 8)),
    "rcbrt": (lambda x: 1 / (torch.sign(x) * x.abs() ** (1 / 3)), (0.1, 8)),
    "exp": (torch.exp, (-10, 10)), "exp2": (torch.exp2, (-10, 10)), "exp10": (lambda x: 10 ** x, (-5, 5)),
    "expm1": (torch.expm1, (-2, 2)), "log": (torch.log, (0.01, 100)), "log2": (torch.log2, (0.01, 100)),
    "log10": (torch.log10, (0.01, 100)), "log1p": (torch.log1p, (-0.5, 10)),
    "sin": (torch.sin, (-6, 6)), "cos": (torch.cos, (-6, 6)), "tan": (torch.tan, (-1.5, 1.5)),
    "asin": (torch.asin, (-1, 1)), "acos": (torch.acos, (-1, 1)), "atan": (torch.atan, (-9, 9)),
    "sinh": (torch.sinh, (-5, 5)), "cosh": (torch.cosh, (-5, 5)), "tanh": (torch.tanh, (-5, 5)),
    "asinh": (torch.asinh, (-9, 9)), "acosh": (torch.acosh, (1, 9)), "atanh": (torch.atanh, (-0.9, 0.9)),
    "sinpi": (lambda x: torch.sin(math.pi * x), (-2, 2)), "cospi": (lambda x: torch.cos(math.pi * x), (-2, 2)),
    "erf": (torch.erf, (-3, 3)), "erfc": (torch.erfc, (-3, 3)),
    "normcdf": (lambda x: 0.5 * torch.erfc(-x / math.sqrt(2)), (-3, 3)),
    "lgamma": (torch.lgamma, (0.1, 9)), "tgamma": (lambda x: torch.exp(torch.lgamma(x)), (0.1, 6)),
    "saturatef": (lambda x: x.clamp(0, 1), (-2, 2)),
    "fast_expf": (torch.exp, (-10, 10)), "fast_exp10f": (lambda x: 10 ** x, (-5, 5)),
    "fast_logf": (torch.log, (0.01, 100)), "fast_log2f": (torch.log2, (0.01, 100)),
    "fast_log10f": (torch.log10, (0.01, 100)), "fast_sinf": (torch.sin, (-6, 6)),
    "fast_cosf": (torch.cos, (-6, 6)), "fast_tanf": (torch.tan, (-1.5, 1.5)),
    "fast_tanhf": (torch.tanh, (-5, 5)),
    "pow": (torch.pow, (0.1, 4)), "fast_powf": (torch.pow, (0.1, 4)), "atan2": (torch.atan2, (-3, 3)),
    "hypot": (torch.hypot, (-9, 9)), "rhypot": (lambda x, y: 1 / torch.hypot(x, y), (0.5, 9)),
    "fmod": (torch.fmod, (0.5, 9)), "remainder": (lambda x, y: x - y * torch.round(x / y), (0.5, 9)),
    "copysign": (torch.copysign, (-4, 4)), "fdim": (lambda x, y: (x - y).clamp_min(0), (-4, 4)),
    "div_rn": (torch.div, (0.5, 9)), "fast_dividef": (torch.div, (0.5, 9)),
    "add_rn": (torch.add, (-4, 4)), "sub_rn": (torch.sub, (-4, 4)), "mul_rn": (torch.mul, (-4, 4)),
    "nextafter": (None, (-4, 4)), "fma": (lambda x, y, z: x * y + z, (-4, 4)),
    "fma_rn": (lambda x, y, z: x * y + z, (-4, 4)), "ldexp": (None, (-4, 4)), "scalbn": (None, (-4, 4)),
    "isnan": (torch.isnan, (-4, 4)), "isinf": (torch.isinf, (-4, 4)), "finitef": (torch.isfinite, (-4, 4)),
    "isfinited": (torch.isfinite, (-4, 4)), "signbit": (torch.signbit, (-4, 4)),
}


def test_every_libdevice_function_the_kernels_use_is_implemented():
    used = set()
    for path in [*(ROOT / "portcheck").rglob("*.py")]:
        used |= set(re.findall(r"\blibdevice\.(\w+)\(", path.read_text()))
    assert used, "no libdevice call found: the scan is broken"
    assert used <= set(N.LIBDEVICE), sorted(used - set(N.LIBDEVICE))
    assert set(REFERENCE) == set(N.LIBDEVICE)


@pytest.mark.parametrize("name", sorted(N.LIBDEVICE))
def test_libdevice_on_the_interpreter_matches_a_float64_reference(name):
    ref, (lo, hi) = REFERENCE[name]
    _, nargs, kind = N.LIBDEVICE[name]
    gen = torch.Generator().manual_seed(3)
    args = [lo + (hi - lo) * torch.rand(64, generator=gen) for _ in range(3)]
    if kind == "pred":
        args[0][:4] = torch.tensor([math.nan, math.inf, -0.0, -math.inf])
    if kind == "ldexp":
        args[1] = torch.randint(-10, 10, (64,), generator=gen, dtype=torch.int32)
    dtype = torch.int32 if kind == "pred" else torch.float32
    out = torch.empty(64, dtype=dtype)
    libdevice_kernel[(1,)](args[0], args[1], args[2], out, 64, FN=name, NARGS=nargs, BLOCK=64)
    if kind == "nextafter":
        want = torch.nextafter(args[0], args[1])
    elif kind == "ldexp":
        want = torch.ldexp(args[0].double(), args[1].double()).float()
    else:
        want = ref(*[a.double() for a in args[:nargs]])
    if kind == "pred":
        assert torch.equal(out, want.to(torch.int32))
    else:   # float64 rounded once to fp32: within one fp32 ulp of the reference (0.5 + reference error)
        torch.testing.assert_close(out.double(), want.double(), rtol=2.0 ** -23, atol=2.0 ** -126)


def test_libdevice_refuses_formats_it_does_not_take_on_the_gpu():
    x = torch.ones(4, dtype=torch.float16)
    with pytest.raises(Exception, match="fp32 or fp64"):
        libdevice_kernel[(1,)](x, x, x, torch.empty(4, dtype=torch.float16), 4, FN="exp", NARGS=1, BLOCK=4)


# ---- the layer's switch ----------------------------------------------------------------------------

def test_install_and_uninstall_are_idempotent_and_described():
    from triton.runtime import interpreter as interp
    patched = interp.InterpreterBuilder.create_dot
    N.install()
    assert interp.InterpreterBuilder.create_dot is patched and N.describe() == N.DESCRIPTION
    with N.active(False):
        N.uninstall()
        assert interp.InterpreterBuilder.create_dot.__name__ == "create_dot" and N.describe() == "raw"
        assert libdevice.exp(torch.ones(1)) is None     # Triton's own stub again
    assert N.installed() and interp.InterpreterBuilder.create_dot.__name__ == "new_dot"


def test_unknown_triton_internals_are_refused_by_name(monkeypatch):
    from triton.runtime import interpreter as interp
    monkeypatch.setattr(triton, "__version__", "3.5.0")
    with pytest.raises(N.InterpreterNumericsError, match=r"not 3\.5\.0.*--raw-interpreter"):
        N.check_supported()
    monkeypatch.setattr(triton, "__version__", N.TRITON_VERSIONS[-1])
    monkeypatch.setattr(interp.InterpreterBuilder, "create_dot", lambda self, a, b, acc: None)
    with pytest.raises(N.InterpreterNumericsError, match="InterpreterBuilder.create_dot"):
        N.check_supported()


# ---- a real bf16 bug, through portcheck's own runner ---------------------------------------------

@triton.jit
def row_sum_kernel(x_ptr, y_ptr, n: tl.constexpr, BF16_ACC: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    if BF16_ACC:    # the bug: the running sum is kept in bf16, rounding at every add
        acc = tl.zeros([BLOCK], dtype=tl.bfloat16)
    else:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=0.0)
        if BF16_ACC:
            acc += x
        else:
            acc += x.to(tl.float32)
    tl.store(y_ptr + row, tl.sum(acc.to(tl.float32), axis=0))


def row_sum_case(bf16_acc: bool) -> Case:
    def make(spec, device):
        gen = torch.Generator().manual_seed(spec["seed"])
        return {"x": (torch.rand(spec["rows"], spec["n"], generator=gen) + 1).to(torch.bfloat16).to(device)}

    def launch(args, outs):
        rows, n = args["x"].shape
        row_sum_kernel[(rows,)](args["x"], outs["y"], n, BF16_ACC=bf16_acc, BLOCK=16)

    return Case(name="row_sum_bf16_acc" if bf16_acc else "row_sum", family="test", dtypes=("bf16",),
                inputs=None, make=make, outputs=lambda a: {"y": ((a["x"].shape[0],), torch.float32)},
                launch=launch, oracle=lambda a: {"y": a["x"].sum(dim=1)},
                tolerance=lambda a, r, d: {"y": tolerance.rounding("fp32", reduction=a["x"].shape[1])},
                cost=lambda a: Cost(a["x"].numel() * 2))


SPEC = {"dtype": "bf16", "seed": 0, "rows": 4, "n": 512}


def first(comparisons):
    """The first launch's comparison of y (the runner may launch more than once)."""
    return next(c for c in comparisons if c.name == "y")


def test_a_bf16_accumulation_bug_fails_for_its_real_size_with_the_layer():
    assert all(c.ok for c in evaluate(row_sum_case(False), "interpreter", SPEC))
    bug = first(evaluate(row_sum_case(True), "interpreter", SPEC))
    # 32 bf16 adds per lane into a sum of ~50: a few bf16 roundings (2^-9 each), not noise
    assert not bug.ok and 2.0 ** -12 < bug.max_rel < 2.0 ** -4, bug.metrics()


def test_without_the_layer_the_same_bug_is_garbage_not_a_rounding_error():
    with N.active(False):
        assert all(c.ok for c in evaluate(row_sum_case(False), "interpreter", SPEC))
        bug = first(evaluate(row_sum_case(True), "interpreter", SPEC))
    # the raw interpreter adds bf16 bit patterns as integers: no verdict about rounding is possible
    assert not bug.ok and not bug.max_rel < 1.0, bug.metrics()
