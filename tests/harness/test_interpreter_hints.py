"""Compiler hints held against their values on the interpreter (portcheck.targets.interpreter_hints):
what each claim means, and a false one failing a user's case through `check`."""
import os

import hypothesis
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from portcheck import Case, tolerance
from portcheck.runner import check
from portcheck.targets.interpreter_hints import broken, checking
from portcheck.targets.runtime import INTERPRETER_ARCH

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET", "0") in ("", "0"),
                                reason="the hints are checked on the interpreter (--target=interpreter)")


@pytest.mark.parametrize("claim, values, hint, wrong", [
    ("tt.divisibility", [32], [16], None),
    ("tt.divisibility", [33], [16], "33 is not a multiple of 16"),
    ("tt.divisibility", list(range(16, 32)), [16], None),             # an arange from a multiple: one run
    ("tt.divisibility", list(range(17, 33)), [16], "17 is not a multiple of 16"),
    ("tt.divisibility", [0, 1, 2, 3, 16, 17, 18, 19], [16], None),    # two runs, each from a multiple
    ("tt.divisibility", [0, 1, 2, 3, 20, 21, 22, 23], [16], "20 is not a multiple of 16"),
    ("tt.contiguity", list(range(5, 21)), [16], None),
    ("tt.contiguity", [0, 1, 2, 3, 8, 9, 10, 11], [4], None),          # groups of 4 from index 0, 4
    ("tt.contiguity", [0, 1, 2, 3, 8, 9, 10, 11], [8], "elements 3 and 4 along dimension 0 hold 3 and 8, in one group of 8"),
    ("tt.constancy", [4, 4, 4, 4, 5, 5, 5, 5], [4], None),
    ("tt.constancy", [4, 4, 4, 5, 5, 5, 5, 6], [4], "elements 2 and 3 along dimension 0 hold 4 and 5, in one group of 4"),
])
def test_each_claim_is_held_against_the_values(claim, values, hint, wrong):
    assert broken(claim, np.array(values, dtype=np.int32), hint) == wrong


@triton.jit
def row_sum_kernel(x_ptr, y_ptr, stride, cols, BLOCK: tl.constexpr, HINT: tl.constexpr):
    start = tl.program_id(0) * stride
    if HINT:   # the bug: true only where rows are padded to 16 elements
        start = tl.multiple_of(start, 16)
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + tl.program_id(0), tl.sum(tl.load(x_ptr + start + offs, mask=offs < cols, other=0.0), axis=0))


def test_a_hint_broken_by_one_program_is_named_with_its_line():
    x, y = torch.randn(3 * 17), torch.empty(3)
    with checking() as found:
        row_sum_kernel[(3,)](x, y, 17, 17, BLOCK=32, HINT=True)
    assert len(found.broken) == 1 and found.broken[0].startswith(
        "false hint: tl.multiple_of(..., 16) at test_interpreter_hints.py:") and \
        "in program (1, 0, 0): 17 is not a multiple of 16" in found.broken[0]
    with checking() as found:
        row_sum_kernel[(3,)](torch.randn(3 * 32), y, 32, 17, BLOCK=32, HINT=True)
    assert found.broken == [] and found.notes == []


@triton.jit
def wrapped_rows_kernel(x_ptr, y_ptr, M, BLOCK: tl.constexpr):
    # Triton's matmul tutorial: rows wrapped with % M, hinted contiguous and aligned
    rows = tl.max_contiguous(tl.multiple_of((tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)) % M, BLOCK), BLOCK)
    tl.store(y_ptr + rows, tl.load(x_ptr + rows) * 2)


def test_the_tutorials_wrapped_contiguity_is_a_note_not_a_finding():
    x, y = torch.randn(20), torch.empty(20)
    with checking() as found:
        wrapped_rows_kernel[(3,)](x, y, 20, BLOCK=8)
    assert found.broken == []   # each run starts at a multiple of 8 (16, then 0)
    assert len(found.notes) == 1 and found.notes[0].startswith("a hint the values break: tl.max_contiguous(..., 8)")
    assert "in program (2, 0, 0): elements 3 and 4 along dimension 0 hold 19 and 0, in one group of 8" in found.notes[0]


def _row_sum_case(hint: bool) -> Case:
    def inputs(dtype, max_elements):
        return hypothesis.strategies.fixed_dictionaries({
            "dtype": hypothesis.strategies.just(dtype), "rows": hypothesis.strategies.integers(1, 4),
            "cols": hypothesis.strategies.integers(1, 32)})

    def launch(a, o):
        x = a["x"]
        row_sum_kernel[(x.shape[0],)](x, o["y"], x.stride(0), x.shape[1], BLOCK=32, HINT=hint)

    return Case(name="row_sum_hint" if hint else "row_sum", family="probe", dtypes=("fp32",), inputs=inputs,
                make=lambda spec, device: {"x": torch.linspace(-1, 2, spec["rows"] * spec["cols"],
                                                               device=device).reshape(spec["rows"], spec["cols"])},
                outputs=lambda a: {"y": ((a["x"].shape[0],), torch.float32)}, launch=launch,
                oracle=lambda a: {"y": a["x"].sum(dim=1)},
                tolerance=lambda a, refs, dtype: {"y": tolerance.Tolerance(atol=1e-5, rtol=1e-5, formula="test")})


SEARCH = hypothesis.settings(max_examples=8, derandomize=True, deadline=None, database=None,
                             phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
                             suppress_health_check=list(hypothesis.HealthCheck))


def test_a_false_hint_fails_a_case_whose_outputs_are_right():
    bad = check(_row_sum_case(True), "interpreter", INTERPRETER_ARCH, "fp32", settings=SEARCH, max_elements=4096)
    assert bad.verdict == "fail" and bad.message.startswith("false hint: tl.multiple_of(..., 16)"), bad.message
    assert bad.diagnosis[0]["cause"].startswith("a tl.multiple_of hint")
    good = check(_row_sum_case(False), "interpreter", INTERPRETER_ARCH, "fp32", settings=SEARCH, max_elements=4096)
    assert good.verdict == "pass", good.message
