"""`portcheck run`: check every selected case on every selected target and write a report.

Each runtime target runs in its own worker process, because the Triton interpreter is a
process-wide mode, under a supervisor (portcheck/supervise.py): a case that hangs, crashes its
process or loses the GPU context fails alone, and the worker restarts for the remaining cases.
Records are appended as they are produced; an interrupted run still leaves a valid, partial report.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import sys
from pathlib import Path

from .. import cases as registry
from .. import results
from ..errors import UsageError
from ..matrix import PROFILES, Matrix, load
from ..overrides import load as load_overrides
from ..reports.markdown import atomic_write, markdown
from ..supervise import EXIT_CONTEXT_LOST, announce, inflight_path, supervise
from ..targets.runtime import RUNTIME_TARGETS, resolve, select_mode
from ._common import check_dtypes, csv, json_spec, named_case, timestamped, writable_dir

NAME = "run"
HELP = "check kernels against float64 oracles on this machine's targets and write a report"
DEFAULT_MATRIX = Path("matrices/default.toml")
RUN_MANIFEST = "run.json"


def add_arguments(p) -> None:
    p.add_argument("--matrix", help=f"matrix file (default: {DEFAULT_MATRIX} if present)")
    p.add_argument("--target", help="comma list of cuda, rocm, interpreter, auto (default: the matrix's)")
    p.add_argument("--kernel", help="comma list of case names or globs (default: the matrix's, else all)")
    p.add_argument("--dtype", help="comma list of dtypes (default: each case's own)")
    p.add_argument("--out", help="report directory, new or empty (default: reports/<timestamp>)")
    p.add_argument("--profile", choices=PROFILES, help="hypothesis profile (default: the matrix's)")
    p.add_argument("--seed", type=int, help="session seed (default: 0 under a derandomized profile "
                                            "such as ci, else random; recorded in the report)")
    p.add_argument("--replay", metavar="JSON", help="rerun exactly this input spec (from a failure)")
    p.add_argument("--timeout", type=float, help="seconds one case may run (default: the matrix's)")
    p.add_argument("--no-time", action="store_true", help="skip the median-time column on GPUs")
    p.add_argument("--worker", metavar="RESULTS", help=argparse.SUPPRESS)


def _plan(args) -> tuple[Matrix, list[str], list, list[str] | None]:
    if args.matrix:
        matrix = load(args.matrix)
    elif DEFAULT_MATRIX.exists():
        matrix = load(DEFAULT_MATRIX)
    else:
        matrix = Matrix(path=Path("<built-in defaults>"))
    if args.timeout is not None:
        if args.timeout <= 0:
            raise UsageError(f"--timeout must be positive, got {args.timeout:g}")
        matrix.timeout = args.timeout
    targets = csv(args.target) or matrix.targets
    for t in targets:
        if t not in (*RUNTIME_TARGETS, "auto"):
            raise UsageError(f"unknown target {t!r}; known: {', '.join(RUNTIME_TARGETS)}, auto")
    targets = list(dict.fromkeys(resolve(t) for t in targets))
    selected = registry.select(csv(args.kernel) or matrix.kernels)
    dtypes = csv(args.dtype) or matrix.dtypes or None
    check_dtypes(selected, dtypes)
    if matrix.overrides:
        load_overrides(matrix.overrides)  # an invalid or expired entry stops the run before it starts
    if args.replay:
        spec = json_spec("--replay", args.replay, "the JSON spec printed by a failure (an object with 'dtype')")
        selected = named_case(selected, args.kernel)
        if len(selected) != 1 or len(targets) != 1:
            raise UsageError("--replay needs exactly one --kernel and one --target")
        args.replay_spec = spec
    return matrix, targets, selected, dtypes


def main(args) -> int:
    if args.worker:  # fix the Triton mode before _plan imports any kernel module
        select_mode(args.target)
    matrix, targets, selected, dtypes = _plan(args)
    if args.worker:
        return _work(args, matrix, targets[0], selected, dtypes)
    out = Path(args.out) if args.out else timestamped("reports")
    if (out / "results.jsonl").exists():
        raise UsageError(f"{out / 'results.jsonl'} exists already; choose a new --out")
    out = writable_dir(out)
    results_path = out / "results.jsonl"
    from ..strategies import session_seed
    seed = args.seed if args.seed is not None else session_seed(args.profile or matrix.profile)
    manifest = {"command": shlex.join(["portcheck", *sys.argv[1:]]), "targets": targets,
                "seed": seed, "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "status": "running"}
    atomic_write(out / RUN_MANIFEST, json.dumps(manifest, indent=2))
    status, interrupted = 0, False
    try:
        for target in targets:
            cmd = [sys.executable, "-m", "portcheck", *_child_argv(args, target, seed, results_path)]
            env = dict(os.environ)
            env.pop("TRITON_INTERPRET", None)
            if target == "interpreter":
                env["TRITON_INTERPRET"] = "1"
            print(f"== {target}: portcheck {shlex.join(cmd[3:])}", flush=True)
            status = max(status, supervise(cmd, env, results_path, target, matrix.timeout))
    except KeyboardInterrupt:
        interrupted, status = True, 130
        print("\nportcheck: interrupted; writing the partial report", file=sys.stderr, flush=True)
    records = results.read(results_path) if results_path.exists() else []
    manifest.update(status="interrupted" if interrupted else "complete",
                    finished=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    title = f"portcheck run ({', '.join(targets)})" + (" - PARTIAL: interrupted" if interrupted else "")
    atomic_write(out / "matrix.md", markdown(records, title))
    atomic_write(out / RUN_MANIFEST, json.dumps(manifest, indent=2))
    print(f"\nreport: {out / 'matrix.md'}\nresults: {results_path}")
    return status


def _child_argv(args, target: str, seed: int, results_path: Path) -> list[str]:
    argv = ["run", "--target", target, "--seed", str(seed), "--worker", str(results_path)]
    for flag in ("matrix", "kernel", "dtype", "profile", "replay"):
        value = getattr(args, flag)
        if value:
            argv += [f"--{flag}", value]
    if args.no_time:
        argv.append("--no-time")
    return argv


def _done(results_path: Path, target: str) -> set[tuple[str, str]]:
    if not results_path.exists():
        return set()
    return {(r["case"], r["dtype"]) for r in results.read(results_path)
            if r.get("kind") == "runtime" and r.get("target") == target}


def _gpu_context_ok() -> bool:
    import torch
    try:
        torch.cuda.synchronize()
        return torch.ones(1, device="cuda").add_(1).item() == 2.0
    except Exception:
        return False


def _work(args, matrix: Matrix, target: str, selected, dtypes) -> int:
    """Worker process: fixed to one target's Triton mode; appends one record per case x dtype."""
    from ..session import Session
    results_path = Path(args.worker)
    command = shlex.join(["portcheck", "run", "--target", target, "--seed", str(args.seed)]
                         + (["--kernel", args.kernel] if args.kernel else [])
                         + (["--dtype", args.dtype] if args.dtype else []))
    overrides = load_overrides(matrix.overrides) if matrix.overrides else []
    session = Session(target, profile=args.profile or matrix.profile, max_elements=matrix.max_elements,
                      seed=args.seed, overrides=overrides, results_path=results_path,
                      time=matrix.time and not args.no_time, command=command)
    if not session.availability.ok:
        print(f"{target}: not available: {session.availability.reason}", flush=True)
        return 0
    inflight = inflight_path(results_path, target)
    done = _done(results_path, target)
    provenance = session.provenance()
    failed = any(r.get("verdict") in ("fail", "error", "xpass") for r in
                 (results.read(results_path) if done else []) if r.get("target") == target)
    for module, why in registry.LOAD_ERRORS.items():   # a module that does not import fails alone
        if (module, "-") not in done:
            results.append(results_path, results.Result(
                "runtime", module, module.rsplit(".", 1)[-1], "-", target, session.arch, "error",
                "gpu" if session.target.is_gpu else "interpreter",
                message=f"kernel module does not import: {why}", provenance=provenance).to_dict())
            print(f"{target}/{session.arch} {module}: does not import: {why}", flush=True)
        failed = True
    for case in selected:
        for dtype in [d for d in case.dtypes if dtypes is None or d in dtypes]:
            spec = getattr(args, "replay_spec", None)
            if (case.name, dtype) in done or (spec is not None and spec.get("dtype") != dtype):
                continue
            from ..runner import reproduce_command
            state = {"case": case.name, "family": case.family, "dtype": dtype, "arch": session.arch,
                     "started": __import__("time").time(), "provenance": provenance,
                     "reproduce": reproduce_command(target, case.name, dtype, None)}
            announce(inflight, state)

            def on_example(example, state=state):
                announce(inflight, {**state, "spec": example})

            r = session.run(case, dtype, spec=spec, on_example=on_example)
            inflight.unlink(missing_ok=True)
            failed |= not r.passed
            extra = f" {r.metrics['max_ulp']:.3g} ulp" if r.verdict != "error" and r.metrics else ""
            print(f"{target}/{session.arch} {case.name:<24} {dtype:<8} {r.verdict:<6}{extra}"
                  f"{'  ' + r.message if r.verdict != 'pass' else ''}", flush=True)
            if not r.passed:
                print(f"    replay: {r.reproduce}", flush=True)
            if r.verdict == "error" and session.target.is_gpu and not _gpu_context_ok():
                print(f"{target}: the GPU context is unusable after this case; restarting the worker",
                      flush=True)
                sys.exit(EXIT_CONTEXT_LOST)
    return 1 if failed else 0
