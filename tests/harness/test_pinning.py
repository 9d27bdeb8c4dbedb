"""One GPU per pytest-xdist worker (portcheck/pinning.py and the plugin's wiring), on the CPU."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from portcheck import pinning
from portcheck.errors import UsageError


def test_worker_index():
    assert pinning.worker_index("gw0") == 0 and pinning.worker_index("gw12") == 12
    assert pinning.worker_index(None) is None and pinning.worker_index("master") is None
    with pytest.raises(ValueError):
        pinning.worker_index("worker-1")


def test_visible_devices_prefers_the_variable_and_keeps_its_spelling():
    env = {"CUDA_VISIBLE_DEVICES": "2, 3,GPU-8f0e"}
    assert pinning.visible_devices("nvidia", env) == ["2", "3", "GPU-8f0e"]
    assert pinning.visible_devices("nvidia", {"CUDA_VISIBLE_DEVICES": ""}) == []
    assert pinning.visible_devices("nvidia", {}, count=lambda: 2) == ["0", "1"]
    # AMD: HIP_VISIBLE_DEVICES first, CUDA_VISIBLE_DEVICES (which HIP also honours) next
    assert pinning.visible_devices("amd", {"HIP_VISIBLE_DEVICES": "4,5", "CUDA_VISIBLE_DEVICES": "0"}) == ["4", "5"]
    assert pinning.visible_devices("amd", {"CUDA_VISIBLE_DEVICES": "1"}) == ["1"]
    assert pinning.visible_devices("amd", {}, count=lambda: 0) == []


def test_assign_shares_for_checks_and_refuses_for_benchmarks():
    devs = ["0", "1"]
    assert [pinning.assign(i, devs, exclusive=True) for i in range(2)] == ["0", "1"]
    assert [pinning.assign(i, devs, exclusive=False) for i in range(4)] == ["0", "1", "0", "1"]
    with pytest.raises(UsageError, match="never share a GPU"):
        pinning.assign(2, devs, exclusive=True)
    with pytest.raises(UsageError, match="no GPU"):
        pinning.assign(0, [], exclusive=False)
    pinning.check_worker_count(2, devs)
    with pytest.raises(UsageError, match="-n 2 or fewer"):
        pinning.check_worker_count(3, devs)


def _workerinput(worker, vendor="nvidia", devices=("3", "5"), exclusive=True):
    return {"workerid": worker,
            pinning.WORKERINPUT_KEY: pinning.workerinput_entry(vendor, list(devices), exclusive)}


def test_pin_worker_sets_the_vendor_variable():
    env = {"CUDA_VISIBLE_DEVICES": "3,5"}
    assert pinning.pin_worker(_workerinput("gw1"), env) == "5"
    assert env["CUDA_VISIBLE_DEVICES"] == "5"
    env = {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert pinning.pin_worker(_workerinput("gw0", "amd", ["0", "1"]), env) == "0"
    assert env == {"HIP_VISIBLE_DEVICES": "0"}       # HIP reads both: only the pinned one is left
    env = {}
    assert pinning.pin_worker(None, env) is None and env == {}
    assert pinning.pin_worker({"workerid": "gw0"}, env) is None and env == {}   # no GPU handout


def test_pin_worker_refuses_after_the_runtime_started(monkeypatch):
    monkeypatch.setattr(pinning, "runtime_initialised", lambda: True)
    with pytest.raises(RuntimeError, match="initialised"):
        pinning.pin_worker(_workerinput("gw0"), {})
    # already pinned to the same device (a re-run of configure): nothing to change, no error
    assert pinning.pin_worker(_workerinput("gw0"), {"CUDA_VISIBLE_DEVICES": "3"}) == "3"


def test_pinning_imports_no_gpu_runtime():
    code = ("import sys; import portcheck.pinning, portcheck.pytest_plugin; "
            "t = sys.modules.get('torch'); print(bool(t and t.cuda.is_initialized()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_a_gpu_target_is_found_available_without_starting_its_runtime(monkeypatch):
    # a pytest-xdist worker resolves --target=auto before it pins its GPU: had that started CUDA
    # (is_available(), the device's name), every worker of `pytest -n N` stopped at start-up
    from types import SimpleNamespace
    from portcheck.targets import runtime

    def started(*args):
        raise AssertionError("the availability check started the GPU runtime")
    cuda = SimpleNamespace(device_count=lambda: 2, is_available=started, get_device_name=started,
                           get_device_properties=started, init=started)
    monkeypatch.setattr(runtime, "_torch", lambda: SimpleNamespace(version=SimpleNamespace(hip=None, cuda="13.0"),
                                                                  cuda=cuda))
    found = runtime._availability.__wrapped__("cuda")
    assert found.ok and found.reason == "2 device(s) visible"
    cuda.device_count = lambda: 0
    assert not runtime._availability.__wrapped__("cuda").ok


PROBE = textwrap.dedent("""
    import json, os, sys

    def test_probe(tmp_path_factory):
        torch = sys.modules.get("torch")
        record = {"worker": os.environ.get("PYTEST_XDIST_WORKER"),
                  "cuda_visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
                  "initialised": bool(torch and torch.cuda.is_initialized())}
        out = os.environ["PROBE_OUT"]
        with open(os.path.join(out, record["worker"] + ".json"), "w") as f:
            json.dump(record, f)
""")


def test_xdist_workers_each_get_their_own_gpu(tmp_path):
    """A real `pytest -n 2` run: the controller hands out CUDA_VISIBLE_DEVICES=3,5 one each."""
    (tmp_path / "test_probe.py").write_text(PROBE)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "3,5", "PROBE_OUT": str(out)}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("TRITON_INTERPRET", None)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                          "--target=cuda", "-p", "no:warnings", "test_probe.py"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    seen = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    assert set(seen) <= {"gw0", "gw1"} and seen, seen
    expected = {"gw0": "3", "gw1": "5"}
    for worker, rec in seen.items():
        assert rec["cuda_visible"] == expected[worker]
        assert rec["initialised"] is False


def test_bench_without_a_device_is_refused(tmp_path):
    from portcheck.targets.runtime import TARGETS
    if TARGETS["cuda"].availability().ok:
        pytest.skip("a GPU is here: --bench --target=cuda runs")
    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    for target in ("cuda",):   # the interpreter takes the same refusal path (not a device)
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--bench",
                              f"--target={target}", "test_nothing.py"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 4, run.stdout + run.stderr      # pytest's usage-error status
        assert "--bench" in run.stderr and "no device" in run.stderr


def test_benchmarks_go_out_by_unit_unless_the_user_chose_a_scheduling(monkeypatch):
    from types import SimpleNamespace

    from portcheck import pytest_plugin

    def config(args, bench=True, addopts=()):
        return SimpleNamespace(invocation_params=SimpleNamespace(args=tuple(args)),
                               getini=lambda name: list(addopts),
                               getoption=lambda name: bench if name == "--bench" else None,
                               getvalue=lambda name: ["popen", "popen"] if name == "tx" else None,
                               option=SimpleNamespace(loadscopereorder=True))

    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    assert not pytest_plugin.dist_given(config(["-n", "2", "--bench"]))
    for chosen in (["--dist", "load"], ["--dist=loadfile"], ["-d"]):
        assert pytest_plugin.dist_given(config(["-n", "2", *chosen]))
    assert pytest_plugin.dist_given(config(["-n", "2"], addopts=["--dist=load"]))
    monkeypatch.setenv("PYTEST_ADDOPTS", "--dist load")
    assert pytest_plugin.dist_given(config(["-n", "2"]))
    monkeypatch.delenv("PYTEST_ADDOPTS")
    # checks keep xdist's own choice; so do benchmarks given --dist
    assert pytest_plugin.pytest_xdist_make_scheduler(config(["-n", "2"], bench=False), None) is None
    assert pytest_plugin.pytest_xdist_make_scheduler(config(["--dist", "load"]), None) is None
    from xdist.scheduler import LoadScopeScheduling
    cfg = config(["-n", "2"])
    sched = pytest_plugin.pytest_xdist_make_scheduler(cfg, None)
    assert isinstance(sched, LoadScopeScheduling) and cfg.option.loadscopereorder is False
    bench = "tests/kernels/test_bench_kernels.py::test_portcheck_bench"
    assert sched._split_scope(f"{bench}[matmul-bf16-m=4000-n=4097-k=4097]") == "matmul-bf16"
    assert sched._split_scope(f"{bench}[matmul-bf16-m=1-n=4104-k=4104]") == "matmul-bf16"
    assert sched._split_scope(f"{bench}[matmul-fp16-m=1-n=4104-k=4104]") == "matmul-fp16"
    assert sched._split_scope("tests/test_x.py::test_y[a-b-c]") == "tests/test_x.py::test_y[a-b-c]"
