"""`portcheck compile`: cross-compile every kernel variant for every arch, no GPU needed, and lint
what the compiler produced (hardware limits Triton does not check at compile time).

    portcheck compile [--arch LIST|all] [--kernel LIST] [--out DIR] [--jobs N] [--timeout S]
    portcheck compile --from DIR [DIR ...] --out DIR     # re-render runs (e.g. one per Triton release)

Writes DIR/results.jsonl (one Result per kernel x variant x arch, kind='compile') and
DIR/compile.md (the kernel x arch matrix). Exit status 1 when any record fails: an error-severity
finding, or a warning too with --fail-on warning (the matrix's `[compile] fail_on`).
"""
from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

from .. import cases as registry
from .. import results
from ..errors import UsageError
from ..matrix import RunPlan
from ..facts.archs import parse_archs
from ._common import (DEFAULT_MATRIX, add_cases_argument, csv, load_cases, load_run_plan, plan_sources, timestamped,
                      writable_dir)

NAME = "compile"
HELP = "cross-compile every kernel variant for every arch (no GPU needed) and lint the result"


def add_arguments(p) -> None:
    p.add_argument("--arch", help="comma list of archs, or 'all' (default: the matrix's [compile] "
                                  "archs, else all ten)")
    p.add_argument("--kernel", help="comma list of case names or globs, or family:NAME (default: the "
                                    "matrix's, else all)")
    add_cases_argument(p)
    p.add_argument("--out", help="output directory (default: reports/<timestamp>)")
    p.add_argument("--jobs", type=int, help="compile worker processes (default: the matrix's, else 2)")
    p.add_argument("--timeout", type=float, help="seconds one compile may take before it is killed "
                                                 "(default: the matrix's, else 300)")
    p.add_argument("--max-variants", type=int, metavar="N",
                   help="at most N variants per kernel x arch, every dtype first (default: the "
                        "matrix's, else 0: all)")
    p.add_argument("--fail-on", choices=("error", "warning"),
                   help="the least finding severity that fails a compile and the exit status "
                        "(default: the matrix's [compile] fail_on, else error)")
    p.add_argument("--matrix", help=f"matrix file (default: {DEFAULT_MATRIX} if present)")
    p.add_argument("--from", dest="sources", nargs="+", metavar="DIR",
                   help="render the compile matrix of earlier runs (their results.jsonl) instead of compiling")


def _settings(args, matrix: RunPlan):
    from dataclasses import replace
    from ..compile.plan import CompileSettings
    s = matrix.compile or CompileSettings()
    if args.jobs is not None:
        if args.jobs < 1:
            raise UsageError(f"--jobs must be a positive number of worker processes, got {args.jobs}")
        s = replace(s, jobs=args.jobs)
    if args.timeout is not None:
        if not args.timeout > 0:
            raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
        s = replace(s, timeout=args.timeout)
    if args.arch is not None:
        s = replace(s, archs=parse_archs(",".join(csv(args.arch))))   # '' names no arch: an error
    if args.fail_on is not None:
        s = replace(s, fail_on=args.fail_on)
    if args.max_variants is not None:
        if args.max_variants < 0:
            raise UsageError(f"--max-variants must be 0 (all) or more, got {args.max_variants}")
        s = replace(s, max_variants=args.max_variants)
    return s


def _render(args) -> int:
    from ..compile.report import compile_matrix
    from ..reports.output import atomic_write
    records = []
    for src in args.sources:
        path = Path(src) / "results.jsonl" if Path(src).is_dir() else Path(src)
        if not path.is_file():
            raise UsageError(f"--from {src}: no results.jsonl there")
        records += [r for r in results.read(path) if r.get("kind") == "compile"]
    if not records:
        raise UsageError("--from: no compile records in " + ", ".join(args.sources))
    out = writable_dir(args.out or timestamped("reports"))
    atomic_write(out / "compile.md", "# portcheck compile\n\n" + compile_matrix(records))
    print(f"report: {out / 'compile.md'} ({len(records)} records)")
    return 0


def main(args) -> int:
    if args.sources:
        return _render(args)
    matrix = load_run_plan(args.matrix)
    settings = _settings(args, matrix)
    load_cases(args, matrix)
    print(f"portcheck compile: {plan_sources(matrix)}", flush=True)
    selected = registry.select(csv(args.kernel) or matrix.kernels or None)
    out = writable_dir(args.out or timestamped("reports"))      # before any compile starts
    results_path = out / "results.jsonl"
    if results_path.exists():
        raise UsageError(f"{results_path} exists already; choose a new --out")
    from ..reports.output import own
    lock = own(out)   # noqa: F841  one process per output directory, until this command ends
    overrides = []
    if matrix.overrides:
        from ..overrides import load as load_overrides
        overrides = load_overrides(matrix.overrides)

    from ..compile.capture import for_cases
    from ..compile.report import cell, compile_matrix
    from ..reports.output import atomic_write
    from ..compile.plan import plan
    from ..compile.pool import Pool
    from ..compile.records import compile_tasks
    started = time.perf_counter()
    with Pool(settings.jobs, settings.timeout).start() as pool:     # workers import while we plan
        need_capture = [c for c in selected if c.variants is None]
        captured = for_cases(need_capture, settings.archs) if need_capture else {}
        tasks = plan(selected, settings.archs, captured, settings.max_variants)
        print(f"compiling {len(tasks)} variants of {len(selected)} kernels for {', '.join(settings.archs)} "
              f"({settings.jobs} jobs, {settings.timeout:g} s limit each)", flush=True)
        command = shlex.join(["portcheck", "compile", *sys.argv[2:]]) if sys.argv[1:2] == ["compile"] \
            else shlex.join(["portcheck", "compile"])
        done = []
        with results.BatchedAppender(results_path) as written:
            def show(r):
                rec = r.to_dict()
                done.append(rec)
                written.add(rec)
                detail = cell([rec]) + (f"  {r.message}" if r.verdict not in ("pass", "skip") else "")
                print(f"{r.arch:<8} {r.case:<22} {r.variant[:48]:<48} {r.verdict:<5} {detail}", flush=True)

            compile_tasks(tasks, settings, on_result=show, command=command, overrides=overrides, pool=pool)
    atomic_write(out / "compile.md", "# portcheck compile\n\n" + compile_matrix(done))
    bad = sum(r["verdict"] in ("fail", "error", "xpass") for r in done)
    for module, why in registry.LOAD_ERRORS.items():   # a kernel module that does not import
        print(f"kernel module {module} does not import: {why}", flush=True)
        bad += 1
    print(f"\n{len(done)} compiles in {time.perf_counter() - started:.1f} s, {bad} failed"
          f"\nreport: {out / 'compile.md'}\nresults: {results_path}")
    return 1 if bad else 0
