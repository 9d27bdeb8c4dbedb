"""The grid limits of the GPUs that the interpreter stands in for. Triton's interpreter runs a grid
of any size, while CUDA launches at most 2**31 - 1 programs along a grid's first axis and 65,535
along its second and third, and a launch past them fails there: a launcher that puts a tensor's
rows on the second axis passes every check on the CPU and fails on a GPU at the first large batch.
`limited()` makes the interpreter refuse such a grid before its first program runs."""
from __future__ import annotations

import contextlib

from .interpreter_builder import builder, patched

LIMITS = (2**31 - 1, 65535, 65535)   # programs per grid axis on CUDA


class GridTooLarge(Exception):
    """A grid that no CUDA GPU launches."""


def excess(grid) -> str | None:
    """What in a grid (1 to 3 program counts) passes LIMITS, or None."""
    for axis, (n, most) in enumerate(zip(grid, LIMITS)):
        if isinstance(n, int) and n > most:
            return (f"grid {tuple(grid)}: its axis {axis} has {n:,} programs, past the {most:,} that CUDA "
                    "allows there")
    return None


@contextlib.contextmanager
def limited():
    """Inside, a launch on the interpreter whose grid passes LIMITS raises GridTooLarge before its
    first program runs."""
    original = builder().set_grid_dim

    def set_grid_dim(nx, ny, nz):
        why = excess((nx, ny, nz))
        if why:
            raise GridTooLarge(why)
        return original(nx, ny, nz)

    with patched(set_grid_dim=set_grid_dim):
        yield
