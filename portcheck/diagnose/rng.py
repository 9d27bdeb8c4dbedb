"""Random numbers: a keep mask that differs bit for bit from its oracle, replayed under the common
mistakes with the Philox model (portcheck/oracles/philox.py) until one reproduces it exactly.

First the convention the reference follows is found (one Philox call per four positions, as the
dropout family draws, or `tl.rand` per position), from the case's arguments: a seed, a stream
offset and a probability p, under their usual names. Element i of a row-major output is at stream
position offset + i. Then each mistake is replayed under that convention: seed and offset swapped,
the offset off by one element or by one block (the launch's tile sizes), the offset ignored, the
row index left out of the position, column-major positions, and the other convention.
"""
from __future__ import annotations

import numpy as np
import torch

from ..oracles import philox
from .finding import REPRODUCED, Finding
from .rerun import OutputMap, Run

SEED_NAMES = ("rng_seed", "philox_seed", "dropout_seed")
OFFSET_NAMES = ("offset", "philox_offset", "rng_offset")
P_NAMES = ("p", "dropout_p")
MAX_POSITION = 2**63 - 1


def _uniform(convention: str, seed: int, positions: np.ndarray) -> np.ndarray:
    if convention == "lanes":
        return philox.rand_lanes(seed, positions)
    return philox.rand(seed, positions)


CONVENTIONS = {"lanes": "one Philox call per four positions (word g % 4 of randint4x(seed, g // 4))",
               "per element": "tl.rand(seed, g): one Philox call per position"}


def keep(convention: str, seed: int, positions: np.ndarray, p: float) -> np.ndarray | None:
    """uniform(seed, g) > fp32(p) per position, or None where the positions leave Philox's range."""
    if seed < 0 or seed > MAX_POSITION or positions.min() < 0 or positions.max() > MAX_POSITION:
        return None
    return _uniform(convention, seed, positions) > np.float32(p)


def _first(args: dict, names) -> object:
    return next((args[n] for n in names if n in args), None)


def _mistakes(convention: str, seed: int, offset: int, shape, tiles: dict):
    """(what, convention, seed, positions) for each common mistake."""
    n = int(np.prod(shape))
    index = np.arange(n, dtype=np.int64)
    yield "seed and offset swapped", convention, offset, seed + index
    for step, what in [(1, "one element")] + [(t, f"one block ({name} = {t})") for name, t in sorted(tiles.items())]:
        yield f"the offset off by {what} ahead", convention, seed, offset + step + index
        yield f"the offset off by {what} behind", convention, seed, offset - step + index
    if offset:
        yield "the offset ignored (the stream starts at 0)", convention, seed, index
    if len(shape) == 2:
        rows, cols = shape
        yield "the row index left out of the position (every row draws the same numbers)", convention, seed, \
            offset + index % cols
        yield "column-major positions (offset + c * rows + r)", convention, seed, \
            offset + (index % cols) * rows + index // cols
    other = next(c for c in CONVENTIONS if c != convention)
    yield f"the counter layout: {CONVENTIONS[other]} where the reference has {CONVENTIONS[convention]}", \
        other, seed, offset + index


def mistakes(run: Run, maps: list[OutputMap], tiles: dict) -> list[Finding]:
    seed, offset, p = (_first(run.args, names) for names in (SEED_NAMES, OFFSET_NAMES, P_NAMES))
    if not all(isinstance(v, int) for v in (seed, offset)) or not isinstance(p, float) or not 0 < p < 1:
        return []
    found = []
    for m in maps:
        if m.out.dtype.is_floating_point or m.out.dtype.is_complex:
            continue
        got = m.out.flatten().numpy().astype(bool)
        want = m.ref.flatten().to(torch.bool).numpy()
        index = np.arange(got.size, dtype=np.int64)
        matches = [c for c in CONVENTIONS if np.array_equal(keep(c, seed, offset + index, p), want)]
        if not matches:
            continue
        for what, convention, s, positions in _mistakes(matches[0], seed, offset, tuple(m.out.shape), tiles):
            replay = keep(convention, s, positions, p)
            if replay is not None and np.array_equal(replay, got):
                found.append(Finding("rng", f"Philox: {what}",
                                     f"replayed so, the Philox model gives the kernel's {got.size}-element mask "
                                     f"bit for bit ({int((got != want).sum())} elements differ from the reference; "
                                     f"seed {seed}, offset {offset}, p {p:g})", REPRODUCED, m.name))
                break
    return found
