"""`portcheck baseline update`: write a gate baseline under matrices/baselines/, on purpose only."""
from __future__ import annotations

import shlex
from pathlib import Path

from ..reports import gate, grid as merge
from ..errors import UsageError
from ..reports.output import write_all

NAME = "baseline"
HELP = "write the baseline the gate compares with (portcheck baseline update --name NAME RESULTS...)"
DEFAULT_DIR = Path("matrices/baselines")


def add_arguments(p) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", parser_class=type(p))
    u = sub.add_parser("update", help="merge RESULTS and write them as baseline NAME",
                       description="Merge RESULTS (newer results win) and write them as the baseline "
                                   f"{DEFAULT_DIR}/NAME.json, replacing the old one. The gate never "
                                   "writes a baseline: updating one is a reviewed change.")
    u.add_argument("results", nargs="+", metavar="RESULTS", help="results.jsonl files or run directories")
    u.add_argument("--name", required=True, help="baseline name, e.g. compile or h200")
    u.add_argument("--dir", default=str(DEFAULT_DIR), help=f"where baselines live (default {DEFAULT_DIR})")
    u.add_argument("--quiet", action="store_true", help="no progress line")


def main(args) -> int:
    if args.action != "update":
        raise UsageError("baseline needs an action: portcheck baseline update --name NAME RESULTS...")
    out = Path(args.dir)   # created by write_all only once the baseline is ready: a failure leaves no folder
    if out.exists() and not out.is_dir():
        raise UsageError(f"--dir {out} is not a directory")
    entries = merge.load(args.results, quiet=args.quiet)
    command = shlex.join(["portcheck", "baseline", "update", "--name", args.name, "--dir", args.dir,
                          *args.results])
    text = gate.baseline_text(entries, args.name, command)
    path = out / f"{args.name}.json"
    existed = path.exists()
    write_all({path: text})
    winners = [e for e in merge.newest(entries)[0] if merge.in_matrix(e.record)]
    failing = sum(1 for e in winners if e.record["verdict"] not in merge.PASSED)
    print(f"{'replaced' if existed else 'wrote'} {path}: {len(winners)} result(s) of "
          f"{len({e.record['case'] for e in winners})} case(s)"
          + (f"; {failing} of them fail, and the gate will accept them failing" if failing else ""))
    return 0
