"""The functions measured: each Triton spelling, its float64 oracle, and its documented bounds.

Spellings: `tl.*` (what kernels usually write) and `libdevice.*` (triton.language.extra.libdevice,
which maps to CUDA's libdevice or AMD's ocml). Division is measured as the reciprocal 1/x over
all 2^32 denominators, in its three forms (the `/` operator, div_rn, fdiv).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..facts.numerics import BOUNDS_SOURCE, ULP_BOUNDS  # noqa: F401  BOUNDS_SOURCE: read by reports


@dataclass(frozen=True)
class MathFn:
    name: str                  # e.g. "tl.exp", "libdevice.exp", "recip.div_rn"
    base: str                  # the mathematical function: exp, log, recip, ...
    spelling: str              # tl | libdevice | operator
    oracle: Callable           # float64 tensor -> float64 tensor
    cuda_bound: float | None   # CUDA math API documented max ULP (facts.numerics)
    hip_bound: float | None    # HIP math API documented max ULP


def _recip(x):
    return 1.0 / x


_ORACLES = {  # base -> float64 oracle; the documented bounds are facts.numerics.ULP_BOUNDS
    "exp": torch.exp, "exp2": torch.exp2, "log": torch.log, "log2": torch.log2, "sin": torch.sin,
    "cos": torch.cos, "sqrt": torch.sqrt, "sqrt_rn": torch.sqrt, "rsqrt": torch.rsqrt,
    "erf": torch.erf, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "recip": _recip,
}
_BASES = {base: (oracle, ULP_BOUNDS[base].cuda, ULP_BOUNDS[base].hip) for base, oracle in _ORACLES.items()}

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
