#!/usr/bin/env python3
"""matmul's autotuner with and without the pruned lists (configs/pruned/matmul.json), side by side.

    python tools/bench_pruned.py [--rounds 5] [--out pruned.json]      (on a GPU)

For every bench spec of the autotuned matmul cases, each autotuner (all configurations the arch
declares, and only those `portcheck prune` kept) tunes once, then both are timed in interleaved
rounds (order reversed every other round, so clock drift lands on both) with
triton.testing.do_bench; the medians, their ratio and the configuration each autotuner chose are
printed and written as JSON with the run's provenance.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch
import triton.testing

from portcheck import cases
from portcheck.facts.device import current_arch
from portcheck.kernels._pruned import configs_for
from portcheck.kernels.matmul import launcher
from portcheck.provenance import collect

CASES = ("matmul", "matmul_fp8", "matmul_int8")


def _launch(case, args, outs, pruned: bool):
    original = launcher._autotuned
    launcher._autotuned = lambda arch, cls: original(arch, cls, pruned)
    try:
        case.launch(args, outs)
    finally:
        launcher._autotuned = original


def _chosen(arch, dtype: str, pruned: bool) -> str:
    tuner = launcher._autotuned(arch, launcher.dtype_class(dtype), pruned)
    best = list(tuner.cache.values())[-1] if tuner.cache else None
    if best is None:
        return "?"
    k = best.kwargs
    return f"{k['BLOCK_M']}x{k['BLOCK_N']}x{k['BLOCK_K']} w{best.num_warps} s{best.num_stages}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default=None)
    opts = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_pruned: needs a GPU", file=sys.stderr)
        return 2
    arch = current_arch()
    rows = []
    for name in CASES:
        case = cases.get(name)
        for spec in case.bench:
            if spec.get("config") is not None or (spec["dtype"].startswith("fp8")
                                                   and spec["dtype"] not in arch.fp8_native):
                continue
            every = launcher._autotuned(arch, launcher.dtype_class(spec["dtype"]), False).configs
            kept = configs_for("matmul", arch.name, every, spec["dtype"])
            if len(kept) == len(every):   # nothing pruned: both autotuners time the same list
                print(f"{name:12} {spec['dtype']:8} {spec['m']}x{spec['n']}x{spec['k']}: "
                      f"all {len(every)} configurations kept, not timed", flush=True)
                rows.append({"case": name, "dtype": spec["dtype"], "m": spec["m"], "n": spec["n"],
                             "k": spec["k"], "configs": len(every), "kept": len(kept)})
                continue
            spec = {**spec, "seed": spec.get("seed", 0)}
            args = case.make(spec, "cuda")
            outs = {n: torch.empty(shape, dtype=dt, device="cuda") for n, (shape, dt) in case.outputs(args).items()}
            for pruned in (False, True):      # tune each once, outside the timing
                _launch(case, args, outs, pruned)
            times = {False: [], True: []}
            for r in range(opts.rounds):
                for pruned in ((False, True) if r % 2 == 0 else (True, False)):
                    times[pruned].append(triton.testing.do_bench(
                        lambda: _launch(case, args, outs, pruned), return_mode="median"))
            all_ms, pruned_ms = statistics.median(times[False]), statistics.median(times[True])
            row = {"case": name, "dtype": spec["dtype"], "m": spec["m"], "n": spec["n"], "k": spec["k"],
                   "configs": len(every), "kept": len(kept),
                   "all_ms": all_ms, "pruned_ms": pruned_ms, "pruned_speedup": all_ms / pruned_ms,
                   "all_chose": _chosen(arch, spec["dtype"], False),
                   "pruned_chose": _chosen(arch, spec["dtype"], True)}
            rows.append(row)
            save(opts.out, arch, rows)
            print(f"{name:12} {spec['dtype']:8} {spec['m']}x{spec['n']}x{spec['k']}: all {all_ms:.4f} ms "
                  f"({row['all_chose']}), pruned {pruned_ms:.4f} ms ({row['pruned_chose']}), "
                  f"pruned/all speed {row['pruned_speedup']:.3f}", flush=True)
    save(opts.out, arch, rows)
    return 0


def save(path, arch, rows) -> None:
    """Written after every row, so a run cut short keeps what it measured."""
    if path:
        from portcheck.targets.runtime import TARGETS
        doc = {"provenance": collect(TARGETS["cuda"], arch.name, command=" ".join(["python3", *sys.argv])),
               "rows": rows}
        with open(path, "w") as f:
            json.dump(doc, f, indent=1, default=str)


if __name__ == "__main__":
    sys.exit(main())
