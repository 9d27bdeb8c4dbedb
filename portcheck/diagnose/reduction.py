"""Growth with the reduction length: the failing spec again at K/2 and 2K.

A correct fp32 accumulation keeps the relative error of the result at the output's rounding,
whatever K; an accumulator in a narrower format adds a rounding of the running sum at every step,
so its relative error grows with K (as sqrt(K) for random signs, up to linearly). The reduction
length is the spec key a case names in `Case.reduction`, else the first of REDUCTION_KEYS the spec has.
"""
from __future__ import annotations

import math
import time

import torch

from ..cases import Case
from . import rerun
from .finding import CORRELATED, FAILED, Finding
from .rerun import OutputMap, Run

REDUCTION_KEYS = ("K", "k", "reduction", "head_dim", "cols", "n_cols")
GROWS = 0.3       # relative error ~ K^p with p at least this grows: the planted fp16 sums gave 0.40 to
                  # 0.54 (sqrt(K) in theory), correct fp32 sums near 0
SMALLEST = 4      # no growth is read from K/2 below this
MIDDLE = 3.0      # the error at K at least the geometric mean of those at K/2 and 2K over this
STEP = 2.5        # log2 of the error's rise for a doubling of K past which it is a step, not growth:
                  # rounding grows as K^0.5 to K^1 (1.4x to 2x a doubling), this is 5.7x


def reduction_key(case: Case, spec: dict) -> str | None:
    if case.reduction:
        return case.reduction if isinstance(spec.get(case.reduction), int) else None
    return next((k for k in REDUCTION_KEYS if type(spec.get(k)) is int and spec[k] >= 2 * SMALLEST), None)


def relative_rms(m: OutputMap) -> float:
    """rms(out - ref) / rms(ref) over the elements where both are finite."""
    o, r = m.out.to(torch.float64), m.ref
    ok = torch.isfinite(o) & torch.isfinite(r)
    size = float(r[ok].square().mean().sqrt()) if bool(ok.any()) else 0.0
    return float((o - r)[ok].square().mean().sqrt()) / size if size else 0.0


def growth(case: Case, target_name: str, run: Run, maps: list[OutputMap], deadline: float) -> list[Finding]:
    key = reduction_key(case, run.spec)
    if key is None or not maps:
        return []
    k = run.spec[key]
    sizes = (k // 2, k, 2 * k)
    errors = {k: {m.name: relative_rms(m) for m in maps}}
    for size in (k // 2, 2 * k):
        if time.monotonic() > deadline:
            return [Finding("diagnosis", f"the rerun at other {key} left out: the diagnosis ran past its time "
                            "budget", "", FAILED)]
        try:
            other = rerun.run(case, target_name, {**run.spec, key: size})
        except Exception:   # the spec admits no such size: no evidence either way
            return []
        errors[size] = {m.name: relative_rms(other.maps[m.name]) for m in maps}
    found = []
    for m in maps:
        e = [errors[s][m.name] for s in sizes]
        p = exponent(e)
        if p is None:
            continue
        measured = "relative rms error " + ", ".join(f"{x:.2g} at {key}={s}" for s, x in zip(sizes, e))
        step = sets_in(sizes, e)
        if step:   # no rounding grows that fast: the sum goes wrong past a size
            found.append(Finding("reduction", f"the error sets in between {key}={step[0]} and {key}={step[1]}, "
                                 f"faster than any accumulated rounding grows: part of the sum wrong once {key} "
                                 "passes a block (a scale, pointer or path taken per block, a block dropped "
                                 "or counted twice)", f"{measured}; rounding grows at most linearly",
                                 CORRELATED, m.name))
            continue
        shape = f"linearly with {key}" if p >= 0.75 else f"with {key} (as {key}^{p:.2f})"
        found.append(Finding("reduction", f"{accumulator_question(m.out.dtype)} the error grows {shape}",
                             f"{measured}; a correct fp32 accumulation stays flat", CORRELATED, m.name))
    return found


def sets_in(sizes, e: list[float]) -> tuple[int, int] | None:
    """The two neighbouring sizes between which the error rises faster than rounding grows (STEP),
    or None."""
    return next(((lo, hi) for lo, hi, a, b in zip(sizes, sizes[1:], e, e[1:])
                 if a > 0 and math.log2(b / a) >= STEP), None)


def exponent(e: list[float]) -> float | None:
    """p in error ~ K^p from the errors at K/2, K and 2K; None where they do not grow with K."""
    if min(e) <= 0:
        return None
    p = math.log(e[2] / e[0]) / math.log(4)   # from the ends: each size draws new inputs, so the
    # middle one is as noisy as the others and a monotonic rise is not required of it...
    if p < GROWS or e[1] < math.sqrt(e[0] * e[2]) / MIDDLE:
        return None   # ...but it must not fall far below the trend: an error set by K's remainder (a
        # dropped tail tile: 0.039, 0.0072, 0.28 at K = 510, 1021, 2042) does not grow with K. Far
        # above it is growth still: a sum that narrows only past its first block (cols > BLOCK)
    return p


def accumulator_question(dtype: torch.dtype) -> str:
    """What an error that grows with the reduction's length suggests: a 16-bit output's sum kept in
    its own format; an fp32 output's kept in a 16-bit one, or parts of the sum lost or counted twice
    (a split reduction that stores its partial where it should add it)."""
    narrow = {torch.float16: "fp16", torch.bfloat16: "bf16"}.get(dtype)
    if narrow:
        return f"accumulating in {narrow}?"
    return "accumulating in fp16 or bf16, or parts of the sum lost or counted twice?"
