"""A passing search ends with one input per tensor argument laid out with a strided last
dimension (runner.strided_columns): a launcher may refuse it; one that hands the kernel the
stride must not get it wrong; one that assumes contiguous tensors is told. The search's own
layouts vary the row stride only (tests/support/strided_inputs.py)."""
import json

import hypothesis
import pytest

from portcheck import runner
from portcheck.errors import UsageError
from portcheck.targets.runtime import INTERPRETER_ARCH

EXAMPLES = 4
LONG = 1   # the interpreter's long-row input (runner.LONG_ROW), which these cases take


def _case(name):
    # imported here, not at collection: registered then, its cases would join every test that
    # walks the registry (tests/kernels)
    from tests.support import strided_inputs
    return getattr(strided_inputs, name)


def _check(case, spec=None):
    search = hypothesis.settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                                 phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
                                 suppress_health_check=list(hypothesis.HealthCheck))
    return runner.check(case, "interpreter", INTERPRETER_ARCH, "fp32", settings=search, max_elements=2048,
                        spec=spec)


@pytest.mark.parametrize("name, ran", [("STRIDES_USED", 2), ("REFUSES_BOTH", 0)])
def test_a_launcher_that_uses_the_strides_or_refuses_them_passes(name, ran):
    r = _check(_case(name))
    assert r.verdict == "pass", r.message
    assert r.examples == EXAMPLES + LONG + ran   # each strided input that ran counts as an example; a refusal does not


def test_a_launcher_that_assumes_contiguous_tensors_passes_and_is_told():
    r = _check(_case("ASSUMES_CONTIGUOUS"))
    assert r.verdict == "pass" and r.examples == EXAMPLES + LONG + 2, r.message
    for name in ("x", "w"):
        assert f"{runner.columns_hint(name)}read as if contiguous, by a launcher that neither copies nor " \
               "refuses it" in r.message


@pytest.mark.parametrize("case, name", [("X_STRIDE_DROPPED", "x"), ("W_UNCHECKED", "w")],
                         ids=["stride-dropped", "second-tensor-unchecked"])
def test_a_launcher_that_takes_a_strided_input_and_gets_it_wrong_fails_on_it(case, name):
    case = _case(case)
    r = _check(case)
    assert r.verdict == "fail" and r.failing_input[runner.COLUMNS_KEY] == name, r.message
    assert r.message.startswith(runner.columns_hint(name)), r.message
    assert r.diagnosis[0]["cause"].startswith(f"{name}'s strided last dimension read as if contiguous")
    again = _check(case, spec=r.failing_input)   # the replay lays it out the same way
    assert again.verdict == "fail" and again.message == r.message


def test_the_printed_replay_runs_from_the_command_line(tmp_path):
    from tests.support.replays import argv_of, run_replay
    r = _check(_case("X_STRIDE_DROPPED"))
    argv = argv_of(r.reproduce)
    assert json.loads(argv[argv.index("--replay") + 1])[runner.COLUMNS_KEY] == "x"
    assert argv[argv.index("--cases") + 1] == "tests.support.strided_inputs"
    proc, record = run_replay(r.reproduce, tmp_path / "replay")
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (record["verdict"], record["failing_input"]) == ("fail", r.failing_input)


def test_replays_take_the_keys_the_harness_adds_and_check_their_values():
    own = {"rows", "cols", "seed"}
    spec = {"rows": 2, "cols": 3, "seed": 1, "autotune": 1, "config": 0, runner.COLUMNS_KEY: "x"}
    assert runner.harness_keys(spec, own, "--replay") == {"rows": 2, "cols": 3, "seed": 1}
    assert runner.harness_keys({"config": 5, "seed": 1}, {"config", "seed"}, "--replay") == {"config": 5, "seed": 1}
    for bad in ({"autotune": -1}, {"config": "0"}, {runner.COLUMNS_KEY: 2}):
        with pytest.raises(UsageError, match="--replay: '"):
            runner.harness_keys({**bad, "seed": 1}, {"seed"}, "--replay")


def test_only_tensors_of_their_own_storage_are_laid_out_so():
    import torch
    base = torch.arange(12.0).reshape(3, 4)
    args = {"x": base.clone(), "v1": base[0], "v2": base[1], "one": torch.ones(3, 1), "n": 3,
            "scale": torch.tensor(2.0), "io": torch.ones(2, 2)}
    assert runner.stridable(args, in_place=("io",)) == ["x"]
    laid = runner.strided_columns(args, "x")
    assert laid["x"].stride() == (8, 2) and torch.equal(laid["x"], args["x"])
    with pytest.raises(ValueError, match="these can: x"):
        runner.strided_columns(args, "v1")


def test_a_replay_naming_a_tensor_the_case_cannot_stride_is_a_usage_error(tmp_path, capsys):
    from portcheck import cli
    spec = {"cols": 5, "dtype": "fp32", "layout": "contiguous", "regime": "normal", "rows": 2, "seed": 1,
            runner.COLUMNS_KEY: "nope"}
    status = cli.main(["run", "--target", "interpreter", "--kernel", "softmax", "--dtype", "fp32",
                       "--replay", json.dumps(spec), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert status == 2 and "'strided_input' must name one of the tensors whose last dimension it can stride (x), " \
                           "got 'nope'" in err, err
    assert not (tmp_path / "o" / "results.jsonl").exists()
