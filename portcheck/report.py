"""The Markdown matrix of a run: kernel x dtype rows, target/arch columns, then the detail."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from tabulate import tabulate

VERDICT_MARK = {"pass": "ok", "fail": "FAIL", "error": "ERROR", "xfail": "xfail", "xpass": "XPASS",
                "skip": "skip"}


def atomic_write(path: Path, text: str) -> None:
    """Write through a temporary file and rename, so a reader never sees half a report."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def md_escape(text: str) -> str:
    """Keep table cells and detail lines inert: no pipes, no HTML, no line breaks."""
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("|", "\\|").replace("\n", " "))


def cell(rec: dict) -> str:
    text = VERDICT_MARK.get(rec["verdict"], rec["verdict"])
    ulp = rec.get("metrics", {}).get("max_ulp")
    if ulp is not None and rec["verdict"] in ("pass", "fail", "xfail", "xpass"):
        text += f" {ulp:.3g} ulp" if ulp < 1e6 else " >1e6 ulp"
    if rec.get("time_ms") is not None:
        text += f" · {rec['time_ms'] * 1e3:.1f} us"
    return text


def column(rec: dict) -> str:
    return f"{rec['target']}/{rec['arch']}"


def runtime_matrix(records: list[dict]) -> str:
    runtime = [r for r in records if r.get("kind") == "runtime"]
    cols = sorted({column(r) for r in runtime})
    rows: dict[tuple, dict] = {}
    for r in runtime:   # later records win: a rerun replaces an earlier verdict
        rows.setdefault((r["case"], r["dtype"]), {})[column(r)] = cell(r)
    table = [[md_escape(case), dtype, *(rows[(case, dtype)].get(c, "") for c in cols)]
             for case, dtype in sorted(rows)]
    return tabulate(table, headers=["kernel", "dtype", *map(md_escape, cols)], tablefmt="github")


def markdown(records: list[dict], title: str = "portcheck report") -> str:
    runtime = [r for r in records if r.get("kind") == "runtime"]
    lines = [f"# {md_escape(title)}", ""]
    counts = {v: sum(r["verdict"] == v for r in runtime) for v in VERDICT_MARK}
    lines.append(", ".join(f"{n} {v}" for v, n in counts.items() if n) or "no results")
    lines += ["", "Cells: verdict, worst error in ULP of the output dtype, median time of one launch "
              "(GPU targets). Evidence: `interpreter` checks the algorithm on the CPU, not the "
              "GPU's low-precision arithmetic.", "", runtime_matrix(records), ""]
    bad = [r for r in runtime if r["verdict"] in ("fail", "error", "xpass")]
    if bad:
        lines += ["## Failures", ""]
        for r in bad:
            lines += [f"- **{md_escape(r['case'])} {r['dtype']} on {md_escape(column(r))}**: "
                      f"{md_escape(r['message'])}", f"  - replay: `{r['reproduce']}`"]
        lines.append("")
    overrides = {tuple(sorted(r["override"].items())) for r in runtime if r.get("override")}
    if overrides:
        lines += ["## Overrides in force", ""]
        for o in sorted(overrides):
            o = dict(o)
            lines.append(f"- {o['action']} {md_escape(o['case'])} on {o['target']}/{o['arch']} "
                         f"{o['dtype']}: {md_escape(o['reason'])} ({o['link']}; expires {o['expires']})")
        lines.append("")
    lines += ["## Tolerances", ""]
    seen = set()
    for r in runtime:
        for name, tol in (r.get("tolerance") or {}).items():
            key = (r["case"], r["dtype"], name)
            if key not in seen and tol:
                seen.add(key)
                lines.append(f"- {md_escape(r['case'])} {r['dtype']} `{name}`: {md_escape(tol['formula'])}")
    lines += ["", "## Provenance", ""]
    prov_rows, seen = [], set()
    for r in runtime:
        p = r.get("provenance", {})
        key = (r["target"], r["arch"], p.get("device"), p.get("driver"), p.get("torch"), p.get("triton"),
               p.get("seed"), p.get("command"))
        if key not in seen:
            seen.add(key)
            prov_rows.append([md_escape(x if x is not None else "-") for x in
                              (*key[:7], p.get("host"), p.get("timestamp"))] + [f"`{key[7]}`"])
    lines.append(tabulate(prov_rows, headers=["target", "arch", "device", "driver", "torch", "triton",
                                              "seed", "host", "time (UTC)", "command"], tablefmt="github"))
    return "\n".join(lines) + "\n"
