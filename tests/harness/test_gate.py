"""portcheck gate and portcheck baseline update: every regression kind is caught on the vendor it
happens on, and none is raised on an unchanged run."""
import copy
import json

import pytest

from portcheck import cli
from tests.support.report_records import bench_rec, compile_rec, runtime, two_vendors_and_compile, write


def run_cli(capsys, *args):
    code = cli.main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def results():
    """Runtime on both vendors, compile on both vendors' archs, a benchmark on each vendor."""
    recs = [r for rs in two_vendors_and_compile().values() for r in rs]
    recs = [r for r in recs if not (r["kind"] == "runtime" and r["verdict"] == "fail")]
    recs.append(runtime("softmax", "fp16", "rocm", "gfx942", ratio=0.4))
    recs.append(bench_rec("softmax", "fp16", "rocm", "gfx942", 0.15, fraction=0.7))
    return recs


def find(recs, kind, arch, case="softmax", dtype="fp16"):
    (r,) = [r for r in recs if (r["kind"], r["arch"], r["case"], r["dtype"]) == (kind, arch, case, dtype)
            and r["evidence"] != "model"]
    return r


@pytest.fixture
def baseline(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "base" / "results.jsonl", results())
    code, out, _ = run_cli(capsys, "baseline", "update", "--name", "ci", "--quiet", tmp_path / "base")
    assert code == 0 and "wrote matrices/baselines/ci.json" in out
    return tmp_path / "matrices" / "baselines" / "ci.json"


def gate(capsys, baseline, recs, tmp_path, *extra):
    write(tmp_path / "new" / "results.jsonl", recs)
    return run_cli(capsys, "gate", "--baseline", baseline, tmp_path / "new", "--quiet", *extra)


def set_metric(name, value):
    return lambda r: r["metrics"].update({name: value})


def fail(r):
    r.update(verdict="fail", message="y: 7 of 64 elements out of tolerance")


def slower(ms, iqr=0.001):
    return lambda r: r["bench"]["kernel"].update(median_ms=ms, iqr_ms=iqr, rel_spread=iqr / ms)


# (name, kind, arch, vendor, change, check): each must be caught as `check` on `vendor`
REGRESSIONS = [
    ("runtime pass -> fail, AMD", "runtime", "gfx942", "amd", fail, "fail"),
    ("runtime pass -> fail, NVIDIA", "runtime", "sm_90a", "nvidia", fail, "fail"),
    ("runtime pass -> error", "runtime", "gfx942", "amd", lambda r: r.update(verdict="error", message="RuntimeError: HIP"), "fail"),
    ("worst error grew past the factor", "runtime", "sm_90a", "nvidia", set_metric("worst_ratio", 0.95), "error-growth"),
    ("compile now fails on an arch", "compile", "gfx1100", "amd", fail, "fail"),
    ("new spills", "compile", "gfx1100", "amd", set_metric("spills", 12), "spills"),
    ("LDS over the cap", "compile", "gfx942", "amd", set_metric("shared", 70000), "shared-cap"),
    ("lower occupancy", "compile", "sm_80", "nvidia", set_metric("occupancy", 4), "occupancy"),
    ("slowdown beyond threshold and noise", "bench", "sm_90a", "nvidia", slower(0.15), "slowdown"),
    ("slowdown on AMD", "bench", "gfx942", "amd", slower(0.2), "slowdown"),
    ("LDS over the cap fails its lint", "compile", "gfx950", "amd",
     lambda r: (r["metrics"].update(shared=200000), fail(r)), "shared-cap"),
    ("compile skipped: toolchain missing", "compile", "sm_120", "nvidia",
     lambda r: r.update(verdict="skip", message="ptxas not found"), "fail"),
]

# changes that must NOT be raised as regressions
HARMLESS = [
    ("worst error grew within the factor", "runtime", "sm_90a", set_metric("worst_ratio", 0.55)),
    ("tiny error grew under the floor", "runtime", "gfx942", set_metric("worst_ratio", 0.0)),
    ("shared grew but stays under the cap", "compile", "sm_90a", set_metric("shared", 70000)),
    ("slowdown inside the measured noise", "bench", "sm_90a", slower(0.15, iqr=0.05)),
    ("slowdown under the threshold", "bench", "sm_90a", slower(0.125)),
    ("regs grew, no spill", "compile", "gfx942", set_metric("regs", 64)),
]


def test_unchanged_run_passes(baseline, tmp_path, capsys):
    code, out, _ = gate(capsys, baseline, results(), tmp_path)
    assert code == 0, out
    assert out.startswith("## portcheck gate: PASS: no regressions")
    assert "0 improvement(s), 0 new result(s)" in out


@pytest.mark.parametrize("name,kind,arch,vendor,change,check", REGRESSIONS, ids=[r[0] for r in REGRESSIONS])
def test_each_regression_is_caught(name, kind, arch, vendor, change, check, baseline, tmp_path, capsys):
    recs = results()
    change(find(recs, kind, arch))
    code, out, _ = gate(capsys, baseline, recs, tmp_path)
    assert code == 1, out
    assert f"## portcheck gate: FAIL: 1 regression(s) ({vendor} 1)" in out
    regressions = out.split("### Regressions")[1].split("###")[0]
    row = [line for line in regressions.splitlines() if line.startswith(f"| {vendor}")]
    assert len(row) == 1 and f"| {check} " in row[0] and arch in row[0], out


@pytest.mark.parametrize("name,kind,arch,vendor,change,check", REGRESSIONS, ids=[r[0] for r in REGRESSIONS])
def test_each_reverse_change_is_an_improvement(name, kind, arch, vendor, change, check, tmp_path, capsys, monkeypatch):
    """The regressed results as a baseline, the good ones as the change: improvements, exit 0."""
    monkeypatch.chdir(tmp_path)
    bad = results()
    change(find(bad, kind, arch))
    write(tmp_path / "bad" / "results.jsonl", bad)
    assert run_cli(capsys, "baseline", "update", "--name", "old", "--quiet", tmp_path / "bad")[0] == 0
    code, out, _ = gate(capsys, tmp_path / "matrices/baselines/old.json", results(), tmp_path)
    assert code == 0, out
    assert "### Improvements (1)" in out and f"| {check} " in out


@pytest.mark.parametrize("name,kind,arch,change", HARMLESS, ids=[h[0] for h in HARMLESS])
def test_harmless_changes_pass(name, kind, arch, change, baseline, tmp_path, capsys):
    recs = results()
    change(find(recs, kind, arch))
    code, out, _ = gate(capsys, baseline, recs, tmp_path)
    assert code == 0, out
    assert "### Regressions" not in out


def test_missing_and_new_failing_results(baseline, tmp_path, capsys):
    recs = [r for r in results() if not (r["kind"] == "compile" and r["arch"] == "gfx950" and r["case"] == "layernorm"
                                         and r["dtype"] == "fp32")]
    recs.append(runtime("new_kernel", "fp16", "rocm", "gfx942", "fail", 9.0, message="wrong"))
    recs.append(runtime("another_kernel", "fp16", "cuda", "sm_90a"))
    code, out, _ = gate(capsys, baseline, recs, tmp_path)
    assert code == 1
    assert "FAIL: 2 regression(s) (amd 2)" in out
    assert "| missing " in out and "| new-failure " in out
    assert "2 new result(s)" in out and "New results not in the baseline" in out


def test_scopes_the_results_do_not_cover_are_listed_not_failed(baseline, tmp_path, capsys):
    nvidia_only = [r for r in results() if r["kind"] == "runtime" and r["arch"] == "sm_90a"]
    code, out, _ = gate(capsys, baseline, nvidia_only, tmp_path)
    assert code == 0, out
    assert "### Not compared" in out and "runtime on rocm/gfx942: 2 result(s)" in out


def test_noise_is_read_from_either_run(baseline, tmp_path, capsys):
    """A noisy *new* measurement does not fail a change either (the larger IQR counts)."""
    recs = results()
    slower(0.15, iqr=0.04)(find(recs, "bench", "sm_90a"))
    assert gate(capsys, baseline, recs, tmp_path)[0] == 0


def test_thresholds_are_flags(baseline, tmp_path, capsys):
    recs = results()
    set_metric("worst_ratio", 0.55)(find(recs, "runtime", "sm_90a"))
    code, out, _ = gate(capsys, baseline, recs, tmp_path, "--error-factor", "1.5")
    assert code == 1 and "error-growth" in out and "x1.5" in out
    for flag, value in (("--error-factor", "0.5"), ("--error-factor", "nan"), ("--error-factor", "inf"),
                        ("--slowdown", "nan"), ("--slowdown", "inf"), ("--error-floor", "nan")):
        code, _, err = gate(capsys, baseline, recs, tmp_path, flag, value)
        assert code == 2 and f"{flag} must be" in err, (flag, value)


def test_summary_file_and_escaping(baseline, tmp_path, capsys):
    recs = results()
    r = find(recs, "runtime", "gfx942")
    fail(r)
    r["message"] = "<script>alert(1)</script> | broken"
    code, out, _ = gate(capsys, baseline, recs, tmp_path, "--summary", tmp_path / "summary.md")
    assert code == 1
    assert (tmp_path / "summary.md").read_text() == out
    assert "<script" not in out and "&lt;script&gt;" in out


def test_gate_never_writes_the_baseline(baseline, tmp_path, capsys):
    before = baseline.read_bytes()
    recs = results()
    fail(find(recs, "runtime", "gfx942"))
    gate(capsys, baseline, recs, tmp_path)
    assert baseline.read_bytes() == before
    assert sorted(p.name for p in baseline.parent.iterdir()) == ["ci.json"]


def test_baseline_file_is_reviewable(baseline):
    text = baseline.read_text()
    doc = json.loads(text)
    assert doc["schema"] == "portcheck.baseline/1" and doc["name"] == "ci"
    assert doc["cases"] == ["layernorm", "softmax"]
    assert len(doc["records"]) == len([r for r in results() if r["evidence"] != "model" and r["case"] != "ceilings"])
    assert all("digests" not in item["record"] for item in doc["records"])
    assert text.count("\n") > len(doc["records"])    # one record per line: diffs read line by line


def test_different_case_set_is_a_usage_error(baseline, tmp_path, capsys):
    other = [runtime("matmul", "fp16", "cuda", "sm_90a"), compile_rec("matmul", "fp16", "gfx942")]
    code, _, err = gate(capsys, baseline, other, tmp_path)
    assert code == 2
    assert "is for a different case set" in err and "matmul" in err and "baseline update" in err


@pytest.mark.parametrize("content,words", [
    ('{\n "schema": "portcheck.baseline/1",\n "records": [', ["not JSON", "truncated"]),
    ('{\n "schema": "portcheck.baseline/9", "records": []\n}', ["schema version 'portcheck.baseline/9'"]),
    ('{\n "schema": "portcheck.baseline/1", "records": []\n}', ["holds no result records"]),
    ("[1, 2, 3]\n", ["line 1"]),
])
def test_bad_baseline(content, words, baseline, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    code, _, err = gate(capsys, bad, results(), tmp_path)
    assert code == 2, err
    for w in words:
        assert w in err


def test_baseline_update_needs_a_name_and_good_input(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "r.jsonl", results())
    code, _, err = run_cli(capsys, "baseline", "update", tmp_path / "r.jsonl")
    assert code == 2 and "--name" in err
    code, _, err = run_cli(capsys, "baseline", "update", "--name", "../escape", tmp_path / "r.jsonl")
    assert code == 2 and "baseline name" in err
    code, _, err = run_cli(capsys, "baseline")
    assert code == 2 and "baseline update" in err
    (tmp_path / "cut.jsonl").write_text(json.dumps(results()[0])[:50])
    code, _, err = run_cli(capsys, "baseline", "update", "--name", "x", tmp_path / "cut.jsonl")
    assert code == 2 and "cut off" in err
    assert not (tmp_path / "matrices" / "baselines" / "x.json").exists()


def test_a_gate_against_a_matrix_json(tmp_path, capsys, monkeypatch):
    """A report's matrix.json is a baseline too (e.g. the last main-branch report)."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "base" / "results.jsonl", results())
    assert run_cli(capsys, "report", tmp_path / "base", "--out", tmp_path / "rep", "--quiet")[0] == 0
    recs = copy.deepcopy(results())
    set_metric("spills", 3)(find(recs, "compile", "gfx90a"))
    code, out, _ = gate(capsys, tmp_path / "rep" / "matrix.json", recs, tmp_path)
    assert code == 1 and "| spills " in out


def test_unwritable_outputs_are_usage_errors(baseline, tmp_path, capsys):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a directory")
    code, _, err = gate(capsys, baseline, results(), tmp_path, "--summary", blocker / "sub" / "summary.md")
    assert code == 2 and "cannot create output directory" in err
    code, _, err = run_cli(capsys, "baseline", "update", "--name", "x", "--dir", blocker / "sub", tmp_path / "new")
    assert code == 2 and "cannot create output directory" in err


def test_runs_on_other_inputs_are_noted(baseline, tmp_path, capsys):
    recs = results()
    for r in recs:
        if r["kind"] == "runtime":
            r["provenance"]["seed"] = 99
    code, out, _ = gate(capsys, baseline, recs, tmp_path)
    assert code == 0 and "checked on other inputs than the baseline's" in out and "seed 99" in out


def test_a_baseline_keeps_the_profile_so_the_same_run_is_not_noted(tmp_path, capsys, monkeypatch):
    """A baseline slimmed the profile away: a gate against the very run it came from said the
    inputs differed ("baseline profile ? seed 0, now profile ci seed 0")."""
    monkeypatch.chdir(tmp_path)
    recs = results()
    for r in recs:
        r["provenance"]["profile"] = "ci"
    write(tmp_path / "base" / "results.jsonl", recs)
    code, _, _ = run_cli(capsys, "baseline", "update", "--name", "p", "--quiet", tmp_path / "base")
    base = tmp_path / "matrices" / "baselines" / "p.json"
    code, out, _ = gate(capsys, base, recs, tmp_path)
    assert code == 0 and "other inputs" not in out, out
    for r in recs:
        r["provenance"]["profile"] = "dev"
    code, out, _ = gate(capsys, base, recs, tmp_path)
    assert code == 0 and "checked on other inputs than the baseline's" in out and "profile dev" in out, out
