"""Whether an autotune cache hit is the cause: the failing example ran a configuration that
Triton's cache hands over from another input with the same key (the spec's autotuned.CACHED),
one this input's own pruning leaves out. The same input again with a configuration its pruning
leaves: right now, the key is what is wrong. Wrong again, the cached configuration is not the
cause (or not the only one), and the other experiments say what is."""
from __future__ import annotations

from .. import autotuned
from ..cases import Case
from .finding import REPRODUCED, Finding
from .rerun import OutputMap, Run, run

CAUSE = ("an autotune key that misses an argument the configurations depend on: Triton's cache hands "
         "this input the configuration another input with the same key chose, one this input's pruning "
         "(or its correctness) rules out; add that argument to key=")


def cached_choice(case: Case, target_name: str, failed: Run, failing: list[OutputMap]) -> list[Finding]:
    if not failed.spec.get(autotuned.CACHED) or not failing:
        return []
    spec = {k: v for k, v in failed.spec.items() if k != autotuned.CACHED}
    with autotuned.choosing(spec):
        again = run(case, target_name, spec)
    if any(again.maps[m.name].failing for m in failing if m.name in again.maps):
        return []
    return [Finding("autotune", CAUSE, "the same input passes with a configuration its own pruning leaves",
                    REPRODUCED)]
