"""Whether the kernel or its launcher keeps state from one launch to the next: the failing
example's inputs, made anew, launched twice more one after the other. On the interpreter a launch
is a function of its inputs and its programs' order, and both launches here run the programs in
the interpreter's own order, so outputs that differ between them come from something the first
launch left behind: a workspace, counter or global that is not reset (or reset by a program that
does not always run). The check's own messages read such a failure as a race or an unwritten
output. On a GPU the programs' order varies by itself, so there the same difference is only a
hint (a race gives it too), and nothing for a case that declares its results nondeterministic."""
from __future__ import annotations

from .. import guards
from ..cases import Case
from ..targets.runtime import TARGETS
from .finding import HINT, REPRODUCED, Finding
from .rerun import launch_once


def _launch(case: Case, target_name: str, spec: dict) -> dict:
    _, outs = launch_once(case, target_name, spec)
    return {name: out.detach().cpu() for name, out in outs.items()}


def kept_between_launches(case: Case, target_name: str, spec: dict, outputs) -> list[Finding]:
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
            return [Finding("state", "state kept from one launch to the next: a workspace, counter or "
                            "global that the launcher or kernel leaves changed and does not reset",
                            f"{int(differ.sum())} of {differ.numel()} elements differ between two "
                            f"launches of the same inputs, one after the other{where}",
                            HINT if gpu else REPRODUCED, name)]
    return []
