"""The benchmark runner's bookkeeping, driven on the CPU.

No GPU here, so the device-facing calls are replaced with CPU stand-ins: events read the host
clock, do_bench returns host-timed samples, CUDA graphs are unavailable (exercising the fallback),
ceilings and clocks are canned. What is checked is everything around the timing: rotation,
baselines and their errors, peers and goals, the record schema, the model rows, the report.
"""
import math
import re
import time
import types

import pytest
import torch

from portcheck.speed import runner as benchrun
from portcheck import results
from portcheck.speed.report import bench_matrix
from portcheck.cases import Case, Cost
from portcheck.matrix import BenchSettings
from portcheck.targets.runtime import Availability

CANNED_CEILINGS = {
    "copy": {"gbs": 4000.0, "bytes_moved": 1 << 31, "method": "triton_copy", "vs_torch_copy": 1.01,
             "agrees_with_torch_copy": True, "torch_copy": {"gbs": 3960.0, "median_ms": 0.54},
             "triton_copy": {"gbs": 4000.0, "median_ms": 0.53}},
    "matmul": {"bf16": {"tflops": 700.0}, "fp8": {"error": "RuntimeError: not here"}},
}


class FakeEvent:
    def __init__(self, enable_timing=False):
        self.t = None

    def record(self, stream=None):
        self.t = time.perf_counter()

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3


def fake_do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
    samples = []
    for _ in range(9):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1e3)
    return samples


class FakeTarget:
    name, vendor, device, is_gpu = "cuda", "nvidia", "cpu", True

    def availability(self):
        return Availability(True, "a CPU standing in for a GPU")

    def arch(self):
        return "sm_90a"

    def describe(self):
        return {"device": "Fake H200", "driver": "0.0", "runtime": "none"}


@pytest.fixture
def fake_gpu(monkeypatch):
    import triton.testing

    from portcheck.speed import ceilings, clocks
    monkeypatch.setitem(benchrun.TARGETS, "cuda", FakeTarget())
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i=0: types.SimpleNamespace(
        name="Fake H200", uuid="1234abcd", L2_cache_size=8 << 20, total_memory=1 << 37))
    monkeypatch.setattr(triton.testing, "do_bench", fake_do_bench)
    monkeypatch.setattr(ceilings, "measure", lambda arch=None: CANNED_CEILINGS)
    monkeypatch.setattr(clocks, "read", lambda vendor, uuid=None: {"tool": "fake", "clocks.sm": 1980,
                                                                  "clocks.mem": 3201})


def _case(calls):
    def make(spec, device):
        calls.append(spec)
        return {"x": torch.randn(spec["rows"], spec["cols"], generator=torch.Generator().manual_seed(spec["seed"]))}

    def baselines(args):
        x = args["x"]
        return {"torch": lambda: x * 2, "liger": lambda: x * 2, "broken": lambda: 1 / 0}

    return Case(name="fake_scale", family="fake", dtypes=("fp32",), inputs=None, make=make,
                outputs=lambda a: {"y": (tuple(a["x"].shape), torch.float32)},
                launch=lambda a, o: torch.mul(a["x"], 2, out=o["y"]), oracle=None, tolerance=None,
                cost=lambda a: Cost(2 * a["x"].numel() * 4, a["x"].numel()),
                bench=({"dtype": "fp32", "rows": 256, "cols": 1024, "seed": 0},), baselines=baselines)


def test_runner_records_ceilings_figures_baselines_and_models(fake_gpu, tmp_path):
    calls = []
    case = _case(calls)
    path = tmp_path / "results.jsonl"
    runner = benchrun.BenchRunner("cuda", BenchSettings(repeats=10, compile=False, graph_below_us=0.0),
                                  results_path=path, command="portcheck bench --test")
    r = runner.bench(case, case.bench[0])
    assert r.verdict == "pass", r.message
    b = r.bench
    # 2 MB of traffic under an 8 MB L2: the inputs are rotated over ceil(4 * 8 / 2) = 16 copies
    assert b["rotation_sets"] == 16 and len(calls) == 16
    # 10 repeats: 2 interleaved rounds of one do_bench call each (the fake returns 9 samples)
    assert b["kernel"]["method"] == "do_bench" and b["kernel"]["n"] == 18
    assert b["kernel"]["rounds"] == 2 and len(b["kernel"]["round_medians_ms"]) == 2
    assert b["bytes"] == 2 * 256 * 1024 * 4 and b["flops"] == 256 * 1024
    assert math.isclose(b["gbs"], b["bytes"] / (b["kernel"]["median_ms"] * 1e6))
    assert b["ceiling"]["bound"] == "memory" and b["ceiling"]["copy_gbs"] == 4000.0
    assert math.isclose(b["fraction_of_ceiling"], b["gbs"] / 4000.0)
    assert math.isclose(b["fraction_of_datasheet"], b["gbs"] / 4800.0)
    assert set(b["baselines"]) == {"torch", "liger", "broken"}
    assert b["baselines"]["broken"]["error"].startswith("ZeroDivisionError")
    assert b["baselines"]["torch"]["speedup"] > 0
    assert [g["goal"] for g in b["goals"]] == ["no slower than liger"]   # 2 MB: no bandwidth goal
    assert b["clocks"]["before"]["clocks.sm"] == 1980 and b["repeat"]["n"] == 18
    assert isinstance(b["repeat_agrees"], bool)
    assert r.provenance["gpu_uuid"] == "1234abcd" and r.provenance["device"] == "Fake H200"
    assert "--spec" in r.reproduce
    assert {"inputs", "warm_up", "kernel", "baselines", "timing"} <= set(b["wall_s"])
    assert all(v >= 0 for v in b["wall_s"].values())

    recs = results.read(path)
    kinds = [(x["case"], x["evidence"], x["arch"]) for x in recs]
    assert kinds[0] == ("ceilings", "gpu", "sm_90a")
    assert kinds[1] == ("fake_scale", "gpu", "sm_90a")
    models = [x for x in recs if x["evidence"] == "model"]
    assert {x["arch"] for x in models} == {"sm_80", "sm_89", "sm_100a", "sm_120", "gfx90a", "gfx942",
                                           "gfx950", "gfx1100", "gfx1201"}
    assert all(x["target"] == "model" and x["verdict"] == "skip" for x in models)

    md = bench_matrix(recs)
    assert "Fake H200" in md and "copy **4,000 GB/s**" in md
    assert "broken: error" in md and "liger" in md
    assert "Roofline model for archs with no device here" in md and "gfx942" in md
    assert "sampled in the same interleaved rounds" in md
    assert re.search(r"Host time of these 1 figures by phase: inputs [0-9.]+ s, warm_up [0-9.]+ s, "
                     r"kernel [0-9.]+ s, baselines [0-9.]+ s, timing [0-9.]+ s; [0-9.]+ s in all", md)


def test_a_second_case_reuses_the_ceilings_and_graph_failure_falls_back(fake_gpu, tmp_path):
    case = _case([])
    path = tmp_path / "results.jsonl"
    runner = benchrun.BenchRunner("cuda", BenchSettings(repeats=5, compile=False, graph_below_us=1e9),
                                  results_path=path)
    first = runner.bench(case, case.bench[0])
    second = runner.bench(case, dict(case.bench[0], rows=128))
    assert first.verdict == second.verdict == "pass"
    # no CUDA graphs on a CPU: the short-launch path says so and times with do_bench instead
    assert "graph capture failed" in first.bench["kernel"]["note"]
    assert first.bench["kernel"]["method"] == "do_bench"
    assert sum(1 for x in results.read(path) if x["case"] == "ceilings") == 1


def test_a_kernel_that_raises_is_an_error_record_not_an_exception(fake_gpu, tmp_path):
    case = _case([])
    broken = Case(**{**{f: getattr(case, f) for f in case.__dataclass_fields__},
                     "launch": lambda a, o: (_ for _ in ()).throw(ValueError("x must be 2-D"))})
    runner = benchrun.BenchRunner("cuda", BenchSettings(repeats=5, compile=False), results_path=tmp_path / "r.jsonl")
    r = runner.bench(broken, broken.bench[0])
    assert r.verdict == "error" and "x must be 2-D" in r.message
    assert "ERROR" in bench_matrix(results.read(tmp_path / "r.jsonl"))


def test_noisy_figures_are_flagged(fake_gpu, tmp_path, monkeypatch):
    import triton.testing
    spread = iter(range(1000))
    monkeypatch.setattr(triton.testing, "do_bench",
                        lambda fn, **k: [1.0 + 0.5 * (next(spread) % 2) for _ in range(10)])
    case = _case([])
    runner = benchrun.BenchRunner("cuda", BenchSettings(repeats=5, compile=False, noise_bound=0.05),
                                  results_path=tmp_path / "r.jsonl")
    r = runner.bench(case, case.bench[0])
    assert r.bench["noisy"] is True and "noisy" in r.message
    assert "NOISY" in bench_matrix(results.read(tmp_path / "r.jsonl"))


def test_time_limit_records_the_specs_it_did_not_time(fake_gpu, tmp_path, capsys):
    from portcheck.commands import bench as cmd
    case = _case([])
    path = tmp_path / "results.jsonl"
    work = [(case, case.bench[0]), (case, dict(case.bench[0], rows=64))]
    written = []
    status = cmd._measure(work, "cuda", BenchSettings(repeats=5, compile=False), None, path,
                          "portcheck bench", time_limit=1e-9, progress=lambda: written.append(1))
    assert status == 1 and "2 spec(s) not timed" in capsys.readouterr().out
    recs = results.read(path)
    skipped = [r for r in recs if r["verdict"] == "skip" and r["evidence"] == "gpu"]
    assert len(skipped) == 2 and all("--time-limit" in r["message"] for r in skipped)
    assert "not timed" in bench_matrix(recs)
    # without a limit every spec is timed and the report is rewritten after each one
    path2 = tmp_path / "r2.jsonl"
    assert cmd._measure(work, "cuda", BenchSettings(repeats=5, compile=False), None, path2,
                        "portcheck bench", time_limit=None, progress=lambda: written.append(1)) == 0
    assert len(written) == 2


def test_a_skip_override_records_the_spec_as_skipped_without_running_it(fake_gpu, tmp_path):
    import datetime as dt

    from portcheck.overrides import Override
    calls = []
    case = _case(calls)
    skip = Override("fake_*", "cuda", "*", "fp32", "skip", "this target has no such format", "here",
                    dt.date(2099, 1, 1))
    runner = benchrun.BenchRunner("cuda", BenchSettings(repeats=5, compile=False), results_path=tmp_path / "r.jsonl",
                                  overrides=[skip])
    r = runner.bench(case, case.bench[0])
    assert r.verdict == "skip" and "this target has no such format" in r.message
    assert calls == []      # nothing was built or launched


def test_a_drifting_device_slows_the_kernel_and_its_baselines_alike(fake_gpu, tmp_path, monkeypatch):
    """A clock that slows 0.5% a sample: the kernel, its second timer and a baseline doing the
    same work are sampled in interleaved rounds, so they agree and the speed-up stays 1; the
    drift itself is reported."""
    import triton.testing
    clock = [1.0]

    def drifting(fn, **k):
        out = []
        for _ in range(10):
            clock[0] *= 1.005
            out.append(clock[0])
        return out

    monkeypatch.setattr(triton.testing, "do_bench", drifting)
    case = _case([])
    runner = benchrun.BenchRunner("cuda", BenchSettings(repeats=60, compile=False, graph_below_us=0.0),
                                  results_path=tmp_path / "r.jsonl")
    r = runner.bench(case, case.bench[0])
    b = r.bench
    assert b["kernel"]["rounds"] == 6 and b["repeat_agrees"] is True
    assert abs(b["baselines"]["torch"]["speedup"] - 1.0) < 0.02
    assert b["kernel"]["drift"] > 0.05 and "the device drifted" in r.message


def test_short_launches_replay_a_graph_per_timer(fake_gpu, tmp_path, monkeypatch):
    from portcheck.speed import timing as bench
    captured = []
    monkeypatch.setattr(bench, "estimate_ms", lambda fn, calls: 0.004)        # 4 us a launch
    monkeypatch.setattr(bench, "graph_estimate_ms", lambda fn, calls: 0.004)  # not host-bound
    monkeypatch.setattr(bench, "capture_graph", lambda fn, calls: captured.append(calls) or object())
    monkeypatch.setattr(bench, "replay_samples", lambda graph, repeats, calls: [0.004] * repeats)
    case = _case([])
    runner = benchrun.BenchRunner("cuda", BenchSettings(repeats=20, compile=False, graph_below_us=20.0),
                                  results_path=tmp_path / "r.jsonl")
    r = runner.bench(case, case.bench[0])
    b = r.bench
    assert r.verdict == "pass" and b["kernel"]["method"] == "cuda_graph" and b["kernel"]["n"] == 20
    # one graph each for the kernel, its second timer, torch and liger (broken fails first), of
    # about 1 ms: 250 launches, rounded down to whole rotations of the 16 input copies
    assert captured == [240] * 4 and b["kernel"]["calls_per_sample"] == 240
    assert b["repeat"]["method"] == b["baselines"]["liger"]["method"] == "cuda_graph"
    assert b["baselines"]["broken"]["error"].startswith("ZeroDivisionError")


def test_the_compiled_baseline_is_timed_with_the_others_or_says_why_not(fake_gpu, tmp_path, monkeypatch):
    case = _case([])
    settings = BenchSettings(repeats=10, compile=True, graph_below_us=0.0)
    monkeypatch.setattr(torch, "compile", lambda f, dynamic=False: f)   # no Inductor on the CPU here
    b = benchrun.BenchRunner("cuda", settings, results_path=tmp_path / "a.jsonl").bench(case, case.bench[0]).bench
    compiled = b["baselines"]["torch.compile"]
    assert compiled["compile_s"] >= 0 and compiled["speedup"] > 0 and compiled["rounds"] == 2
    assert list(b["baselines"]) == ["torch", "torch.compile", "liger", "broken"]   # the case's order

    def no_compiler(f, dynamic=False):
        raise RuntimeError("no C++ compiler")
    monkeypatch.setattr(torch, "compile", no_compiler)
    b = benchrun.BenchRunner("cuda", settings, results_path=tmp_path / "b.jsonl").bench(case, case.bench[0]).bench
    assert b["baselines"]["torch.compile"] == {"error": "RuntimeError: no C++ compiler"}
    assert b["baselines"]["torch"]["speedup"] > 0
