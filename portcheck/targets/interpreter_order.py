"""Run the interpreter's grid programs in a shuffled order.

Triton's interpreter (TRITON_INTERPRET=1) runs a grid's programs one after another in one fixed
order, x then y then z, so a result that depends on the order of programs (an fp32 atomic_add
accumulation, a split reduction) never varies there. `shuffled(seed)` makes every launch inside
it visit the same programs in a seeded random order.

It works without copying the interpreter's loop: GridExecutor.__call__ announces the grid with
interpreter_builder.set_grid_dim() and each program with set_grid_idx(x, y, z) in loop order; the
patched set_grid_idx substitutes the k-th program of a permutation for the k-th one announced,
which visits every program exactly once. The shape of that loop is checked first (triton 3.6 and
3.9 have it), and an interpreter that does not match is refused rather than silently unshuffled.
"""
from __future__ import annotations

import contextlib
import inspect
import random

from ..errors import UsageError
from .interpreter_builder import builder, patched

_LOOP_MARKERS = ("interpreter_builder.set_grid_dim(", "interpreter_builder.set_grid_idx(x, y, z)")


def _interpreter():
    import triton
    from triton.runtime import interpreter
    source = inspect.getsource(interpreter.GridExecutor.__call__)
    if not all(marker in source for marker in _LOOP_MARKERS):
        raise UsageError(f"triton {triton.__version__}: the interpreter's grid loop is not the one "
                         "portcheck knows (GridExecutor.__call__ calling set_grid_dim and "
                         "set_grid_idx(x, y, z)), so it cannot shuffle program order; run with "
                         "--launches 1")
    return interpreter


def check_supported() -> None:
    """Raise UsageError when this Triton's interpreter cannot be shuffled."""
    _interpreter()


@contextlib.contextmanager
def shuffled(seed: int):
    """Inside, each grid launched on the interpreter runs its programs in a random order drawn
    from `seed` and the launch's number within the block (so each kernel of a multi-kernel launch
    gets its own order, the same on every replay)."""
    _interpreter()
    launches = 0
    order: list[tuple[int, int, int]] = []
    position = 0
    b = builder()
    original_dim, original_idx = b.set_grid_dim, b.set_grid_idx

    def set_grid_dim(nx, ny, nz):
        nonlocal launches, order, position
        order = [(x, y, z) for x in range(nx) for y in range(ny) for z in range(nz)]
        random.Random(f"{seed}:{launches}").shuffle(order)
        launches += 1
        position = 0
        original_dim(nx, ny, nz)

    def set_grid_idx(x, y, z):
        nonlocal position
        original_idx(*order[position])
        position += 1

    with patched(set_grid_dim=set_grid_dim, set_grid_idx=set_grid_idx):
        yield
