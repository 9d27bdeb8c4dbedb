"""Result records for the report, gate and diff tests: built through portcheck.results.Result,
so they have exactly the shape real runs write."""
from __future__ import annotations

import json
from pathlib import Path

from portcheck.results import Result

HOSTS = {"cuda": "nv-box", "rocm": "amd-box", "interpreter": "ci-runner", "hip": "ci-runner"}
DEVICES = {"cuda": ("NVIDIA H200", "580.65"), "rocm": ("AMD Instinct MI300X", "6.10.5"),
           "interpreter": ("CPU (x86_64), Triton interpreter", None)}


def provenance(target: str, arch: str, when: str, seed=1234) -> dict:
    device, driver = DEVICES.get(target, (None, None))
    p = {"host": HOSTS.get(target, "host"), "arch": arch, "torch": "2.11.0", "triton": "3.6.0",
         "portcheck": "0.1.0", "python": "3.12.3", "timestamp": when, "seed": seed,
         "command": f"portcheck run --target {target} --seed {seed}"}
    if target in DEVICES:
        p.update(target=target, device=device, driver=driver)
    return p


def runtime(case: str, dtype: str, target: str, arch: str, verdict: str = "pass", ratio: float = 0.25,
            when: str = "2026-12-01T10:00:00+00:00", message: str = "", failing=None, override=None) -> dict:
    r = Result("runtime", case, case.split("_")[0], dtype, target, arch, verdict,
               "interpreter" if target == "interpreter" else "gpu", message=message, examples=12,
               metrics={"max_abs": ratio * 1e-3, "max_rel": ratio * 1e-3, "max_ulp": ratio * 4,
                        "worst_ratio": ratio, "mismatches": 0 if verdict == "pass" else 3},
               tolerance={"y": {"formula": f"rtol = u({dtype}) + n u(fp32)", "rtol": 1e-3, "atol": 1e-6,
                                "exact": False}},
               failing_input=failing, override=override,
               reproduce=f"portcheck run --target {target} --kernel {case} --dtype {dtype}")
    r.provenance = provenance(target, arch, when)
    return r.to_dict()


def compile_rec(case: str, dtype: str, arch: str, verdict: str = "pass", regs: int = 40, spills: int = 0,
                shared: int = 4096, occupancy: float = 8, variant: str = "n=4096",
                when: str = "2026-12-01T09:00:00+00:00", lints=()) -> dict:
    backend = "hip" if arch.startswith("gfx") else "cuda"
    r = Result("compile", case, case.split("_")[0], dtype, backend, arch, verdict, "compile",
               message="" if verdict == "pass" else "PassManager::run failed",
               metrics={"regs": regs, "spills": spills, "shared": shared, "occupancy": occupancy},
               variant=variant, lints=list(lints),
               reproduce=f"portcheck compile --arch {arch} --kernel {case}")
    r.provenance = provenance("compile", arch, when, seed=None)
    r.provenance["command"] = f"portcheck compile --arch {arch}"
    return r.to_dict()


def bench_rec(case: str, dtype: str, target: str, arch: str, median_ms: float, iqr_ms: float = 0.001,
              fraction: float = 0.8, when: str = "2026-12-01T11:00:00+00:00", variant: str = "32768x4096") -> dict:
    """A measured benchmark, shaped as portcheck.speed.runner writes it (timings from portcheck.speed.timing)."""
    from portcheck.speed.timing import Timing, summarize
    samples = [median_ms - iqr_ms, median_ms - iqr_ms / 2, median_ms, median_ms + iqr_ms / 2, median_ms + iqr_ms]
    kernel = Timing(summarize(samples), "do_bench").to_dict()
    r = Result("bench", case, case.split("_")[0], dtype, target, arch, "pass", "gpu", variant=variant,
               time_ms=median_ms,
               bench={"spec": {"dtype": dtype, "rows": 32768, "cols": 4096, "seed": 0}, "label": variant,
                      "bytes": 2 * 32768 * 4096 * 2, "flops": 5 * 32768 * 4096, "kernel": kernel,
                      "gbs": 3000.0, "tflops": 0.1, "noise_bound": 0.05, "noisy": False,
                      "ceilings": {"copy_gbs": 4200.0, "matmul_tflops": {"bf16": 690.0}},
                      "ceiling": {"ms": fraction * median_ms, "bound": "memory", "copy_gbs": 4200.0},
                      "fraction_of_ceiling": fraction, "fraction_of_datasheet": fraction * 0.9,
                      "baselines": {"torch": {"median_ms": 2 * median_ms, "speedup": 2.0}}, "goals": []},
               reproduce=f"portcheck bench --kernel {case}")
    r.provenance = provenance(target, arch, when)
    return r.to_dict()


def ceilings_rec(target: str, arch: str) -> dict:
    """The device-ceilings record a bench run writes first (not a kernel timing)."""
    r = Result("bench", "ceilings", "ceilings", "-", target, arch, "pass", "gpu", variant="device ceilings",
               time_ms=0.5)
    copy = {"gbs": 4200.0, "method": "torch_copy", "torch_copy": {"gbs": 4200.0}, "triton_copy": {"gbs": 4050.0},
            "vs_torch_copy": 1.0, "agrees_with_torch_copy": True}     # as portcheck.speed.ceilings.measure_copy
    r.bench = {"ceilings": {"copy": copy, "matmul": {"bf16": {"tflops": 690.0}}},
               "device": {"name": DEVICES.get(target, ("?",))[0]}, "clocks": {}}
    r.provenance = provenance(target, arch, "2026-12-01T10:59:00+00:00", seed=None)
    return r.to_dict()


def model_rec(case: str, dtype: str, arch: str) -> dict:
    """A roofline model row (datasheet floor, never measured), as portcheck.speed.runner writes it."""
    r = Result("bench", case, case.split("_")[0], dtype, "model", arch, "skip", "model",
               message="roofline floor from datasheet peaks and the cost model; not measured", variant="32768x4096")
    r.bench = {"bytes": 1 << 28, "flops": 0, "model": {"ms": 0.05, "bound": "memory"}}
    r.provenance = provenance("model", arch, "2026-12-01T11:00:00+00:00", seed=0)
    return r.to_dict()


ARCHS10 = ("sm_80", "sm_89", "sm_90a", "sm_100a", "sm_120", "gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1201")


def two_vendors_and_compile() -> dict[str, list[dict]]:
    """An NVIDIA run, an AMD run and a compile-only run of two cases."""
    nv = [runtime("softmax", d, "cuda", "sm_90a", ratio=0.3) for d in ("fp32", "fp16")]
    nv.append(bench_rec("softmax", "fp16", "cuda", "sm_90a", 0.12, fraction=0.91))
    nv += [model_rec("softmax", "fp16", a) for a in ("sm_90a", "gfx942")] + [ceilings_rec("cuda", "sm_90a")]
    amd = [runtime("softmax", "fp32", "rocm", "gfx942", ratio=0.5),
           runtime("softmax", "fp16", "rocm", "gfx942", "fail", ratio=3.5, message="y: 3 of 4096 elements out of tolerance",
                   failing={"dtype": "fp16", "rows": 3, "cols": 1021, "regime": "large", "seed": 77})]
    comp = [compile_rec(c, d, a) for c in ("softmax", "layernorm") for d in ("fp32", "fp16") for a in ARCHS10]
    return {"nvidia": nv, "amd": amd, "compile": comp}


def write(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    return path


_REAL_RUN: dict = {}


def real_run(tmp_root: Path) -> Path:
    """results.jsonl of a real `portcheck run` in the interpreter (softmax family, fp32), made
    once per test process: records exactly as a run writes them, digests included."""
    if "path" not in _REAL_RUN:
        import os
        import subprocess
        import sys
        out = Path(tmp_root) / "real-run"
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        proc = subprocess.run([sys.executable, "-m", "portcheck", "run", "--target", "interpreter", "--kernel",
                               "softmax,softmax_long", "--dtype", "fp32", "--matrix", "matrices/ci.toml", "--seed", "7",
                               "--out", str(out)], capture_output=True, text=True, timeout=600, env=env,
                              cwd=Path(__file__).resolve().parents[2])
        assert proc.returncode == 0, proc.stdout + proc.stderr
        _REAL_RUN["path"] = out / "results.jsonl"
    return _REAL_RUN["path"]
