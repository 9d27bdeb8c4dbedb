"""One small case with a bench spec, for the timing pool's order of work on a CPU
(tests/harness/test_workers.py): the interpreter has no timer, so its timings fail and say so."""
import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

from portcheck import Case, Cost, register
from portcheck.tolerance import rounding


@triton.jit
def timed_copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def _launch(args, outs):
    timed_copy_kernel[(1,)](args["x"], outs["y"], args["x"].numel(), BLOCK=64)


register(Case(
    name="timed_copy", family="timed", dtypes=("fp32", "fp16"),
    inputs=lambda dtype, max_elements: st.fixed_dictionaries(
        {"dtype": st.just(dtype), "n": st.integers(1, 64), "seed": st.integers(0, 9)}),
    make=lambda spec, device: {"x": torch.randn(spec["n"], generator=torch.Generator().manual_seed(spec["seed"]))
                               .to(getattr(torch, {"fp32": "float32", "fp16": "float16"}[spec["dtype"]])).to(device)},
    outputs=lambda a: {"y": (tuple(a["x"].shape), a["x"].dtype)},
    launch=_launch, oracle=lambda a: {"y": a["x"]},
    tolerance=lambda a, r, d: {"y": rounding(d)}, cost=lambda a: Cost(0),
    bench=({"dtype": "fp32", "n": 64, "seed": 0},)))
