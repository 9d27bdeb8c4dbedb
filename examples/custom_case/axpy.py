"""A user's own kernel, checked by portcheck without touching portcheck: y = a * x + y0.

Register it from your repository's conftest.py (as this folder does), from an entry point in
your package (`[project.entry-points."portcheck.cases"] axpy = "yourpkg.axpy"`), or for
`portcheck run` with PORTCHECK_CASE_MODULES=yourpkg.axpy.
"""
import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

import portcheck
from portcheck import strategies as S


@triton.jit
def axpy_kernel(x_ptr, y0_ptr, y_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y0 = tl.load(y0_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (a * x + y0).to(y_ptr.dtype.element_ty), mask=mask)


def inputs(dtype, max_elements):
    return st.fixed_dictionaries({"dtype": st.just(dtype), "n": S.lengths(1024, max_elements),
                                  "a": st.floats(-4, 4, width=32), "seed": S.seeds(),
                                  "regime": S.regimes()})


def make(spec, device):
    g = S.generator(spec["seed"])
    x = S.values((spec["n"],), spec["dtype"], spec["regime"], g)
    y0 = S.values((spec["n"],), spec["dtype"], spec["regime"], g)
    return {"x": x.to(device), "y0": y0.to(device), "a": spec["a"]}


def launch(args, outs):
    n = args["x"].numel()
    axpy_kernel[(triton.cdiv(n, 1024),)](args["x"], args["y0"], outs["y"], args["a"], n, BLOCK=1024)


def tolerance(args, refs, dtype):
    # a*x and the add each round once in fp32 (2 u(fp32) relative to |a x| + |y0|), then the
    # result rounds to the output format; relative to |y| that can grow by (|a x| + |y0|) / |y|.
    scale = (args["a"] * args["x"]).abs() + args["y0"].abs()
    u32 = portcheck.tolerance.fmt("fp32").unit_roundoff
    return {"y": portcheck.Tolerance(portcheck.tolerance.fmt(dtype).unit_roundoff,
                                     2 * u32 * scale + portcheck.tolerance.fmt(dtype).tiny,
                                     f"rtol = u({dtype}); atol = 2 u(fp32)(|a x| + |y0|) + tiny({dtype})")}


CASE = portcheck.register(portcheck.Case(
    name="example_axpy", family="example", dtypes=("fp32", "fp16"), inputs=inputs, make=make,
    outputs=lambda a: {"y": (tuple(a["x"].shape), a["x"].dtype)}, launch=launch,
    oracle=lambda a: {"y": a["a"] * a["x"] + a["y0"]}, tolerance=tolerance,
    cost=lambda a: portcheck.Cost(bytes=3 * a["x"].numel() * a["x"].element_size(), flops=2 * a["x"].numel()),
    description="user-registered example"))
