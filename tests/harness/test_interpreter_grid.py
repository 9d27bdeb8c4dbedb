"""A grid that no GPU launches, found on the interpreter (portcheck.targets.interpreter_grid): a
row kernel whose launcher puts the rows on the grid's second axis passes every input the search
draws, and fails on the many-rows input, whose launches are noted first and run only where a
grid passes CUDA's limits; the interpreter then refuses that grid before its first program."""
import os

import hypothesis
import pytest
import torch
import triton
import triton.language as tl

from portcheck import Case, strategies as S, tolerance as T
from portcheck.compile.capture import recording
from portcheck import runner
from portcheck.runner import check
from portcheck.targets.interpreter_grid import GridTooLarge, excess, limited
from portcheck.targets.runtime import INTERPRETER_ARCH

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET", "0") in ("", "0"),
                                reason="the grid limits are the interpreter's (--target=interpreter)")


@triton.jit
def scale_kernel(x_ptr, y_ptr, xs, ys, cols, BLOCK: tl.constexpr, AXIS: tl.constexpr):
    row = tl.program_id(AXIS).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * xs + offs, mask=offs < cols, other=0.0)
    tl.store(y_ptr + row * ys + offs, 2.0 * x, mask=offs < cols)


def _case(axis: int, launched_rows: list | None = None) -> Case:
    def launch(args, outs):
        x, y = args["x"], outs["y"]
        if launched_rows is not None:
            launched_rows.append(x.shape[0])
        grid = (x.shape[0], 1) if axis == 0 else (1, x.shape[0])
        scale_kernel[grid](x, y, x.stride(0), y.stride(0), x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]),
                           AXIS=axis)
    return Case(name=f"scale_axis{axis}", family="probe", dtypes=("fp32",),
                inputs=lambda dtype, max_elements: S.row_inputs(dtype, min(max_elements, 2048), tile=32, max_rows=8),
                make=lambda spec, device: {"x": S.row_tensor(spec, device)},
                outputs=lambda a: {"y": (tuple(a["x"].shape), a["x"].dtype)}, launch=launch,
                oracle=lambda a: {"y": 2.0 * a["x"]},
                tolerance=lambda a, refs, dtype: {"y": T.rounding(dtype, "fp32")})


SEARCH = hypothesis.settings(max_examples=6, derandomize=True, deadline=None, database=None,
                             phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
                             suppress_health_check=list(hypothesis.HealthCheck))


def test_rows_on_the_second_axis_fail_on_the_many_rows_input_and_its_replay_fails_fast():
    bad = check(_case(1), "interpreter", INTERPRETER_ARCH, "fp32", settings=SEARCH, max_elements=2048)
    assert bad.verdict == "fail", bad.message
    assert bad.message.startswith("more rows than the search draws (65537")
    assert "a grid no GPU launches: grid (1, 65537, 1): its axis 1 has 65,537 programs, past the 65,535" in bad.message
    assert bad.failing_input["rows"] == 65537
    assert bad.diagnosis[0]["cause"].startswith("a launcher that puts a count that grows with the input")
    again = check(_case(1), "interpreter", INTERPRETER_ARCH, "fp32", settings=SEARCH, max_elements=2048,
                  spec=bad.failing_input)
    assert again.verdict == "fail" and "a grid no GPU launches" in again.message


def test_rows_on_the_first_axis_pass_without_running_65537_rows():
    rows: list = []
    good = check(_case(0, rows), "interpreter", INTERPRETER_ARCH, "fp32", settings=SEARCH, max_elements=2048)
    assert good.verdict == "pass", good.message
    # noted at 65,537 rows, and at runner.STRIDING_ROWS (a program a row: not run either)...
    assert 65537 in rows and not any(r > 64 and r not in (65537, runner.STRIDING_ROWS) for r in rows)
    assert good.examples < 20                                               # ...and never run


def test_limits_and_the_recorded_grids():
    assert excess((2**31 - 1, 65535, 65535)) is None
    assert excess((2**31,)).startswith("grid (2147483648,): its axis 0 has 2,147,483,648 programs")
    with recording() as rec:
        scale_kernel[lambda meta: (meta["cols"], 70000)](1, 2, 3, 4, 5, BLOCK=8, AXIS=1)
    assert rec.grids == [(5, 70000)]
    x = torch.zeros(70000, 8)
    with limited(), pytest.raises(GridTooLarge):
        scale_kernel[(1, 70000)](x, x, 8, 8, 8, BLOCK=8, AXIS=1)
