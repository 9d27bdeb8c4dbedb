"""`portcheck math`: the accuracy of Triton's float32 math functions on a target.

On a GPU every one of the 2^32 inputs is measured; on the interpreter a stratified sample, so
labelled. The lowering of each function is read from cross-compiled code for every arch.
The measurement runs in a child process fixed to the target's Triton mode; the cross-compiles
run in this process, where TRITON_INTERPRET is unset.
"""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
from pathlib import Path

from .. import results
from ..errors import UsageError
from ..reports.output import atomic_write
from ..facts.archs import ARCHS, parse_archs
from ..supervise import PORTCHECK
from ..targets.runtime import RUNTIME_TARGETS, resolve, select_mode, target_env
from ._common import csv, timestamped, writable_dir

NAME = "math"
HELP = "measure the ULP error of Triton's math functions (exhaustive on a GPU) and their lowering per arch"


def add_arguments(p) -> None:
    p.add_argument("--function", help="comma list of functions (tl.exp, libdevice.exp, ...) or bases (exp)")
    p.add_argument("--target", default="auto", help="cuda, rocm, interpreter or auto (default)")
    p.add_argument("--arch", default="all", help="archs to cross-compile for the lowering table, or 'none'")
    p.add_argument("--out", help="output directory (default: reports/math-<timestamp>)")
    p.add_argument("--per-exponent", type=int, default=64,
                   help="sample size per sign and exponent on the interpreter (default 64)")
    p.add_argument("--worker", metavar="RESULTS", help=argparse.SUPPRESS)


def main(args) -> int:
    from ..mathacc.functions import select
    if args.target not in (*RUNTIME_TARGETS, "auto"):
        raise UsageError(f"unknown target {args.target!r}; known: {', '.join(RUNTIME_TARGETS)}, auto")
    if args.per_exponent <= 0:
        raise UsageError("--per-exponent must be positive")
    target = resolve(args.target)
    fns = select(csv(args.function))
    archs = () if args.arch == "none" else parse_archs(args.arch)
    if args.worker:
        return _measure(target, fns, Path(args.worker), args.per_exponent)
    from ..targets.runtime import target as runtime_target
    available = runtime_target(target).availability()
    if not available.ok:   # before anything is written: not an empty math.md
        raise UsageError(f"target {target} is not available: {available.reason}")
    out = writable_dir(args.out or timestamped("reports").with_name("math-" + timestamped("r").name))
    path = out / "results.jsonl"
    if path.exists():
        raise UsageError(f"{path} exists already; choose a new --out")
    env = target_env(target)
    cmd = [*PORTCHECK, "math", "--target", target, "--arch", "none",
           "--per-exponent", str(args.per_exponent), "--worker", str(path)]
    if args.function:
        cmd += ["--function", args.function]
    code = subprocess.run(cmd, env=env).returncode
    select_mode("compile")           # the lowering table: compiled kernels, never interpreted
    _lowering(fns, archs, path)
    from ..mathacc.report import math_section
    atomic_write(out / "math.md", math_section(results.read(path)) if path.exists() else "no results\n")
    print(f"report: {out / 'math.md'}")
    return 0 if code == 0 else 1


def _lowering(fns, archs, path: Path) -> None:
    from ..mathacc.lowering import lower
    from ..provenance import collect
    for name in archs:
        arch = ARCHS[name]
        for fn in fns:
            try:
                text = lower(fn.name, arch)
            except Exception as exc:   # a function the arch's backend cannot build
                text = f"does not compile: {str(exc).strip().splitlines()[-1][:120]}"
            r = results.Result("math", fn.name, fn.base, "fp32", "compile", name, "pass", "compile",
                               message=text, provenance=collect(None, name))
            results.append(path, r.to_dict())


def _measure(target: str, fns, path: Path, per_exponent: int) -> int:
    select_mode(target)
    from ..mathacc.sweep import sweep_gpu, sweep_sample
    from ..provenance import collect
    from ..targets.runtime import TARGETS
    t = TARGETS[target]
    avail = t.availability()
    if not avail.ok:
        raise UsageError(f"target {target} is not available here: {avail.reason}")
    arch = t.arch()
    command = shlex.join(["portcheck", "math", "--target", target, "--function", ",".join(f.name for f in fns)])
    for fn in fns:
        r = results.Result("math", fn.name, fn.base, "fp32", target, arch, "pass",
                           "gpu" if t.is_gpu else "interpreter", provenance=collect(t, arch, command=command))
        try:
            stats = sweep_gpu(fn) if t.is_gpu else sweep_sample(fn, t.device, per_exponent)
        except Exception as exc:   # e.g. libdevice on the interpreter
            r.verdict, r.message = "skip", f"unsupported on {target}: {type(exc).__name__}: {str(exc)[:160]}"
            results.append(path, r.to_dict())
            print(f"{fn.name:<20} {r.message}", flush=True)
            continue
        r.metrics = {k: v for k, v in vars(stats).items() if k != "function"}
        r.variant = "exhaustive" if stats.exhaustive else f"sample of {stats.inputs}"
        bound = fn.cuda_bound if t.vendor == "nvidia" else fn.hip_bound if t.vendor == "amd" else None
        r.metrics["documented_bound"] = bound
        notes = []
        if bound is not None and stats.max_ulp_normal > bound + 0.5:
            # a documented bound of b ULP allows results within b ULP of the rounded result:
            # up to b + 0.5 ULP from the exact value
            r.verdict = "fail"
            notes.append(f"{stats.max_ulp_normal:.3g} ULP over normal inputs is above the documented "
                         f"{bound} ULP")
        if stats.special_mismatches:
            notes.append("special values differ from IEEE: " + json.dumps(stats.special_mismatches))
        r.message = "; ".join(notes)
        results.append(path, r.to_dict())
        print(f"{fn.name:<20} max {stats.max_ulp:.3g} ULP at x={stats.worst_x!r}; normal {stats.max_ulp_normal:.3g}; "
              f"{stats.seconds:.1f} s {r.message}", flush=True)
    return 0
