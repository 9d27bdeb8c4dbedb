"""Cases that fail on purpose, one per fault kind, for tests/harness/test_faults.py.

Imported by a `portcheck run` worker through PORTCHECK_CASE_MODULES=tests.support.fault_cases (with the repository root on
PYTHONPATH); never part of the registry otherwise. Each fault happens for real in the kernel, the
launcher or the oracle, on the interpreter.
"""
import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

from portcheck import Case, Cost, register
from portcheck.tolerance import exact, rounding


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def nan_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, tl.where(offs == n - 1, float("nan"), x), mask=offs < n)


@triton.jit
def spin_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    # a kernel that never finishes: it waits for y[0] to become 1.0, which nothing writes (the
    # harness poisons y with NaN); the atomic keeps the compiler from deleting the loop
    flag = tl.atomic_add(y_ptr, 0.0)
    while flag != 1.0:
        flag = tl.atomic_add(y_ptr, 0.0)
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def wild_store_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    # an out-of-bounds write far past the output: the process faults
    tl.store(y_ptr + offs + (1 << 40), tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def bad_compile_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, tl.dot(x, x), mask=offs < n)   # tl.dot needs 2-D blocks


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, 1.5 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)   # wrong: y = x


def _inputs(dtype, max_elements):
    return st.fixed_dictionaries({"dtype": st.just(dtype), "n": st.integers(1, 64), "seed": st.integers(0, 9)})


def _make(spec, device):
    g = torch.Generator().manual_seed(spec["seed"])
    return {"x": torch.randn(spec["n"], generator=g).to(device)}


def _outputs(args):
    return {"y": (tuple(args["x"].shape), args["x"].dtype)}


def _launcher(kernel):
    def launch(args, outs):
        kernel[(1,)](args["x"], outs["y"], args["x"].numel(), BLOCK=64)
    return launch


def _identity_oracle(args):
    return {"y": args["x"]}


def _tol(args, refs, dtype):
    return {"y": rounding(dtype)}


def _fault_case(name, launch=None, oracle=_identity_oracle, tolerance=_tol, outputs=_outputs, **more):
    return register(Case(name=f"fault_{name}", family="faults", dtypes=("fp32",), inputs=more.pop("inputs", _inputs),
                         make=_make, outputs=outputs, launch=launch or _launcher(copy_kernel),
                         oracle=oracle, tolerance=tolerance, cost=lambda a: Cost(0), **more))


def _over_the_limits(args, outs):
    # 64 warps = 2048 threads per block, over every GPU's 1024: refused at launch on a GPU
    # (the interpreter runs blocks as numpy arrays and ignores num_warps, so there it passes)
    copy_kernel[(1,)](args["x"], outs["y"], args["x"].numel(), BLOCK=64, num_warps=64)


def _crash_off_the_strategy(args, outs):
    # wrong on every length the strategy draws (multiples of 16); a length it never draws, which
    # the diagnosis's re-run at half the reduction length makes, kills the process
    kernel = scale_kernel if args["x"].numel() % 16 == 0 else wild_store_kernel
    kernel[(1,)](args["x"], outs["y"], args["x"].numel(), BLOCK=64)


def _sixteens(dtype, max_elements):
    return st.fixed_dictionaries({"dtype": st.just(dtype), "n": st.integers(1, 4).map(lambda m: 16 * m),
                                  "seed": st.integers(0, 9)})


def _oom(args, outs):
    torch.empty(1 << 62, dtype=torch.uint8, device=args["x"].device)   # more memory than exists


def _raising_oracle(args):
    raise ZeroDivisionError("the oracle divided by zero")


def _wrong_shape_oracle(args):
    return {"y": torch.cat([args["x"], args["x"][:1]])}


def _wrong_dtype(args, refs, dtype):
    return {"y": exact()}


_fault_case("ok")                                                  # the control: passes
_fault_case("nan", _launcher(nan_kernel))
_fault_case("hang", _launcher(spin_kernel))
_fault_case("crash", _launcher(wild_store_kernel))
_fault_case("crash_in_diagnosis", _crash_off_the_strategy, inputs=_sixteens, reduction="n")
_fault_case("compile_error", _launcher(bad_compile_kernel))
_fault_case("oom", _oom)
_fault_case("resources", _over_the_limits)
_fault_case("oracle_raises", oracle=_raising_oracle)
_fault_case("wrong_shape", oracle=_wrong_shape_oracle)
_fault_case("wrong_dtype", oracle=lambda a: {"y": a["x"].to(torch.float64)}, tolerance=_wrong_dtype)
