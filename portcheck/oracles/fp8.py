"""Exact fp8 encoding and decoding in float64, written from the format definitions.

Four 8-bit formats, each 1 sign bit, E exponent bits with bias B, and M fraction bits:

  fp8e4nv   OCP E4M3 ("e4m3fn"): E=4 M=3 B=7.  No inf; only S.1111.111 is NaN (0x7f, 0xff);
            largest finite 1.75 * 2^8 = 448; smallest subnormal 2^-9; has -0 (0x80).
  fp8e5     OCP E5M2: E=5 M=2 B=15, IEEE-like: exponent 11111 is inf (fraction 0) or NaN;
            largest finite 1.75 * 2^15 = 57344; smallest subnormal 2^-16.
  fp8e4b8   FNUZ E4M3 (AMD CDNA3, "e4m3fnuz"): E=4 M=3 B=8.  Every exponent field is finite;
            no inf, no -0: the code 0x80 is the single NaN; largest finite 1.875 * 2^7 = 240.
  fp8e5b16  FNUZ E5M2 ("e5m2fnuz"): E=5 M=2 B=16, NaN = 0x80 only; largest finite 57344.

Rounding is to nearest, ties to even, on the format's grid (subnormals included). What happens
to a value beyond the largest finite one depends on the mode:
  saturate=True   +-max finite, and +-inf also become +-max: what cvt.rn.satfinite (NVIDIA)
                  does, and what a quantization kernel that clamps to [-max, max] produces;
  saturate=False  IEEE-style overflow: e5m2 gives +-inf, the formats without inf give NaN.
A magnitude overflows when its round-to-nearest-even result on the unbounded grid exceeds max:
for e4m3fn that is |x| > 464 (the midpoint 464 ties to the even 448).
NaN: OCP formats keep the input's sign (0x7f / 0xff), FNUZ formats have only 0x80. Zero: OCP
keeps the sign of zero (and of a value that rounds to zero); FNUZ has only +0.

Nothing here calls torch's float8 conversions: tests/kernels/test_fp8_oracle.py checks this module
against them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Fp8Format:
    name: str            # portcheck dtype name
    torch_dtype: torch.dtype
    exp_bits: int
    man_bits: int
    bias: int
    fnuz: bool           # finite-only exponents, no -0, single NaN 0x80
    has_inf: bool        # e5m2: exponent all ones with zero fraction is inf

    @property
    def min_normal_exp(self) -> int:
        return 1 - self.bias

    @property
    def max_finite(self) -> float:
        top = (1 << self.exp_bits) - 1
        if self.fnuz:            # all exponent fields are finite
            return math.ldexp(2 - 2.0 ** -self.man_bits, top - self.bias)
        if self.has_inf:         # the top exponent is inf/NaN
            return math.ldexp(2 - 2.0 ** -self.man_bits, top - 1 - self.bias)
        # e4m3fn: the top exponent is finite except its all-ones fraction (NaN)
        return math.ldexp(2 - 2.0 ** (1 - self.man_bits), top - self.bias)

    @property
    def min_subnormal(self) -> float:
        return math.ldexp(1.0, self.min_normal_exp - self.man_bits)

    def nan_code(self, negative: bool = False) -> int:
        """FNUZ: 0x80 only. OCP: S.1111.111 (e4m3fn) and S.11111.11 (e5m2) are both 0x7f | sign."""
        if self.fnuz:
            return 0x80
        return 0x7f | (0x80 if negative else 0)

    @property
    def max_code(self) -> int:
        """The code of +max finite: all-ones fields below the first non-finite code."""
        if self.fnuz:
            return 0x7f
        if self.has_inf:
            return (((1 << self.exp_bits) - 2) << self.man_bits) | ((1 << self.man_bits) - 1)
        return 0x7e

    def inf_code(self, negative: bool = False) -> int:
        if not self.has_inf:
            raise ValueError(f"{self.name} has no infinity")
        return (((1 << self.exp_bits) - 1) << self.man_bits) | (0x80 if negative else 0)


FORMATS: dict[str, Fp8Format] = {f.name: f for f in (
    Fp8Format("fp8e4nv", torch.float8_e4m3fn, 4, 3, 7, fnuz=False, has_inf=False),
    Fp8Format("fp8e5", torch.float8_e5m2, 5, 2, 15, fnuz=False, has_inf=True),
    Fp8Format("fp8e4b8", torch.float8_e4m3fnuz, 4, 3, 8, fnuz=True, has_inf=False),
    Fp8Format("fp8e5b16", torch.float8_e5m2fnuz, 5, 2, 16, fnuz=True, has_inf=False),
)}
_BY_TORCH = {f.torch_dtype: f for f in FORMATS.values()}


def fp8_format(name_or_dtype) -> Fp8Format:
    if isinstance(name_or_dtype, torch.dtype):
        try:
            return _BY_TORCH[name_or_dtype]
        except KeyError:
            raise ValueError(f"{name_or_dtype} is not an fp8 format") from None
    try:
        return FORMATS[name_or_dtype]
    except KeyError:
        raise ValueError(f"unknown fp8 format {name_or_dtype!r}; known: {', '.join(FORMATS)}") from None


def round_to_grid(x: torch.Tensor, f: Fp8Format) -> torch.Tensor:
    """|x| rounded to nearest even on f's grid, unbounded above (float64 in and out, x finite).

    The grid spacing in the binade [2^e, 2^(e+1)) is 2^(e - M), and 2^(emin - M) below the
    smallest normal; dividing by a power of two is exact, and torch.round rounds half to even.
    """
    a = x.to(torch.float64).abs()
    _, e = torch.frexp(a)                        # a = m * 2^e with m in [0.5, 1)
    e = torch.clamp(e.to(torch.int64) - 1, min=f.min_normal_exp)
    quantum = torch.ldexp(torch.ones_like(a), e - f.man_bits)
    return torch.round(a / quantum) * quantum


def encode(x: torch.Tensor, fmt, saturate: bool = True) -> torch.Tensor:
    """float values -> fp8 codes (uint8) of format `fmt`, rounding to nearest even."""
    f = fmt if isinstance(fmt, Fp8Format) else fp8_format(fmt)
    x = x.detach().to(device="cpu", dtype=torch.float64)
    negative = torch.signbit(x)
    nan = torch.isnan(x)
    inf = torch.isinf(x)
    finite = ~(nan | inf)
    v = round_to_grid(torch.where(finite, x, torch.zeros_like(x)), f)
    over = finite & (v > f.max_finite)
    v = torch.where(over, torch.full_like(v, f.max_finite), v)   # the code for max; fixed below if not saturating

    # magnitude code of a finite grid value: subnormal fields below 2^emin, normal above
    _, e = torch.frexp(v)
    e = e.to(torch.int64) - 1
    normal = v >= math.ldexp(1.0, f.min_normal_exp)
    exp_field = torch.where(normal, e + f.bias, torch.zeros_like(e))
    frac_unit = torch.ldexp(torch.ones_like(v), torch.where(normal, e, torch.full_like(e, f.min_normal_exp)) - f.man_bits)
    frac = (v / frac_unit).to(torch.int64) - torch.where(normal, 1 << f.man_bits, 0)
    code = (exp_field << f.man_bits) | frac
    sign_bit = torch.where(negative, 0x80, 0)
    if f.fnuz:
        sign_bit = torch.where(v == 0, 0, sign_bit)          # no -0: 0x80 is NaN
    code = code | sign_bit

    nan_code = torch.where(negative, f.nan_code(True), f.nan_code(False))
    if saturate:   # overflow already holds max's code; +-inf become +-max too
        inf_code = torch.where(negative, f.max_code | 0x80, f.max_code)
    else:          # IEEE-style: inf where the format has it, else NaN
        inf_code = torch.where(negative, f.inf_code(True), f.inf_code(False)) if f.has_inf else nan_code
        code = torch.where(over, inf_code, code)
    code = torch.where(inf, inf_code, code)
    code = torch.where(nan, nan_code, code)
    return code.to(torch.uint8)


def decode(codes: torch.Tensor, fmt) -> torch.Tensor:
    """fp8 codes (uint8, or an fp8 tensor) -> exact float64 values."""
    f = fmt if isinstance(fmt, Fp8Format) else fp8_format(fmt)
    if codes.dtype != torch.uint8:
        codes = codes.view(torch.uint8)
    c = codes.to(torch.int64)
    sign = (c >> 7) & 1
    exp_field = (c >> f.man_bits) & ((1 << f.exp_bits) - 1)
    frac = c & ((1 << f.man_bits) - 1)
    normal = exp_field > 0
    mant = torch.where(normal, frac + (1 << f.man_bits), frac).to(torch.float64)
    e = torch.where(normal, exp_field - f.bias, torch.full_like(exp_field, f.min_normal_exp)) - f.man_bits
    v = torch.ldexp(mant, e)
    v = torch.where(sign == 1, -v, v)
    top = (1 << f.exp_bits) - 1
    if f.fnuz:
        v = torch.where(c == 0x80, torch.full_like(v, float("nan")), v)
    elif f.has_inf:
        special = exp_field == top
        v = torch.where(special & (frac == 0), torch.where(sign == 1, -math.inf, math.inf), v)
        v = torch.where(special & (frac != 0), torch.full_like(v, float("nan")), v)
    else:
        v = torch.where((exp_field == top) & (frac == (1 << f.man_bits) - 1), torch.full_like(v, float("nan")), v)
    return v


def as_fp8(codes: torch.Tensor, fmt) -> torch.Tensor:
    """uint8 codes viewed as the torch fp8 dtype of `fmt` (for exact comparison with a kernel)."""
    f = fmt if isinstance(fmt, Fp8Format) else fp8_format(fmt)
    return codes.to(torch.uint8).view(f.torch_dtype)
