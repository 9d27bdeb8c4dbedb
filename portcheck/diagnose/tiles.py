"""The last partial tile, or every tile after the first: a failing example whose error lies in the
last partial tile of a dimension again with that dimension one whole tile longer.

A shrunk input of 17 rows over tiles of 16 has two tiles, the second partial, so an error confined
to it says "the tail" where a wrong per-tile offset (program_id * BLOCK dropped, a scale indexed
by the wrong tile) spoils every tile after the first just as well. With a whole tile more, a tail
bug stays in the new last partial tile; a per-tile bug shows in the whole tile before it too.
The dimension's length must be the value of exactly one of the spec's sizes (rows = 17), the one
lengthened.
"""
from __future__ import annotations

import time

from ..cases import Case
from . import rerun
from .finding import CORRELATED, FAILED, Finding
from .position import along, tail
from .rerun import OutputMap, Run

SIZE_SKIP = {"seed", "dtype"}
CAUSE = ("every tile after the first wrong, not only the last partial one: a per-tile offset (program_id * "
         "BLOCK, a scale or pointer indexed by the tile) wrong or missing")
TAIL = "the last partial tile"   # the words of the position findings this one contradicts


def contradicted(findings: list[Finding]) -> list[Finding]:
    """The findings less those that put an error in the last partial tile of an output where this
    experiment found it in a whole tile too."""
    whole = {f.output for f in findings if f.cause == CAUSE}
    return [f for f in findings if not (f.output in whole and f.kind == "position" and TAIL in f.cause)]


def every_tile(case: Case, target_name: str, run: Run, maps: list[OutputMap], tiles: dict,
               deadline: float) -> list[Finding]:
    found = []
    for m in maps:
        at = tail(m.bad, tiles)
        if at is None or not at[0].startswith("dimension "):
            continue
        label, start, n, tile, _ = at
        keys = [k for k, v in run.spec.items() if k not in SIZE_SKIP and type(v) is int and v == n]
        if len(keys) != 1:
            continue
        if time.monotonic() > deadline:
            return found + [Finding("diagnosis", "the rerun a tile longer left out: the diagnosis ran past its "
                                    "time budget", "", FAILED)]
        try:
            longer = rerun.run(case, target_name, {**run.spec, keys[0]: n + tile})
        except Exception:   # the case admits no such size: no evidence either way
            continue
        other = longer.maps.get(m.name)
        if other is None:
            continue
        hit = along(other.bad, int(label.split()[1])).nonzero().flatten().tolist()
        whole = [i for i in hit if tile <= i < (n + tile) // tile * tile]
        if whole:
            found.append(Finding(
                "tiles", CAUSE,
                f"with {keys[0]} = {n + tile} (one tile of {tile} more) the error reaches index {whole[0]} of "
                f"{label}, inside a whole tile; at {n} it lay in the last partial tile [{start}, {n})",
                CORRELATED, m.name))
    return found
