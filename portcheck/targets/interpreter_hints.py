"""The compiler hints a kernel gives (`tl.multiple_of`, `tl.max_contiguous`, `tl.max_constancy`),
held against the values they describe. A GPU compiler trusts them: a false `multiple_of` on an
offset makes it emit aligned vector loads at an address that is not aligned (wrong values, or a
misaligned-address fault), a false `max_contiguous` makes it load a vector where the lanes want
scattered elements. Triton's interpreter stores them and ignores them, so such a kernel passed
every check on the CPU. `checking()` notes every hint whose values break it: a false
`multiple_of` is a finding; a broken `max_contiguous` or `max_constancy` only a note, since it is
harmless where the hinted dimension is not the one the accesses step along, and Triton's own
matmul tutorial breaks one so (`(pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M`, then
`tl.max_contiguous(..., BLOCK_M)`: the last tile wraps when BLOCK_M does not divide M).

What each claim means is Triton's axis analysis's (per dimension d, with value d of the list):
  - contiguity C: each group of C elements along d, from an index that is a multiple of C, steps
    by one;
  - constancy C: each such group holds one value;
  - divisibility D: the first element of each run that steps by one along d (an offset from
    `tl.arange` counts as one run) is a multiple of D; pointers count in bytes, as on the GPU.
The runs are the longest the values have, so a claim is only called false where no grouping of
the values makes it true."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np

from ..frames import calling_line
from .interpreter_builder import builder

CLAIMS = {"tt.divisibility": "tl.multiple_of", "tt.contiguity": "tl.max_contiguous",
          "tt.constancy": "tl.max_constancy"}


def broken(claim: str, values: np.ndarray, hint: list[int]) -> str | None:
    """How `values` break the hint (a claim of CLAIMS, one number per dimension), or None."""
    x = np.asarray(values).astype(np.int64).reshape(values.shape or (1,))
    for d, n in enumerate(hint):
        if n <= 1 or d >= x.ndim:
            continue
        steps = np.diff(np.moveaxis(x, d, -1), axis=-1)
        if claim == "tt.divisibility":
            starts = np.concatenate([np.ones(steps.shape[:-1] + (1,), bool), steps != 1], axis=-1)
            bad = np.moveaxis(x, d, -1)[starts]
            bad = bad[bad % n != 0]
            if bad.size:
                return f"{int(bad[0])} is not a multiple of {n}"
            continue
        want = 1 if claim == "tt.contiguity" else 0
        size = x.shape[d]
        inside = (np.arange(size - 1) + 1) % n != 0   # a step between two elements of one group
        wrong = (steps != want) & inside
        if wrong.any():
            at = int(np.argwhere(wrong)[0][-1])
            row = np.moveaxis(x, d, -1)[tuple(np.argwhere(wrong)[0][:-1])]
            return (f"elements {at} and {at + 1} along dimension {d} hold {int(row[at])} and {int(row[at + 1])}"
                    f", in one group of {n}")
    return None


@dataclass
class Hints:
    """What `checking` found: one message per hint a program broke, the first program's."""
    broken: list[str] = field(default_factory=list)   # false multiple_of: findings
    notes: list[str] = field(default_factory=list)    # broken max_contiguous / max_constancy


@contextlib.contextmanager
def checking():
    """Inside, every hint a kernel gives on the interpreter is held against its values."""
    from triton.runtime import interpreter
    found = Hints()
    seen: set[tuple] = set()   # (source line, claim): one message each
    handle = interpreter.TensorHandle
    original = handle.set_attr

    def set_attr(self, key, value):
        if key in CLAIMS and isinstance(value, (list, tuple)) and np.issubdtype(np.asarray(self.data).dtype, np.integer):
            why = broken(key, self.data, list(value))
            where = calling_line()
            if why and (where, key) not in seen:
                seen.add((where, key))
                hint = (f"{CLAIMS[key]}(..., {list(value) if len(value) > 1 else value[0]}) at {where} in "
                        f"program {tuple(builder().grid_idx)}: {why}")
                if key == "tt.divisibility":
                    found.broken.append(f"false hint: {hint}; a GPU compiler trusts it (aligned vector "
                                        "accesses at addresses that are not): drop it or make it true")
                else:
                    found.notes.append(f"a hint the values break: {hint} (wrong values on a GPU where the "
                                       "accesses step along that dimension)")
        return original(self, key, value)

    handle.set_attr = set_attr
    try:
        yield found
    finally:
        handle.set_attr = original
