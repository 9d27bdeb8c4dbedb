"""`portcheck run --jobs N`: parallel workers give the records of a serial run, in the same order;
bad --jobs, --gpus and --shard are usage errors; the helpers of portcheck/workers.py."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from portcheck import cli, workers
from portcheck.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.xdist_group("workers")
# what may differ between two runs of the same checks: wall times and the command line
VARYING = ("phases", "provenance")


def _run(out: Path, jobs: int, kernels: str, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PORTCHECK_CASE_MODULES="tests.support.reliability_cases,tests.support.fault_cases",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run([sys.executable, "-m", "portcheck", "run", "--target", "interpreter", "--kernel", kernels,
                           "--profile", "ci", "--seed", "7", "--jobs", str(jobs), "--out", str(out), *extra],
                          env=env, capture_output=True, text=True, timeout=900)


def _records(out: Path) -> list[dict]:
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in VARYING} for r in records]


def test_a_parallel_run_gives_the_records_of_a_serial_run(tmp_path):
    # a passing case, a failing one (shrunk, diagnosed) and one whose worker dies (a fault record)
    kernels = "rel_a_ok,softmax,fault_nan,rel_exit1,silu_mul"
    serial = _run(tmp_path / "serial", 1, kernels, "--dtype", "fp32")
    parallel = _run(tmp_path / "parallel", 3, kernels, "--dtype", "fp32")
    assert serial.returncode == parallel.returncode == 1, parallel.stderr[-2000:]
    assert "checking with 1 worker(s)" in serial.stdout and "checking with 3 worker(s)" in parallel.stdout
    a, b = _records(tmp_path / "serial"), _records(tmp_path / "parallel")
    assert [(r["case"], r["dtype"]) for r in a] == [(r["case"], r["dtype"]) for r in b]
    assert a == b   # inputs, digests, verdicts, messages and replays, in the same order
    assert {r["case"]: r["verdict"] for r in a if not r["verdict"] == "pass"} == {"fault_nan": "fail",
                                                                                   "rel_exit1": "error"}
    assert not list((tmp_path / "parallel").glob(".claims-*")), "claims are the run's scratch"


def test_shards_together_check_every_unit_once(tmp_path):
    small = ("softmax,silu_mul", "--dtype", "fp32,fp16")
    assert _run(tmp_path / "whole", 2, *small).returncode == 0
    whole = _records(tmp_path / "whole")
    parts = []
    for i in (1, 2):
        assert _run(tmp_path / f"part{i}", 1, *small, "--shard", f"{i}/2").returncode == 0
        parts += _records(tmp_path / f"part{i}")
    key = lambda r: (r["case"], r["dtype"])  # noqa: E731
    assert sorted(parts, key=key) == sorted(whole, key=key)


def test_shards_deal_each_case_round_robin_starting_one_part_further_each_case():
    units = [("fp8", "e4"), ("fp8", "e5"), ("fp8", "b8"), ("fp8_out", "e4"), ("fp8_out", "e5"),
             ("fp8_out", "b8"), ("int8", "i8")]
    case = lambda u: u[0]  # noqa: E731
    assert workers.shard(units, "1/2", case) == [("fp8", "e4"), ("fp8", "b8"), ("fp8_out", "e5"), ("int8", "i8")]
    assert workers.shard(units, "2/2", case) == [("fp8", "e5"), ("fp8_out", "e4"), ("fp8_out", "b8")]
    assert workers.shard(units, "1/2") == units[0::2]   # no cases named: one round-robin
    parts = [workers.shard(units, f"{i}/3", case) for i in (1, 2, 3)]
    assert sorted(sum(parts, [])) == sorted(units) and all(parts)


@pytest.mark.parametrize("flags, says", [
    (["--jobs", "0"], "--jobs must be at least 1"),
    (["--jobs", "-2"], "--jobs must be at least 1"),
    (["--shard", "3/2"], "--shard 3/2"),
    (["--shard", "half"], "--shard wants I/N"),
    (["--gpus", "0"], "--gpus chooses GPUs, and this run's targets (interpreter) use none"),
])
def test_bad_parallel_options_are_usage_errors(tmp_path, capsys, flags, says):
    assert cli.main(["run", "--target", "interpreter", "--kernel", "softmax", "--out", str(tmp_path / "o"),
                     *flags]) == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "o").exists(), "nothing is written before the options are checked"


def test_gpus_names_visible_devices_only(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    assert workers.gpus("nvidia", None) == ["2", "5"]
    assert workers.gpus("nvidia", "1") == ["5"]   # an index among the visible ones
    for bad in ("2", "-1", "x"):
        with pytest.raises(UsageError, match="no GPU"):
            workers.gpus("nvidia", bad)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(UsageError, match="no GPU is visible"):
        workers.gpus("nvidia", "0")


def test_slots_pin_each_worker_to_a_gpu_round_robin():
    slots = workers.slots("nvidia", ["0", "1"], 2, {"CUDA_VISIBLE_DEVICES": "0,1"})
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in slots] == ["0", "1", "0", "1"]
    assert {s.env[workers.PROCESSES_VAR] for s in slots} == {"4"}
    amd = workers.slots("amd", ["3"], 1, {"CUDA_VISIBLE_DEVICES": "3"})
    assert amd[0].env["HIP_VISIBLE_DEVICES"] == "3" and "CUDA_VISIBLE_DEVICES" not in amd[0].env
    interpreter = workers.slots(None, [], 2, {})
    assert [s.gpu for s in interpreter] == [None, None]


def test_default_jobs_follow_cpus_and_memory(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    monkeypatch.setattr(workers, "cpu_count", lambda: 16)
    assert workers.default_jobs(1, 139 << 30) == 16
    assert workers.default_jobs(2, 139 << 30) == 8
    assert workers.default_jobs(1, 16 << 30) == 4       # 4 GiB a worker
    assert workers.default_jobs(0) == 16                # the interpreter: one per CPU
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")   # a run inside `pytest -n 4` takes its share
    assert workers.default_jobs(1, 139 << 30) == 4
    monkeypatch.setattr(workers, "cpu_count", lambda: 1)
    assert workers.default_jobs(4, 1 << 30) == 1


def test_claims_are_taken_once(tmp_path):
    a, b = workers.Claims(tmp_path / "c"), workers.Claims(tmp_path / "c")
    assert a.take("softmax:fp16") and not b.take("softmax:fp16") and b.take("softmax:bf16")


def test_records_come_back_in_unit_order():
    rec = lambda case, dtype, target="cuda", **kw: {"case": case, "dtype": dtype, "target": target, **kw}  # noqa: E731
    order = [workers.unit_key("a", "fp32"), workers.unit_key("b", "fp32"), workers.unit_key("b", "fp16")]
    shuffled = [rec("b", "fp16"), rec("a", "fp32", target="interpreter"), rec("b", "fp32"), rec("a", "fp32"),
                rec("mod", "-")]
    ordered = workers.in_unit_order(shuffled, ["cuda", "interpreter"], order)
    assert [(r["target"], r["case"], r["dtype"]) for r in ordered] == [
        ("cuda", "mod", "-"), ("cuda", "a", "fp32"), ("cuda", "b", "fp32"), ("cuda", "b", "fp16"),
        ("interpreter", "a", "fp32")]


def test_a_worker_yields_cpu_priority_to_the_poles_once_and_survives_a_refusal(monkeypatch):
    calls = []
    monkeypatch.setattr(workers, "_yielded", False)
    monkeypatch.setattr(workers.os, "nice", lambda inc: calls.append(inc))
    workers.yield_to_poles()
    workers.yield_to_poles()   # nice adds up: a second call must not lower it again
    assert calls == [workers.POLE_NICENESS]

    def refused(inc):
        raise PermissionError("not allowed")
    monkeypatch.setattr(workers, "_yielded", False)
    monkeypatch.setattr(workers.os, "nice", refused)
    workers.yield_to_poles()   # speed only: no error reaches the worker


def test_share_cpus_splits_torch_threads(monkeypatch):
    import torch
    before = torch.get_num_threads()
    monkeypatch.setattr(workers, "cpu_count", lambda: 16)
    monkeypatch.setenv(workers.PROCESSES_VAR, "4")
    try:
        workers.share_cpus()
        assert torch.get_num_threads() == 4
    finally:
        torch.set_num_threads(before)


def test_workers_cache_bytecode_where_python_keeps_none_beside_the_sources(monkeypatch, tmp_path):
    import importlib.util
    import types
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONDONTWRITEBYTECODE": "1"}
    source = tmp_path / "torch" / "__init__.py"   # where torch is found (it is not imported)
    beside = source.parent / "__pycache__" / f"__init__.{sys.implementation.cache_tag}.pyc"
    beside.parent.mkdir(parents=True)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: types.SimpleNamespace(origin=str(source)))
    beside.write_bytes(b"")   # torch's bytecode lies beside its sources: nothing to change
    assert workers.bytecode_cache(env) == env
    beside.unlink()           # none there (a venv made without .pyc files, say)
    worker_env = workers.bytecode_cache(env)
    prefix = tmp_path / "cache" / "portcheck" / "bytecode"
    assert worker_env == {"PATH": env["PATH"], workers.BYTECODE_VAR: str(prefix)}
    assert workers.bytecode_cache({**env, workers.BYTECODE_VAR: "/elsewhere"})[workers.BYTECODE_VAR] == "/elsewhere"
    # a process started with it caches what it imports there, for the next one to read
    subprocess.run([sys.executable, "-c", "import tabulate"], env=worker_env, check=True, timeout=120)
    assert any("tabulate" in str(p) for p in prefix.rglob("*.pyc"))
    # the command line takes it for itself and for every process it starts
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv(workers.BYTECODE_VAR, raising=False)
    workers.keep_bytecode()
    assert sys.pycache_prefix == os.environ[workers.BYTECODE_VAR] == str(prefix)
    assert not sys.dont_write_bytecode and "PYTHONDONTWRITEBYTECODE" not in os.environ


def test_a_worker_that_dies_under_as_arch_fails_every_arch_its_check_stood_for(tmp_path, capsys):
    # sm_89 and sm_120 make the same launches (one check stands for both): a fault in it is a
    # record for each, with its own replay, valid for `portcheck report`
    out = tmp_path / "run"
    proc = _run(out, 1, "rel_exit1", "--as-arch", "sm_89,sm_120,gfx1100")
    assert proc.returncode == 1, proc.stderr[-2000:]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["arch"] for r in records) == ["gfx1100", "sm_120", "sm_89"]
    for r in records:
        assert (r["verdict"], r["evidence"]) == ("error", "as-arch") and "status 1" in r["message"]
        assert r["as_arch"]["arch"] == r["arch"] and f"--as-arch {r['arch']} " in r["reproduce"]
    assert cli.main(["report", str(out), "--out", str(tmp_path / "merged"), "--quiet"]) == 0


def test_claims_go_longest_first_by_this_machines_history_else_the_shipped_one(tmp_path):
    shipped = tmp_path / "shipped.json"
    shipped.write_text(json.dumps({"cuda/sm_90a": {"a:fp16": 1.0, "b:fp16": 9.0}}))
    history = workers.History(tmp_path / "mine.json", shipped)
    units = ["a:fp16", "b:fp16", "new:fp16"]
    # never-run units first, then longest first; another arch of the same target uses its figures
    assert workers.longest_first(units, history.seconds("cuda/sm_90a"), str) == ["new:fp16", "b:fp16", "a:fp16"]
    assert workers.longest_first(units, history.seconds("cuda/sm_80"), str) == ["new:fp16", "b:fp16", "a:fp16"]
    assert workers.longest_first(units, history.seconds("interpreter/cpu-interpreter"), str) == units
    history.record("cuda/sm_90a", {"a:fp16": 20.0, "new:fp16": 5.0})
    # this machine's figures first; b, which it has not run, keeps the shipped 9 s
    assert workers.longest_first(units, history.seconds("cuda/sm_90a"), str) == ["a:fp16", "b:fp16", "new:fp16"]
    history.record("cuda/sm_90a", {"b:fp16": 2.0})
    assert workers.longest_first(units, history.seconds("cuda/sm_90a"), str) == ["a:fp16", "new:fp16", "b:fp16"]
    # a warm run (its kernels cached) halves a unit's figure at most each time: the next cold run
    # still starts the unit that compiles longest first
    history.record("cuda/sm_90a", {"a:fp16": 0.5, "new:fp16": 6.0})
    assert history.seconds("cuda/sm_90a")["a:fp16"] == 10.0
    assert workers.longest_first(units, history.seconds("cuda/sm_90a"), str) == ["a:fp16", "new:fp16", "b:fp16"]
    history.record("cuda/sm_90a", {"a:fp16": 0.5})
    assert workers.longest_first(units, history.seconds("cuda/sm_90a"), str) == ["new:fp16", "a:fp16", "b:fp16"]
    (tmp_path / "mine.json").write_text("{not json")   # a broken cache orders less well, no more
    assert workers.longest_first(units, history.seconds("cuda/sm_90a"), str) == ["new:fp16", "b:fp16", "a:fp16"]


def test_the_shipped_history_names_built_in_units():
    from portcheck import cases
    data = json.loads(workers.SHIPPED.read_text())
    names = {c.name for c in cases.select([])}
    assert {"cuda/sm_90a", "interpreter/cpu-interpreter"} <= set(data)
    for scope in data.values():
        assert {key.split(":")[0] for key in scope} <= names


def test_the_timing_worker_starts_with_the_checks_and_times_only_after_them(tmp_path, monkeypatch, capsys):
    # the timing pool runs on GPUs only: here it is let run on the interpreter, which has no timer,
    # so its timings fail and say so; what is checked is the pools' order of work
    from portcheck import cases
    from portcheck.commands import run
    monkeypatch.setattr(run, "_timed", lambda args, matrix, target: True)
    # the built-ins first, into the registry this process keeps: loaded into the copy below, they
    # went with it, and their modules, imported once, never registered again (later runs in this
    # process found no case at all)
    cases.all_cases()
    for name in ("_REGISTRY", "_NAMED", "_ORIGIN"):   # the case registered here goes with the test
        monkeypatch.setattr(cases, name, dict(getattr(cases, name)))
    monkeypatch.delitem(sys.modules, "tests.support.timed_case", raising=False)
    released, release = [], run._Go.release
    monkeypatch.setattr(run._Go, "release", lambda self, go: released.append(go) or release(self, go))
    out = tmp_path / "o"
    status = cli.main(["run", "--target", "interpreter", "--cases", "tests.support.timed_case", "--kernel",
                       "timed_copy", "--jobs", "2", "--out", str(out)])
    text = capsys.readouterr().out
    assert status == 0, text
    assert released == [True, True]   # once both check workers said they finished, and after their exit
    header = "== interpreter: timing with 1 worker(s), started with the checks"
    assert header in text and "--wait-for" in text
    checked = [line for line in text.splitlines() if line.startswith("interpreter/") and " pass" in line]
    assert len(checked) == 2 and all(text.index(line) < text.index(header) for line in checked)
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted((r["case"], r["dtype"]) for r in records) == [("timed_copy", "fp16"), ("timed_copy", "fp32")]
    # each timed once, after its check (the timings file is folded into the records at the end)
    assert all(r["verdict"] == "pass" and r["time_ms"] is None and r["message"].startswith("timing failed")
               for r in records)
    assert not list(out.glob(".go-*")) and not list(out.glob(".claims-*"))


def test_a_worker_is_known_finished_before_it_has_exited(tmp_path):
    # a GPU worker's exit takes its context down (a second or so): the timing pool starts on the
    # check workers' word that they finished, not on their exit
    import time

    from portcheck import supervise
    inflight = tmp_path / "w.inflight.json"
    worker = ("import json, sys, time; from pathlib import Path; "
              "Path(sys.argv[1]).write_text(json.dumps({'finished': True, 'failed': False})); time.sleep(2)")
    proc = subprocess.Popen([sys.executable, "-c", worker, str(inflight)])
    heard = []
    code = supervise._wait(proc, inflight, 60, on_finished=lambda: heard.append(time.monotonic()))
    exited = time.monotonic()
    assert code == 0 and len(heard) == 1 and exited - heard[0] > 1.0
    # one that exits before its supervisor reads its last word is heard at its exit, once
    quick = worker.replace("time.sleep(2)", "None")
    heard.clear()
    assert supervise.supervise([sys.executable, "-c", quick, str(inflight)], dict(os.environ),
                               tmp_path / "results.jsonl", "interpreter", 60, inflight=inflight,
                               on_finished=lambda: heard.append(time.monotonic())) == 0
    assert len(heard) == 1


def test_a_run_stopped_once_its_timing_began_does_not_wait_for_the_timing(tmp_path, monkeypatch):
    # stopped while the timing worker waits for its go, the run waits for it to read "stop" (the
    # faults tests); stopped after the go, the worker times and reads nothing more: the run ends
    # at once, and the worker with it (supervise.watch_supervisor)
    import threading
    import time
    from types import SimpleNamespace

    from portcheck.commands import run
    monkeypatch.setattr(run, "_timed", lambda args, matrix, target: True)
    timing = threading.Event()

    def pool(*args, go=None, on_all_finished=None, **kwargs):
        if kwargs.get("timing"):
            assert run._wait_for_go(go.path)
            timing.set()
            time.sleep(120)   # timing: it never looks at the go file again
            return 0
        on_all_finished()
        assert timing.wait(30)
        raise KeyboardInterrupt
    monkeypatch.setattr(run, "_pool", pool)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run._supervise_targets(SimpleNamespace(), SimpleNamespace(), ["interpreter"], [], None, {},
                               tmp_path / "results.jsonl", 0, [], None)
    assert time.monotonic() - start < run.STOP_WAIT_S / 2


def test_a_timing_worker_started_early_stops_when_told(tmp_path):
    from portcheck.commands import run
    go = run._Go(tmp_path / "results.jsonl", "cuda")
    assert go.released() is None
    go.release(False)
    assert go.released() is False and run._wait_for_go(go.path) is False
    go.release(True)
    assert go.released() is True and run._wait_for_go(go.path) is True


@pytest.fixture
def standbys(monkeypatch):
    """Every supervise.Standby the test starts, and the commands handed to them."""
    from portcheck import supervise
    made, init, start = [], supervise.Standby.__init__, supervise.Standby.start

    def spy_init(self, argv, env):
        init(self, argv, env)
        self.handed = None
        made.append(self)

    def spy_start(self, cmd, env):
        self.handed = cmd
        return start(self, cmd, env)
    monkeypatch.setattr(supervise.Standby, "__init__", spy_init)
    monkeypatch.setattr(supervise.Standby, "start", spy_start)
    return made


def _cli_run(out: Path, *extra: str) -> int:
    return cli.main(["run", "--target", "interpreter", "--profile", "ci", "--seed", "7", "--out", str(out), *extra])


def test_a_run_hands_its_checks_to_standbys_with_the_records_of_fresh_workers(tmp_path, standbys, monkeypatch):
    from portcheck.commands import run
    small = ("--kernel", "softmax,silu_mul", "--dtype", "fp32,fp16", "--jobs", "2")
    assert _cli_run(tmp_path / "standby", *small) == 0
    assert len(standbys) == 2 and all(s.handed and "--worker" in s.handed for s in standbys)
    assert all(s.proc.poll() is not None for s in standbys), "every standby has ended with the run"
    monkeypatch.setattr(run._Standbys, "start", lambda self, args, named: None)   # workers started afresh
    assert _cli_run(tmp_path / "fresh", *small) == 0
    assert len(standbys) == 2
    assert _records(tmp_path / "standby") == _records(tmp_path / "fresh")


def test_standbys_a_run_does_not_need_are_stopped(tmp_path, standbys, capsys):
    # three started for --jobs 3, one unit to check: the pool takes one; a usage error takes none
    assert _cli_run(tmp_path / "one", "--kernel", "softmax", "--dtype", "fp32", "--jobs", "3") == 0
    assert "checking with 1 worker(s)" in capsys.readouterr().out
    assert len(standbys) == 3 and sum(s.handed is not None for s in standbys) == 1
    assert all(s.proc.poll() is not None for s in standbys)
    assert _cli_run(tmp_path / "none", "--kernel", "no_such_case", "--jobs", "2") == 2
    assert len(standbys) == 5 and all(s.handed is None and s.proc.poll() is not None for s in standbys[3:])
    assert capsys.readouterr().err.count("error:") == 1 and not (tmp_path / "none").exists()


def test_a_standby_given_no_command_ends_quietly():
    from portcheck.supervise import Standby
    from portcheck.targets.runtime import target_env
    standby = Standby(["run", "--standby", "--target", "interpreter"], target_env("interpreter"))
    standby.proc.stdin.close()   # the supervisor's end, as its stdin sees it
    assert standby.proc.wait(timeout=300) == 0
    assert standby.proc.stdout.read() == ""
    standby.stop()


def test_standbys_are_counted_without_the_gpu_runtime(monkeypatch):
    monkeypatch.setattr(workers, "cpu_count", lambda: 32)
    monkeypatch.delenv(workers.XDIST_VAR, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert workers.standby_count("nvidia", None) == 32 and workers.standby_count("nvidia", 3) == 6
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setattr(workers, "driver_gpu_count", lambda vendor: None)   # no driver files: one GPU
    assert workers.standby_count("nvidia", None) == workers.MAX_JOBS_PER_GPU
    assert workers.standby_count(None, None) == workers.MAX_JOBS_PER_GPU and workers.standby_count(None, 2) == 2


def test_the_default_target_gets_standbys_for_the_target_the_drivers_files_suggest(tmp_path, standbys, monkeypatch):
    # no --target: the matrix's 'auto', which torch resolves later; the standbys' target is guessed
    # from the driver's files (here made to say what torch will find, then something else)
    from portcheck import pinning
    from portcheck.targets.runtime import resolve
    found = resolve("auto")
    says = {"cuda": "nvidia", "rocm": "amd"}
    one = ("run", "--kernel", "softmax", "--dtype", "fp32", "--jobs", "1", "--profile", "ci")
    monkeypatch.setattr(pinning, "driver_gpu_count", lambda vendor: 1 if says.get(found) == vendor else None)
    assert cli.main([*one, "--out", str(tmp_path / "guessed")]) == 0
    assert len(standbys) == 1 and standbys[0].handed is not None
    wrong = "amd" if found == "interpreter" else None   # a GPU said to be here, or none where one is
    monkeypatch.setattr(pinning, "driver_gpu_count", lambda vendor: 1 if vendor == wrong else None)
    assert cli.main([*one, "--out", str(tmp_path / "wrong")]) == 0   # stopped, workers started afresh
    assert len(standbys) == 2 and standbys[1].handed is None and standbys[1].proc.poll() is not None
    assert _records(tmp_path / "guessed") == _records(tmp_path / "wrong")
