"""A launcher whose cache is keyed on too few of its arguments, as a portcheck Case for
tests/harness/test_diagnose.py: `stale_scale` multiplies x by a per-column table that depends on
the row length and on `scale`, and keys the table it caches on the row length alone, so an input
whose length an earlier input had gets that input's table. In a fresh process its first call
builds the right table: the printed replay of its failure passes there.

Imported by a `portcheck run` worker through `--cases tests.support.stale_cache`; never part of
the registry otherwise.
"""
import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

from portcheck import Case, register
from portcheck import strategies as S
from portcheck.tolerance import rounding

BLOCK = 64
_tables: dict = {}   # the bug: keyed on cols, not on (cols, scale)


@triton.jit
def scale_kernel(x_ptr, t_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=ok) * tl.load(t_ptr + offs, mask=ok), mask=ok)


def _inputs(dtype, max_elements):
    return st.fixed_dictionaries({"dtype": st.just(dtype), "cols": st.integers(1, 8),
                                  "scale": st.sampled_from([1, 2, 3]), "seed": S.seeds()})


def _make(spec, device):
    return {"x": S.normal((spec["cols"],), S.generator(spec["seed"])).to(device), "scale": spec["scale"]}


def _launch(args, outs):
    x = args["x"]
    n = x.numel()
    if n not in _tables:
        _tables[n] = torch.arange(1, n + 1, dtype=torch.float32, device=x.device) * args["scale"]
    scale_kernel[(triton.cdiv(n, BLOCK),)](x, _tables[n], outs["y"], n, BLOCK=BLOCK)


register(Case(name="stale_scale", family="diagnosis", dtypes=("fp32",), inputs=_inputs, make=_make,
              outputs=lambda a: {"y": (tuple(a["x"].shape), torch.float32)}, launch=_launch,
              oracle=lambda a: {"y": a["x"] * torch.arange(1, a["x"].numel() + 1, dtype=torch.float64) * a["scale"]},
              tolerance=lambda a, r, d: {"y": rounding("fp32", ops=1)}))
