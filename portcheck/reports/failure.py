"""The lines under a failing record on a console, the same from `portcheck run` and pytest: its
likely causes (the first with its evidence), its replay, and the search's first failing input where
shrinking ended on another."""
from __future__ import annotations

import json
import textwrap

CAUSES = 3                  # likely causes printed (the record keeps them all)
FIRST_FAILURE_CHARS = 240   # of the first failing input's message (the record keeps it whole)


def failure_lines(r) -> list[str]:
    """For a Result whose verdict is not a pass (after any note); [] for one that passed."""
    lines = [f"likely cause {rank}: {cause['cause']}" + (f" ({cause['evidence']})" if rank == 1 and cause["evidence"]
                                                         else "")
             for rank, cause in enumerate(r.diagnosis[:CAUSES], start=1)]
    if r.passed:
        return lines
    lines.append(f"replay: {r.reproduce}")
    if r.first_failure:   # before shrinking: a realistic input's symptom, where the shrunk one is degenerate
        first = r.first_failure
        lines.append(f"first failing input: {json.dumps(first['input'], sort_keys=True)}: "
                     f"{textwrap.shorten(first['message'], FIRST_FAILURE_CHARS, placeholder=' ...')}")
    return lines
