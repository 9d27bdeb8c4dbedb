"""`portcheck prune`: per arch, the autotune configurations of a kernel family that compile clean,
and for every dropped one the reason, written as the committed lists its autotuner reads.

    portcheck prune --kernel matmul --arch all            # compile every launch, write the lists
    portcheck prune --from DIR [--kernel matmul]          # from a `portcheck compile` run instead
    portcheck prune --check --from reports/ci-compile     # exit 1 when the committed lists are stale

Writes portcheck/kernels/configs/pruned/<family>.json (see portcheck/kernels/_pruned.py), or under
--dir. --check writes nothing: it recomputes the launches it has facts for (a sampled compile run
checks those it holds) and fails on a dropped launch that now compiles clean, a kept one that no
longer does, or one the lists do not hold.
"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

from .. import cases as registry
from .. import results
from ..errors import UsageError
from ..facts.archs import parse_archs
from ._common import csv, load_run_plan

NAME = "prune"
HELP = "per arch, the autotune configs that compile clean (and why the others do not), as committed lists"


def add_arguments(p) -> None:
    p.add_argument("--kernel", help="comma list of kernel families (default: every family in --from; with "
                                    "--check, those that have lists)")
    p.add_argument("--arch", help="comma list of archs, or 'all' (default: all ten; with --from: its archs)")
    p.add_argument("--from", dest="sources", nargs="+", metavar="DIR",
                   help="use the records of `portcheck compile` runs instead of compiling")
    p.add_argument("--check", action="store_true",
                   help="compare with the committed lists and exit 1 where they are stale; write nothing")
    p.add_argument("--min-occupancy", type=float, default=0.0, metavar="FRACTION",
                   help="drop launches whose effective occupancy is under this fraction of the arch's "
                        "most (default 0: only those with none resident)")
    p.add_argument("--max-spill-bytes", type=int, default=None, metavar="BYTES",
                   help="drop launches that spill more than this (default: spills never drop a launch; "
                        "see portcheck/compile/prune.py for the H200 figures behind that)")
    p.add_argument("--dir", help="where the lists live (default: portcheck/kernels/configs/pruned)")
    p.add_argument("--jobs", type=int, help="compile worker processes (default: the matrix's, else 2)")
    p.add_argument("--timeout", type=float, help="seconds one compile may take (default: the matrix's, else 300)")
    p.add_argument("--matrix", help="matrix file whose [compile.lints] thresholds judge a clean compile")


def _families(args, records, directory: Path) -> list[str]:
    """--kernel's families, else those in the records (with --check: those that have lists)."""
    from ..kernels._pruned import pruned_file
    if args.kernel:
        return csv(args.kernel)
    found = sorted({r["family"] for r in records})
    if args.check:
        found = [f for f in found if pruned_file(f, directory).exists()]
    if not found:
        raise UsageError("--from: no compile records of a family to prune"
                         + (" that has committed lists" if args.check else ""))
    return found


def _read(sources) -> list[dict]:
    records = []
    for src in sources:
        path = Path(src) / "results.jsonl" if Path(src).is_dir() else Path(src)
        if not path.is_file():
            raise UsageError(f"--from {src}: no results.jsonl there")
        records += [r for r in results.read(path) if r.get("kind") == "compile"]
    return records


def _tasks(family: str, archs) -> list:
    from ..compile.capture import for_cases
    from ..compile.plan import plan
    chosen = registry.select([f"{registry.FAMILY_PREFIX}{family}"])
    need = [c for c in chosen if c.variants is None]
    return plan(chosen, archs, for_cases(need, archs) if need else {})


def _compile(tasks, settings) -> list[dict]:
    from ..compile.records import compile_tasks
    done = []

    def show(r):
        done.append(r.to_dict())
        print(f"{r.arch:<8} {r.case:<22} {r.variant[:56]:<56} {r.verdict}", flush=True)
    compile_tasks(tasks, settings, on_result=show, command=shlex.join(["portcheck", *sys.argv[1:]]))
    return done


def main(args) -> int:
    import triton

    from ..compile import prune
    from ..compile.plan import NO_VARIANTS
    from ..kernels._pruned import PRUNED_DIR, pruned_file
    from .compile import _settings
    directory = Path(args.dir) if args.dir else PRUNED_DIR
    records = _read(args.sources) if args.sources else []
    archs = parse_archs(args.arch) if (args.arch or not records) else \
        tuple(dict.fromkeys(r["arch"] for r in records))
    args.fail_on = args.max_variants = None     # the compile options prune does not take
    if not 0 <= args.min_occupancy <= 1:
        raise UsageError(f"--min-occupancy must be a fraction within [0, 1], got {args.min_occupancy:g}")
    if args.max_spill_bytes is not None and args.max_spill_bytes < 0:
        raise UsageError(f"--max-spill-bytes must be 0 or more, got {args.max_spill_bytes}")
    settings = _settings(args, load_run_plan(args.matrix))
    stale = 0
    for family in _families(args, records, directory):
        tasks = _tasks(family, archs)
        mine = [r for r in records if r["family"] == family] if args.sources else _compile(tasks, settings)
        found = prune.entries(tasks, mine, args.min_occupancy, args.max_spill_bytes)
        if not found:
            raise UsageError(f"no compile record of the {family} family's launches on {', '.join(archs)}")
        path = pruned_file(family, directory)
        if args.check:
            problems = prune.stale(prune.load_committed(path), found)
            checked = sum(len(es) for es in found.values())
            print(f"{family}: {checked} launches checked against {path}: "
                  f"{f'{len(problems)} stale' if problems else 'up to date'}")
            for p in problems:
                print(f"  stale: {p}")
            if problems:
                print(f"  re-run `portcheck prune --kernel {family} --arch all` and commit the lists")
            stale += len(problems)
            continue
        missing = [t for t in tasks if t.arch in found and t.label != NO_VARIANTS
                   and not any(e["case"] == t.case and e["label"] == t.label for e in found[t.arch])]
        if missing:
            raise UsageError(f"{family}: {len(missing)} launches have no compile record (e.g. "
                             f"{missing[0].case} [{missing[0].label}] on {missing[0].arch}); prune "
                             "from a run that compiled every variant, or use --check")
        command = shlex.join(["portcheck", "prune", "--kernel", family, "--arch", args.arch or ",".join(archs)]
                             + (["--min-occupancy", f"{args.min_occupancy:g}"] if args.min_occupancy else [])
                             + (["--max-spill-bytes", str(args.max_spill_bytes)]
                                if args.max_spill_bytes is not None else [])
                             + (["--dir", args.dir] if args.dir else []))
        from ..reports.output import atomic_write
        directory.mkdir(parents=True, exist_ok=True)
        atomic_write(path, prune.document(family, found, command, triton.__version__))
        print(f"{family}: wrote {path}")
        print(prune.table(found))
    return 1 if stale else 0
