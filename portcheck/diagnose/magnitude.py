"""How much: the error's size against the precisions a kernel may have used by accident.

Each candidate format is modelled, not guessed from a number: the float64 oracle is fed the
inputs rounded to it (tf32 dot operands, a bf16 / fp16 / fp8 cast on the way in), or its result
is rounded to it (an output that passed through a narrower format). A candidate that brings the
kernel's output within its own tolerance explains the failure. (The error's size alone, set beside
the unit roundoffs, was tried and left out: a GELU's form error or an fp16 accumulator's lands near
some format's roundoff and named the wrong cause.)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from ..dtypes import fmt
from ..facts.archs import ARCHS, INTERPRETER
from .finding import EXPLAINED, Finding
from .rerun import OutputMap, Run, float_ratio

FP16_MAX = 65504.0


def to_bits(x: torch.Tensor, bits: int, truncate: bool) -> torch.Tensor:
    """x (float64) with `bits` fraction bits, truncated or rounded to nearest even; fp32's range."""
    m, e = torch.frexp(x)
    scale = 2.0 ** (bits + 1)
    q = torch.trunc(m * scale) if truncate else torch.round(m * scale)
    return torch.where(torch.isfinite(x), torch.ldexp(q / scale, e), x)


def _through(dtype: torch.dtype) -> Callable:
    return lambda x: x.to(dtype).to(torch.float64)


@dataclass(frozen=True)
class Precision:
    name: str                 # what the kernel would have done
    bits: int                 # fraction bits kept
    unit_roundoff: float
    round: Callable           # float64 tensor -> float64 tensor rounded so


CANDIDATES = (
    Precision("tf32 (truncated)", 10, 2.0 ** -11, lambda x: to_bits(x, 10, truncate=True)),
    Precision("tf32", 10, 2.0 ** -11, lambda x: to_bits(x, 10, truncate=False)),
    Precision("bf16", 7, fmt("bf16").unit_roundoff, _through(torch.bfloat16)),
    Precision("bf16 (truncated)", 7, fmt("bf16").unit_roundoff, lambda x: to_bits(x, 7, truncate=True)),
    Precision("fp16", 10, fmt("fp16").unit_roundoff, _through(torch.float16)),
    Precision("fp8e4nv", 3, fmt("fp8e4nv").unit_roundoff, _through(torch.float8_e4m3fn)),
    Precision("fp8e5", 2, fmt("fp8e5").unit_roundoff, _through(torch.float8_e5m2)),
)


def _narrower(p: Precision, dtype: torch.dtype) -> bool:
    return dtype.is_floating_point and fmt(dtype).mantissa_bits > p.bits


def _dot_note(arch_name: str) -> str:
    """What tl.dot does with fp32 operands on the arch the check ran on (facts/archs.py)."""
    arch = INTERPRETER if arch_name.endswith("interpreter") else ARCHS.get(arch_name)
    if arch is None:
        return "tl.dot's default input_precision is tf32 on NVIDIA: pass input_precision=\"ieee\""
    if arch.dot_default == "tf32":   # the interpreter's too: its numerics layer rounds to tf32 as NVIDIA does
        return f"tl.dot's default input_precision on {arch.name} is tf32: pass input_precision=\"ieee\""
    return (f"tl.dot's default on {arch.name} is {arch.dot_default}: the kernel asks for tf32 "
            "(input_precision=\"tf32\")")


def _cause(p: Precision, arch_name: str, beyond_fp16: int) -> str:
    if p.name.startswith("tf32"):
        return f"{p.name} rounding of the dot inputs: {_dot_note(arch_name)}"
    if p.name == "fp16" and beyond_fp16:
        return f"the inputs pass through fp16: its range ({beyond_fp16} inputs beyond {FP16_MAX:g} become inf)"
    return f"the inputs pass through {p.name} (unit roundoff 2^{math.log2(p.unit_roundoff):g})"


def _worst(m: OutputMap, ref: torch.Tensor) -> float:
    ratio = float_ratio(m.out, ref.detach().cpu().to(torch.float64), m.bound)
    return float(ratio.max()) if ratio.numel() else 0.0


def _rounded_inputs(run: Run, p: Precision) -> dict | None:
    """The oracle's arguments with every float input narrower-rounded to p; None if none narrows."""
    args = dict(run.args64)
    changed = False
    for k, v in run.args.items():
        if isinstance(v, torch.Tensor) and _narrower(p, v.dtype):
            args[k] = p.round(run.args64[k])
            changed = True
    return args if changed else None


def _oracle(case, args: dict | None) -> dict:
    """The oracle's outputs for these arguments; {} when there are none, or it refuses them (an
    fp8 rounding may make a NaN the oracle rejects)."""
    if args is None:
        return {}
    try:
        return case.oracle(args)
    except Exception:
        return {}


def precision(case, run: Run, maps: list[OutputMap], arch_name: str) -> list[Finding]:
    """Findings for the float outputs that fail by a finite error."""
    found = []
    beyond = sum(int((v.abs() > FP16_MAX).sum()) for v in run.args64.values()
                 if isinstance(v, torch.Tensor) and v.dtype == torch.float64)
    for p in CANDIDATES:
        refs = _oracle(case, _rounded_inputs(run, p))
        for m in maps:
            if m.name in refs:
                worst = _worst(m, refs[m.name])
                if worst <= 1:
                    found.append(Finding(
                        "magnitude", _cause(p, arch_name, beyond if p.name == "fp16" else 0),
                        f"fed {p.name}-rounded inputs, the float64 oracle agrees with the output within its "
                        f"tolerance (worst {worst:.2g} of it; against the exact inputs {m.worst:.3g}x)",
                        EXPLAINED, m.name))
            if _narrower(p, m.out.dtype) and _worst(m, p.round(m.ref)) <= 1:
                found.append(Finding("magnitude", f"the output passes through {p.name} before its store",
                                     f"the float64 reference rounded to {p.name} agrees with the output within "
                                     f"its tolerance (against the reference itself {m.worst:.3g}x)",
                                     EXPLAINED, m.name))
    return _best_first(found)


def _best_first(found: list[Finding]) -> list[Finding]:
    """Of several candidates that explain one output (tf32 truncated and rounded, say), the first
    keeps its score and the others rank just below it."""
    seen, out = set(), []
    for f in found:
        out.append(f if f.output not in seen else Finding(f.kind, f.cause, f.evidence, f.score - 0.05, f.output))
        seen.add(f.output)
    return out
