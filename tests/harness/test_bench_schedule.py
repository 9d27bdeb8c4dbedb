"""Which GPU runs which benchmark (portcheck/speed/schedule.py): units, their order, their clock."""
from types import SimpleNamespace

from portcheck.speed.schedule import CACHE_KEY, UnitClock, longest_first, param_id, unit, unit_of

BENCH = "tests/kernels/test_bench_kernels.py::test_portcheck_bench"


def _work(*pairs):
    return [(SimpleNamespace(name=case), {"dtype": dtype, "i": i}) for i, (case, dtype) in enumerate(pairs)]


def test_a_unit_is_one_case_in_one_dtype_and_is_read_back_from_the_node_id():
    pid = param_id("quant_fp8_per_token", "bf16 rows=16384 cols=8192 path=fused")
    assert pid == "quant_fp8_per_token-bf16-rows=16384-cols=8192-path=fused"
    assert unit_of(f"{BENCH}[{pid}]") == unit("quant_fp8_per_token", {"dtype": "bf16"})
    assert unit_of("tests/kernels/test_kernels.py::test_portcheck_case[softmax-bf16]") is None


def test_longest_units_go_first_and_units_never_timed_before_them():
    work = _work(("softmax", "bf16"), ("matmul", "fp16"), ("matmul", "fp32"), ("new", "bf16"),
                 ("matmul", "fp16"), ("rope", "bf16"))
    seconds = {"softmax-bf16": 2.0, "matmul-fp16": 97.0, "matmul-fp32": 111.2, "rope-bf16": 7.1}
    order = [(c.name, s["dtype"], s["i"]) for c, s in longest_first(work, seconds)]
    assert order == [("new", "bf16", 3), ("matmul", "fp32", 2), ("matmul", "fp16", 1),
                     ("matmul", "fp16", 4), ("rope", "bf16", 5), ("softmax", "bf16", 0)]
    assert longest_first(work, {}) == work                  # no record: the matrix's order


def test_the_unit_clock_sums_reports_and_merges_into_the_cache():
    class Cache(dict):
        def get(self, key, default):
            return super().get(key, default)

        def set(self, key, value):
            self[key] = value

    cache = Cache({CACHE_KEY: {"matmul-fp32": 111.2, "rope-bf16": 9.0}})
    clock = UnitClock()
    for nodeid, d in ((f"{BENCH}[rope-bf16-tokens=16384-rot_dim=128]", 2.5),
                      (f"{BENCH}[rope-bf16-tokens=16384-rot_dim=64]", 2.25),
                      ("tests/kernels/test_kernels.py::test_portcheck_case[rope-bf16]", 40.0)):
        clock.add(nodeid, d)
    clock.save(cache)
    assert cache[CACHE_KEY] == {"matmul-fp32": 111.2, "rope-bf16": 4.8}
    UnitClock().save(cache)                                 # a run without benchmarks keeps the record
    assert cache[CACHE_KEY]["rope-bf16"] == 4.8


def test_xdist_runs_each_unit_on_one_worker(tmp_path):
    """The scheduler under real pytest-xdist workers: six benchmarks in four units over two
    workers; every unit stays on one worker and both workers get work."""
    import os
    import subprocess
    import sys
    (tmp_path / "conftest.py").write_text(
        "from portcheck.speed.schedule import make_scheduler\n\n"
        "def pytest_xdist_make_scheduler(config, log):\n"
        "    return make_scheduler(config, log)\n")
    (tmp_path / "test_units.py").write_text(
        "import os, time, pytest\n\n"
        "@pytest.mark.parametrize('p', ['matmul-fp16-a', 'softmax-bf16-a', 'matmul-fp16-b',\n"
        "                               'matmul-bf16-a', 'softmax-bf16-b', 'rope-bf16-a'])\n"
        "def test_portcheck_bench(p):\n"
        "    time.sleep(0.3)\n"
        "    with open(os.environ['UNIT_LOG'], 'a') as f:\n"
        "        f.write(os.environ['PYTEST_XDIST_WORKER'] + ' ' + p + '\\n')\n")
    log = tmp_path / "log.txt"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                          "test_units.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "UNIT_LOG": str(log)})
    assert run.returncode == 0, run.stdout + run.stderr
    ran = [line.split() for line in log.read_text().splitlines()]
    assert sorted(p for _, p in ran) == sorted(['matmul-fp16-a', 'softmax-bf16-a', 'matmul-fp16-b',
                                                'matmul-bf16-a', 'softmax-bf16-b', 'rope-bf16-a'])
    workers_of = {}
    for worker, p in ran:
        workers_of.setdefault(p.rsplit("-", 1)[0], set()).add(worker)
    assert all(len(w) == 1 for w in workers_of.values()), workers_of
    assert len(set().union(*workers_of.values())) == 2
