"""Cases for tests/harness/test_reliability.py: a worker that exits (status 1, 0 and 3) in the middle
of a case, and a case after which a fake GPU-context check reports the context lost.

Loaded through PORTCHECK_CASE_MODULES=tests.support.reliability_cases (with the repository root on
PYTHONPATH), or imported by the test itself (no kernel runs at import).
"""
import os

import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

from portcheck import Case, Cost, register
from portcheck.tolerance import rounding

POISONED = False   # set by rel_poison's launch: the fake context check of the pytest test reads it


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def _inputs(dtype, max_elements):
    return st.fixed_dictionaries({"dtype": st.just(dtype), "n": st.integers(1, 64), "seed": st.integers(0, 9)})


def _make(spec, device):
    g = torch.Generator().manual_seed(spec["seed"])
    return {"x": torch.randn(spec["n"], generator=g).to(device)}


def _copy(args, outs):
    copy_kernel[(1,)](args["x"], outs["y"], args["x"].numel(), BLOCK=64)


def _exits(status):
    def launch(args, outs):
        os._exit(status)   # the worker ends mid-case, as a crashing extension or sys.exit path does
    return launch


def _poisons(args, outs):
    global POISONED
    _copy(args, outs)
    POISONED = True


def _case(name, launch):
    return register(Case(name=f"rel_{name}", family="reliability", dtypes=("fp32",), inputs=_inputs,
                         make=_make, outputs=lambda a: {"y": (tuple(a["x"].shape), a["x"].dtype)},
                         launch=launch, oracle=lambda a: {"y": a["x"]},
                         tolerance=lambda a, r, d: {"y": rounding(d)}, cost=lambda a: Cost(0)))


_case("a_ok", _copy)
_case("exit0", _exits(0))
_case("exit1", _exits(1))
_case("exit3", _exits(3))   # the supervisor's "context lost, case recorded" code, from a case
_case("poison", _poisons)
_case("z_after", _copy)
