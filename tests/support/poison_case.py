"""One case whose kernel writes far out of bounds: on a GPU an illegal address that leaves the
CUDA context unusable for every later kernel in the process. For issue 18's acceptance on the
H200 (pytest --target=cuda -n 4 over the built-in cases plus this one: only it may fail):

    PORTCHECK_CASE_MODULES=tests.support.poison_case pytest tests/kernels/test_kernels.py --target=cuda -n 4

Never run it on the interpreter: there the store is a wild write into the host process.
"""
import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

from portcheck import Case, Cost, register
from portcheck.tolerance import rounding


@triton.jit
def oob_store_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    # 2^40 elements past the output: far outside any allocation, so the GPU faults
    tl.store(y_ptr + offs + (1 << 40), tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def _launch(args, outs):
    oob_store_kernel[(1,)](args["x"], outs["y"], args["x"].numel(), BLOCK=64)


register(Case(
    name="poison_oob_store", family="poison", dtypes=("fp32",),
    inputs=lambda dtype, max_elements: st.fixed_dictionaries(
        {"dtype": st.just(dtype), "n": st.integers(1, 64), "seed": st.integers(0, 9)}),
    make=lambda spec, device: {"x": torch.randn(spec["n"], generator=torch.Generator().manual_seed(spec["seed"])).to(device)},
    outputs=lambda a: {"y": (tuple(a["x"].shape), a["x"].dtype)},
    launch=_launch, oracle=lambda a: {"y": a["x"]},
    tolerance=lambda a, r, d: {"y": rounding(d)}, cost=lambda a: Cost(0)))
