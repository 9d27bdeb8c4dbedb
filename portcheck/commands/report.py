"""`portcheck report`: merge runs from any hosts and vendors into one matrix (json, md, html)."""
from __future__ import annotations

import json

from ..reports import grid as merge
from ..speed.report import bench_matrix
from ..reports.markdown import render as render_markdown
from ..reports.output import write_all
from ..reports.html import render as render_html
from ._common import add_overrides_argument, overrides_in_force, timestamped, writable_dir

NAME = "report"
HELP = ("merge results from several runs (hosts, vendors, compile-only) into matrix.json/.md/.html "
        "(and bench.md where they hold benchmarks)")


def add_arguments(p) -> None:
    p.add_argument("results", nargs="+", metavar="RESULTS",
                   help="results.jsonl files, run directories (their results.jsonl, or every one below), "
                        "or a matrix.json / baseline")
    p.add_argument("--out", help="output directory (default: reports/<timestamp>)")
    p.add_argument("--title", default="portcheck matrix", help="report title")
    add_overrides_argument(p)
    p.add_argument("--quiet", action="store_true", help="no progress line")


def main(args) -> int:
    out = writable_dir(args.out or timestamped("reports"))
    entries = merge.load(args.results, quiet=args.quiet)
    matrix = merge.build(entries, overrides_in_force(args, entries))
    files = {out / "matrix.json": json.dumps(matrix.to_json(), indent=1, sort_keys=True, allow_nan=False) + "\n",
             out / "matrix.md": render_markdown(matrix, args.title),
             out / "matrix.html": render_html(matrix, args.title)}
    speed = bench_matrix([e.record for e in entries])   # the newest figure per device, case and spec
    if speed:
        files[out / "bench.md"] = f"# {args.title}\n\n{speed}"
    write_all(files)
    bad = sum(1 for c in matrix.cells.values() if c.status() not in merge.PASSED)
    print(f"{len(matrix.entries)} result(s) from {len(matrix.sources)} input(s) in {len(matrix.cells)} cell(s), "
          f"{bad} failing; {len(matrix.superseded)} superseded by newer results")
    for path in files:
        print(f"wrote {path}")
    return 0
