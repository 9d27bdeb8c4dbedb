"""Whether the kernel or its launcher keeps state from one launch to the next: the failing
example's inputs, made anew, launched twice more one after the other. On the interpreter a launch
is a function of its inputs and its programs' order, and both launches here run the programs in
the interpreter's own order, so outputs that differ between them come from something the first
launch left behind: a workspace, counter or global that is not reset (or reset by a program that
does not always run). The check's own messages read such a failure as a race or an unwritten
output. On a GPU the programs' order varies by itself, so there the same difference is only a
hint (a race gives it too), and nothing for a case that declares its results nondeterministic.

Where the two launches agree (a counter never reset that stops every launch after the first from
finishing leaves the same unwritten outputs each time), the check's first input whose first launch
was right is launched again as that launch was: wrong now, it says the same."""
from __future__ import annotations

import json

from .. import autotuned, guards
from ..cases import Case
from ..targets.runtime import TARGETS
from .finding import HINT, REPRODUCED, Finding
from .rerun import launch_once, run


def _launch(case: Case, target_name: str, spec: dict) -> dict:
    _, outs = launch_once(case, target_name, spec)
    return {name: out.detach().cpu() for name, out in outs.items()}


CAUSE = ("state kept from one launch to the next: a workspace, counter or global that the launcher or "
         "kernel leaves changed and does not reset")


def kept_between_launches(case: Case, target_name: str, spec: dict, outputs,
                          right: dict | None = None) -> list[Finding]:
    """`right`: an input whose first launch was right earlier in the same check, if one was."""
    gpu = TARGETS[target_name].is_gpu
    if gpu and case.nondeterministic:
        return []
    first, second = _launch(case, target_name, spec), _launch(case, target_name, spec)
    for name in outputs:
        if name not in first or name not in second or first[name].shape != second[name].shape:
            continue
        differ = guards.bits(first[name]) != guards.bits(second[name])
        if bool(differ.any()):
            where = "" if gpu else ", its programs in the same order both times"
            return [Finding("state", CAUSE, f"{int(differ.sum())} of {differ.numel()} elements differ "
                            f"between two launches of the same inputs, one after the other{where}",
                            HINT if gpu else REPRODUCED, name)]
    return [] if right is None else _right_before(case, target_name, right)


def _right_before(case: Case, target_name: str, right: dict) -> list[Finding]:
    """The input that was right, launched again: wrong now, it shows what the launches since left."""
    with autotuned.choosing(right):   # the configuration it ran, not the failing input's
        maps = run(case, target_name, right).maps
    for name, m in maps.items():
        if m.failing:
            unwritten = int((m.bad & m.unwritten).sum())
            return [Finding("state", CAUSE, f"an input whose first launch was right earlier in this check is "
                            f"wrong when launched again ({int(m.bad.sum())} of {m.bad.numel()} elements out "
                            f"of tolerance{f', {unwritten} of them never written' if unwritten else ''}; "
                            f"a replay in a fresh process may pass its first launch): {_short(right)}",
                            HINT if TARGETS[target_name].is_gpu else REPRODUCED, name)]
    return []


def _short(spec: dict) -> str:
    text = json.dumps(spec, sort_keys=True)
    return text if len(text) <= 200 else text[:197] + "..."
