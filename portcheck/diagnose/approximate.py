"""An exact output off by one step in a few elements, from a kernel that rounds through
approximate instructions; or in many, on the "ties" regime, from the rounding of ties.

Triton lowers an fp32 `/` to div.full.f32 on NVIDIA (PTX ISA: 2 ULP, not IEEE's div.rn), tl.exp
and tl.exp2 to ex2.approx, 1 / sqrt to rsqrt.approx, and AMD's v_rcp_f32, v_exp_f32, ... are
approximations too. A code computed from such a value (a quantizer's x / scale rounded to int8 or
fp8) lands on the neighbouring code wherever the exact value lies within the approximation's error
of a rounding boundary: a few elements in millions, which a check sees on the many-rows input of
a GPU (an H200 gave 2 of 4,128,831 fp8 codes one step off for a quantizer that divides with `/`).
An oracle that follows the kernel's steps in IEEE arithmetic holds the code the IEEE steps give.

GPU targets only: the instructions are read from the failing launch's own compiled code, from
its kernels' caches (an autotuned kernel's other configurations may compile, within the
diagnosis's time budget). The interpreter computes `/` and the math functions exactly, so its
codes are the IEEE steps' own.
"""
from __future__ import annotations

import math
import re
import time

import torch

from ..cases import Case
from ..targets.runtime import TARGETS
from .finding import CORRELATED, Finding
from .rerun import OutputMap, Run, captured

APPROXIMATE = re.compile(r"\b((?:ex2|lg2|sin|cos|sqrt|rsqrt|rcp|tanh)\.approx(?:\.ftz)?\.f32"
                         r"|div\.(?:full|approx)(?:\.ftz)?\.f32"
                         r"|v_(?:exp|log|sin|cos|sqrt|rsq|rcp)_f32)\b")
FEW = 1e-3   # at most this share of an output's elements: a boundary effect, not a wrong formula
# On the "ties" regime half of the values sit on rounding boundaries. A rule that breaks ties
# otherwise than half to even misplaces half of those in the rows that probe the output's format
# (strategies.tie_values: one row in len(TIE_FORMATS) = 4), a quarter of their elements: 1/16 of
# the output or more. An approximate division lands a tie on the wrong side only where its error
# crosses the boundary, a few in a thousand (H200: 1 of 228 int8 codes, a quantizer dividing with
# `/`). Below this share an approximation explains the codes, above it a rounding rule.
TIES_FEW = 0.02
# what to write instead, by the instruction's first letters (NVIDIA's, then AMD's)
FIXES = (("div", "tl.math.div_rn for an IEEE division"), ("rcp", "tl.math.div_rn for an IEEE division"),
         ("v_rcp", "tl.math.div_rn for an IEEE division"), ("sqrt", "tl.math.sqrt_rn"),
         ("v_sqrt", "tl.math.sqrt_rn"), ("rsqrt", "tl.math.div_rn(1.0, tl.math.sqrt_rn(x))"),
         ("v_rsq", "tl.math.div_rn(1.0, tl.math.sqrt_rn(x))"))


def one_step_off(m: OutputMap, few: float = FEW) -> bool:
    """An exact output whose differing elements, at most a `few` share, are each one step from the
    reference: the next integer, or the next code of a float format (same sign, neighbouring bit
    patterns)."""
    if not m.exact or not m.failing:
        return False
    bad = m.bad
    if float(bad.float().mean()) > few:
        return False
    got, ref = m.out[bad], m.ref.to(m.out.dtype)[bad]
    if got.is_floating_point():
        bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32}.get(got.element_size())
        if bits is None or not bool(torch.isfinite(got.float()).all() and torch.isfinite(ref.float()).all()):
            return False
        got, ref = got.view(bits).to(torch.int64), ref.view(bits).to(torch.int64)
        if got.element_size() == 1:   # the codes as unsigned bytes: sign bit 0x80
            same_sign = (got & 0x80) == (ref & 0x80)
        else:
            same_sign = (got < 0) == (ref < 0)
        return bool(same_sign.all() and ((got - ref).abs() == 1).all())
    return bool(((got.to(torch.int64) - ref.to(torch.int64)).abs() == 1).all())


def instructions(case: Case, args: dict) -> dict[str, int]:
    """The approximate instructions in the compiled code of the case's launches on `args` (the
    kernels their cache already holds), counted by mnemonic; {} when none can be read."""
    rec = captured(case, args)
    if rec is None:   # a launcher that needs its kernel's results: nothing to read
        return {}
    found: dict[str, int] = {}
    for kernel, kargs, kwargs in rec.raw:
        try:
            compiled = kernel.warmup(*kargs, grid=(1,), **kwargs)
        except Exception:   # noqa: BLE001  no compiled code to read
            continue
        asm = getattr(compiled, "asm", {}) or {}
        for text in (asm.get("ptx"), asm.get("amdgcn")):
            for match in APPROXIMATE.finditer(text or ""):
                found[match.group(1)] = found.get(match.group(1), 0) + 1
    return found


def boundary_codes(case: Case, target: str, run: Run, failing: list[OutputMap],
                   deadline: float = math.inf) -> list[Finding]:
    """Outputs one step off in a few elements (TIES_FEW of them on the ties regime, whose values
    sit on the boundaries), where the kernel's code holds approximations. Not after `deadline`
    (time.monotonic()): reading the code may compile an autotuned kernel's other configurations."""
    if not TARGETS[target].is_gpu or time.monotonic() > deadline:
        return []
    few = TIES_FEW if run.spec.get("regime") == "ties" else FEW
    off = [m for m in failing if one_step_off(m, few)]
    if not off:
        return []
    found = instructions(case, run.args)
    if not found:
        return []
    names = ", ".join(f"{name} x{count}" for name, count in sorted(found.items()))
    fixes = sorted({fix for prefix, fix in FIXES if any(f.startswith(prefix) for f in found)})
    return [Finding("approximate",
                    "codes at a rounding boundary, rounded from an approximate result: the kernel's "
                    f"code holds {names}" + (f" (use {'; '.join(fixes)})" if fixes else "")
                    + ", where the oracle's steps are IEEE",
                    f"{int(m.bad.sum())} of {m.out.numel()} elements, each one step from the reference",
                    CORRELATED, m.name) for m in off]


def tie_rounding(run: Run, failing: list[OutputMap]) -> list[Finding]:
    """Codes one step off on an input of the "ties" regime (strategies.tie_values: values on the
    midpoints between codes once scaled by their absmax), in more than TIES_FEW of an output's
    elements: a rounding that breaks ties otherwise than the oracle's half to even. Fewer are an
    approximation's (boundary_codes). Any target: the interpreter's arithmetic is the IEEE steps'."""
    if run.spec.get("regime") != "ties":
        return []
    return [Finding("approximate",
                    "ties rounded otherwise than half to even: the input puts values on the midpoints "
                    "between codes, and the codes one step off are there (libdevice.round and "
                    "floor(x + 0.5) round half away or up; libdevice.rint, or adding and subtracting "
                    "1.5 * 2^23 in fp32, round half to even)",
                    f"{int(m.bad.sum())} of {m.out.numel()} elements, each one step from the reference, "
                    "on the ties regime", CORRELATED, m.name)
            for m in failing if one_step_off(m, few=1.0) and not one_step_off(m, few=TIES_FEW)]
