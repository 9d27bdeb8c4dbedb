"""Say why a check failed: cheap experiments on the failing example, each naming a likely cause
with its evidence, ranked (portcheck.diagnose.finding: reproduced > explained > correlated >
located > hint).

    where         position.py   the error map by position, and the check's own guard messages
                  tiles.py      an error in the last partial tile again one whole tile longer
    how much      magnitude.py  candidate precisions modelled on the inputs and the output
                  reduction.py  growth of the error with the reduction length (K/2, K, 2K)
                  offset.py     an offset-regime failure again with its rows centred
    which function function.py  a declared function's weak region; GELU's two forms
    autotune cache autotune.py  a configuration another input's key chose, swapped for one of its own
    random numbers rng.py       the Philox model replayed under the common mistakes
    launch to launch state.py   two more launches of the same inputs: state left behind
    call to call  fresh.py      the printed replay in a fresh process: state from earlier inputs
    one code off  approximate.py  exact codes a step off, from approximate instructions (GPU code),
                                 or at the ties regime's midpoints, from the rounding of ties
    undefined lanes undefined.py  masked-off lanes of a load without other= (interpreter): 0 again
    across vendors vendors.py   `portcheck diff`: each difference between two runs classified

`diagnose()` runs after a failure only (runner.check), on the failing example: one re-run of it,
a capture of its launch's tile sizes and grid (not run), two launches one after the other (and,
where they agree, one of the first input whose first launch was right), on the interpreter one with
undefined lanes 0, two re-runs at other reduction lengths, for the offset regime one with the rows
centred, for an error in the last partial tile one with a whole tile more, and where an autotune
cache handed the example another input's configuration, one with a configuration of its own, all
on the case's own device; the rest is float64 arithmetic on the CPU. A time budget bounds the
re-runs beyond the first: they are left out once it is spent (the first re-run always runs: it is
the evidence every experiment reads, and costs what one launch of the check cost). A search's
failure (not a replay's) is also replayed by its printed command in a fresh process, within a
budget of its own (runner.fresh_replay_budget).
"""
from __future__ import annotations

import functools
import time

from ..cases import Case
from ..targets.interpreter_grid import GridTooLarge
from . import (approximate, autotune, fresh, function, magnitude, offset, position, reduction, rerun, rng, state,
               tiles, undefined)
from .finding import FAILED, REPRODUCED, Finding, ranked

BUDGET_S = 10.0   # seconds for one failure's diagnosis: no re-run at another length starts after it


def diagnose(case: Case, target: str, dtype: str, failing_spec: dict, comparisons: list, *,
             arch: str = "", budget_s: float = BUDGET_S, right: dict | None = None,
             replay: list[str] | None = None, replay_budget_s: float = 0.0) -> list[Finding]:
    """The likely causes of `case`'s failure on `target` (arch `arch`) for `failing_spec`, whose
    failing comparisons were `comparisons`, strongest first (`right`: an input whose first launch
    was right earlier in the same check; `replay`: the failure's printed replay command, run in a
    fresh process within `replay_budget_s`). Never raises: an experiment that fails says so in a
    finding of its own, ranked last."""
    deadline = time.monotonic() + budget_s
    findings = position.from_messages(comparisons)
    try:
        run = rerun.run(case, target, {**failing_spec, "dtype": failing_spec.get("dtype", dtype)})
    except GridTooLarge:   # refused again, as the check's own message says
        return ranked(findings)
    except Exception as exc:
        return ranked(findings + [_failed("the re-run", exc)])

    @functools.cache
    def launches():   # captured once (not run), when an experiment first needs them
        return rerun.captured(case, run.args)

    def tile_sizes() -> dict:
        return rerun.launch_tiles(launches())

    def grids() -> list:
        return launches().grids if launches() is not None else []

    failing = [m for m in run.maps.values() if m.failing]
    # outputs with values to model: some bad element finite, and most of them written (no precision
    # explains an element the kernel never stored)
    numeric = [m for m in failing if not m.exact and bool((m.bad & m.ratio.isfinite()).any())
               and int((m.bad & m.unwritten).sum()) < int(m.bad.sum()) / 2]
    read_outside = any("out-of-bounds read" in c.message for c in comparisons)
    # state first: where it is reproduced, the other experiments' findings (an unwritten output
    # blamed on the grid) describe what the state did, and rank after it at equal strength
    experiments = (
        ("the launches one after another", lambda: state.kept_between_launches(
            case, target, run.spec, [m.name for m in failing], right) if time.monotonic() < deadline else []),
        ("the undefined lanes", lambda: undefined.zero_lanes(case, target, run, failing, deadline)),
        ("the autotune cache", lambda: autotune.cached_choice(case, target, run, failing)),
        ("the position map", lambda: [f for m in failing for f in position.where(m, tile_sizes(), read_outside)]),
        ("the tile after", lambda: tiles.every_tile(case, target, run, failing, tile_sizes(), deadline)),
        ("each program's rows", lambda: [f for m in failing for f in position.later_rows(m, grids())]),
        ("the Philox replay", lambda: rng.mistakes(run, failing, tile_sizes())),
        ("the precision models", lambda: magnitude.precision(case, run, numeric, arch)),
        ("the GELU forms", lambda: function.gelu_form(run, numeric)),
        ("the math regions", lambda: function.math_region(case, run, numeric)),
        ("the centred rows", lambda: offset.centred_rows(case, target, run, failing, deadline)),
        ("the reduction lengths", lambda: reduction.growth(case, target, run, numeric, deadline)),
        ("the approximate instructions", lambda: approximate.boundary_codes(case, target, run, failing, deadline)),
        ("the rounding of ties", lambda: approximate.tie_rounding(run, failing)),
        # last, and only where nothing above reproduced a cause: it costs a process start
        ("the replay in a fresh process", lambda: fresh.replay_passes(
            replay, case.name, dtype, target, replay_budget_s)
            if replay and not any(f.score >= REPRODUCED for f in findings) else []),
    )
    for name, experiment in experiments:
        try:
            findings += experiment()
        except Exception as exc:
            findings.append(_failed(name, exc))
    return ranked(tiles.contradicted(findings))


def _failed(name: str, exc: Exception) -> Finding:
    return Finding("diagnosis", f"{name} failed: {type(exc).__name__}: {exc}", "", FAILED)


__all__ = ["Finding", "diagnose"]
