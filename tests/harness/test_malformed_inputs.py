"""Malformed user documents (matrix, overrides, replay and bench specs) and flags: each is exit 2
with one line naming what is wrong, no traceback, nothing written (issue 18, defects 5-8, 12, 14).
The commands run in-process through portcheck.cli.main; the property-based tests generate the
documents with hypothesis."""
import datetime as dt
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from portcheck import cli
from portcheck.targets.runtime import TARGETS

FAST = settings(max_examples=15, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.nested_given])   # the replay check draws one example


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v == math.inf else ("-inf" if v == -math.inf else repr(v)))
    if isinstance(v, (int, dt.date)):
        return v.isoformat() if isinstance(v, dt.date) else str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(map(_toml_value, v)) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(v)


def _toml(tables: list[tuple[str, dict]]) -> str:
    return "".join(f"{head}\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in body.items()) + "\n"
                   for head, body in tables)


def refused(argv, capsys, out=None) -> str:
    """Run the command; it must exit 2 with one line on stderr, no traceback, nothing at `out`."""
    capsys.readouterr()
    code = cli.main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("portcheck: error: "), err
    assert "Traceback" not in err
    if out is not None:
        assert not out.exists(), f"{out} was written"
    return lines[0]


RUN_BASE = {"targets": ["interpreter"], "kernels": ["softmax"], "profile": "ci", "timeout": 60.0,
            "max_elements": {"interpreter": 4096}}
# (key, value) pairs none of which is a valid [run] entry
BAD_RUN = [("kernels", [1, 2]), ("kernels", "softmax"), ("kernels", [""]), ("targets", ["gpu"]),
           ("targets", [True]), ("profile", "fast"), ("profile", 1), ("timeout", math.nan),
           ("timeout", math.inf), ("timeout", 0), ("timeout", "10"), ("timeout", True),
           ("max_elements", {"interpreter": True}), ("max_elements", {"interpreter": 0}),
           ("max_elements", {"gpu": 1.5}), ("max_elements", {"cpu": 1}), ("max_elements", 5),
           ("overrides", "/etc"), ("overrides", 5), ("overrides", "missing.toml"), ("time", "yes"),
           ("dtypes", [7]), ("bench_noise", math.nan), ("compile_timeout", math.nan),
           ("shrink_time", math.nan), ("shrink_time", -1), ("shrink_time", "60"), ("shrink_time", True)]
KNOWN_RUN_KEYS = {"targets", "kernels", "dtypes", "profile", "max_elements", "overrides", "time", "timeout",
                  "shrink_time",
                  "case_modules", "bench_noise", "compile_timeout"}   # the last two: the test's own [bench] / [compile]


@FAST
@given(st.lists(st.sampled_from(BAD_RUN) | st.tuples(
    st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12).filter(lambda k: k not in KNOWN_RUN_KEYS),
    st.integers(0, 3)), min_size=1, max_size=3, unique_by=lambda kv: kv[0]))
def test_generated_malformed_matrices_are_refused(tmp_path_factory, capsys, mutations):
    d = tmp_path_factory.mktemp("matrix")
    run = {**RUN_BASE, **dict(mutations)}
    tables = [("[bench]", {"noise_bound": run.pop("bench_noise")})] if "bench_noise" in run else []
    tables += [("[compile]", {"timeout": run.pop("compile_timeout")})] if "compile_timeout" in run else []
    (d / "m.toml").write_text(_toml([("[run]", run), *tables]))
    refused(["run", "--matrix", d / "m.toml", "--out", d / "out"], capsys, d / "out")


OVERRIDE_BASE = {"case": "softmax", "action": "tolerance", "reason": "a stated cause", "link": "",
                 "expires": dt.date(2099, 1, 1), "factor": 2.0}
BAD_OVERRIDE = [("factor", math.nan), ("factor", math.inf), ("factor", "big"), ("factor", True), ("factor", 1.0),
                ("expires", dt.datetime(2030, 1, 1)), ("expires", "2030-01-01"), ("expires", dt.date(2001, 1, 1)),
                ("case", 5), ("target", ["cuda"]), ("reason", ""), ("reason", 7), ("action", "ignore"),
                ("action", 5), ("link", 3), ("dtype", [1]), ("bogus", 1)]


@FAST
@given(st.lists(st.sampled_from(BAD_OVERRIDE), min_size=1, max_size=3, unique_by=lambda kv: kv[0]),
       st.sampled_from(["[[override]]", "[[overide]]"]), st.sampled_from([None, "case", "reason", "expires"]))
def test_generated_malformed_overrides_are_refused(tmp_path_factory, capsys, mutations, table, dropped):
    d = tmp_path_factory.mktemp("overrides")
    entry = {k: v for k, v in {**OVERRIDE_BASE, **dict(mutations)}.items() if k != dropped}
    (d / "o.toml").write_text(_toml([(table, entry)]))
    (d / "m.toml").write_text(_toml([("[run]", {**RUN_BASE, "overrides": "o.toml"})]))
    line = refused(["run", "--matrix", d / "m.toml", "--out", d / "out"], capsys, d / "out")
    assert "o.toml" in line   # the error names the file


@pytest.fixture(scope="module")
def softmax_spec():
    from portcheck import cases
    from hypothesis import find
    return find(cases.get("softmax").inputs("fp32", 4096), lambda _: True, settings=settings(database=None))


@FAST
@given(st.data())
def test_generated_replay_specs_outside_the_domain_are_refused(tmp_path_factory, capsys, softmax_spec, data):
    spec = dict(softmax_spec)
    kind = data.draw(st.sampled_from(["drop", "add", "retype", "huge", "dtype"]))
    key = data.draw(st.sampled_from(sorted(k for k in spec if k != "dtype")))
    if kind == "drop":
        del spec[key]
    elif kind == "add":
        spec[data.draw(st.text("abcdefghij", min_size=1).filter(lambda k: k not in spec))] = 1
    elif kind == "retype":
        spec[key] = [spec[key]] if data.draw(st.booleans()) else ("1" if isinstance(spec[key], int) else 1)
    elif kind == "huge":
        spec["rows"] = 10**9
    else:
        spec["dtype"] = data.draw(st.sampled_from(["int8", "fp99", "fp8e4nv"]))
    out = tmp_path_factory.mktemp("replay") / "out"
    refused(["run", "--target", "interpreter", "--kernel", "softmax", "--profile", "ci",
             "--replay", json.dumps(spec), "--out", out], capsys, out)


def test_replay_with_wrong_keys_is_a_usage_error_not_a_kernel_error(tmp_path, capsys):
    """Defect 5: a bad replay spec stops before anything runs, naming what differs."""
    out = tmp_path / "out"
    line = refused(["run", "--target", "interpreter", "--kernel", "softmax", "--replay",
                    '{"dtype": "fp32", "rows": 2}', "--out", out], capsys, out)
    assert "missing" in line and "seed" in line
    line = refused(["run", "--target", "interpreter", "--kernel", "softmax", "--replay",
                    '{"dtype": "fp32", "rows": 1000000000, "cols": 4, "regime": "normal", '
                    '"layout": "contiguous", "seed": 1}', "--out", out], capsys, out)
    assert "rows" in line and "budget" in line


@pytest.mark.parametrize("argv", [
    ["run", "--target", "interpreter", "--timeout", "nan"],
    ["run", "--target", "interpreter", "--kernel", ","],
    ["compile", "--arch", ""],
    ["bench", "--model-only", "--noise-bound", "nan"],
    ["bench", "--model-only", "--time-limit", "0"],
    ["bench", "--model-only", "--kernel", "softmax", "--spec", '{"dtype": "fp32", "bogus": 1}'],
    ["bench", "--model-only", "--kernel", "softmax", "--spec", '{"dtype": "fp32", "rows": "many"}'],
], ids=["timeout-nan", "kernel-comma", "arch-empty", "noise-bound-nan", "time-limit-0", "spec-unknown-key",
        "spec-wrong-type"])
def test_flags_that_would_disable_a_check_are_refused(tmp_path, capsys, argv):
    """Defects 6 and 14: NaN, an empty list and a bad --spec are usage errors, and no output
    directory is left behind."""
    out = tmp_path / "out"
    refused([*argv, "--out", out], capsys, out)


@pytest.mark.parametrize("command", ["run", "math"])
def test_an_absent_gpu_target_is_a_usage_error(tmp_path, capsys, command):
    """Defect 12: no GPU here means exit 2 and nothing written, not an empty report."""
    if TARGETS["cuda"].availability().ok:
        pytest.skip("this machine has a CUDA GPU")
    out = tmp_path / "out"
    line = refused([command, "--target", "cuda", "--out", out], capsys, out)
    assert "not available" in line


# (where, key, value): each makes the committed compile baseline malformed
BAD_BASELINE = [("top", "bogus", 1), ("top", "records", {}), ("item", "line", math.nan), ("item", "line", -1),
                ("item", "line", "9"), ("item", "line", True), ("item", "source", 5), ("item", "extra", 1),
                ("item", "record", []), ("record", "verdict", "great"), ("record", "bogus", 1),
                ("record", "kind", 5)]


@FAST
@given(st.lists(st.sampled_from(BAD_BASELINE), min_size=1, max_size=3, unique_by=lambda m: m[:2]),
       st.integers(0, 2))
def test_generated_malformed_baselines_are_refused(tmp_path_factory, capsys, mutations, index):
    """A baseline is a user document too: typed envelope and records, NaN and unknown keys refused,
    the file and the record named; the gate then exits 2, never 1 (a regression) or 0."""
    from pathlib import Path
    d = tmp_path_factory.mktemp("baseline")
    doc = json.loads((Path(__file__).resolve().parents[2] / "matrices/baselines/compile.json").read_text())
    doc["records"] = doc["records"][:3]
    results = d / "results.jsonl"   # the run judged: the baseline's own first records, untouched
    results.write_text("".join(json.dumps(item["record"]) + "\n" for item in doc["records"]))
    for where, key, value in sorted(mutations, key=lambda m: m[0] == "top"):   # the envelope last
        record = doc["records"][index]
        target = {"top": doc, "item": record, "record": record["record"]}[where]
        if isinstance(target, dict):
            target[key] = value
    (d / "b.json").write_text(json.dumps(doc))   # NaN written as the bare NaN Python's json reads back
    line = refused(["gate", "--baseline", d / "b.json", results, "--quiet"], capsys)
    assert "b.json" in line
