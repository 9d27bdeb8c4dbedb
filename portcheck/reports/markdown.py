"""The Markdown matrix: kernel x dtype rows against arch columns, short enough for a pull-request
comment, with the detail (failures, overrides, compile resources, benchmarks, superseded results,
tolerances, provenance) in collapsed blocks below it.

Every string that comes from a kernel, an error or a file goes through `md_escape` (or
`md_code`, both in reports/output.py), so a kernel named `<script>` or `[x](javascript:...)`
stays inert text.
"""
from __future__ import annotations

import json
import math

from tabulate import tabulate

from ..compile import report as compile_report
from .grid import (PASSED, SEVERITY, Cell, ResultGrid, from_records, in_matrix, number, roofline, timing,
                   vendor_of)
from .output import md_code, md_escape

VERDICT_MARK = {"pass": "ok", "fail": "FAIL", "error": "ERROR", "xfail": "xfail", "xpass": "XPASS",
                "skip": "skip"}
EVIDENCE_MARK = {"gpu": "G", "interpreter": "I", "as-arch": "X", "compile": "C"}
COMMENT_LIMIT = 60000   # GitHub refuses comments over 65536 characters
CAUSES_SHOWN = 3        # of a failure's diagnosis (the record keeps them all)
LEGEND = ("Cells: verdict, then the worst error over its tolerance (1 = at the tolerance). Evidence: "
          "**G** ran on the GPU, **I** ran in Triton's CPU interpreter (checks the algorithm, not the "
          "GPU's low-precision arithmetic), **X** ran this arch's launch configuration on another device "
          "(`--as-arch`: its tiling and masking, not its arithmetic; the record names the device), **C** "
          "compiled only (cross-compiled, never run).")


def ratio_text(x) -> str:
    x = number(x)
    if x is None:
        return ""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf"
    if x == 0:
        return "0"
    if x < 0.01:
        return "<0.01"
    return f"{x:.2g}" if x < 10 else (f"{x:.0f}" if x < 1e6 else ">1e6")


def accuracy_cell(c: Cell | None) -> str:
    if c is None:
        return ""
    acc, comp = c.accuracy(), c.compiled()
    parts = []
    if acc is not None:
        text = VERDICT_MARK[acc["verdict"]]
        if acc["verdict"] in ("pass", "fail", "xfail", "xpass") and acc["worst_ratio"] is not None:
            text += f" {ratio_text(acc['worst_ratio'])}"
        parts.append(text)
    if comp is not None:
        if comp["verdict"] == "skip":
            parts.append("compile skip")   # nothing built: the case declares no launch here
        elif comp["verdict"] not in PASSED:
            parts.append(f"compile {VERDICT_MARK[comp['verdict']]} {comp['failed']}/{comp['variants']}")
        elif comp["over_cap"]:
            parts.append("shared over cap")
        elif acc is None:
            parts.append("built")
    marks = "".join(EVIDENCE_MARK[e] for e in c.evidence())
    return ", ".join(parts) + f" {marks}"


def speed_cell(c: Cell | None) -> str:
    s = c.speed() if c is not None else None
    if s is None:
        return ""
    return f"{100 * s['fraction']:.0f}%" + ("" if s["basis"] == "measured ceiling" else " (peak)")


def _table(m: ResultGrid, render, rows=None) -> str:
    rows = rows if rows is not None else m.rows
    body = [[md_escape(case), md_escape(dtype), *(render(m.cell(case, dtype, a)) for a in m.archs)]
            for case, dtype in rows]
    heads = ["kernel", "dtype", *(md_escape(a) for a in m.archs)]
    return tabulate(body, headers=heads, tablefmt="github", disable_numparse=True)


def _summary(m: ResultGrid) -> list[str]:
    hosts = sorted({(e.record.get("provenance") or {}).get("host") or "?" for e in m.entries})
    vendors = {}
    for a in m.archs:
        vendors.setdefault(vendor_of(a), []).append(md_escape(a))
    lines = [f"{len(m.sources)} input(s), {len(hosts)} host(s): {', '.join(md_escape(h) for h in hosts)}; "
             "archs: " + ("; ".join(f"{v} {', '.join(a)}" for v, a in vendors.items()) or "none") + "."]
    for kind in ("runtime", "compile", "bench"):
        counts = m.counts(kind)
        if counts:
            lines.append(f"- {kind}: " + ", ".join(f"{n} {VERDICT_MARK[v]}" for v, n in counts.items()))
    aside = sum(1 for e in m.entries if not in_matrix(e.record))
    if aside:
        lines.append(f"- bench: {aside} roofline-model or device-ceilings record(s), not kernel timings, "
                     "kept in matrix.json")
    bad = [c for c in m.cells.values() if c.status() not in PASSED]
    lines.append(f"- cells failing: {len(bad)} of {len(m.cells)}" +
                 (f"; newer results replaced {len(m.superseded)} older one(s) (see below)"
                  if m.superseded else ""))
    return lines


def _details(summary: str, body: list[str]) -> list[str]:
    return ["<details>", f"<summary>{summary}</summary>", "", *body, "", "</details>", ""]


def _noted(m: ResultGrid) -> list:
    """Passing records that say something: a check that did not run as elsewhere (a strided input
    the launcher reads as if contiguous, a launch the memory watch left unwatched, far rows), a
    timing that failed."""
    return [e for e in m.entries if e.record["verdict"] == "pass" and e.record.get("message")]


def _pass_notes(m: ResultGrid, most: int = 40) -> list[str]:
    noted = _noted(m)
    out = [f"- **{md_escape(e.record['case'])} {md_escape(e.record['dtype'])} on {md_escape(e.record['target'])}/"
           f"{md_escape(e.record['arch'])}**: {md_escape(e.record['message'])}" for e in noted[:most]]
    if len(noted) > most:
        out.append(f"- ... and {len(noted) - most} more: see matrix.json")
    return out


def _failures(m: ResultGrid, most: int = 40) -> list[str]:
    out = []
    bad = [e for e in sorted(m.entries, key=lambda e: -SEVERITY[e.record["verdict"]])
           if e.record["verdict"] not in PASSED]
    for e in bad[:most]:
        r = e.record
        variant = f" [{md_escape(r['variant'])}]" if r.get("variant") else ""
        out.append(f"- **{md_escape(r['case'])} {md_escape(r['dtype'])} on {md_escape(r['target'])}/"
                   f"{md_escape(r['arch'])}**{variant} ({r['kind']}, {VERDICT_MARK[r['verdict']]}, "
                   f"evidence {r['evidence']}{_ran_on(r)}): {md_escape(r['message'])}")
        for rank, f in enumerate((r.get("diagnosis") or [])[:CAUSES_SHOWN], start=1):
            out.append(f"  - likely cause {rank}: **{md_escape(f['cause'])}** ({md_escape(evidence_text(f))})")
        if r.get("failing_input"):
            out.append(f"  - failing input: {md_code(json.dumps(r['failing_input'], sort_keys=True))}")
        if r.get("reproduce"):
            out.append(f"  - replay: {md_code(r['reproduce'])}")
        out.append(f"  - from {md_escape(e.where())}")
    if len(bad) > most:
        out.append(f"- ... and {len(bad) - most} more failure(s): see matrix.html")
    return out


def _ran_on(record: dict) -> str:
    """' on interpreter' for a record of an arch's configuration run elsewhere (--as-arch)."""
    local = (record.get("as_arch") or {}).get("local")
    return f" on {md_escape(local)}" if local else ""


def evidence_text(finding: dict) -> str:
    """A diagnosis finding's evidence, prefixed by the output it concerns."""
    output = finding.get("output")
    return f"{output}: {finding['evidence']}" if output else finding["evidence"]


def _overrides(m: ResultGrid) -> list[str]:
    out = []
    for o in m.overrides:
        factor = f" x{o['factor']:g}" if o.get("action") == "tolerance" and o.get("factor") else ""
        out.append(f"- {md_escape(o['action'])}{factor} {md_escape(o['case'])} on "
                   f"{md_escape(o.get('target', '*'))}/{md_escape(o.get('arch', '*'))} "
                   f"{md_escape(o.get('dtype', '*'))}: {md_escape(o['reason'])} "
                   f"({md_escape(o.get('link', ''))}; expires {md_escape(o['expires'])}; "
                   f"applied to {o.get('applied', 0)} record(s))")
    return out


def compile_cell(c: Cell | None) -> str:
    return md_escape(compile_report.cell([e.record for e in c.compile])) if c is not None else ""


def _compile_table(m: ResultGrid) -> list[str]:
    rows = [r for r in m.rows if any(m.cell(*r, a) is not None and m.cell(*r, a).compile for a in m.archs)]
    if not rows:
        return []
    return [compile_report.CELL_LEGEND, "", _table(m, compile_cell, rows)]


def _lints(m: ResultGrid) -> list[str]:
    out = []
    for e in m.entries:
        for lint in e.record.get("lints") or ():
            out.append(f"- {md_escape(e.record['case'])} {md_escape(e.record['dtype'])} on "
                       f"{md_escape(e.record['arch'])} [{md_escape(e.record.get('variant', ''))}] "
                       f"{md_escape(lint.get('severity', ''))} {md_escape(lint.get('rule', ''))}: "
                       f"{md_escape(lint.get('message', ''))}")
    return out


def _bench_table(m: ResultGrid) -> list[str]:
    """Measured benchmarks (model rows and the device-ceilings record are not kernel timings)."""
    rows = []
    for e in m.entries:
        r = e.record
        if r["kind"] != "bench" or not in_matrix(r):
            continue
        b = r.get("bench") or {}
        t = timing(b)
        frac, basis = roofline(b)

        def num(d, key, f="{:.3g}"):
            v = number(d.get(key))
            return f.format(v) if v is not None else "-"
        spread = number(t.get("rel_spread"))
        rows.append([md_escape(r["case"]), md_escape(r["dtype"]), md_escape(r["arch"]),
                     md_escape(r.get("variant", "")), VERDICT_MARK[r["verdict"]], num(t, "median_ms", "{:.4g}"),
                     "-" if spread is None else f"{100 * spread:.1f}%", num(b, "gbs", "{:.0f}"),
                     num(b, "tflops", "{:.1f}"), "-" if frac is None else f"{100 * frac:.0f}% of {basis}"])
    if not rows:
        return []
    return [tabulate(rows, headers=["kernel", "dtype", "arch", "spec", "verdict", "median ms", "IQR/median",
                                    "GB/s", "TFLOP/s", "roofline"], tablefmt="github",
                     disable_numparse=True)]


def _tolerances(m: ResultGrid) -> list[str]:
    out, seen = [], set()
    for r in m.records("runtime"):
        for name, tol in (r.get("tolerance") or {}).items():
            key = (r["case"], r["dtype"], name, tol.get("formula") if tol else None)
            if key not in seen and tol:
                seen.add(key)
                out.append(f"- {md_escape(r['case'])} {md_escape(r['dtype'])} {md_escape(name)}: "
                           f"{md_escape(tol['formula'])}")
    return out


def _provenance(m: ResultGrid) -> list[str]:
    rows, seen = [], set()
    for e in m.entries:
        r, p = e.record, e.record.get("provenance") or {}
        key = (e.source, r["kind"], r["target"], r["arch"], p.get("host"), p.get("device"), p.get("driver"),
               p.get("torch"), p.get("triton"), p.get("portcheck"), p.get("seed"), p.get("command"))
        if key in seen:
            continue
        seen.add(key)
        rows.append([md_escape("-" if x is None else x) for x in key[:11]] + [md_code(key[11] or "-")])
    return [tabulate(rows, headers=["source", "kind", "target", "arch", "host", "device", "driver", "torch",
                                    "triton", "portcheck", "seed", "command"], tablefmt="github",
                     disable_numparse=True)]


def _superseded(m: ResultGrid) -> list[str]:
    return [f"- {md_escape(s.describe())}" for s in m.superseded]


def _capped(lines: list[str], what: str, most: int = 120) -> list[str]:
    if len(lines) <= most:
        return lines
    return lines[:most] + [f"- ... and {len(lines) - most} more {what}: see matrix.html"]


def render(m: ResultGrid, title: str = "portcheck report", limit: int = COMMENT_LIMIT, notes=()) -> str:
    """The whole Markdown report; detail blocks that would push it past `limit` are left out,
    with a note that points to matrix.html and matrix.json. `notes` (a partial run, say) come
    first, one quoted line each."""
    head = [f"# {md_escape(title)}", "", *(f"> {md_escape(n)}" for n in notes), *([""] if notes else []),
            *_summary(m), "", LEGEND, "", "## Accuracy", "",
            _table(m, accuracy_cell) if m.rows else "no results", ""]
    if any(c.bench for c in m.cells.values()):
        head += ["## Speed (fraction of roofline)", "",
                 "The lowest fraction among a cell's benchmarked specs; '(peak)' marks a fraction of the "
                 "datasheet peak where the run measured no ceiling.", "",
                 _table(m, speed_cell, [r for r in m.rows if any(m.cell(*r, a) and m.cell(*r, a).bench
                                                                 for a in m.archs)]), ""]
    if m.overrides:
        applied = sum(1 for o in m.overrides if o.get("applied"))
        head += [f"{len(m.overrides)} override(s) in force, {applied} of them applied to these results: "
                 "see below.", ""]
    failing = sum(1 for e in m.entries if e.record["verdict"] not in PASSED)
    blocks = [_details(summary, body) for summary, body in (
        (f"Failures ({failing})", _failures(m)),
        (f"Passing cells with notes ({len(_noted(m))})", _pass_notes(m)),
        (f"Overrides in force ({len(m.overrides)})", _overrides(m)),
        ("Compile resources", _compile_table(m)),
        ("Lint findings", _capped(_lints(m), "finding(s)")),
        ("Benchmarks", _bench_table(m)),
        (f"Superseded results ({len(m.superseded)})", _capped(_superseded(m), "superseded result(s)")),
        ("Tolerances", _tolerances(m)),
        ("Provenance", _provenance(m))) if body]
    text = "\n".join(head)
    omitted = []
    for block in blocks:
        piece = "\n".join(block)
        if len(text) + len(piece) + 200 > limit:
            omitted.append(block[1][len("<summary>"):-len("</summary>")])
            continue
        text += "\n" + piece
    if omitted:
        text += (f"\n_Left out to stay under {limit} characters: {', '.join(omitted)}; "
                 "see matrix.html and matrix.json._\n")
    return text.rstrip("\n") + "\n"


def markdown(records: list[dict], title: str = "portcheck report") -> str:
    """The Markdown report of one run's records (used by `portcheck run` and the pytest plugin)."""
    return render(from_records(records), title)
