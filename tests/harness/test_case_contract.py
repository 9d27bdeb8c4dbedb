"""A case's parts must agree, and an argument updated in place is an output too.

The oracle sees an in-place argument as it was before the launch; the value the kernel leaves
there is compared with the oracle's reference of that name. A case whose oracle, tolerance and
outputs disagree is an error that names the part, never a kernel failure or a silent pass.
(Planted-bug probe 4, independent round: a correct fused add + RMSNorm failed, its oracle fed
the residual the kernel had already updated; a wrong residual update passed; an output the
oracle never returned passed unchecked.)"""
import dataclasses
import os

import hypothesis
import pytest
import torch
import triton
import triton.language as tl

from portcheck import Case
from portcheck import strategies as S
from portcheck import tolerance as T
from portcheck.runner import check

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET", "0") in ("", "0"),
                                reason="the kernels here run on the interpreter (--target=interpreter)")

# found, not shrunk (a failure's shrink costs seconds here and shows nothing these tests look at)
SEARCH = hypothesis.settings(max_examples=6, derandomize=True, deadline=None, database=None,
                             phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
                             suppress_health_check=list(hypothesis.HealthCheck))


@triton.jit
def add_scale_kernel(x_ptr, r_ptr, y_ptr, n, BUG: tl.constexpr, BLOCK: tl.constexpr):
    """r += x in place, then y = 2 r: a fused residual add's shape. BUG 1: r = x stored (y
    right); BUG 2: y from the residual before the add (r right)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    r = tl.load(r_ptr + offs, mask=mask)
    s = x + r
    tl.store(r_ptr + offs, x if BUG == 1 else s, mask=mask)
    tl.store(y_ptr + offs, 2 * (r if BUG == 2 else s), mask=mask)


def _make(spec, device):   # contiguous: the kernel indexes the elements flat
    x = S.row_tensor(spec, device).contiguous()
    return {"x": x, "r": S.row_tensor({**spec, "seed": spec["seed"] + 1}, device).contiguous()}


def _launch(bug):
    def launch(args, outs):
        x, r = args["x"], args["r"]
        add_scale_kernel[(triton.cdiv(x.numel(), 64),)](x, r, outs["y"], x.numel(), BUG=bug, BLOCK=64)
    return launch


def _case(bug=0, **changes):
    base = Case(
        name=f"contract_add_scale_{bug}", family="contract", dtypes=("fp32",),
        inputs=lambda dtype, max_elements: S.row_inputs(dtype, max_elements, max_rows=4, allowed=("normal",)),
        make=_make, outputs=lambda args: {"y": (tuple(args["x"].shape), args["x"].dtype)},
        launch=_launch(bug), in_place=("r",),
        oracle=lambda a: {"y": 2 * (a["x"] + a["r"]), "r": a["x"] + a["r"]},
        tolerance=lambda a, refs, dtype: {"y": T.elementwise(dtype, "fp32", ops=2),
                                          "r": T.elementwise(dtype, "fp32", ops=1)})
    return dataclasses.replace(base, **changes)


def _check(case):
    return check(case, "interpreter", "cpu-interpreter", "fp32", settings=SEARCH, max_elements=1024, seed=0)


def test_the_oracle_sees_an_in_place_argument_as_the_kernel_did_and_its_new_value_is_checked():
    r = _check(_case())
    assert r.verdict == "pass", r.message
    lost = _check(_case(1))                    # y right for its r, r wrong
    assert lost.verdict == "fail" and lost.message.startswith("r:"), lost.message
    stale = _check(_case(2))                   # r right, y from the old r
    assert stale.verdict == "fail" and stale.message.startswith("y:"), stale.message


def test_an_in_place_argument_without_a_reference_is_noted_unchecked():
    r = _check(_case(1, oracle=lambda a: {"y": 2 * (a["x"] + a["r"])}))   # r wrong, unchecked
    assert r.verdict == "pass" and "r updated in place, with no reference from the oracle" in r.message, r.message


@pytest.mark.parametrize("changes, said", [
    ({"oracle": lambda a: {"r": a["x"] + a["r"]}}, "the oracle returns no reference for output y"),
    ({"oracle": lambda a: {"y": 2 * (a["x"] + a["r"]), "z": a["x"]}}, "the oracle returns z, which is neither"),
    ({"oracle": lambda a: {"y": (2 * (a["x"] + a["r"])).flatten()}}, "the oracle's y has shape"),
    ({"oracle": lambda a: {"y": 1.0}}, "the oracle's y is a float, not a tensor"),
    ({"tolerance": lambda a, refs, dtype: {"y": T.elementwise(dtype, "fp32", ops=2)}}, "no Tolerance for r"),
    ({"tolerance": lambda a, refs, dtype: {"y": 1e-6, "r": 1e-6}}, "tolerance()['y'] is a float"),
    ({"outputs": lambda args: {"y": (tuple(args["x"].shape), args["x"].dtype), "r": ((1,), torch.float32)}},
     "r: both an output (outputs()) and an argument updated in place"),
])
def test_a_case_whose_parts_disagree_is_an_error_that_names_the_part(changes, said):
    r = _check(_case(**changes))
    assert r.verdict == "error" and r.message.startswith("CaseContractError") and said in r.message, r.message


def test_inputs_that_do_not_follow_from_the_spec_are_an_error():
    """make() drawing from torch's global generator: every replay would be another input."""
    def make(spec, device):
        return {"x": torch.randn(2, 8, device=device), "r": torch.zeros(2, 8, device=device)}
    r = _check(_case(make=make))
    assert r.verdict == "error" and "make() gave two different 'x' for one spec" in r.message, r.message


def test_a_failure_and_a_fault_on_other_inputs_report_the_failure_on_its_own_input():
    """Shrinking a failure met a fault on another input: hypothesis raised both, and the record
    held the fault's message with the failure's input, whose replay showed the failure."""
    wrong, right = _launch(2), _launch(0)

    def launch(args, outs):   # wrong from two columns on; one column of two rows or more raises
        rows, cols = args["x"].shape
        if cols == 1 and rows >= 2:
            raise RuntimeError("one column of several rows refused here")
        (wrong if cols >= 2 else right)(args, outs)
    search = hypothesis.settings(SEARCH, max_examples=30,   # with the shrink, which meets the fault
                                 phases=hypothesis.settings.default.phases)
    r = check(_case(launch=launch), "interpreter", "cpu-interpreter", "fp32", settings=search,
              max_elements=64, seed=0)   # small inputs: a shrink of few, fast steps
    assert r.verdict == "fail" and r.message.startswith("y:"), r.message
    assert r.failing_input["cols"] >= 2
    assert "(another input raised RuntimeError: one column of several rows refused here" in r.message, r.message
