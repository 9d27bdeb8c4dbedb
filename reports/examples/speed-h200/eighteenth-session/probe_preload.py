"""A long pole's warm-up on this GPU, step by step (issue 17): the launches its examples make,
noted; what the JIT would compile for them (Triton's jit_cache_hook); those compiled in N
processes (JITFunction.preload) into an empty Triton cache; then the JIT's own lookups of the same
launches, which must find every kernel there (milliseconds, not a compile each). JSON per step.
  TRITON_CACHE_DIR=$(mktemp -d) python3 probe_preload.py matmul_fp8_out fp8e4nv 4
"""
import functools
import json
import sys
import time

import hypothesis

from portcheck import cases, precompile, runner
from portcheck.compile.pool import Pool
from portcheck.session import case_seed
from portcheck.strategies import register_profiles

register_profiles()
name, dtype, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
case = cases.get(name)
settings = hypothesis.settings.get_profile("ci")
specs = precompile.examples(case.inputs(dtype, 1 << 22), settings, case_seed(0, name, dtype))


def launch(spec):
    args, _ = runner._inputs(case, "cuda", spec, runner.CHECKS)
    case.launch(args, runner._outputs(case, args, "cuda", runner.CHECKS.guards)[0])


jobs = [functools.partial(launch, s) for s in specs]
out = {"case": name, "dtype": dtype, "processes": n, "examples": len(specs)}
t = time.perf_counter()
noted = precompile.noted_launches(jobs)
out["noted"], out["noting_s"] = len(noted), round(time.perf_counter() - t, 2)
errors = []
for kernel, args, kwargs in noted[:1]:   # what a warm-up with the hook raises, if anything
    try:
        from triton import knobs
        knobs.runtime.jit_cache_hook = lambda **k: True
        kernel.warmup(*args, grid=(1,), **kwargs)
    except Exception as exc:   # noqa: BLE001
        errors.append(f"{type(exc).__name__}: {exc}"[:300])
    finally:
        knobs.runtime.jit_cache_hook = None
t = time.perf_counter()
payloads = precompile.specializations(noted)
out["to_compile"], out["hook_errors"] = len(payloads), errors
out["signatures"] = sorted({",".join(v for v in json.loads(p["preload"])["signature"].values() if "tensordesc" in v or v.startswith("*"))
                            for p in payloads})[:4]
results = []
with Pool(n, 300) as pool:
    pool.start()
    pool.run([(i, p, "") for i, p in enumerate(payloads)], lambda key, raw: results.append(raw))
out["preload_s"] = round(time.perf_counter() - t, 2)
out["preloads"] = [{k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items()} for r in results]
t = time.perf_counter()
for kernel, args, kwargs in noted:
    kernel.warmup(*args, grid=(1,), **kwargs)
out["jit_lookups_s"] = round(time.perf_counter() - t, 2)
t = time.perf_counter()
for job in jobs:
    job()
out["launches_s"] = round(time.perf_counter() - t, 2)
print(json.dumps(out))
