"""Where a check's time goes (each runtime record's `phases`), and a shrink that stops at the time
limit: a failure is reported as a failure, with its smallest input so far and its replay, never
turned into a time-out by the search for a smaller one. Run on the session's target."""
import dataclasses
import io
import time

import hypothesis
import torch
from hypothesis import strategies as st

from portcheck import Case, Cost
from portcheck.reports.failure import failure_lines
from portcheck.reports.progress import Progress, duration
from portcheck.results import PHASES, phase_totals
from portcheck.runner import check
from portcheck.tolerance import Tolerance, rounding

SLOW_S = 0.2   # each launch of the slow case
SEARCH = hypothesis.settings(max_examples=50, derandomize=True, deadline=None, database=None,
                             suppress_health_check=list(hypothesis.HealthCheck))


def _case(name: str, launch) -> Case:
    """An unregistered copy case (x -> y) whose launch is `launch`."""
    return Case(name=name, family="phases", dtypes=("fp32",),
                inputs=lambda dtype, budget: st.fixed_dictionaries(
                    {"dtype": st.just(dtype), "n": st.integers(1, 4096), "seed": st.integers(0, 1000)}),
                make=lambda spec, device: {"x": torch.randn(spec["n"], generator=torch.Generator().manual_seed(
                    spec["seed"])).to(device)},
                outputs=lambda args: {"y": (tuple(args["x"].shape), args["x"].dtype)},
                launch=launch, oracle=lambda args: {"y": args["x"]},
                tolerance=lambda args, refs, dtype: {"y": rounding(dtype)}, cost=lambda args: Cost(0))


def _copy(args, outs):
    outs["y"].copy_(args["x"])


def _slow_and_wrong(args, outs):
    time.sleep(SLOW_S)
    outs["y"].copy_(args["x"] + 1)


def _check(session, case, **kwargs):
    return check(case, session.target.name, session.arch, "fp32", settings=SEARCH,
                 max_elements=session.max_elements, seed=0, **kwargs)


def test_a_passing_record_states_the_seconds_of_each_phase(portcheck_session):
    result = _check(portcheck_session, _case("phases_copy", _copy))
    assert result.verdict == "pass", result.message
    assert {"inputs", "compile", "launches", "oracle", "compare"} <= set(result.phases) <= set(PHASES)
    assert "shrink" not in result.phases and "diagnosis" not in result.phases
    assert all(seconds >= 0 for seconds in result.phases.values())


def test_a_failure_whose_every_example_is_slow_stops_shrinking_at_the_deadline(portcheck_session):
    one_example = 2 * SLOW_S + 0.5   # two launches, and the rest of an example, generously
    start = time.monotonic()
    result = _check(portcheck_session, _case("phases_slow_failure", _slow_and_wrong), deadline=start + 2.0)
    searched = time.monotonic() - start - result.phases.get("diagnosis", 0.0)
    assert result.verdict == "fail", result.message
    assert f"shrinking stopped at the time limit after {result.examples} examples" in result.message
    assert result.failing_input is not None and result.failing_input["dtype"] == "fp32"
    assert "--replay" in result.reproduce
    assert searched <= 2.0 + one_example, (searched, result.phases)
    assert result.phases["shrink"] > 0 and result.examples >= 2


def test_a_failure_stops_shrinking_once_its_shrink_time_is_spent(portcheck_session):
    one_example = 2 * SLOW_S + 0.5
    start = time.monotonic()
    result = _check(portcheck_session, _case("phases_slow_shrink", _slow_and_wrong), shrink_time=1.0,
                    deadline=start + 600)   # a case limit far off: the shrink budget stops it
    shrunk = result.phases["shrink"]
    assert result.verdict == "fail" and "shrinking stopped at the time limit" in result.message, result.message
    assert 1.0 <= shrunk <= 1.0 + one_example, result.phases
    assert "--replay" in result.reproduce and result.failing_input is not None


def test_without_a_deadline_the_failure_shrinks_to_its_minimal_input(portcheck_session):
    fast_and_wrong = _case("phases_fast_failure", lambda args, outs: outs["y"].copy_(args["x"] + 1))
    result = _check(portcheck_session, fast_and_wrong, deadline=time.monotonic() + 600)
    assert result.verdict == "fail" and "shrinking stopped" not in result.message, result.message
    assert result.failing_input == {"dtype": "fp32", "n": 1, "seed": 0}
    assert result.first_failure is None   # the first input drawn failed: nothing shrank


def test_the_recorded_tolerance_is_the_one_of_the_failing_input_reported(portcheck_session):
    def per_length(args, refs, dtype):   # a formula that names the input it was made for
        return {"y": Tolerance(atol=1e-6, rtol=1e-6, formula=f"n={args['x'].numel()}")}

    def second_wrong(args, outs):   # right at n = 1, the first input drawn; shrinks to n = 2
        outs["y"].copy_(args["x"])
        outs["y"][1:2] += 1

    wrong = dataclasses.replace(_case("phases_tol_failure", second_wrong), tolerance=per_length)
    result = _check(portcheck_session, wrong, deadline=time.monotonic() + 600)
    assert result.verdict == "fail" and result.failing_input["n"] == 2, result.failing_input
    assert result.tolerance["y"]["formula"] == "n=2"   # not the first failing input's, before shrinking
    # that first failing input is kept with its message, and printed
    first = result.first_failure
    assert first is not None and first["input"]["n"] > 2, first
    assert first["message"].startswith("y: 1 of ") and "at [1] got" in first["message"]
    lines = failure_lines(result)
    assert lines[-2] == f"replay: {result.reproduce}" and lines[-1].startswith("first failing input: {")


def test_the_run_totals_sum_each_phase_over_the_records_in_a_fixed_order():
    records = [{"phases": {"launches": 1.0, "inputs": 0.5}}, {"phases": {"shrink": 2.0, "launches": 0.25}},
               {"kind": "compile"}]
    assert list(phase_totals(records).items()) == [("inputs", 0.5), ("launches", 1.25), ("shrink", 2.0)]


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_progress_line_gives_the_cases_done_and_the_time_left():
    log = io.StringIO()
    with Progress("interpreter: cases", 4, stream=log, done=1, eta=True) as bar:
        bar._started -= 10.0   # one case done here in 10 s: 2 left take 20 s
        bar.advance()
        bar._started -= 20.0   # 3 cases here in 30 s
        bar.advance(2)
    assert log.getvalue() == ("interpreter: cases: 50% (2/4), about 20 s left\n"
                              "interpreter: cases: 100% (4/4) in 30 s\n")
    terminal = _Terminal()
    bar = Progress("interpreter: cases", 4, stream=terminal, eta=True)
    bar.advance(0)
    bar.clear()
    bar.advance()
    assert terminal.getvalue().startswith("\rinterpreter: cases [" + "-" * 24 + "] 0/4\x1b[K\r\x1b[K\r")
    assert "] 1/4, about " in terminal.getvalue()


def test_durations_read_as_seconds_minutes_and_hours():
    assert [duration(s) for s in (0.4, 59, 65, 3725)] == ["0 s", "59 s", "1 min 05 s", "1 h 02 min"]


def test_shrinking_ends_once_no_smaller_failing_input_turns_up(portcheck_session, monkeypatch):
    """runner.SHRINK_STALL examples in a row with no failing input smaller by its sizes end the
    search quietly; what it reports is the smallest failing input it ran, not the last."""
    from portcheck import runner
    stall = 10   # at 5, this search stops at n = 66: hypothesis takes a few tries between its steps
    monkeypatch.setattr(runner, "SHRINK_STALL", stall)
    ran = []
    evaluate = runner.evaluate
    monkeypatch.setattr(runner, "evaluate", lambda case, target, spec, *a, **k: (
        ran.append(dict(spec)), evaluate(case, target, spec, *a, **k))[1])
    wrong_past_one = _case("phases_stall", lambda args, outs: outs["y"].copy_(args["x"] + (args["x"].numel() > 1)))
    result = _check(portcheck_session, wrong_past_one, deadline=time.monotonic() + 600)
    assert result.verdict == "fail" and "shrinking stopped" not in result.message, result.message
    assert result.failing_input["n"] == 2                    # the smallest failing size: n = 1 passes
    first_two = next(i for i, spec in enumerate(ran) if spec["n"] == 2)
    assert result.examples <= first_two + 1 + stall, (result.examples, first_two)
