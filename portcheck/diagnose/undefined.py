"""A result that depends on lanes a masked `tl.load` without `other=` leaves undefined.

The interpreter poisons those lanes (targets.interpreter_lanes): NaN, an integer extreme. The
failing example runs once more with them 0, as today's GPU backends fill them; where the failing
elements change, the kernel reads lanes the language does not define.
"""
from __future__ import annotations

import math
import time

import torch

from ..cases import Case
from ..targets import interpreter_lanes
from ..targets.runtime import TARGETS
from .finding import REPRODUCED, Finding
from .rerun import OutputMap, Run, launch_once, output_map


def zero_lanes(case: Case, target: str, run: Run, failing: list[OutputMap],
               deadline: float = math.inf) -> list[Finding]:
    """Outputs whose failing elements change when the undefined lanes hold 0 instead of poison.
    Interpreter only (a GPU's lanes are its compiler's), not after `deadline`."""
    if (not failing or TARGETS[target].is_gpu or not interpreter_lanes.installed()
            or time.monotonic() > deadline):
        return []
    with interpreter_lanes.zero_filled() as lines:
        _, outs = launch_once(case, target, run.spec)
    if not lines:
        return []
    findings = []
    for m in failing:
        if m.name not in outs or outs[m.name].shape != m.out.shape:
            continue
        again = output_map(m.name, outs[m.name], m.ref, m.tol)
        moved = m.bad & ~_same(m.out, again.out)
        if not bool(moved.any()):
            continue
        still = int(again.bad.sum())
        evidence = ("with those lanes 0, as the NVIDIA and AMD backends and Triton's own interpreter give them today, "
                    + ("the output passes" if not still else
                       f"{int(moved.sum())} of the {int(m.bad.sum())} failing elements change, {still} still fail"))
        findings.append(Finding(
            "undefined lanes",
            f"the result depends on the masked-off lanes of tl.load without other= at {', '.join(lines)}: "
            "the language leaves them undefined (poisoned here); give other= the value the computation "
            "needs there (0 for a sum, -inf for a max)", evidence, REPRODUCED, m.name))
    return findings


def _same(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise: the same value (-0.0 as 0.0), or NaN in both."""
    if a.dtype.is_floating_point:
        fa, fb = a.to(torch.float64), b.to(torch.float64)
        return (fa == fb) | (torch.isnan(fa) & torch.isnan(fb))
    return a == b
