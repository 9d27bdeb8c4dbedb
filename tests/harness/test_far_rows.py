"""Far rows: after a passing search on a GPU, one more input with its rows 2**31 elements apart, so
that a kernel computing row * stride in int32 (a 32-bit program id times a 32-bit stride) reads
the wrong row or faults. The layout's arithmetic and the runner's control flow are checked here on
the CPU (with the boundary lowered: the real one takes gigabytes); the catch itself, on a GPU, by
a planted kernel run through `portcheck run` (its fault may end the process's GPU context).
"""
import json
import os
import subprocess
import sys
import textwrap

import dataclasses

import hypothesis
import pytest
import torch
import triton
import triton.language as tl

from portcheck import cases, runner
from portcheck import strategies as S
from portcheck.kernels.quant.case import _laid_out_codes
from portcheck.targets.runtime import INTERPRETER_ARCH

INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
SEARCH = hypothesis.settings(max_examples=6, derandomize=True, deadline=None, database=None,
                             phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
                             suppress_health_check=list(hypothesis.HealthCheck))


@pytest.mark.parametrize("rows,cols", [(3, 1), (3, 4096), (4, 100), (64, 7), (1000, 50000)])
def test_the_last_far_row_starts_past_2_31_with_an_int32_stride(rows, cols):
    stride = S.far_stride(rows, cols)
    assert (rows - 1) * stride >= 2**31 > stride          # the product wraps, the stride does not
    assert stride % S.FAR_ALIGN == 0 and stride >= cols + S.PAD
    assert (rows - 2) * stride < 2**31 or rows > 3        # with 3 rows only the last is past it


def test_far_rows_need_three_rows():
    with pytest.raises(ValueError, match="3 rows"):
        S.far_stride(2, 10)


@pytest.fixture
def low_boundary(monkeypatch):
    """The far layout with its boundary at 4096 elements: the same code, kilobytes of storage."""
    monkeypatch.setattr(S, "FAR_ELEMENTS", 4096)


def test_far_rows_hold_the_values_and_poison_past_each_row(low_boundary):
    t = torch.randn(5, 10)
    far = S.laid_out(t, "far", "cpu")
    assert torch.equal(far, t) and far.stride() == (S.far_stride(5, 10), 1)
    assert (far.shape[0] - 1) * far.stride(0) >= 4096
    after = far.as_strided((5, S.PAD), (far.stride(0), 1), far.storage_offset() + 10)
    assert after.isnan().all()


def test_quant_codes_take_the_far_layout_with_their_format_nan(low_boundary):
    codes = torch.randint(0, 256, (4, 7), dtype=torch.uint8)
    for dtype, fill in ((torch.float8_e4m3fn, 0x7f), (torch.int8, 0x80)):
        far = _laid_out_codes(codes.view(dtype), "far", "cpu")
        assert far.dtype == dtype and torch.equal(far.view(torch.uint8), codes)
        after = far.view(torch.uint8).as_strided((4, S.PAD), (far.stride(0), 1), far.storage_offset() + 7)
        assert (after == fill).all()


def test_the_many_rows_input_has_16_rows_a_unit_and_3_and_passes_the_grid_axis_limit():
    spec = {"dtype": "bf16", "rows": 5, "cols": 4000, "regime": "equal", "layout": "padded", "seed": 1}
    h200 = runner.many_rows_example(spec, 132)
    assert h200 == {**spec, "rows": 65537, "cols": 32, "regime": "normal"}   # 63 at most, 4000's 32 kept
    assert [runner.many_rows_example({**spec, "cols": c}, 132)["cols"] for c in (4096, 4097, 200, 40)] == [32, 63, 56, 40]
    assert runner.many_rows_example(spec, 8192)["rows"] == 16 * 8192 + 3
    # the gated activations' row length is d (half the input's): cut too, not left as the search drew it
    gated = runner.many_rows_example({"dtype": "fp16", "rows": 13, "d": 79809, "regime": "zeros",
                                      "layout": "contiguous", "seed": 0}, 132)
    assert (gated["rows"], gated["d"]) == (65537, 63) and gated["rows"] * gated["d"] <= runner.MANY_ROWS_ELEMENTS
    # tokens of heads x dims: no row length to cut, so 16 a unit and 3 (65,537 could take gigabytes)
    assert runner.many_rows_example({"dtype": "fp16", "tokens": 2, "layout": "contiguous", "seed": 0}, 132)["tokens"] == 2115


def test_a_row_layout_input_gives_the_far_example():
    spec = {"dtype": "fp32", "rows": 1, "cols": 9, "layout": "padded", "seed": 3}
    assert runner.far_rows_base(spec)
    assert runner.far_rows_example(spec) == {**spec, "rows": 3, "layout": "far"}
    assert runner.far_rows_example({**spec, "rows": 40})["rows"] == 40
    # the largest passing input, with normal values whatever its own were
    assert runner.far_rows_rank({**spec, "cols": 99}) > runner.far_rows_rank(spec)
    assert runner.far_rows_example({**spec, "regime": "equal"})["regime"] == "normal"
    assert runner.far_rows_twin(runner.far_rows_example(spec)) == {**spec, "rows": 3, "layout": "contiguous"}
    moe = {"dtype": "bf16", "tokens": 2, "layout": "contiguous", "seed": 0}
    assert runner.far_rows_example(moe)["tokens"] == 3
    assert not runner.far_rows_base({"dtype": "fp32", "M": 4, "seed": 0})            # no layout
    assert not runner.far_rows_base({**spec, "layout": "fused_qkv"})                # a layout of its own


@pytest.fixture
def far_on_the_interpreter(monkeypatch, low_boundary):
    """The runner's far example on the interpreter, as it runs on a GPU, at the low boundary."""
    monkeypatch.setattr(runner, "far_rows_runs_on", lambda target: True)
    monkeypatch.setattr(runner, "far_rows_obstacle", lambda target, spec: None)
    # the many-rows input before it: 16 x 1 + 3 = 19 rows, as on a GPU of one SM
    monkeypatch.setattr(runner.facts_device, "compute_units", lambda device=None: 1)
    monkeypatch.setattr(runner, "MANY_ROWS_ELEMENTS", 2048)   # 19 rows stay within the low boundary
    monkeypatch.setattr(runner, "MANY_ROWS_AT_LEAST", 0)       # 65,537 programs: minutes on the interpreter


def _check(case):
    return runner.check(case, "interpreter", INTERPRETER_ARCH, "fp32", settings=SEARCH, max_elements=2048)


@pytest.mark.skipif(not INTERPRETED, reason="kernels run on the interpreter here (--target=interpreter)")
def test_a_passing_search_ends_with_the_far_example(far_on_the_interpreter, monkeypatch):
    seen = []
    real = runner.evaluate
    monkeypatch.setattr(runner, "evaluate", lambda case, target, spec, *a, **k: (seen.append(spec), real(case, target, spec, *a, **k))[1])
    result = _check(cases.get("softmax"))
    assert result.verdict == "pass" and result.message == "", result.message
    assert seen[-1]["layout"] == "far" and seen[-1]["rows"] >= 3
    assert seen[-2] == runner.far_rows_twin(seen[-1])   # its twin with contiguous rows just before
    assert seen[-3]["rows"] == 19 and seen[-3]["layout"] != "far"   # and the many-rows input
    ran = [s for s in seen if runner.COLUMNS_KEY not in s]   # softmax refuses a strided x: tried, not counted
    assert [s[runner.COLUMNS_KEY] for s in seen if runner.COLUMNS_KEY in s] == ["x"]
    assert [s["layout"] for s in ran[:-1]].count("far") == 0 and result.examples == len(ran)


@pytest.mark.skipif(not INTERPRETED, reason="kernels run on the interpreter here (--target=interpreter)")
def test_a_case_with_a_layout_of_its_own_says_far_rows_were_not_checked(far_on_the_interpreter):
    result = runner.check(cases.get("kv_cache_write"), "interpreter", INTERPRETER_ARCH, "fp16",
                          settings=SEARCH, max_elements=2048)
    assert result.verdict == "pass"
    assert result.message.startswith("far rows not checked: make() laid out no tensor past"), result.message


@triton.jit
def softmax_wrapping_rows_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    # BUG, as int32 arithmetic has it at 2**31: the row offset wraps, here at the lowered boundary
    x = tl.load(x_ptr + (row * x_stride) % 4096 + cols, mask=ok, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row.to(tl.int64) * y_stride + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty),
             mask=ok)


def _wrapping_launch(args, outs):
    x, y = args["x"], outs["y"]
    softmax_wrapping_rows_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0),
                                                BLOCK=triton.next_power_of_2(x.shape[1]))


@pytest.mark.skipif(not INTERPRETED, reason="kernels run on the interpreter here (--target=interpreter)")
def test_a_row_offset_that_wraps_fails_on_the_far_rows_only(far_on_the_interpreter):
    case = dataclasses.replace(cases.get("softmax"), name="softmax_wrapping_rows", launch=_wrapping_launch,
                               bench=(), variants=None, baselines=None)
    result = _check(case)
    assert result.verdict == "fail" and result.message.startswith(runner.FAR_HINT), result.message
    # the base was a passing input of normal values with more than one column, re-laid out far
    far = result.failing_input
    assert far["layout"] == "far" and far["rows"] >= 3 and far["cols"] > 1 and far["regime"] == "normal"
    assert "--replay" in result.reproduce
    again = runner.check(case, "interpreter", INTERPRETER_ARCH, "fp32", settings=SEARCH, max_elements=2048,
                         spec=far)
    assert again.verdict == "fail" and again.message.startswith(runner.FAR_HINT)


def _wrong_with_three_rows(args, outs):
    cases.get("softmax").launch(args, outs)
    if outs["y"].shape[0] == 3:   # BUG: with three rows the last is lost, in any layout
        outs["y"][2] = 0


@pytest.mark.skipif(not INTERPRETED, reason="kernels run on the interpreter here (--target=interpreter)")
def test_a_failure_of_the_near_twin_is_an_ordinary_failure(far_on_the_interpreter):
    """The far example's twin with contiguous rows runs first: a kernel wrong with three rows
    (which the search, drawing at most 2 rows here, never gave it) fails there, with no far hint."""
    base = cases.get("softmax")
    case = dataclasses.replace(base, name="softmax_three_rows", launch=_wrong_with_three_rows, bench=(),
                               variants=None, baselines=None,
                               inputs=lambda dtype, most: base.inputs(dtype, most).map(
                                   lambda spec: {**spec, "rows": min(spec["rows"], 2)}))
    result = _check(case)
    assert result.verdict == "fail" and not result.message.startswith(runner.FAR_HINT), result.message
    assert result.failing_input["layout"] == "contiguous" and result.failing_input["rows"] == 3


@triton.jit
def softmax_stale_sum_kernel(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    """A persistent softmax: each program strides over the rows."""
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    total = 0.0   # BUG: the sum starts once per program, not once per row
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x = tl.load(x_ptr + row * x_stride + cols, mask=ok, other=-float("inf")).to(tl.float32)
        e = tl.exp(x - tl.max(x, axis=0))
        total += tl.sum(e, axis=0)
        tl.store(y_ptr + row * y_stride + cols, (e / total).to(y_ptr.dtype.element_ty), mask=ok)


def _stale_sum_launch(args, outs):
    x, y = args["x"], outs["y"]
    softmax_stale_sum_kernel[(min(x.shape[0], 4),)](x, y, x.shape[0], x.shape[1], x.stride(0), y.stride(0),
                                                   BLOCK=triton.next_power_of_2(x.shape[1]))


@pytest.mark.skipif(not INTERPRETED, reason="kernels run on the interpreter here (--target=interpreter)")
def test_a_row_loop_that_carries_state_fails_on_many_rows(far_on_the_interpreter):
    """A grid of 4 programs, and a search of at most 4 rows (as 64 rows on a GPU of 132 SMs): no
    program takes a second row until the many-rows input (16 per SM and 3: 19 here)."""
    base = cases.get("softmax")
    case = dataclasses.replace(base, name="softmax_stale_sum", launch=_stale_sum_launch, bench=(),
                               variants=None, baselines=None,
                               inputs=lambda dtype, most: base.inputs(dtype, most).map(
                                   lambda spec: {**spec, "rows": min(spec["rows"], 4)}))
    result = _check(case)
    hint = runner.MANY_HINT.format(rows=19, per=runner.MANY_ROWS_PER_UNIT)
    assert result.verdict == "fail" and result.message.startswith(hint), result.message
    assert result.failing_input["rows"] == 19 and result.failing_input["layout"] != "far"
    assert "--replay" in result.reproduce


def _capped_launch(programs):
    def launch(args, outs):   # a grid capped at an H100 / H200's 132 SMs, as a user's launcher may be
        x, y = args["x"], outs["y"]
        softmax_stale_sum_kernel[(min(x.shape[0], programs),)](
            x, y, x.shape[0], x.shape[1], x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
    return launch


@pytest.mark.skipif(not INTERPRETED, reason="kernels run on the interpreter here (--target=interpreter)")
@pytest.mark.parametrize("programs", [132, 2048])
def test_on_the_interpreter_programs_capped_at_a_gpus_sms_take_several_rows(programs):
    """The search draws at most 64 rows; the many-rows input does not run on the interpreter. The
    STRIDING_ROWS input (611 rows) does where a launch has fewer programs than rows: 132 programs
    carry the sum from row to row there. 2048 programs (one a row): the input does not run."""
    base = cases.get("softmax")
    case = dataclasses.replace(base, name="softmax_capped", launch=_capped_launch(programs), bench=(),
                               variants=None, baselines=None)
    result = _check(case)
    if programs == 2048:
        assert result.verdict == "pass", result.message
        return
    assert result.verdict == "fail", result.message
    assert result.message.startswith(runner.STRIDING_HINT.format(rows=runner.STRIDING_ROWS)), result.message
    assert result.failing_input["rows"] == runner.STRIDING_ROWS
    assert result.failing_input["rows"] * result.failing_input["cols"] <= runner.REGIME_ELEMENTS


def _gated_launch(base):
    def launch(args, outs):   # past 32,768 columns a "split path" that leaves the row's tail unwritten
        x = args["x"]
        if x.shape[1] > 32768:
            base.launch({**args, "x": x[:, :32768]}, {"y": outs["y"][:, :32768]})
            return
        base.launch(args, outs)
    return launch


@pytest.mark.skipif(not INTERPRETED, reason="kernels run on the interpreter here (--target=interpreter)")
@pytest.mark.parametrize("gated", [True, False])
def test_on_the_interpreter_a_path_taken_past_32768_columns_runs(gated):
    """The interpreter's search stays within 16,384 elements; its LONG_ROW input (two rows of
    40,959) takes a launcher's path for longer rows, and the failure's replay is accepted there."""
    base = cases.get("softmax")
    case = dataclasses.replace(base, name="softmax_gated", launch=_gated_launch(base) if gated else base.launch,
                               bench=(), variants=None, baselines=None)
    result = _check(case)
    if not gated:
        assert result.verdict == "pass", result.message
        return
    assert result.verdict == "fail", result.message
    assert result.message.startswith(runner.LONG_ROW_HINT.format(cols=runner.LONG_ROW)), result.message
    assert (result.failing_input["rows"], result.failing_input["cols"]) == (2, runner.LONG_ROW)
    assert runner.replay_budget("interpreter", 16384) >= 2 * runner.LONG_ROW
    again = runner.check(case, "interpreter", INTERPRETER_ARCH, "fp32", settings=SEARCH, max_elements=2048,
                         spec=result.failing_input)
    assert again.verdict == "fail"


@pytest.mark.skipif(not INTERPRETED, reason="kernels run on the interpreter here (--target=interpreter)")
def test_a_launch_refused_on_many_rows_fails_its_case_with_the_hint(far_on_the_interpreter):
    """As the driver refuses a grid whose second axis passes 65,535 programs: here past 4 rows,
    which the search (at most 4 rows) never reaches and the many-rows input (19) does."""
    base = cases.get("softmax")

    def launch(args, outs):
        if args["x"].shape[0] > 4:
            raise RuntimeError("Triton Error [CUDA]: invalid argument")
        base.launch(args, outs)
    case = dataclasses.replace(base, name="softmax_grid_refused", launch=launch, bench=(), variants=None,
                               baselines=None, inputs=lambda dtype, most: base.inputs(dtype, most).map(
                                   lambda spec: {**spec, "rows": min(spec["rows"], 4)}))
    result = _check(case)
    hint = runner.MANY_HINT.format(rows=19, per=runner.MANY_ROWS_PER_UNIT)
    assert result.verdict in ("fail", "error") and result.message.startswith(hint), result.message
    assert "invalid argument" in result.message and result.failing_input["rows"] == 19


def test_inputs_past_the_rehome_limit_stay_in_place(monkeypatch):
    """A far input is not copied into guards (a row stride each side, tens of GB at 2**31): not by
    the check, the diagnosis's re-run or the NaN explanation, which all re-home through guards."""
    from portcheck import guards
    monkeypatch.setattr(guards, "REHOME_LIMIT_BYTES", 1024)
    small, large = torch.randn(4, 8), torch.randn(40, 8)
    moved, groups = guards.rehome_inputs({"small": small, "large": large, "eps": 1e-5})
    assert moved["large"] is large and moved["small"] is not small and torch.equal(moved["small"], small)
    assert [g.names for g in groups] == [["small"]] and moved["eps"] == 1e-5


def test_far_rows_are_skipped_with_a_reason_where_memory_is_short(monkeypatch):
    class Target:
        is_gpu, device = True, "cuda:0"
    monkeypatch.setitem(runner.TARGETS, "fake-gpu", Target())
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (3 * 2**30, 80 * 2**30))
    why = runner.far_rows_obstacle("fake-gpu", {"dtype": "fp32", "rows": 3, "layout": "far"})
    assert why is not None and "8 GiB" in why and "3 GiB" in why


PLANTED = '''
import dataclasses

import torch
import triton
import triton.language as tl

from portcheck import cases


@triton.jit
def row_max(x_row, n_cols, BLOCK: tl.constexpr):
    # a looped softmax's three passes over one row (one compilation for every row length)
    cols = tl.arange(0, BLOCK)
    top = tl.full([BLOCK], -float("inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        top = tl.maximum(top, tl.load(x_row + start + cols, mask=start + cols < n_cols, other=-float("inf")).to(tl.float32))
    return tl.max(top, axis=0)


@triton.jit
def row_sum(x_row, n_cols, m, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    total = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=-float("inf")).to(tl.float32)
        total += tl.exp(x - m)
    return tl.sum(total, axis=0)


@triton.jit
def row_write(x_row, y_row, n_cols, m, s, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    for start in range(0, n_cols, BLOCK):
        ok = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=ok, other=-float("inf")).to(tl.float32)
        tl.store(y_row + start + cols, (tl.exp(x - m) / s).to(y_row.dtype.element_ty), mask=ok)


@triton.jit
def softmax_int32_rows_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)                 # BUG: int32, so row * x_stride wraps past 2**31
    x_row = x_ptr + row * x_stride
    y_row = y_ptr + row.to(tl.int64) * y_stride
    m = row_max(x_row, n_cols, BLOCK)
    row_write(x_row, y_row, n_cols, m, row_sum(x_row, n_cols, m, BLOCK), BLOCK)


def launch(args, outs):
    x, y = args["x"], outs["y"]
    softmax_int32_rows_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK=1024)


cases.register(dataclasses.replace(cases.get("softmax"), name="softmax_int32_rows", launch=launch,
                                   bench=(), variants=None, baselines=None))


@triton.jit
def softmax_stale_sum_kernel(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    # a persistent looped softmax: one program per SM strides over the rows
    total = 0.0   # BUG: the sum starts once per program, not once per row
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + tl.cast(row, tl.int64) * x_stride
        y_row = y_ptr + tl.cast(row, tl.int64) * y_stride
        m = row_max(x_row, n_cols, BLOCK)
        total += row_sum(x_row, n_cols, m, BLOCK)
        row_write(x_row, y_row, n_cols, m, total, BLOCK)


def stale_launch(args, outs):
    x, y = args["x"], outs["y"]
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    softmax_stale_sum_kernel[(min(x.shape[0], sms),)](x, y, x.shape[0], x.shape[1], x.stride(0), y.stride(0),
                                                     BLOCK=1024)


cases.register(dataclasses.replace(cases.get("softmax"), name="softmax_stale_sum", launch=stale_launch,
                                   bench=(), variants=None, baselines=None))


@triton.jit
def softmax_grid_y_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(1).to(tl.int64)    # the rows on the grid's second axis
    x_row, y_row = x_ptr + row * x_stride, y_ptr + row * y_stride
    m = row_max(x_row, n_cols, BLOCK)
    row_write(x_row, y_row, n_cols, m, row_sum(x_row, n_cols, m, BLOCK), BLOCK)


def grid_y_launch(args, outs):
    x, y = args["x"], outs["y"]
    # BUG: a grid's second axis takes at most 65,535 programs
    softmax_grid_y_kernel[(1, x.shape[0])](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK=1024)


cases.register(dataclasses.replace(cases.get("softmax"), name="softmax_grid_y", launch=grid_y_launch,
                                   bench=(), variants=None, baselines=None))
'''


@pytest.mark.skipif(INTERPRETED or not torch.cuda.is_available(), reason="the far rows run on GPUs")
def test_planted_row_bugs_fail_on_the_inputs_the_search_does_not_draw(tmp_path):
    """Through `portcheck run`: int32 row offsets fail on the far rows; a persistent kernel whose
    sum carries over from row to row, on the many rows (the search's 64 rows at most leave each
    of the H200's 132 programs one row); the real softmax passes both."""
    (tmp_path / "planted_int32.py").write_text(textwrap.dedent(PLANTED))
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "portcheck", "run", "--target", "cuda", "--cases", "planted_int32",
                           "--kernel", "softmax_int32_rows,softmax_stale_sum,softmax_grid_y,softmax", "--dtype", "bf16",
                           "--profile", "ci",
                           "--no-time", "--out", str(out)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    records = {r["case"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    planted, real = records["softmax_int32_rows"], records["softmax"]
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert planted["verdict"] in ("fail", "error") and planted["message"].startswith(runner.FAR_HINT), planted
    assert planted["failing_input"]["layout"] == "far" and planted["failing_input"]["rows"] >= 3
    assert real["verdict"] == "pass" and real["message"] == "", real    # int64 rows: the far example passed
    stale = records["softmax_stale_sum"]
    assert stale["verdict"] == "fail" and stale["message"].startswith("more rows than the search draws ("), stale
    assert stale["failing_input"]["rows"] == max(runner.MANY_ROWS_AT_LEAST, runner.MANY_ROWS_PER_UNIT
                                                 * torch.cuda.get_device_properties(0).multi_processor_count + 3)
    grid_y = records["softmax_grid_y"]   # a launch error, or rows left unwritten: either fails the case
    assert grid_y["verdict"] in ("fail", "error") and grid_y["message"].startswith("more rows than the search draws ("), grid_y
    assert grid_y["failing_input"]["rows"] == runner.MANY_ROWS_AT_LEAST
