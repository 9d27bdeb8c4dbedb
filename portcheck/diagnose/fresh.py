"""Whether the failure's printed replay fails in a fresh process: the replay command run as the
user would paste it, in a process of its own. A failing input that passes there failed here
because of what earlier inputs of this check left in the process: a launcher's cache keyed on too
few of its arguments (a table built for another size, base or dtype), a workspace or a global.
The launches-one-after-another experiment (state.py) cannot see it: within this process the input
fails every time.

It costs a process start, an import of torch and Triton and the replay's compilations (about 2 s
on the interpreter), so it runs after a failure only, never from a replay (which is that command
already), last among the experiments and only where none reproduced a cause, within a time
budget, and not where PORTCHECK_FRESH_REPLAY=0 (the test suite: its failures are the harness's
own checks of other things).
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from .. import results
from ..targets.runtime import TARGETS
from .finding import EXPLAINED, REPRODUCED, Finding

MIN_BUDGET_S = 3.0   # less than this left: no replay is started (the interpreter's alone takes ~2 s)

CAUSE = ("state kept from earlier calls in the process: a launcher cache keyed on too few of its "
         "arguments (a table built for another size, dtype or parameter), a workspace or a global")


def enabled() -> bool:
    return os.environ.get("PORTCHECK_FRESH_REPLAY", "1") != "0"


def replay_passes(argv: list[str], case: str, dtype: str, target_name: str, budget_s: float) -> list[Finding]:
    """`argv`: the printed replay (`portcheck run ... --replay SPEC`). A finding where it passes in a
    fresh process; nothing where it fails there too, does not run, or runs past `budget_s`."""
    if not enabled() or budget_s < MIN_BUDGET_S:
        return []
    with tempfile.TemporaryDirectory(prefix="portcheck-fresh-") as tmp:
        out = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "portcheck", *argv[1:], "--no-time", "--out", str(out)]
        # in this process's session, so that a supervisor that kills this worker's session kills
        # the replay too; the replay's own workers leave once it is gone (supervise._orphaned)
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            proc.wait(timeout=budget_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return []
        try:
            records = results.read(out / "results.jsonl")
        except (OSError, ValueError):   # it never started, or wrote nothing a record can be read from
            return []
        verdicts = [r.get("verdict") for r in records if r.get("case") == case and r.get("dtype") == dtype]
    if verdicts != ["pass"]:
        return []
    gpu = TARGETS[target_name].is_gpu
    return [Finding("state", CAUSE, "the printed replay passes in a fresh process, where this process failed "
                    "the same input after the check's earlier ones" + (" (on a GPU a race may pass once too)" if gpu else ""),
                    EXPLAINED if gpu else REPRODUCED)]
