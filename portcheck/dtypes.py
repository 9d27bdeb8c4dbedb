"""Dtype names as portcheck, Triton and torch spell them, and the number-format facts tolerances need."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .errors import UsageError


@dataclass(frozen=True)
class Format:
    name: str            # portcheck's name: fp32, bf16, fp8e4nv, ...
    torch_dtype: torch.dtype
    triton_name: str     # Triton's signature spelling: fp32, bf16, fp8e4nv, ...
    mantissa_bits: int   # explicit fraction bits (0 for integers)
    min_exp: int         # exponent of the smallest normal (0 for integers)
    is_float: bool = True

    @property
    def unit_roundoff(self) -> float:
        """u = 2^-(p) with p = fraction bits + 1: the largest relative error of round-to-nearest."""
        return 2.0 ** -(self.mantissa_bits + 1) if self.is_float else 0.0

    @property
    def tiny(self) -> float:
        """Smallest positive normal number."""
        return 2.0 ** self.min_exp if self.is_float else 0.0

    @property
    def subnormal_step(self) -> float:
        """Spacing of the subnormals (the smallest positive value): the ULP of every value below
        tiny, so the floor an absolute tolerance near zero may have; tiny would accept zero for
        every output below the smallest normal."""
        return 2.0 ** (self.min_exp - self.mantissa_bits) if self.is_float else 0.0

    @property
    def overflow_threshold(self) -> float | None:
        """The magnitude from which round-to-nearest gives +-inf: max + ulp(max) / 2 (IEEE 754);
        None for formats without infinities (e4m3fn and the FNUZ pair) and for integers."""
        if not self.is_float or self.name not in HAS_INF:
            return None
        top = torch.finfo(self.torch_dtype).max
        return top + 2.0 ** (math.frexp(top)[1] - 1 - self.mantissa_bits) / 2


HAS_INF = ("fp64", "fp32", "fp16", "bf16", "fp8e5")   # the float formats with infinities


def _f(name, dt, tname, mant, emin):
    return Format(name, dt, tname, mant, emin)


FORMATS: dict[str, Format] = {
    f.name: f
    for f in [
        _f("fp64", torch.float64, "fp64", 52, -1022),
        _f("fp32", torch.float32, "fp32", 23, -126),
        _f("fp16", torch.float16, "fp16", 10, -14),
        _f("bf16", torch.bfloat16, "bf16", 7, -126),
        # fp8: OCP e4m3fn / e5m2 (NVIDIA sm_89+, gfx950, gfx12) and the FNUZ pair (gfx942).
        _f("fp8e4nv", torch.float8_e4m3fn, "fp8e4nv", 3, -6),
        _f("fp8e5", torch.float8_e5m2, "fp8e5", 2, -14),
        _f("fp8e4b8", torch.float8_e4m3fnuz, "fp8e4b8", 3, -7),
        _f("fp8e5b16", torch.float8_e5m2fnuz, "fp8e5b16", 2, -15),
        Format("int8", torch.int8, "i8", 0, 0, is_float=False),
        Format("int32", torch.int32, "i32", 0, 0, is_float=False),
        Format("int64", torch.int64, "i64", 0, 0, is_float=False),
        Format("uint8", torch.uint8, "u8", 0, 0, is_float=False),
        Format("bool", torch.bool, "i1", 0, 0, is_float=False),
    ]
}
_BY_TORCH = {f.torch_dtype: f for f in FORMATS.values()}


def fmt(name_or_dtype) -> Format:
    """Look a format up by portcheck name or torch dtype; unknown names are a usage error."""
    if isinstance(name_or_dtype, torch.dtype):
        return _BY_TORCH[name_or_dtype]
    try:
        return FORMATS[name_or_dtype]
    except KeyError:
        raise UsageError(f"unknown dtype {name_or_dtype!r}; known: {', '.join(FORMATS)}") from None


def torch_dtype(name: str) -> torch.dtype:
    return fmt(name).torch_dtype
