"""portcheck must catch real kernel bugs: each broken kernel below is wrapped as a Case (never
registered) around the real family's strategy, oracle and tolerance, and checked on the
interpreter. Each must come back 'fail', name the output and what was wrong, and carry a
failing input that fails again when replayed. The correct kernels pass the same search.

The interpreter is a process-wide mode fixed before the kernels below are decorated: the
pytest plugin sets TRITON_INTERPRET for --target=interpreter (or auto on a machine without a
GPU) at configure time, before test modules are imported.
"""
import dataclasses
import os

import hypothesis
import pytest
import torch
import triton
import triton.language as tl

from portcheck import cases
from portcheck.runner import check
from portcheck.targets.runtime import INTERPRETER_ARCH

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET", "0") in ("", "0"),
                                reason="broken kernels run on the interpreter only (--target=interpreter)")

# no shrink phase: the first failing input is replayable as it is, and shrinking on the
# interpreter costs minutes
SEARCH = hypothesis.settings(max_examples=30, derandomize=True, deadline=None, database=None,
                             phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
                             suppress_health_check=list(hypothesis.HealthCheck))
MAX_ELEMENTS = 4096


# ---- the broken kernels ----------------------------------------------------------------------

@triton.jit
def softmax_without_max_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=ok, other=-float("inf")).to(tl.float32)
    e = tl.exp(x)                                   # BUG: no max subtraction, overflows for large x
    tl.store(y_ptr + row * y_stride + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def softmax_unmasked_tail_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * x_stride + cols).to(tl.float32)   # BUG: reads past the row's end
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * y_stride + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty),
             mask=cols < n_cols)


@triton.jit
def rmsnorm_unmasked_tail_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, n_cols, x_stride, y_stride, eps,
                                 HAS_W: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols).to(tl.float32)   # BUG: the tail enters the sum
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    y = x * rstd
    if HAS_W:
        y = y * tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * y_stride + cols, y.to(y_ptr.dtype.element_ty), mask=ok)
    tl.store(rstd_ptr + row, rstd)


@triton.jit
def dropout_memory_offset_kernel(x_ptr, b_ptr, y_ptr, keep_ptr, n_cols, x_stride, p, scale, seed, offset,
                                 HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    a = tl.load(x_ptr + row * x_stride + cols, mask=ok, other=0.0).to(tl.float32)
    if HAS_BIAS:
        a += tl.load(b_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    g = 0.5 * a * (1.0 + tl.math.erf(a * 0.7071067811865476))
    # BUG: the Philox counter is the input's memory offset (row * stride), not the element index
    keep = tl.rand(seed, offset + row * x_stride + cols) > p
    index = row * n_cols + cols
    tl.store(y_ptr + index, tl.where(keep, g * scale, 0.0).to(y_ptr.dtype.element_ty), mask=ok)
    tl.store(keep_ptr + index, keep.to(tl.uint8), mask=ok)


# ---- launchers with the real families' signatures ----------------------------------------------

def _guarded(make, block_of):
    """The real make, with x copied into storage that extends a block past its last element: the
    interpreter does not bound-check loads, and a kernel that reads past a row must read NaN or
    the next row's values (both wrong), never unallocated memory."""
    def guarded_make(spec, device):
        args = make(spec, device)
        x = args["x"]
        rows, cols = x.shape
        room = (rows - 1) * x.stride(0) + cols + block_of(cols)
        storage = torch.full((room,), float("nan"), dtype=x.dtype, device=x.device)
        view = storage.as_strided(x.shape, x.stride())
        view.copy_(x)
        return {**args, "x": view}
    return guarded_make


def _softmax_launch(kernel):
    def launch(args, outs):
        x, y = args["x"], outs["y"]
        kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0),
                              BLOCK=triton.next_power_of_2(x.shape[1]))
    return launch


def _rmsnorm_launch(args, outs):
    x, w, y = args["x"], args["weight"], outs["y"]
    rmsnorm_unmasked_tail_kernel[(x.shape[0],)](x, w if w is not None else x, y, outs["rstd"], x.shape[1],
                                                x.stride(0), y.stride(0), args["eps"], HAS_W=w is not None,
                                                BLOCK=triton.next_power_of_2(x.shape[1]))


def _dropout_launch(args, outs):
    x, b, p = args["x"], args["bias"], args["p"]
    if p == 0:   # the real launcher's no-dropout path: the bug is in the random stream
        from portcheck.kernels.bias_gelu_dropout import bias_gelu_dropout
        bias_gelu_dropout(x, b, p, args["rng_seed"], args["offset"], out=outs["y"], keep=outs["keep"])
        return
    dropout_memory_offset_kernel[(x.shape[0],)](
        x, b if b is not None else x, outs["y"], outs["keep"], x.shape[1], x.stride(0), p,
        1.0 / (1.0 - p) if p < 1 else 0.0, args["rng_seed"], args["offset"], HAS_BIAS=b is not None,
        BLOCK=triton.next_power_of_2(x.shape[1]))


def _block(cols):
    return triton.next_power_of_2(cols)


def broken(real_name, name, launch, guard=False):
    real = cases.get(real_name)
    make = _guarded(real.make, _block) if guard else real.make
    return dataclasses.replace(real, name=name, launch=launch, make=make, bench=(), variants=None,
                               baselines=None)


BROKEN = {  # name -> (the broken case, the output named, words that say what was wrong)
    "softmax_without_max": (lambda: broken("softmax", "softmax_without_max",
                                           _softmax_launch(softmax_without_max_kernel)),
                            "y", ("NaN/Inf placement differs", "out of tolerance")),
    "softmax_unmasked_tail": (lambda: broken("softmax", "softmax_unmasked_tail",
                                             _softmax_launch(softmax_unmasked_tail_kernel), guard=True),
                              "y", ("NaN/Inf placement differs", "out of tolerance")),
    "rmsnorm_unmasked_tail": (lambda: broken("rmsnorm", "rmsnorm_unmasked_tail", _rmsnorm_launch, guard=True),
                              "rstd", ("NaN/Inf placement differs", "out of tolerance")),
    "dropout_memory_offset": (lambda: broken("bias_gelu_dropout", "dropout_memory_offset", _dropout_launch),
                              "keep", ("differ bitwise",)),
}


def _check(case, spec=None):
    return check(case, "interpreter", INTERPRETER_ARCH, "fp32", settings=SEARCH,
                 max_elements=MAX_ELEMENTS, spec=spec)


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_portcheck_catches_the_broken_kernel(name):
    make_case, output, words = BROKEN[name]
    case = make_case()
    result = _check(case)
    assert result.verdict == "fail", (result.verdict, result.message)
    assert f"{output}: " in result.message, result.message
    assert any(w in result.message for w in words), result.message
    assert result.failing_input is not None and result.failing_input["dtype"] == "fp32"
    assert "--replay" in result.reproduce and f"--kernel {name}" in result.reproduce
    again = _check(case, spec=result.failing_input)
    assert again.verdict == "fail" and again.failing_input == result.failing_input, again.message
    # the record's numbers are the reported input's, as its replay prints them
    assert again.metrics == result.metrics


@pytest.mark.parametrize("real", ["softmax", "rmsnorm", "bias_gelu_dropout"])
def test_the_correct_kernels_pass_the_same_search(real):
    result = _check(cases.get(real))
    assert result.verdict == "pass", result.message
    assert result.examples >= 10


def test_the_interpreters_overflow_warnings_stay_out_of_the_output():
    # numpy warns at each overflow the broken softmax makes; the failure already says what it did
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = _check(BROKEN["softmax_without_max"][0]())
    assert result.verdict == "fail"
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in caught]
