"""Issue 18: no silent loss, no tracebacks, no false alarms after a crash. One test (or more) per
defect, named in its docstring; the malformed documents of defects 5-8 are in
test_malformed_inputs.py. Workers really exit, hang and get signalled here, on the interpreter."""
import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from portcheck import cli, supervise
from portcheck.commands._common import timestamped
from portcheck.compare import compare
from portcheck.errors import UsageError
from portcheck.reports import output
from portcheck.reports.grid import from_records
from portcheck.reports.markdown import render
from portcheck.tolerance import softmax as softmax_tolerance
from tests.support.report_records import compile_rec, runtime, write

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.xdist_group("reliability")


def _env(modules: str) -> dict:
    env = dict(os.environ, PORTCHECK_CASE_MODULES=modules,
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("TRITON_INTERPRET", None)
    return env


def _run_cmd(out: Path, kernels: str, timeout: float = 300) -> list[str]:
    return [sys.executable, "-m", "portcheck", "run", "--target", "interpreter", "--kernel", kernels,
            "--profile", "ci", "--timeout", str(timeout), "--out", str(out)]


def _records(out: Path) -> dict:
    return {r["case"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}


def _wait_for_case(out: Path, case: str, proc, limit: float = 240) -> dict:
    """The in-flight state once the worker announces `case`."""
    deadline = time.time() + limit
    while time.time() < deadline:
        assert proc.poll() is None, proc.communicate()
        for inflight in out.glob(".interpreter*.inflight.json"):   # a worker's, of several
            try:
                state = json.loads(inflight.read_text())
            except (OSError, ValueError):
                state = {}
            if state.get("case") == case:
                return state
        time.sleep(0.2)
    raise AssertionError(f"{case} never started")


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


# ---- defect 16: near zero, the subnormal step, not the smallest normal ---------------------------

def test_defect16_a_kernel_that_flushes_small_probabilities_fails():
    """A 32768-column fp16 softmax row: most outputs lie below fp16's smallest normal; a kernel that
    writes zero there failed nothing under atol = tiny(out), and fails now; the honest rounding passes."""
    x = torch.randn(1, 32768, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    y = torch.softmax(x, dim=-1)
    tol = softmax_tolerance(x, y, "fp16")
    honest = y.to(torch.float16)
    flushed = torch.where(y < 2.0**-14, torch.zeros_like(y), y).to(torch.float16)
    assert float((y < 2.0**-14).double().mean()) > 0.5
    assert compare("y", honest, y, tol).ok
    bad = compare("y", flushed, y, tol)
    assert not bad.ok and bad.mismatches > 16000
    assert "sub(fp16)" in tol.formula and "tiny" not in tol.formula


def test_defect16_the_built_in_softmax_tolerance_has_the_same_floor():
    from portcheck.kernels.softmax import _tolerance
    x = torch.randn(2, 4096, dtype=torch.float64)
    tol = _tolerance({"x": x}, {"y": torch.softmax(x, dim=-1)}, "fp16")["y"]
    assert tol.atol < 2.0**-23 and "sub(fp16)" in tol.formula


# ---- defect 15: a skip is not a pass -----------------------------------------------------------

def test_defect15_a_case_with_no_launch_is_not_shown_as_built():
    """A runtime pass on one arch merged with a compile run whose records are all skips (the case
    declares no launch there): the cell says the compile was skipped, not "built", and claims no
    compile evidence."""
    records = [runtime("softmax", "fp16", "cuda", "sm_90a"),
               compile_rec("softmax", "fp16", "sm_90a", verdict="skip"),
               compile_rec("softmax", "fp16", "gfx942", verdict="skip")]
    grid = from_records(records)
    text = render(grid, "t")
    row = next(line for line in text.splitlines() if line.startswith("| softmax"))
    assert "built" not in row and row.count("compile skip") == 2
    assert grid.cell("softmax", "fp16", "gfx942").compiled()["verdict"] == "skip"
    assert grid.cell("softmax", "fp16", "sm_90a").evidence() == ["gpu"]


def test_a_folder_holding_random_py_and_json_py_shadows_nothing(tmp_path):
    """`python -m` (the user's, and the supervisor's for its workers) puts the current folder
    first on the import path: a random.py or json.py there broke every worker. A case module
    from that folder still imports."""
    folder = tmp_path / "user"
    folder.mkdir()
    for name in ("random", "json", "numbers"):
        (folder / f"{name}.py").write_text(f"raise ImportError('the user folder\'s {name}.py was imported')\n")
    (folder / "my_cases.py").write_text("from tests.support.reliability_cases import *  # noqa: F401,F403\n")
    out = tmp_path / "run"
    env = _env("")
    proc = subprocess.run([*_run_cmd(out, "rel_a_ok"), "--cases", "my_cases"], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert _records(out)["rel_a_ok"]["verdict"] == "pass"
    proc = subprocess.run([sys.executable, "-m", "portcheck", "run", "--cases", "json", "--target", "interpreter",
                           "--out", str(tmp_path / "json")], cwd=folder, env=env, capture_output=True, text=True)
    assert proc.returncode == 2 and "standard-library module" in proc.stderr, proc.stderr[-2000:]


# ---- defect 1: any exit without the finish mark is a fault of the case in flight --------------

def test_defect1_a_worker_exit_of_status_1_0_or_3_is_recorded_and_the_run_goes_on(tmp_path):
    """Status 3 is also what a worker uses after recording its case itself (its GPU context
    lost): a case that exits with it while in flight is still that case's fault."""
    out = tmp_path / "run"
    proc = subprocess.run(_run_cmd(out, "rel_a_ok,rel_exit0,rel_exit1,rel_exit3,rel_z_after"),
                          env=_env("tests.support.reliability_cases"), capture_output=True, text=True, timeout=600)
    records = _records(out)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert records["rel_a_ok"]["verdict"] == records["rel_z_after"]["verdict"] == "pass"
    for case, status in (("rel_exit0", 0), ("rel_exit1", 1), ("rel_exit3", 3)):
        r = records[case]
        assert r["verdict"] == "error" and f"exited with status {status}" in r["message"]
        assert r["failing_input"] is not None and "--replay" in r["reproduce"]
    assert json.loads((out / "run.json").read_text())["status"] == "complete"
    assert "rel_exit1" in (out / "matrix.md").read_text()


def test_defect1_a_worker_that_stops_outside_any_case_makes_the_run_partial(tmp_path):
    (tmp_path / "rel_dies_in_worker.py").write_text(
        "import os\nif os.environ.get('PORTCHECK_SUPERVISOR_PID'):\n    os._exit(5)   # at start-up, in the worker only\n")
    out = tmp_path / "run"
    proc = subprocess.run(_run_cmd(out, "softmax"), env=_env("rel_dies_in_worker"), cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "stopped outside any case: the worker process exited with status 5" in proc.stderr
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["status"] == "partial" and "status 5" in manifest["why"]
    assert "PARTIAL" in (out / "matrix.md").read_text().splitlines()[0]


# ---- defects 2 and 3: signals stop the workers; the report says the run is partial --------------

def test_defect2_sigterm_kills_the_worker_and_leaves_a_partial_report_that_report_names(tmp_path, capsys):
    out = tmp_path / "run"
    proc = subprocess.Popen([*_run_cmd(out, "fault_ok,fault_hang"), "--jobs", "2"],   # whichever is claimed first
                            env=_env("tests.support.fault_cases"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    state = _wait_for_case(out, "fault_hang", proc)
    deadline = time.time() + 240   # another worker may still be checking fault_ok
    while time.time() < deadline and "fault_ok" not in ((out / "results.jsonl").exists() and _records(out) or {}):
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert _gone(state["pid"]), "the worker outlived its supervisor"
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["status"] == "interrupted" and "SIGTERM" in manifest["why"]
    assert "PARTIAL" in (out / "matrix.md").read_text()
    assert _records(out)["fault_ok"]["verdict"] == "pass"
    # defect 3: `portcheck report` on it says it did not finish and names the case in flight
    capsys.readouterr()
    assert cli.main(["report", str(out), "--out", str(tmp_path / "merged"), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "PARTIAL" in printed and "in flight: fault_hang" in printed
    assert "in flight: fault_hang" in (tmp_path / "merged" / "matrix.md").read_text()


def test_defect2_a_worker_whose_supervisor_is_killed_stops(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen(_run_cmd(out, "fault_hang"), env=_env("tests.support.fault_cases"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state = _wait_for_case(out, "fault_hang", proc)
    proc.kill()
    proc.wait()
    deadline = time.time() + 30
    while time.time() < deadline and not _gone(state["pid"]):
        time.sleep(0.2)
    assert _gone(state["pid"]), "the worker kept running after SIGKILL to its supervisor"


ASK_ORPHANED = "from portcheck.supervise import _orphaned; print(_orphaned())"
WRAPPER = "import subprocess, sys; sys.exit(subprocess.run([sys.executable, '-c', sys.argv[1]]).returncode)"


def test_a_worker_under_a_wrapper_still_knows_its_supervisor():
    # compute-sanitizer wraps a sanitized worker: the supervisor is its grandparent, not its parent
    def orphaned(supervisor: int) -> str:
        return subprocess.run([sys.executable, "-c", WRAPPER, ASK_ORPHANED], capture_output=True, text=True,
                              env={**os.environ, supervise.SUPERVISOR_PID: str(supervisor)}, check=True).stdout.strip()
    assert orphaned(os.getpid()) == "False"
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert orphaned(stranger.pid) == "True"   # a supervisor that is no ancestor is gone
    finally:
        stranger.kill()
        stranger.wait()


def test_defect3_report_on_a_run_that_stopped_mid_case(tmp_path, capsys):
    run = tmp_path / "run"
    write(run / "results.jsonl", [runtime("softmax", "fp32", "cuda", "sm_90a")])
    (run / "run.json").write_text(json.dumps({"status": "running"}))
    (run / ".cuda.inflight.json").write_text(json.dumps({"case": "layernorm", "dtype": "fp16", "arch": "sm_90a"}))
    capsys.readouterr()
    assert cli.main(["report", str(run), "--out", str(tmp_path / "r"), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "did not finish" in printed and "'running'" in printed and "in flight: layernorm fp16" in printed
    assert (tmp_path / "r" / "matrix.md").read_text().startswith("# portcheck matrix - PARTIAL")


# ---- defect 4: one owner per run directory; default names cannot collide -------------------------

def test_defect4_a_second_owner_of_a_run_directory_is_refused(tmp_path):
    with output.owned(tmp_path):
        with pytest.raises(UsageError, match="in use by another portcheck process"):
            with output.owned(tmp_path):
                pass
    with output.owned(tmp_path):   # released with its holder
        pass


def test_defect4_a_second_run_into_a_used_directory_exits_2(tmp_path, capsys):
    (tmp_path / ".lock").touch()    # what a running `portcheck run` holds
    assert cli.main(["run", "--target", "interpreter", "--kernel", "softmax", "--out", str(tmp_path)]) == 2
    assert "not an empty directory" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock"]


def test_defect4_compile_holds_its_output_directory_too(tmp_path, capsys):
    with output.owned(tmp_path):
        assert cli.main(["compile", "--kernel", "softmax", "--arch", "sm_90a", "--out", str(tmp_path)]) == 2
    assert "in use by another portcheck process" in capsys.readouterr().err
    assert not (tmp_path / "results.jsonl").exists()


def test_defect4_default_directory_names_do_not_collide(tmp_path):
    first = timestamped(tmp_path)
    first.mkdir()
    second = timestamped(tmp_path)
    assert second != first and str(os.getpid()) in first.name
    child = subprocess.run([sys.executable, "-c", "from portcheck.commands._common import timestamped; "
                            f"print(timestamped({str(tmp_path)!r}))"], capture_output=True, text=True,
                           env=_env(""), timeout=120)
    assert Path(child.stdout.strip()) not in (first, second)


# ---- defect 9 and 13: report files all or nothing; a full disk is one line ----------------------

def test_defect9_13_a_failed_write_leaves_the_previous_report(tmp_path, monkeypatch):
    old = {tmp_path / "matrix.json": "old json", tmp_path / "matrix.md": "old md"}
    for path, text in old.items():
        path.write_text(text)
    stage, calls = output._stage, []

    def full_disk(path, text):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return stage(path, text)
    monkeypatch.setattr(output, "_stage", full_disk)
    with pytest.raises(UsageError, match="No space left on device"):
        output.write_all({p: "new" for p in old})
    assert {p: p.read_text() for p in old} == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["matrix.json", "matrix.md"]   # no temporaries
    calls.clear()
    with pytest.raises(UsageError):
        output.write_all({tmp_path / "new" / "a.md": "x", tmp_path / "new" / "b.md": "y"})
    assert not (tmp_path / "new").exists()   # the folder it made is gone again


def test_defect13_announce_leaves_no_temporary_when_the_disk_is_full(tmp_path, monkeypatch):
    def no_space(*args):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "replace", no_space)
    with pytest.raises(OSError):
        supervise.announce(tmp_path / ".interpreter.inflight.json", {"case": "x"})
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_still_gets_the_run_manifest_its_final_state(tmp_path, monkeypatch):
    """run.json is written first with room to spare; when the disk is full at the end, its final
    state is written into the file's own blocks instead of staying "running"."""
    from portcheck.commands.run import MANIFEST_RESERVE
    path = tmp_path / "run.json"
    output.atomic_write(path, json.dumps({"status": "running"}) + "\n" + " " * MANIFEST_RESERVE)

    def no_space(*args):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "replace", no_space)
    final = {"status": "partial", "why": "cannot write matrix.md: No space left on device", "seed": 0}
    output.write_reserved(path, json.dumps(final, indent=2))
    assert json.loads(path.read_text()) == final
    with pytest.raises(UsageError):   # no room left in the file either: the error, not a torn file
        output.write_reserved(path, json.dumps({"why": "x" * (2 * MANIFEST_RESERVE)}))
    assert json.loads(path.read_text()) == final


@pytest.mark.parametrize("command", ["report", "gate", "diff"])
def test_defect9_an_output_path_that_is_a_directory_is_a_usage_error(tmp_path, capsys, command):
    results = write(tmp_path / "a" / "results.jsonl", [runtime("softmax", "fp32", "cuda", "sm_90a")])
    out = tmp_path / "out"
    target = out / "matrix.html" if command == "report" else out
    target.mkdir(parents=True)
    if command == "report":
        (out / "matrix.json").write_text("old")
    argv = {"report": ["report", results, "--out", out, "--quiet"],
            "gate": ["gate", "--baseline", results, results, "--summary", out, "--quiet"],
            "diff": ["diff", results, results, "--out", out, "--quiet"]}[command]
    capsys.readouterr()
    assert cli.main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err
    assert "is a directory" in err and "Traceback" not in err
    if command == "report":
        assert (out / "matrix.json").read_text() == "old" and not (out / "matrix.md").exists()


# ---- defect 10: a broken case module fails alone ------------------------------------------------

def test_defect10_broken_case_modules_are_load_errors(tmp_path):
    (tmp_path / "rel_syntax.py").write_text("def broken(:\n")
    (tmp_path / "rel_raises.py").write_text("raise RuntimeError('no GPU library here')\n")
    (tmp_path / "rel_twice.py").write_text(   # a second, different case named softmax
        "import dataclasses\nfrom portcheck import cases\n"
        "cases.register(dataclasses.replace(cases.get('softmax'), family='mine'))\n")
    code = ("from portcheck import cases; cases.add_modules(['rel_syntax', 'rel_raises', 'rel_twice']); "
            "n = len(cases.all_cases()); import json; print(json.dumps(cases.LOAD_ERRORS))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_env(""), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    errors = json.loads(proc.stdout.strip().splitlines()[-1])
    assert errors["rel_syntax"].startswith("SyntaxError")
    assert errors["rel_raises"] == "RuntimeError: no GPU library here"
    # both modules named, from `portcheck run` as from pytest's collection (the same ValueError)
    assert errors["rel_twice"] == ("ValueError: two cases are named 'softmax': a built-in case of "
                                   "portcheck.kernels.softmax, and one of rel_twice; give yours another name")


# ---- defect 11: --portcheck-report takes a directory and never replaces a run -------------------

@pytest.mark.parametrize("kind", ["file", "run directory"])
def test_defect11_a_report_path_that_is_not_ours_is_a_usage_error(tmp_path, kind):
    report = tmp_path / "report"
    if kind == "file":
        report.write_text("x")
    else:
        write(report / "results.jsonl", [runtime("softmax", "fp32", "cuda", "sm_90a")])
        (report / "run.json").write_text("{}")
    before = {p.name: p.read_bytes() for p in ([report] if kind == "file" else report.iterdir())}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--co", "-q",
                           "--target", "interpreter", f"--portcheck-report={report}", str(tmp_path)],
                          cwd=tmp_path, env=_env(""), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "INTERNALERROR" not in proc.stdout + proc.stderr
    assert {p.name: p.read_bytes() for p in ([report] if kind == "file" else report.iterdir())} == before


# ---- defect 14: the smaller ones ------------------------------------------------------------------

def test_defect14_report_refuses_a_run_directory_as_out_and_writes_nothing_on_failure(tmp_path, capsys):
    run = tmp_path / "run"
    results = write(run / "results.jsonl", [runtime("softmax", "fp32", "cuda", "sm_90a")])
    assert cli.main(["report", str(results), "--out", str(run)]) == 2
    assert sorted(p.name for p in run.iterdir()) == ["results.jsonl"]
    assert cli.main(["report", str(tmp_path / "missing"), "--out", str(tmp_path / "r")]) == 2
    assert not (tmp_path / "r").exists()
    assert cli.main(["baseline", "update", "--name", "b", "--dir", str(tmp_path / "b"), str(tmp_path / "missing")]) == 2
    assert not (tmp_path / "b").exists()


def test_defect14_report_passes_math_results_by_with_a_note(tmp_path, capsys):
    math = json.dumps({"kind": "math", "case": "exp", "verdict": "pass"})
    results = write(tmp_path / "a" / "results.jsonl", [runtime("softmax", "fp32", "cuda", "sm_90a")])
    results.write_text(results.read_text() + math + "\n")
    capsys.readouterr()
    assert cli.main(["report", str(results), "--out", str(tmp_path / "r"), "--quiet"]) == 0
    assert "1 `portcheck math` record(s) passed by" in capsys.readouterr().out


# ---- defect 0: a case that loses the GPU context fails alone under pytest -------------------------

POISON_CONFTEST = """
import pytest
from tests.support import reliability_cases

@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    # the interpreter has no GPU context: this fake says it is lost once rel_poison has run
    config._portcheck.context_check = lambda: not reliability_cases.POISONED
"""
POISON_TESTS = """
from portcheck.testing import test_portcheck_case  # noqa: F401
PORTCHECK_CASES = ["rel_a_ok", "rel_poison", "rel_z_after"]
"""


def _pytest_with_poison(tmp_path, *extra):
    (tmp_path / "conftest.py").write_text(POISON_CONFTEST)
    (tmp_path / "test_poison.py").write_text(POISON_TESTS)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "--target", "interpreter",
           "--portcheck-profile", "ci", f"--portcheck-report={tmp_path / 'report'}", "test_poison.py", *extra]
    proc = subprocess.run(cmd, cwd=tmp_path, env=_env(""), capture_output=True, text=True, timeout=600)
    return proc, proc.stdout + proc.stderr


def _outcomes(text: str) -> dict:
    found = {}
    for line in text.splitlines():
        for word in ("PASSED", "FAILED", "ERROR"):
            if line.startswith(word + " ") and "[rel_" in line:
                case = line.split("[", 1)[1].split("-", 1)[0]
                found.setdefault(case, set()).add(word)
    return found


def test_defect0_without_xdist_the_rest_fail_with_the_reason(tmp_path):
    proc, text = _pytest_with_poison(tmp_path)
    outcomes = _outcomes(text)
    assert outcomes == {"rel_a_ok": {"PASSED"}, "rel_poison": {"FAILED"}, "rel_z_after": {"FAILED"}}, text[-4000:]
    assert "GPU context is unusable after this case" in text and "replay: portcheck run" in text
    assert "GPU context lost after test_poison.py::test_portcheck_case[rel_poison-fp32]; not run here" in text
    records = [json.loads(line) for line in (tmp_path / "report" / "results.jsonl").read_text().splitlines()]
    lost = [r for r in records if r["case"] == "rel_poison" and r["verdict"] == "error"]
    assert lost and lost[0]["failing_input"] is not None


def test_defect0_with_xdist_only_the_poisoning_case_fails(tmp_path):
    pytest.importorskip("xdist")
    proc, text = _pytest_with_poison(tmp_path, "-n", "2")
    outcomes = _outcomes(text)
    assert outcomes.get("rel_poison") == {"FAILED"}, text[-4000:]
    assert outcomes.get("rel_a_ok") == {"PASSED"} and outcomes.get("rel_z_after") == {"PASSED"}, text[-4000:]
    assert "crashed while running 'test_poison.py::test_portcheck_case[rel_poison-fp32]'" in text
