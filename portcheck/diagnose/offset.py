"""The rows' offset: a failing example of the offset regime again with its rows centred.

The offset regime (`strategies.values`) puts each row at +-c plus its spread. A kernel that
measures a spread around zero (a one-pass variance E[x^2] - E[x]^2, a sum of squares taken before
the mean is) loses the spread to cancellation there, and one that takes a masked lane's 0 into a
max or min gets it wrong on rows all of one sign. The same spec in the normal regime draws the
same spread without the offset: a kernel that passes it fails on the offset alone.
"""
from __future__ import annotations

import time

from ..cases import Case
from ..strategies import offset_ratio
from . import rerun
from .finding import EXPLAINED, FAILED, Finding
from .rerun import OutputMap, Run


def centred_rows(case: Case, target_name: str, run: Run, maps: list[OutputMap], deadline: float) -> list[Finding]:
    if run.spec.get("regime") != "offset" or not maps:
        return []
    if time.monotonic() > deadline:
        return [Finding("diagnosis", "the rerun with centred rows left out: the diagnosis ran past its time "
                        "budget", "", FAILED)]
    try:
        centred = rerun.run(case, target_name, {**run.spec, "regime": "normal"})
    except Exception:   # the case admits no normal regime: no evidence either way
        return []
    ratio = offset_ratio(run.spec["dtype"])
    found = []
    for m in maps:
        other = centred.maps.get(m.name)
        if other is None or other.failing:
            continue
        found.append(Finding(
            "offset", "the rows' offset from zero: the same rows centred pass (a one-pass variance "
            "E[x^2] - E[x]^2 cancelling, or a masked lane's 0 taken into the max or min of rows all of one sign?)",
            f"worst error/tolerance {m.worst:.3g} with each row at +-{ratio:g} times its spread, "
            f"{other.worst:.2g} for the same rows centred", EXPLAINED, m.name))
    return found
