"""Tolerances derived from the number formats and the shape of the computation.

Every tolerance carries the formula that produced it, and reports print that formula. The model:
an output rounded to its format contributes u(out); each rounding step in the accumulation
format contributes u(acc), and a reduction over n terms contributes up to n such steps (the
classical bound gamma_n ~ n*u for recursive summation, Higham, *Accuracy and Stability of
Numerical Algorithms*, 2nd ed., sec. 4.2). An element passes when
    |out - ref| <= atol + rtol * |ref|
Near zero the absolute floor is the format's subnormal spacing, sub(f) = 2^(emin - mantissa bits)
(the ULP of every value below the smallest normal), never tiny(f): a floor of tiny(out) would
accept zero for every output below the smallest normal (88% of a 32768-column fp16 softmax row).
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


def near_zero(out: str, acc: str = "fp32", steps: float = 0) -> tuple[float, str]:
    """(atol floor, its formula): the output's rounding near zero, sub(out), plus `steps` rounding
    steps in `acc` whose results may fall below its smallest normal (one subnormal step each)."""
    floor = fmt(out).subnormal_step + steps * fmt(acc).subnormal_step
    return floor, (f"sub({out}) + {steps:g} sub({acc})" if steps else f"sub({out})")


def exact(what: str = "bitwise equality") -> Tolerance:
    return Tolerance(0.0, 0.0, what, exact=True)


def rounding(out: str, acc: str = "fp32", reduction: int = 0, ops: int = 0,
             atol: Number | None = None, atol_formula: str | None = None) -> Tolerance:
    """rtol = u(out) + (reduction + ops) * u(acc); atol = sub(out) + (reduction + ops) sub(acc)
    unless given (each rounding step near zero errs by up to one subnormal step).

    `reduction` is the length of the longest sum an output depends on; `ops` counts the other
    rounding steps (each elementary function counts its documented ULP bound).
    """
    o, a = fmt(out), fmt(acc)
    steps = reduction + ops
    rtol = o.unit_roundoff + steps * a.unit_roundoff
    text = f"rtol = u({out}) + ({reduction} + {ops})*u({acc}) = {rtol:.3g}"
    if atol is None:
        atol = o.subnormal_step + steps * a.subnormal_step
        atol_formula = f"sub({out}) + {steps} sub({acc})"
    return Tolerance(rtol, atol, f"{text}; atol = {atol_formula}")


# ---- per-element bounds for the common shapes of computation -----------------------------------
# Each takes the float64 arguments (and references) the oracle saw and returns one Tolerance whose
# rtol / atol are tensors shaped like the output, with the formula stated. u = unit roundoff.

def elementwise(out: str, acc: str = "fp32", ops: int = 1, terms: Number | None = None) -> Tolerance:
    """An elementwise map with `ops` rounding steps in `acc` (an elementary function counts its
    ULP bound, portcheck.facts.numerics). Without `terms`: relative to the result, rounding()'s
    bound. With `terms` (per element, the sum of the magnitudes of the values added, e.g.
    |a x| + |y| for a x + y): cancellation makes the error relative to them, not to the result."""
    if terms is None:
        return rounding(out, acc, ops=ops)
    o, a = fmt(out), fmt(acc)
    return Tolerance(o.unit_roundoff, ops * a.unit_roundoff * terms + o.subnormal_step + ops * a.subnormal_step,
                     f"rtol = u({out}); atol_i = {ops} u({acc}) t_i + sub({out}) + {ops} sub({acc}), "
                     f"t_i = sum of the magnitudes added")


def flushed(acc: str) -> float:
    """What one addition in `acc` may lose near zero on a GPU beyond its rounding: an fp32 sum may
    be accumulated by atomics on global memory, which flush subnormal inputs and results to zero
    (PTX ISA, atom: "atom.add.f32 without .noftz"; AMD's native fp32 atomic add ignores the
    denormal mode, LLVM's amdgpu.ignore.denormal.mode), so each addition may err by up to
    tiny(fp32). fp16, bf16 and fp64 atomic adds keep subnormals (atom.add.noftz.f16 / .bf16):
    nothing more there."""
    return fmt(acc).tiny if acc == "fp32" else 0.0


def row_reduction(terms: torch.Tensor, out: str, acc: str = "fp32", ops: int = 0) -> Tolerance:
    """A sum (or mean) over the last dimension of `terms` (the float64 summands, n per row),
    plus `ops` other roundings: |error| <= (n + ops) u(acc) sum_j |t_j| (Higham's gamma_n), and
    near zero n flushed(acc): a correct fp32 sum by atomics loses its subnormal partial sums on a
    GPU (an H200 returned 0 for a row of fp32 subnormals summed by tl.atomic_add)."""
    n = terms.shape[-1]
    o, a = fmt(out), fmt(acc)
    atol = (n + ops) * a.unit_roundoff * terms.abs().sum(dim=-1) + o.subnormal_step + ops * a.subnormal_step \
        + n * flushed(acc)
    flush = f" + n tiny({acc}) (fp32 atomics flush subnormals)" if flushed(acc) else ""
    return Tolerance(o.unit_roundoff, atol,
                     f"rtol = u({out}); atol_r = (n + {ops}) u({acc}) sum_j |t_rj| + sub({out}) + {ops} sub({acc})"
                     f"{flush}, n = {n}")


def normalization(x: torch.Tensor, out: str, acc: str = "fp32", eps: float = 0.0, centered: bool = True,
                  weight: torch.Tensor | None = None, bias: torch.Tensor | None = None) -> Tolerance:
    """y = (x - mean) * rstd * w + b over the last dimension (LayerNorm; RMSNorm with
    centered=False: no mean, rstd from the mean square). The mean errs by (n+2) (u M + sub)
    (M = max|x|; each of its n+2 roundings errs by u of its value, or by a subnormal step of the
    accumulator where it lands among the subnormals, as a mean of subnormal inputs does), which
    moves every x - m by t = (n+2) (u M + sub) s in units of the row's sigma (s = rstd); rstd errs
    by e = ((n+4) u + 2t + t^2)/2 + RSQRT_ULP u; then y_i by |w_i x^_i| (e + 4u) + |w_i| t (1 + e)
    + |b_i| u."""
    from .facts.numerics import RSQRT_ULP
    n = x.shape[-1]
    mean = x.mean(dim=-1, keepdim=True) if centered else torch.zeros_like(x[..., :1])
    s = ((x - mean).square().mean(dim=-1, keepdim=True) + eps).rsqrt()
    _, t, e = normalization_terms(x, s, acc, centered)
    kind = f"t = (n+2) (u M + sub({acc})) s" if centered else "t = 0 (no mean)"
    return Tolerance(fmt(out).unit_roundoff, normalization_atol(x, mean, s, t, e, out, acc, weight, bias),
                     f"rtol = u({out}); atol_i = |w_i x^_i| (e + 4u) + |w_i| t (1 + e) + |b_i| u + sub({out}), "
                     f"{kind}, e = ((n+4) u + 2t + t^2)/2 + {RSQRT_ULP} u; u = u({acc}), n = {n}, "
                     f"M = max|x|, s = rstd per row")


def normalization_terms(x: torch.Tensor, s: torch.Tensor, acc: str = "fp32", centered: bool = True):
    """`normalization`'s per-row terms, the last dimension kept (s: rstd per row, so kept): the
    mean's error bound (n+2) (u M + sub), t, that error in units of the row's sigma, and e, rstd's
    relative error bound; with centered=False (no mean) the first two are 0."""
    from .facts.numerics import RSQRT_ULP
    n = x.shape[-1]
    u = fmt(acc).unit_roundoff
    mean_error = ((n + 2) * (u * x.abs().amax(dim=-1, keepdim=True) + fmt(acc).subnormal_step) if centered
                  else torch.zeros_like(s))
    t = mean_error * s
    return mean_error, t, ((n + 4) * u + 2 * t + t * t) / 2 + RSQRT_ULP * u


def normalization_atol(x: torch.Tensor, mean: torch.Tensor, s: torch.Tensor, t: torch.Tensor, e: torch.Tensor,
                       out: str, acc: str = "fp32", weight: torch.Tensor | None = None,
                       bias: torch.Tensor | None = None) -> torch.Tensor:
    """`normalization`'s bound on y_i: |w_i x^_i| (e + 4u) + |w_i| t (1 + e) + |b_i| u + sub(out),
    x^_i = (x_i - mean) s, from `normalization_terms`' t and e (mean and s: per row, kept)."""
    u = fmt(acc).unit_roundoff
    w = weight.abs() if weight is not None else torch.ones_like(x[..., :1])
    b = bias.abs() if bias is not None else torch.zeros_like(x[..., :1])
    return w * (x - mean).abs() * s * (e + 4 * u) + w * t * (1 + e) + b * u + fmt(out).subnormal_step


def softmax(x: torch.Tensor, y: torch.Tensor, out: str, acc: str = "fp32") -> Tolerance:
    """y = softmax(x) over the last dimension, computed as exp(x - max) / sum (or any output
    normalised by a sum of exponentials: log-softmax-like outputs need their own). Per element,
    relative to y_i: exp errs by EXP_ULP ULP of its result plus |x_i - m| u from its argument's
    rounding; through the row sum, by their y-weighted mean and n u; the division by DIV_ULP ULP."""
    from .facts.numerics import DIV_ULP, EXP_ULP
    n = x.shape[-1]
    u, o = fmt(acc).unit_roundoff, fmt(out)
    m = x.amax(dim=-1, keepdim=True)
    dist = torch.nan_to_num((x - m).abs(), nan=0.0, posinf=0.0)
    spread = (torch.nan_to_num(y, nan=0.0) * dist).sum(dim=-1, keepdim=True)
    rtol = o.unit_roundoff + (n + 4 * EXP_ULP + 1 + 2 * DIV_ULP + 2 * dist + 2 * spread) * u
    # a result below acc's smallest normal errs by EXP_ULP + DIV_ULP subnormal steps of acc
    atol = o.subnormal_step + (EXP_ULP + DIV_ULP) * fmt(acc).subnormal_step
    return Tolerance(rtol, atol,
                     f"rtol_i = u({out}) + (n + 4*{EXP_ULP} + 1 + 2*{DIV_ULP} + 2|x_i-m| + 2 sum_j y_j|x_j-m|) "
                     f"u({acc}), n = {n}, m = the row's max; atol = sub({out}) + ({EXP_ULP} + {DIV_ULP}) sub({acc})")


def dot(a: torch.Tensor, b: torch.Tensor, out: str, acc: str = "fp32", inputs: str | None = None) -> Tolerance:
    """C = A @ B with K = a.shape[-1], accumulated in `acc`: |error| <= (2K u(acc) + p) (|A| @ |B|)
    + K tiny(acc) + sub(out), p = u(acc) when a product of two `inputs` values is not exact in `acc`
    (fp16 / bf16 / fp8 products are exact in fp32), else 0."""
    k = a.shape[-1]
    o, ac = fmt(out), fmt(acc)
    inp = fmt(inputs or out)
    exact_products = 2 * (inp.mantissa_bits + 1) <= ac.mantissa_bits + 1
    p = 0.0 if exact_products else ac.unit_roundoff
    atol = (2 * k * ac.unit_roundoff + p) * (a.abs() @ b.abs()) + k * ac.tiny + o.subnormal_step
    return Tolerance(o.unit_roundoff, atol,
                     f"rtol = u({out}); atol_ij = (2K u({acc}) + {'0' if exact_products else f'u({acc})'}) "
                     f"(|A||B|)_ij + K tiny({acc}) + sub({out}), K = {k}")
