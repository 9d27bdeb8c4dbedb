"""Tolerances derived from the number formats and the shape of the computation.

Every tolerance carries the formula that produced it, and reports print that formula. The model:
an output rounded to its format contributes u(out); each rounding step in the accumulation
format contributes u(acc), and a reduction over n terms contributes up to n such steps (the
classical bound gamma_n ~ n*u for recursive summation, Higham, *Accuracy and Stability of
Numerical Algorithms*, 2nd ed., sec. 4.2). An element passes when
    |out - ref| <= atol + rtol * |ref|
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import torch

from .dtypes import fmt

Number = Union[float, torch.Tensor]


@dataclass(frozen=True)
class Tolerance:
    rtol: Number          # a float, or a tensor broadcastable to the output (per-element bounds)
    atol: Number
    formula: str
    exact: bool = False   # bitwise equality (integers, quantized codes, RNG masks)

    def summary(self) -> dict:
        return {"formula": self.formula, "rtol": _largest(self.rtol), "atol": _largest(self.atol),
                "exact": self.exact}

    def scaled(self, factor: float, reason: str) -> "Tolerance":
        """An override: the same formula times a factor, with the reason kept in the formula."""
        return Tolerance(self.rtol * factor, self.atol * factor,
                         f"{factor:g} x ({self.formula}) [override: {reason}]", self.exact)


def _largest(x: Number) -> float:
    return float(x.max()) if isinstance(x, torch.Tensor) and x.numel() else float(x)


def exact(what: str = "bitwise equality") -> Tolerance:
    return Tolerance(0.0, 0.0, what, exact=True)


def rounding(out: str, acc: str = "fp32", reduction: int = 0, ops: int = 0,
             atol: Number | None = None, atol_formula: str | None = None) -> Tolerance:
    """rtol = u(out) + (reduction + ops) * u(acc); atol = tiny(out) unless given.

    `reduction` is the length of the longest sum an output depends on; `ops` counts the other
    rounding steps (each elementary function counts its documented ULP bound).
    """
    o, a = fmt(out), fmt(acc)
    steps = reduction + ops
    rtol = o.unit_roundoff + steps * a.unit_roundoff
    text = f"rtol = u({out}) + ({reduction} + {ops})*u({acc}) = {rtol:.3g}"
    if atol is None:
        atol, atol_formula = o.tiny, f"tiny({out})"
    return Tolerance(rtol, atol, f"{text}; atol = {atol_formula}")
