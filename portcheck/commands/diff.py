"""`portcheck diff`: where two runs (two vendors) disagree on identical inputs, and by how many ULP."""
from __future__ import annotations

from pathlib import Path

from ..reports.output import write_all
from ..errors import UsageError
from ._common import writable_dir

NAME = "diff"
HELP = "compare two runs output by output on identical inputs (bitwise, ULP, and each one's error)"


def add_arguments(p) -> None:
    p.add_argument("run_a", metavar="RUN_A", help="results.jsonl or run directory (e.g. the NVIDIA run)")
    p.add_argument("run_b", metavar="RUN_B", help="results.jsonl or run directory (e.g. the AMD run)")
    p.add_argument("--arch-a", help="the arch to take from RUN_A when it holds several")
    p.add_argument("--arch-b", help="the arch to take from RUN_B when it holds several")
    p.add_argument("--out", metavar="FILE", help="also write the Markdown to FILE (atomically)")
    p.add_argument("--quiet", action="store_true", help="no progress line")


def main(args) -> int:
    out = Path(args.out) if args.out else None
    if out is not None:
        if out.is_dir():   # checked first: the comparison must not run to end in a traceback
            raise UsageError(f"--out {out} is a directory; it takes a file")
        writable_dir(out.parent if str(out.parent) else ".")
    from ..reports import diff, grid as merge   # torch, through the diagnosis: not at every command's start
    a = merge.load([args.run_a], quiet=True)
    b = merge.load([args.run_b], quiet=True)
    res = diff.diff(a, b, arch_a=args.arch_a, arch_b=args.arch_b, quiet=args.quiet)
    text = diff.render(res)
    if out is not None:
        write_all({out: text})
    print(text, end="")
    return 0
