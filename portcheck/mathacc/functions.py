"""The functions measured: each Triton spelling, its float64 oracle, and its documented bounds.

Spellings: `tl.*` (what kernels usually write) and `libdevice.*` (triton.language.extra.libdevice,
which maps to CUDA's libdevice or AMD's ocml). Division is measured as the reciprocal 1/x over
all 2^32 denominators, in its three forms (the `/` operator, div_rn, fdiv).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class MathFn:
    name: str                  # e.g. "tl.exp", "libdevice.exp", "recip.div_rn"
    base: str                  # the mathematical function: exp, log, recip, ...
    spelling: str              # tl | libdevice | operator
    oracle: Callable           # float64 tensor -> float64 tensor
    cuda_bound: float | None   # CUDA math API documented max ULP (see BOUNDS_SOURCE)
    hip_bound: float | None    # HIP math API documented max ULP


def _recip(x):
    return 1.0 / x


# Documented single-precision maximum errors in ULP.
# CUDA: CUDA C++ Programming Guide, "Mathematical Functions" appendix, single-precision table
#   (expf 2, exp2f 2, logf 1, log2f 1, sinf 2, cosf 2, sqrtf 0 (IEEE, -prec-sqrt=true),
#   rsqrtf 2, erff 2, tanhf 2, x/y 0 (IEEE, -prec-div=true)); the intrinsics behind tl.* lowering
#   (__expf: "2 + floor(abs(1.173 * x))", __fdividef 2) have wider bounds.
# HIP: HIP math API reference (ROCm docs), single-precision table: expf 1, logf 2, sinf 1,
#   tanhf 2, erff 4 (as quoted in shared/FACTS.md); entries not re-checked here are None
#   (unknown), never guessed.
BOUNDS_SOURCE = ("CUDA C++ Programming Guide, Mathematical Functions appendix (single precision); "
                 "HIP math API reference, single-precision functions (ROCm documentation)")

_BASES = {  # base -> (oracle, cuda bound, hip bound)
    "exp": (torch.exp, 2, 1), "exp2": (torch.exp2, 2, None), "log": (torch.log, 1, 2),
    "log2": (torch.log2, 1, None), "sin": (torch.sin, 2, 1), "cos": (torch.cos, 2, None),
    "sqrt": (torch.sqrt, 0, None), "sqrt_rn": (torch.sqrt, 0, None), "rsqrt": (torch.rsqrt, 2, None),
    "erf": (torch.erf, 2, 4), "tanh": (torch.tanh, 2, 2), "sigmoid": (torch.sigmoid, None, None),
    "recip": (_recip, 0, None),
}

# name -> (base, spelling); the kernel source in kernels.py switches on the name.
SPELLINGS = {
    "tl.exp": ("exp", "tl"), "tl.exp2": ("exp2", "tl"), "tl.log": ("log", "tl"),
    "tl.log2": ("log2", "tl"), "tl.sin": ("sin", "tl"), "tl.cos": ("cos", "tl"),
    "tl.sqrt": ("sqrt", "tl"), "tl.sqrt_rn": ("sqrt_rn", "tl"), "tl.rsqrt": ("rsqrt", "tl"),
    "tl.erf": ("erf", "tl"), "tl.sigmoid": ("sigmoid", "tl"),
    "libdevice.exp": ("exp", "libdevice"), "libdevice.exp2": ("exp2", "libdevice"),
    "libdevice.log": ("log", "libdevice"), "libdevice.log2": ("log2", "libdevice"),
    "libdevice.sin": ("sin", "libdevice"), "libdevice.cos": ("cos", "libdevice"),
    "libdevice.sqrt": ("sqrt", "libdevice"), "libdevice.sqrt_rn": ("sqrt_rn", "libdevice"),
    "libdevice.rsqrt": ("rsqrt", "libdevice"), "libdevice.erf": ("erf", "libdevice"),
    "libdevice.tanh": ("tanh", "libdevice"),
    "recip.operator": ("recip", "operator"), "recip.div_rn": ("recip", "tl"),
    "recip.fdiv": ("recip", "tl"),
}

FUNCTIONS: dict[str, MathFn] = {
    name: MathFn(name, base, spelling, *_BASES[base]) for name, (base, spelling) in SPELLINGS.items()
}


def select(names: list[str] | None) -> list[MathFn]:
    """Names ('tl.exp'), bases ('exp': every spelling) or all; unknown names list the known ones."""
    from ..errors import UsageError
    if not names:
        return list(FUNCTIONS.values())
    chosen = []
    for n in names:
        hits = [f for f in FUNCTIONS.values() if n in (f.name, f.base)]
        if not hits:
            raise UsageError(f"unknown math function {n!r}; known: {', '.join(FUNCTIONS)} "
                             f"(or a base name: {', '.join(_BASES)})")
        chosen += [f for f in hits if f not in chosen]
    return chosen


def documented_bound(base: str, vendor: str) -> float | None:
    """The vendor's documented max ULP error for a base function (nvidia | amd)."""
    _, cuda, hip = _BASES[base]
    return cuda if vendor == "nvidia" else hip
