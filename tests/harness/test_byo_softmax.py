"""The user softmax of examples/custom_case (a Case of 12 lines beyond its kernel and launcher,
its tolerance from portcheck.tolerance.softmax) still catches real softmax bugs: a missing max
subtraction (exp overflows for large logits), an fp16 accumulator, and a store mask that leaves
the last column of the output its launcher allocated unwritten; the correct kernel passes the
same search. Runs on the interpreter (the mode is fixed before these kernels are decorated).
"""
import dataclasses
import os
import sys
from pathlib import Path

import hypothesis
import pytest
import torch
import triton
import triton.language as tl

import portcheck
from portcheck.runner import check
from portcheck.targets.runtime import INTERPRETER_ARCH

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "custom_case"))
import user_softmax  # noqa: E402  the module name examples/custom_case/conftest.py imports too

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET", "0") in ("", "0"),
                                reason="runs on the interpreter only (--target=interpreter)")

SEARCH = hypothesis.settings(max_examples=20, derandomize=True, deadline=None, database=None,
                             phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
                             suppress_health_check=list(hypothesis.HealthCheck))


@triton.jit
def no_max_kernel(x_ptr, y_ptr, x_stride, y_stride, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * x_stride + offs, mask=offs < cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x)                                           # BUG: no max subtraction
    tl.store(y_ptr + row * y_stride + offs, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=offs < cols)


@triton.jit
def fp16_sum_kernel(x_ptr, y_ptr, x_stride, y_stride, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * x_stride + offs, mask=offs < cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0)).to(tl.float16)
    total = tl.sum(e, axis=0)                               # BUG: accumulated in fp16
    tl.store(y_ptr + row * y_stride + offs, (e / total).to(y_ptr.dtype.element_ty), mask=offs < cols)


@triton.jit
def store_mask_kernel(x_ptr, y_ptr, x_stride, y_stride, cols, STORED: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * x_stride + offs, mask=offs < cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * y_stride + offs, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty),
             mask=offs < cols + STORED)   # BUG: -1 never stores the last column, +1 one past each row


def _with_kernel(kernel, **constexprs):
    def softmax(x):
        y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        kernel[(x.shape[0],)](x, y, x.stride(0), y.stride(0), x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]),
                              **constexprs)
        return y
    return dataclasses.replace(user_softmax.CASE, launch=portcheck.allocating_launcher(softmax, "y"))


def _check(case, dtype):
    return check(case, "interpreter", INTERPRETER_ARCH, dtype, settings=SEARCH, max_elements=4096, seed=0)


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_the_user_softmax_passes(dtype):
    r = _check(user_softmax.CASE, dtype)
    assert r.verdict == "pass", r.message
    assert r.examples > 0


def test_a_missing_max_subtraction_is_caught():
    r = _check(_with_kernel(no_max_kernel), "fp32")
    assert r.verdict == "fail", r.message
    assert r.failing_input["regime"] == "large"     # exp overflows: inf / inf
    assert "nan" in r.message.lower() or "inf" in r.message.lower(), r.message


def test_an_fp16_accumulator_is_caught():
    r = _check(_with_kernel(fp16_sum_kernel), "fp32")
    assert r.verdict == "fail", r.message
    assert r.message.startswith("y:"), r.message


def test_an_allocating_launcher_that_leaves_elements_unwritten_is_caught():
    """Its torch.empty output holds the harness's poison during the launch (guards.poisoned_allocations),
    not whatever the allocator's block held: the unwritten column shows on every run."""
    r = _check(_with_kernel(store_mask_kernel, STORED=-1), "fp32")
    assert r.verdict == "fail", r.message
    assert "never written" in r.message or "read before written" in r.message, r.message


def test_an_allocating_launcher_that_stores_past_its_output_is_caught():
    """The launcher's torch.empty output sits between guard bands during a check, as the harness's
    own outputs do: the last row's store past its end lands in them (it corrupted the heap on the
    interpreter before, and the worker died of SIGABRT, or did not). The message names the
    allocation's line."""
    r = _check(_with_kernel(store_mask_kernel, STORED=1), "fp32")
    assert r.verdict == "fail", r.message
    assert "out-of-bounds write" in r.message and "tensor the launcher allocated at test_byo_softmax.py:" \
        in r.message, r.message
