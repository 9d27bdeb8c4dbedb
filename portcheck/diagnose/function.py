"""Which function: the error set against what is known of the math functions a case declares
(`Case.math`) and against the two forms of GELU.

- A function with a known weak region (REGIONS): the error's size by quartile of the argument's
  magnitude, where the argument is an input shaped like the output. tl.exp is ex2(x log2 e) on
  NVIDIA (and v_exp_f32 of the same product on AMD): the rounding of that product grows with |x|,
  to 63.8 ULP at x = 88 on the H200, where libdevice.exp stays at 1.93 (reports/examples/math-h200/math.md, the
  exhaustive sweep `portcheck math` runs). The kernel is not rerun with the function swapped: a
  source rewrite of every jitted helper is not robust, and the error's shape is the evidence.
- GELU: the output against both float64 forms (erf, tanh) of each candidate pre-activation (an
  input shaped like the output, or one plus a broadcast bias), with a common scale (dropout's
  1/(1-p)); the form the output follows, where the reference follows the other, is named.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..compare import ulp_of
from ..dtypes import fmt
from ..facts.numerics import ULP_BOUNDS
from ..oracles.gelu import gelu
from .finding import CORRELATED, EXPLAINED, Finding
from .rerun import OutputMap, Run, float_ratio


@dataclass(frozen=True)
class Region:
    where: str      # the inputs the function is weak on
    cause: str
    known: str      # what was measured, and where to measure it again


# tl.exp's figures: the H200 sweep (reports/examples/math-h200/math.md); libdevice's: facts.numerics
REGIONS = {
    "exp": Region("large |x|", "tl.exp's ex2.approx at large arguments: use libdevice.exp",
                  "tl.exp is exp2 of the fp32 product x log2(e), whose rounding grows with |x|: 63.8 ULP at "
                  f"x = 88 on the H200 (3.9 for |x| <= pi), libdevice.exp {ULP_BOUNDS['exp'].h200}; "
                  "`portcheck math --function exp` measures it on a target"),
}
GROWTH = 3.0     # the top quartile's mean error at least this many times the bottom's (|x| uniform
                 # on [0, 88]: about 7 for tl.exp; an error flat in |x|: about 1)


def _arguments(run: Run, shape) -> list[tuple[str, torch.Tensor]]:
    """Float inputs shaped like the output: candidates for an elementwise function's argument."""
    return [(k, v.detach().cpu()) for k, v in run.args64.items()
            if isinstance(v, torch.Tensor) and v.dtype == torch.float64 and tuple(v.shape) == tuple(shape)]


def _quartile_means(x: torch.Tensor, err: torch.Tensor) -> list[float]:
    """The mean error in each quartile of |x| (the means follow an error that grows with |x|; the
    maxima of adjacent quartiles nearly meet)."""
    order = x.abs().argsort()
    return [float(part.mean()) for part in err[order].chunk(4) if part.numel()]


def math_region(case, run: Run, maps: list[OutputMap]) -> list[Finding]:
    found = []
    for name in case.math:
        region = REGIONS.get(name)
        if region is None:
            continue
        for m in maps:
            ok = torch.isfinite(m.ratio) & torch.isfinite(m.ref)
            ulps = torch.where(ok, (m.out.to(torch.float64) - m.ref).abs() / ulp_of(m.ref, fmt(m.out.dtype)),
                               torch.zeros_like(m.ref))
            for arg, x in _arguments(run, m.out.shape):
                q = _quartile_means(x.flatten()[ok.flatten()], ulps.flatten()[ok.flatten()])
                worst = int(ulps.flatten().argmax())
                if len(q) == 4 and q == sorted(q) and q[3] >= GROWTH * max(q[0], 0.25):
                    found.append(Finding(
                        "function", region.cause,
                        f"the error grows with |{arg}| (mean by quartile of |{arg}|: "
                        + ", ".join(f"{v:.3g}" for v in q) + f" ULP; worst {float(ulps.flatten()[worst]):.3g} ULP "
                        f"at {arg} = {float(x.flatten()[worst]):.4g}); " + region.known, CORRELATED, m.name))
                    break
    return found


FORMS = {"none": "the erf form", "tanh": "the tanh approximation"}


def _pre_activations(run: Run, shape) -> list[tuple[str, torch.Tensor]]:
    inputs = _arguments(run, shape)
    biases = [(k, v.detach().cpu()) for k, v in run.args64.items() if isinstance(v, torch.Tensor)
              and v.dtype == torch.float64 and len(shape) > 1 and tuple(v.shape) == tuple(shape[-1:])]
    return inputs + [(f"{x} + {b}", xv + bv) for x, xv in inputs for b, bv in biases]


def _scale(ref: torch.Tensor, form: torch.Tensor) -> float:
    """The common factor between the reference and a form (dropout's 1/(1-p); else 1)."""
    big = form.abs() > 1e-3 * form.abs().max()
    return float((ref[big] / form[big]).median()) if bool(big.any()) else 1.0


def _worst(target: torch.Tensor, model: torch.Tensor, bound: torch.Tensor) -> float:
    ratio = float_ratio(target, model, bound)
    return float(ratio.max()) if ratio.numel() else 0.0


def gelu_form(run: Run, maps: list[OutputMap]) -> list[Finding]:
    found = []
    for m in maps:
        out = m.out.to(torch.float64)
        # dropped elements (zero in the output or the reference) say nothing about the form
        sel = torch.isfinite(out) & torch.isfinite(m.ref) & (out != 0) & (m.ref != 0)
        if int(sel.sum()) < 8:
            continue
        for label, a in _pre_activations(run, m.out.shape):
            a = torch.nan_to_num(a, nan=0.0)
            forms = {f: gelu(a, f)[sel] for f in FORMS}
            for meant, used in (("none", "tanh"), ("tanh", "none")):
                scale, bound = _scale(m.ref[sel], forms[meant]), m.bound[sel]
                # the reference is the meant form, and the forms differ here by more than the tolerance
                ref_is_meant = (_worst(m.ref[sel], scale * forms[meant], bound) <= 1e-3
                                and _worst(m.ref[sel], scale * forms[used], bound) > 1)
                out_fits = _worst(out[sel], scale * forms[used], bound)
                if ref_is_meant and out_fits <= 1:
                    gap = (forms["tanh"] - forms["none"]).abs()
                    i = int(gap.argmax())
                    found.append(Finding(
                        "function", f"{FORMS[used]} of GELU where {FORMS[meant]} is meant",
                        f"against float64 GELU of {label} in {FORMS[used]} the output is within its tolerance "
                        f"(worst {out_fits:.2g} of it); against {FORMS[meant]}, the reference, {m.worst:.3g}x; "
                        f"the forms differ most at |{label}| = {abs(float(a[sel][i])):.2g}, by "
                        f"{float(gap[i] / forms['none'][i].abs()):.1g} relative", EXPLAINED, m.name))
    return found
