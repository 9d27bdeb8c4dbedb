"""`portcheck report`: merge runs from any hosts and vendors into one matrix (json, md, html)."""
from __future__ import annotations

import json
from pathlib import Path

from ..reports import grid as merge
from ..speed.report import bench_matrix
from ..reports.markdown import render as render_markdown
from ..reports.output import write_all
from ..reports.html import render as render_html
from ..errors import UsageError
from ..supervise import in_flight
from .run import RUN_MANIFEST
from ._common import add_overrides_argument, overrides_in_force, timestamped

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
    out = Path(args.out) if args.out else timestamped("reports")
    if (out / "results.jsonl").exists() or (out / RUN_MANIFEST).exists():
        raise UsageError(f"--out {out} is a run directory; a report goes to a directory of its own")
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is not a directory")
    notes: list[str] = []
    unfinished = [n for n in map(_unfinished_run, args.results) if n]
    try:
        entries = merge.load(args.results, quiet=args.quiet, notes=notes)
    except UsageError as exc:   # a run stopped before its first record: say which case it was in
        raise UsageError("; ".join([str(exc), *unfinished])) from None
    matrix = merge.build(entries, overrides_in_force(args, entries))
    title = args.title + (" - PARTIAL: a run did not finish" if unfinished else "")
    files = {out / "matrix.json": json.dumps(matrix.to_json(), indent=1, sort_keys=True, allow_nan=False) + "\n",
             out / "matrix.md": render_markdown(matrix, title, notes=unfinished + notes),
             out / "matrix.html": render_html(matrix, title)}
    speed = bench_matrix([e.record for e in entries])   # the newest figure per device, case and spec
    if speed:
        files[out / "bench.md"] = f"# {args.title}\n\n{speed}"
    write_all(files)   # all or nothing, creating `out` only now
    bad = sum(1 for c in matrix.cells.values() if c.status() not in merge.PASSED)
    for note in unfinished + notes:
        print(f"note: {note}")
    print(f"{len(matrix.entries)} result(s) from {len(matrix.sources)} input(s) in {len(matrix.cells)} cell(s), "
          f"{bad} failing; {len(matrix.superseded)} superseded by newer results"
          + ("; PARTIAL: a run did not finish" if unfinished else ""))
    for path in files:
        print(f"wrote {path}")
    return 0


def _unfinished_run(path: str) -> str | None:
    """A note when `path` is (the results of) a run directory whose run.json does not say
    complete, naming the case that was in flight when it stopped."""
    run_dir = Path(path) if Path(path).is_dir() else Path(path).parent
    try:
        manifest = json.loads((run_dir / RUN_MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    status = manifest.get("status") if isinstance(manifest, dict) else None
    if status == "complete":
        return None
    note = f"{run_dir} did not finish (run.json status {status!r}"
    for case in in_flight(run_dir):
        note += f"; in flight: {case}"
    return note + "): its missing cases are not in this report"
