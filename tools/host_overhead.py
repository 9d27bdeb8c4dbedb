"""Host time of one launch of rope, paged decode and matmul, next to torch (a developer's tool, not a test).

    python3 tools/host_overhead.py [--json PATH] [--count 100] [--rounds 10] [--profile] [--list]

Per workload (rope's bench spec and a decode step of it; paged decode's bench batch and a small
one, with validate=False as a serving loop calls it and validate=True; matmul at M = 1 (split-K)
and 256^3 (tensor descriptors on sm_90a)), side by side in one process:

- host us per launch: after a sync, `count` launches back to back with no sync between them,
  wall time / count; the median of `rounds` such rounds, interleaved over every row (each round
  times every launch in turn, so drift in the host's speed reaches every row alike). For the
  portcheck launcher planned (the usual path: the first launch of a key plans it,
  kernels/_plans.py), unplanned (its plans cleared and none kept, so every launch runs the
  checks, Triton's dispatch and the recording too: about the cost before plans), torch eager
  (the case's own baselines) and, once, one one-kernel torch op (the least a launch from Python
  costs on this host);
- GPU us per launch: CUDA-graph replay (no host in the loop), median.

`bound` says which is larger. Where the GPU is (GPU us > host us) the launches fill the launch
queue and then wait for the GPU, so the host figure is an upper bound there; the host figures of
the small workloads are the ones that count. Goal (issue #22): at most GOAL_US of host time per
planned launch. `--profile` adds a cProfile of each planned launcher; `--list` prints what would
be measured and exits (no GPU needed). Speed claims in reports come from `portcheck bench`.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import time

import torch
import triton
import triton.testing

GOAL_US = 20.0
DEVICE = "cuda"

# (name, case, changes to the case's first bench spec)
WORKLOADS = [
    ("rope: decode step, 32 tokens", "rope", {"tokens": 32}),
    ("rope: bench, 16384 tokens", "rope", {}),
    ("paged decode: 8 sequences x 1024 tokens", "paged_attention", {"context_lens": [1024] * 8}),
    ("paged decode: bench, 64 sequences x 4096 tokens", "paged_attention", {}),
    ("matmul: bf16 1 x 4104 x 4104", "matmul", {"dtype": "bf16", "m": 1, "n": 4104, "k": 4104}),
    ("matmul: bf16 256^3", "matmul", {"dtype": "bf16", "m": 256, "n": 256, "k": 256}),
]
WHAT = {
    "rope": ["portcheck planned", "portcheck unplanned", "torch"],
    "paged_attention": ["portcheck planned (validate=False)", "portcheck unplanned (validate=False)",
                        "portcheck validate=True (checked, one sync)", "torch", "sdpa"],
    "matmul": ["portcheck planned", "portcheck unplanned", "torch"],
}
# the baselines timed next to each case's launcher
BASELINES = {"rope": ("torch",), "paged_attention": ("torch", "sdpa"), "matmul": ("torch",)}


def _launchers(case_name: str, args: dict):
    """({what: zero-arg launch}, the launcher's Plans) of one workload's arguments."""
    if case_name == "rope":
        from portcheck.kernels import rope as R
        pos, q, k, d, cache, neox = (args[n] for n in ("positions", "query", "key", "head_size", "cache", "neox"))
        # in place, as vLLM calls it (repeated rotations keep the values' size)
        return {"portcheck": lambda: R.rotary_embedding(pos, q, k, d, cache, neox)}, R._PLANS
    if case_name == "matmul":
        from portcheck.kernels.matmul import launcher as M
        return {"portcheck": lambda: M.matmul(args["a"], args["b"])}, M._PLANS
    from portcheck.kernels import paged_attention as P
    out = torch.empty_like(args["query"])

    def call(validate: bool):
        a = args
        return lambda: P.paged_decode_attention(
            a["query"], a["key_cache"], a["value_cache"], a["block_tables"], a["context_lens"],
            scale=a["scale"], out=out, max_context_len=a["max_context_len"], num_splits=a["num_splits"],
            validate=validate)
    return {"portcheck": call(False), "validate": call(True)}, P._PLANS


def host_us(fns: dict, count: int, rounds: int) -> dict:
    """{name: median over rounds of wall time / count} for zero-arg launches, launches back to
    back after a sync. The rounds are interleaved (each round times every launch in turn), so a
    host whose speed drifts during the run (the leases' hosts do, by a third) moves every row
    alike instead of the rows measured during a slow spell."""
    for fn in fns.values():
        for _ in range(20):     # compiled, planned, allocator warm
            fn()
    per = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            fn()                # (re-plans an entry whose plans the unplanned entry cleared)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(count):
                fn()
            per[name].append((time.perf_counter() - t0) / count)
    torch.cuda.synchronize()
    return {name: statistics.median(t) * 1e6 for name, t in per.items()}


def gpu_us(fn) -> float | str:
    """Median GPU microseconds of one launch by CUDA-graph replay, or why it could not be."""
    try:
        fn()
        torch.cuda.synchronize()
        return triton.testing.do_bench_cudagraph(fn, rep=50, return_mode="median") * 1e3
    except Exception as exc:  # noqa: BLE001 - a launch that cannot be captured is a row too
        return f"{type(exc).__name__}: {exc}"[:200]


def _unplanned(fn, plans):
    """fn with the launcher keeping no plan: every launch is checked and dispatched by Triton."""
    def call():
        limit, plans.limit = plans.limit, 0
        plans.clear()
        try:
            return fn()
        finally:
            plans.limit = limit
    return call


def _row(workload: str, what: str, host, gpu) -> dict:
    row = {"workload": workload, "what": what, "host_us": host, "gpu_us": gpu}
    if isinstance(host, float) and isinstance(gpu, float):
        row["bound"] = "host" if host > gpu else "gpu"
    if what.startswith("portcheck planned") and isinstance(host, float):
        row["goal_met"] = host <= GOAL_US
    print(json.dumps(row), flush=True)
    return row


def measure(count: int, rounds: int, profile: bool) -> tuple[list[dict], dict]:
    from portcheck import cases as C
    from portcheck.strategies import drawn_on
    small = torch.zeros(1024, device=DEVICE)
    timed = {("floor", "torch: one small kernel (x.add_(1))"): lambda: small.add_(1)}
    gpu = {("floor", "torch: one small kernel (x.add_(1))"): gpu_us(lambda: small.add_(1))}
    planned = {}
    for workload, case_name, change in WORKLOADS:
        case = C.get(case_name)
        spec = {**case.bench[0], **change}
        with drawn_on(DEVICE):
            args = case.make(spec, DEVICE)
        ours, plans = _launchers(case_name, args)
        label = WHAT[case_name]
        planned[workload] = ours["portcheck"]
        ours_gpu = gpu_us(ours["portcheck"])
        timed[(workload, label[0])] = ours["portcheck"]
        gpu[(workload, label[0])] = ours_gpu
        timed[(workload, label[1])] = _unplanned(ours["portcheck"], plans)
        gpu[(workload, label[1])] = ours_gpu
        if "validate" in ours:
            timed[(workload, label[2])] = ours["validate"]
            gpu[(workload, label[2])] = None
        for name, fn in case.baselines(args).items():
            if name in BASELINES[case_name]:
                timed[(workload, name)] = fn
                gpu[(workload, name)] = gpu_us(fn)
    host = host_us(timed, count, rounds)
    rows = [_row(workload, what, host[(workload, what)], gpu[(workload, what)]) for workload, what in timed]
    profiles = {}
    if profile:
        for workload, fn in planned.items():
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(2000):
                fn()
            prof.disable()
            torch.cuda.synchronize()
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
            profiles[workload] = text.getvalue()
            print(text.getvalue(), flush=True)
    return rows, profiles


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", help="write the rows (and profiles) here")
    p.add_argument("--count", type=int, default=100, help="launches per round")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--profile", action="store_true", help="cProfile 2000 planned launches per workload")
    p.add_argument("--list", action="store_true", help="print what would be measured and exit")
    args = p.parse_args(argv)
    if args.list:
        print("floor: torch: one small kernel (x.add_(1)): host us, GPU us")
        for workload, case_name, _ in WORKLOADS:
            for what in WHAT[case_name]:
                print(f"{workload}: {what}: host us{'' if 'validate=True' in what else ', GPU us'}")
        return 0
    rows, profiles = measure(args.count, args.rounds, args.profile)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "triton": triton.__version__, "goal_us": GOAL_US, "count": args.count,
                       "rounds": args.rounds, "rows": rows, "profiles": profiles}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
