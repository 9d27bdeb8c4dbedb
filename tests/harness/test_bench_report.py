"""The speed section (portcheck/speed/report.py) from hand-made records: measured figures per
device, flags for noise, disagreeing repeats and unmet goals, the model kept apart."""
from portcheck.speed.timing import summarize
from portcheck.speed.report import bench_matrix
from portcheck.speed.runner import speed_goals


def _stats(samples, method="do_bench"):
    return {**summarize(samples).to_dict(), "method": method, "sets": 1, "calls_per_sample": 1, "note": ""}


def _ceilings(host, uuid):
    return {"kind": "bench", "case": "ceilings", "family": "ceilings", "dtype": "-", "target": "cuda",
            "arch": "sm_90a", "verdict": "pass", "evidence": "gpu", "variant": "device ceilings",
            "bench": {"ceilings": {"copy": {"gbs": 4200.0, "torch_copy": {"gbs": 4190.0},
                                            "triton_copy": {"gbs": 4200.0}, "vs_torch_copy": 1.002,
                                            "agrees_with_torch_copy": True},
                                   "matmul": {"bf16": {"tflops": 694.0}, "int8": {"error": "RuntimeError: no"}}}},
            "provenance": {"host": host, "gpu_uuid": uuid, "device": "NVIDIA H200", "driver": "580.1",
                           "torch": "2.11.0", "triton": "3.6.0", "command": "portcheck bench"}}


def _measured(host, uuid, case="softmax", kernel=(0.128, 0.129, 0.127, 0.128, 0.130), repeat=None,
              gbs_fraction=0.97, peer_ms=None, nbytes=512 * 2**20):
    k = _stats(kernel)
    b = {"spec": {"dtype": "bf16"}, "label": "bf16 rows=32768 cols=4096", "bytes": nbytes, "flops": 1,
         "kernel": k, "gbs": 4200.0 * gbs_fraction, "tflops": 0.01, "noise_bound": 0.05,
         "noisy": k["rel_spread"] > 0.05, "ceiling": {"bound": "memory", "copy_gbs": 4200.0},
         "fraction_of_ceiling": gbs_fraction, "fraction_of_datasheet": gbs_fraction * 4200 / 4800,
         "baselines": {"torch": {**_stats([0.2, 0.21, 0.2]), "speedup": 0.2 / k["median_ms"]},
                       "torch.compile": {"error": "BackendCompilerFailed: x"}},
         "clocks": {"before": {"clocks.sm": 1980}, "after": {"clocks.sm": 1965}}}
    if peer_ms is not None:
        b["baselines"]["flaggems"] = {**_stats(peer_ms), "speedup": sorted(peer_ms)[len(peer_ms) // 2] / k["median_ms"]}
    if repeat is not None:
        from portcheck.speed.timing import Stats, agree
        b["repeat"] = _stats(repeat)
        b["repeat_agrees"] = agree(Stats.from_dict(k), Stats.from_dict(b["repeat"]))
    b["goals"] = speed_goals(b)
    return {"kind": "bench", "case": case, "family": case, "dtype": "bf16", "target": "cuda", "arch": "sm_90a",
            "verdict": "pass", "evidence": "gpu", "variant": b["label"], "bench": b,
            "provenance": {"host": host, "gpu_uuid": uuid, "device": "NVIDIA H200", "driver": "580.1",
                           "torch": "2.11.0", "triton": "3.6.0", "command": "portcheck bench"}}


def _model(arch, ms):
    return {"kind": "bench", "case": "softmax", "family": "softmax", "dtype": "bf16", "target": "model",
            "arch": arch, "verdict": "skip", "evidence": "model", "variant": "bf16 rows=32768 cols=4096",
            "bench": {"bytes": 512 * 2**20, "flops": 1,
                      "model": {"ms": ms, "bound": "memory", "compute_ms": 0.0}}, "provenance": {}}


def test_no_bench_records_no_section():
    assert bench_matrix([]) == ""
    assert bench_matrix([{"kind": "runtime", "case": "softmax"}]) == ""


def test_measured_per_device_and_model_apart():
    recs = [_ceilings("hostA", "u1"), _measured("hostA", "u1"), _ceilings("hostB", "u2"),
            _measured("hostB", "u2", gbs_fraction=0.90), _model("gfx942", 0.101), _model("sm_100a", 0.067)]
    md = bench_matrix(recs)
    assert md.count("### NVIDIA H200 (cuda/sm_90a), host hostA") == 1
    assert md.count("### NVIDIA H200 (cuda/sm_90a), host hostB") == 1
    assert md.count("Ceilings measured in this run") == 2 and "int8 n/a" in md
    measured_part, model_part = md.split("### Roofline model")
    assert "gfx942" not in measured_part.split("### Speed goals")[0]
    assert "gfx942" in model_part and "101 m" in model_part and "a model, not a measurement" in model_part
    assert "torch.compile: error" in md
    errors = md.split("### Baselines that failed")[1].split("###")[0]   # each with its message
    assert errors.count("| torch.compile | BackendCompilerFailed: x |") == 2
    # hostB's kernel at 90% of the copy ceiling misses the 95% goal, and says so
    assert "**NOT MET**" in md and "goal unmet" in md
    assert "1980→1965" in md


def test_noise_repeat_and_peer_flags():
    noisy = _measured("h", "u", kernel=(0.10, 0.15, 0.10, 0.15, 0.10, 0.15),
                      repeat=(0.30, 0.31, 0.30, 0.31, 0.30), peer_ms=(0.05, 0.05, 0.05))
    md = bench_matrix([_ceilings("h", "u"), noisy])
    assert "NOISY" in md and "repeat disagrees" in md and "**NO**" in md
    assert "timed again after its baselines" in md     # records without rounds: the old method
    assert "goal unmet: no slower than flaggems" in md


def test_speed_goals():
    fast = _measured("h", "u", peer_ms=(0.2, 0.2, 0.2))["bench"]
    assert [(g["goal"].split()[0], g["met"]) for g in fast["goals"]] == [("≥", True), ("no", True)]
    small = _measured("h", "u", nbytes=10 * 2**20)["bench"]      # under 256 MB: no bandwidth goal
    assert small["goals"] == []
    # within the spread of the peer counts as no slower
    close = _measured("h", "u", kernel=(0.100, 0.101, 0.099, 0.102, 0.098), peer_ms=(0.0995, 0.1, 0.099))
    assert close["bench"]["goals"][-1]["met"] is True
