"""`portcheck gate`: fail (exit 1) on a regression on any vendor against a committed baseline."""
from __future__ import annotations

from pathlib import Path

from ..reports import gate, grid as merge
from ..reports.output import write_all
from ..errors import UsageError
from ._common import add_overrides_argument, overrides_in_force

NAME = "gate"
HELP = "compare results with a baseline; exit 1 on any regression, print a Markdown summary"


def add_arguments(p) -> None:
    p.add_argument("--baseline", required=True, metavar="FILE",
                   help="a baseline (matrices/baselines/*.json), a matrix.json or a results.jsonl")
    p.add_argument("results", nargs="+", metavar="RESULTS", help="results.jsonl files or run directories")
    t = gate.Thresholds()
    p.add_argument("--error-factor", type=float, default=t.error_factor,
                   help=f"worst error over tolerance may grow by this factor (default {t.error_factor:g})")
    p.add_argument("--error-floor", type=float, default=t.error_floor,
                   help=f"ratios below this count as this much (default {t.error_floor:g})")
    p.add_argument("--slowdown", type=float, default=t.slowdown,
                   help=f"relative slowdown that fails, beyond the noise (default {t.slowdown:g})")
    p.add_argument("--summary", metavar="FILE", help="also write the Markdown summary to FILE (atomically)")
    add_overrides_argument(p)
    p.add_argument("--quiet", action="store_true", help="no progress line")


def main(args) -> int:
    th = gate.Thresholds(args.error_factor, args.error_floor, args.slowdown)
    summary_path = Path(args.summary) if args.summary else None
    if summary_path is not None:
        from ._common import writable_dir
        if summary_path.is_dir():   # a usage error (2), never the gate's own failure (1)
            raise UsageError(f"--summary {summary_path} is a directory; it takes a file")
        writable_dir(summary_path.parent if str(summary_path.parent) else ".")
    baseline = merge.load([args.baseline], quiet=True)
    current = merge.load(args.results, quiet=args.quiet)
    overrides_in_force(args, current)   # expired overrides fail the gate (exit 2)
    outcome = gate.compare(baseline, current, th, str(args.baseline))
    text = gate.summary(outcome, th, gate.baseline_label(Path(args.baseline)), list(args.results))
    if summary_path is not None:
        write_all({summary_path: text})
    print(text, end="")
    return 1 if outcome.failed else 0
