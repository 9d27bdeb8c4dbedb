"""Where the error is: everywhere, only in the partial tile at a tensor's end (which dimension, and
the tile size the launch used), in a band of rows or columns, only in never-written elements, only
in the rows after each program's first (a launch of fewer programs than rows), or
next to a guard band (the check's out-of-bounds and determinism messages, reused as they are)."""
from __future__ import annotations

import torch

from .finding import EXPLAINED, HINT, LOCATED, REPRODUCED, Finding
from .rerun import OutputMap

# the check's own messages that name a cause outright (portcheck.guards, runner, compare): the
# words to find, the cause, how strongly the check established it
_MESSAGES = (
    (("out-of-bounds write", "bytes before"), "a store before the output's start: a negative index "
                                              "(a slot of -1 not skipped?)", REPRODUCED),
    (("out-of-bounds write", "bytes after"), "a store past the output's end: the last tile's store has no "
                                             "tail mask (or the wrong bound)", REPRODUCED),
    (("out-of-bounds write", "padding"), "a store into an input's padding: a wrong stride or mask", REPRODUCED),
    (("out-of-bounds read",), "a load without its mask: it reads outside its input", EXPLAINED),
    (("out-of-bounds atomic",), "an atomic without its mask (or with the wrong bound): it updates memory "
                                "past the tensor", REPRODUCED),
    (("false hint:",), "a tl.multiple_of hint that the values break: true for the shapes it was written "
                       "for (rows padded to 16?), not for every input", REPRODUCED),
    (("a grid no GPU launches",), "a launcher that puts a count that grows with the input (rows, tokens, "
                                  "heads) on a grid's second or third axis, 65,535 programs at most there: "
                                  "the first axis takes 2**31 - 1, or each program can loop", REPRODUCED),
    (("race within a program",), "a program that passes values between elements of its block through memory "
                                 "with no tl.debug_barrier() between the store and the load", REPRODUCED),
    (("race:",), "programs of one launch touch the same memory with no atomic that orders them: a "
                 "race (plain loads and stores where an update needs an atomic, or a program reading "
                 "what another writes)", REPRODUCED),
    (("read before written",), "memory the launcher allocated (torch.empty or kin) read before it is "
                               "written: a buffer assumed to hold zeros, or an output left partly unwritten",
     REPRODUCED),
    (("an undefined float-to-integer conversion",), "a float-to-integer cast of NaN, inf or a value outside "
     "the integer type's range: its value is the lowering's choice (clamp, and map NaN, before the cast)",
     REPRODUCED),
    (("modified:",), "a store into an input the case does not declare in Case.in_place", REPRODUCED),
    (("nondeterministic",), "the result depends on the order of the programs: a race (read-modify-write of "
                            "shared data) or an unordered atomic or split reduction", EXPLAINED),
    (("the kernel produced it",), "the kernel makes NaN or Inf where the reference is finite: an overflow or "
                                  "an invalid operation (0/0, inf - inf, a log or sqrt of a negative)", LOCATED),
)
SMALLEST_MAP = 8   # fewer elements than this say nothing about a band or the whole output
BAND_FILL = 0.5    # the share of a band's elements out of tolerance for it to name an index or stride


def from_messages(comparisons) -> list[Finding]:
    """The causes the check itself established (guard bands, repeated launches), with its words."""
    found = []
    for comp in comparisons:
        for words, cause, score in _MESSAGES:
            if all(w in comp.message for w in words):
                found.append(Finding("position", cause, comp.message, score, comp.name))
                break
    return found


def along(bad: torch.Tensor, dim: int) -> torch.Tensor:
    """Which indices of dimension `dim` hold a bad element."""
    return bad.movedim(dim, 0).reshape(bad.shape[dim], -1).any(dim=1)


def _partial_tile(start: int, n: int, tiles: dict) -> tuple[int, str] | None:
    """(tile, where the size came from) when the bad indices [start, n) are exactly the last partial
    tile of one of the launch's tile sizes; with none captured, inferred: the largest power of two
    whose last partial tile starts at `start`."""
    if tiles:
        sizes = [(t, f"{name}={t} in the launch") for name, t in sorted(tiles.items(), key=lambda kv: -kv[1])]
    else:
        sizes = [(1 << b, f"{1 << b}, inferred from where the error starts") for b in range(n.bit_length(), 0, -1)]
    for tile, source in sizes:
        if n % tile and n - n % tile == start:
            return tile, source
    return None


def tail(bad: torch.Tensor, tiles: dict) -> tuple[str, int, int, int, str] | None:
    """(dimension, first bad index, size, tile, tile source) when every bad element lies in the last
    partial tile of one dimension (the flattened tensor counts as one) and clean tiles precede it."""
    views = [(f"dimension {d}", bad, d) for d in range(bad.dim())]
    if bad.dim() > 1:
        views.append(("the flattened tensor", bad.flatten(), 0))
    for label, view, dim in views:
        hit = along(view, dim).nonzero().flatten()
        if not hit.numel():
            continue
        start, n = int(hit[0]), view.shape[dim]
        found = _partial_tile(start, n, tiles) if start > 0 else None
        if found:
            return (label, start, n, *found)
    return None


def _band(bad: torch.Tensor) -> str | None:
    """'rows a..b of n' when the bad elements fill a contiguous band of rows or columns, not all.
    A wrong index or stride spoils most of its band; a few stray elements that happen to share a
    column (a precision miss, one element of a one-row input) are no band."""
    if bad.dim() != 2:
        return None
    for dim, what in ((0, "rows"), (1, "columns")):
        hit = along(bad, dim).nonzero().flatten()
        lo, hi, n = int(hit[0]), int(hit[-1]), bad.shape[dim]
        if bad.shape[1 - dim] < 2 or hi - lo + 1 != hit.numel() or hit.numel() >= n / 2:
            continue
        if float(bad.narrow(dim, lo, hi - lo + 1).float().mean()) >= BAND_FILL:
            return f"{what} {lo}..{hi} of {n}"
    return None


def later_rows(m: OutputMap, grids: list[tuple]) -> list[Finding]:
    """Each program's first row right and its later rows wrong, for a launch of fewer programs
    than rows: rows [0, P) right for programs that stride by P, or every R-th row for programs
    that take R rows each in a run. What a program carries from one row to the next (a sum, a
    max, a counter not reset per row) spoils only the rows after its first."""
    bad = m.bad
    if bad.dim() < 1 or not grids:
        return []
    rows, hit = bad.shape[0], along(bad, 0)
    for programs in sorted({g[0] for g in grids if g and 1 < g[0] < rows}):
        run = -(-rows // programs)
        firsts = {"strided": torch.arange(rows) < programs, "in runs": torch.arange(rows) % run == 0}
        for how, first in firsts.items():
            owner = torch.arange(rows) % programs if how == "strided" else torch.arange(rows) // run
            if bool(hit[first].any()) or float(hit[~first].float().mean()) < BAND_FILL \
                    or owner[hit].unique().numel() < 2:   # the later rows of two programs at least
                continue
            which = (f"rows 0..{programs - 1} right, {int(hit.sum())} of the {rows - programs} after them wrong"
                     if how == "strided" else
                     f"rows 0, {run}, {2 * run}, ... right, {int(hit.sum())} of the rows between them wrong")
            return [Finding("position", "each program's first row right and its later rows wrong: state "
                            "carried from one row to the next (an accumulator, max or counter not reset "
                            "per row, or the row's offset not advanced)",
                            f"{which}; the launch has {programs} programs for {rows} rows", LOCATED, m.name)]
    return []


def where(m: OutputMap, tiles: dict, read_outside: bool) -> list[Finding]:
    """The error map of one output, read for its shape."""
    bad = m.bad
    count, total = int(bad.sum()), bad.numel()
    if not count:
        return []
    unwritten = int((m.unwritten & bad).sum())
    found = tail(bad, tiles)
    if found:
        label, start, n, tile, source = found
        span = f"all {count} elements out of tolerance lie in [{start}, {n}) of {label}: the last partial " \
               f"tile ({n} = {n // tile} x {tile} + {n % tile}; tile {source})"
        if unwritten == count:
            return [Finding("position", "the last partial tile is never written: the grid does not cover it "
                            "(launch triton.cdiv(n, BLOCK) programs) or its store mask cuts it off",
                            f"{span}; they still hold the harness's output poison", REPRODUCED, m.name)]
        if read_outside:
            return [Finding("position", "a load without its tail mask: the last partial tile reads past the "
                            "end of its input", f"{span}; the check saw NaN read from an input's guard",
                            REPRODUCED, m.name)]
        return [Finding("position", "the last partial tile is computed wrong: a mask, or a masked load's "
                        "`other` value, in the tail", span, LOCATED, m.name)]
    if unwritten == count:
        return [Finding("position", "elements never written: the grid or a store mask misses them",
                        f"{count} of {total} elements still hold the harness's output poison", REPRODUCED, m.name)]
    if unwritten >= count / 2:   # most of the error is no value at all: no precision explains it
        return [Finding("position", "elements never written: the grid or a store mask misses them (the "
                        "block a launch covers too small for this input?)", f"{unwritten} of the {count} "
                        f"elements out of tolerance still hold the harness's output poison", LOCATED, m.name)]
    if total < SMALLEST_MAP:
        return []
    band = _band(bad)
    if band:
        return [Finding("position", f"an error confined to {band}: an index or stride wrong there",
                        f"{count} of {total} elements out of tolerance, all in {band}", HINT, m.name)]
    if count >= total / 2:
        return [Finding("position", "a systematic error over the whole output (a precision or a formula), "
                        "not a boundary", f"{count} of {total} elements out of tolerance, spread over the "
                        "whole output", HINT, m.name)]
    return []
