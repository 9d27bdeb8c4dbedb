"""Across vendors: a difference between two runs' outputs on identical inputs (`portcheck diff`),
classified by each side's own error against the float64 oracle:

- within both tolerances: rounding that both bounds allow (nothing to fix);
- a genuine bug on one side: it fails its own float64 check where the other passes;
- an environment artifact: the failing side ran where the result says nothing about the kernel,
  a known interpreter limitation or a format its arch lacks (facts/archs.py);
- failing on both: the kernel (or its oracle) is wrong everywhere, not a vendor difference.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..facts.archs import ARCHS
from .finding import EXPLAINED, HINT, LOCATED, REPRODUCED, Finding

LOW_PRECISION = ("bf16", "fp8e4nv", "fp8e5", "fp8e4b8", "fp8e5b16", "fp8e4b15")


@dataclass(frozen=True)
class Side:
    label: str        # A or B
    target: str       # cuda | rocm | interpreter
    arch: str
    numerics: str     # the interpreter's numerics layer as the record states it ('raw': off)

    @property
    def name(self) -> str:
        return f"{self.label} ({self.target}/{self.arch})"


def artifact(side: Side, dtype: str) -> str | None:
    """Why a failure on this side says nothing about the kernel, or None."""
    if side.target == "interpreter":
        if side.numerics == "raw" and dtype in LOW_PRECISION:
            return (f"the raw interpreter (--raw-interpreter) computes {dtype} on bit patterns (bf16 dot, "
                    "truncating casts, unsaturated fp8)")
        if dtype == "fp8e4b15":
            return "the interpreter's numerics layer does not model fp8e4b15 (torch has no such dtype)"
        return None
    arch = ARCHS.get(side.arch)
    if arch is not None and dtype.startswith("fp8") and dtype not in arch.fp8_triton:
        return f"{arch.name} lacks {dtype}: Triton does not compile it there"
    return None


def _tf32_hint(bad: Side, good: Side, dtype: str) -> str:
    """fp32 failing where tl.dot defaults to tf32 and passing where it defaults to ieee."""
    a, b = ARCHS.get(bad.arch), ARCHS.get(good.arch)
    if dtype == "fp32" and a is not None and a.dot_default == "tf32" and (b is None or b.dot_default == "ieee"):
        return (f"; tl.dot's default input_precision is tf32 on {a.name} and ieee on {good.arch}: a kernel "
                "that needs fp32 products must pass input_precision=\"ieee\"")
    return ""


def classify(dtype: str, ratio_a: float | None, ratio_b: float | None, a: Side, b: Side) -> Finding:
    """One difference, classified from each side's worst error over its tolerance."""
    if ratio_a is None or ratio_b is None:
        return Finding("vendors", "unclassified", "no float64 reference here (the case is not registered in "
                                                  "this process, or the output was kept as a hash only)", 0.0)
    errors = f"{a.label} {ratio_a:.3g}x, {b.label} {ratio_b:.3g}x its tolerance"
    if ratio_a <= 1 and ratio_b <= 1:
        return Finding("vendors", "within both tolerances", f"{errors}: rounding both bounds allow", EXPLAINED)
    if ratio_a > 1 and ratio_b > 1:
        return Finding("vendors", "fails on both: a bug in the kernel or its oracle, not a vendor difference",
                       errors, LOCATED)
    bad, good = (a, b) if ratio_a > 1 else (b, a)
    why = artifact(bad, dtype)
    if why:
        return Finding("vendors", f"an environment artifact on {bad.name}", f"{errors}; {why}", HINT)
    return Finding("vendors", f"a genuine bug on {bad.name}",
                   f"{errors}: {bad.label} fails its own float64 check where {good.label} passes"
                   + _tf32_hint(bad, good, dtype), REPRODUCED)
