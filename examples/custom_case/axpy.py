"""A user's own kernel, checked by portcheck without touching portcheck: y = a * x + y0.

Register it from your repository's conftest.py (as this folder does), from an entry point in
your package (`[project.entry-points."portcheck.cases"] axpy = "yourpkg.axpy"`), or name the
module: `portcheck run --cases axpy` (from this folder), or `case_modules = ["axpy"]` in a
matrix's [run] table.

It declares its `variants` (the launches `portcheck compile` builds for each arch); without
them, compile captures the launches from the launcher, once per arch (see user_softmax.py).
"""
import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

import portcheck
from portcheck import strategies as S
from portcheck import tolerance as T
from portcheck.cases import launch_divisibility


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
    # a*x and the add each round once in fp32: 2 u(fp32) relative to |a x| + |y0|, which
    # cancellation can make much larger than |y|; then the result rounds to the output format
    terms = (args["a"] * args["x"]).abs() + args["y0"].abs()
    return {"y": T.elementwise(dtype, "fp32", ops=2, terms=terms)}


def variants(arch):
    """The launches launch() makes, as the compiler sees them: one per dtype (BLOCK 1024, Triton's
    default 4 warps), pointers and n specialized as multiples of 16 as at n = 4096."""
    out = []
    for dtype in ("fp32", "fp16"):
        ptr = "*" + portcheck.fmt(dtype).triton_name
        sig = {"x_ptr": ptr, "y0_ptr": ptr, "y_ptr": ptr, "a": "fp32", "n": "i32"}
        out.append(portcheck.Variant(axpy_kernel, sig, {"BLOCK": 1024}, num_warps=4, label=f"{dtype} n%16",
                                     divisible_by_16=launch_divisibility(sig, n=4096)))
    return out


CASE = portcheck.register(portcheck.Case(
    name="example_axpy", family="example", dtypes=("fp32", "fp16"), inputs=inputs, make=make,
    outputs=lambda a: {"y": (tuple(a["x"].shape), a["x"].dtype)}, launch=launch,
    oracle=lambda a: {"y": a["a"] * a["x"] + a["y0"]}, tolerance=tolerance, variants=variants,
    cost=lambda a: portcheck.Cost(bytes=3 * a["x"].numel() * a["x"].element_size(), flops=2 * a["x"].numel()),
    description="user-registered example"))
