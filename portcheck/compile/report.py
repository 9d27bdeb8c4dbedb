"""The compile matrix in Markdown: kernel (x Triton release) rows, arch columns, one compact cell.

A cell sums up every compiled variant of a kernel on an arch: `ok 96r 0sp 32K occ 8` (the worst
registers per thread, spilled bytes, shared memory / LDS per block and occupancy over its
variants, with `+Nw` for variants that drew warnings), or the failing rule and how many variants
it failed (`FAIL shared-over-limit 2/14`). The merged report (reports/markdown.py) shows the
same cells. When records come from several Triton releases (tox's
compile-triton* environments), each release gets its own row, so a regression between releases
shows as two rows that differ.
"""
from __future__ import annotations

from collections import Counter, defaultdict

from .plan import NO_VARIANTS
from ..facts.archs import ARCHS
from ..reports.output import md_escape as _md

_FAILED = {"error": "ERROR", "fail": "FAIL", "xpass": "XPASS"}   # worst first: the mark a failing cell shows
CELL_LEGEND = ("Cells, worst over the kernel's variants: registers per thread (r; AMD: VGPRs), spilled "
               "bytes per thread (sp; NVIDIA stack, AMD scratch), shared memory / LDS per block (OVER: "
               "above the arch's cap), the lowest occupancy (occ); +Nw: variants with warnings. A failing "
               "cell names the rule that failed most and how many variants failed.")


def _release_key(version: str):
    parts = []
    for p in str(version).split("."):
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def _size(n) -> str:
    if n is None:
        return "?"
    return f"{n / 1024:.0f}K" if n >= 1024 else f"{n:.0f}B"


def _worst(metrics: list[dict], key: str, pick=max):
    vals = [m[key] for m in metrics if isinstance(m.get(key), (int, float)) and not isinstance(m[key], bool)]
    return pick(vals) if vals else None


def cell(records: list[dict]) -> str:
    """One kernel x arch (x release) over all its compile records (variants), for this matrix
    and the merged report's compile table alike."""
    if not records:
        return ""
    failed = [r for r in records if r["verdict"] in _FAILED]
    n = len(records)
    if failed:
        # the errors that failed them, else the warnings (a run with fail_on = "warning")
        rules = (Counter(f["rule"] for r in failed for f in r.get("lints") or () if f["severity"] == "error")
                 or Counter(f["rule"] for r in failed for f in r.get("lints") or () if f["severity"] == "warning"))
        mark = next(_FAILED[v] for v in _FAILED if any(r["verdict"] == v for r in failed))
        rule = f" {rules.most_common(1)[0][0]}" if rules else ""
        return f"{mark}{rule} {len(failed)}/{n}"
    ran = [r for r in records if r["verdict"] != "skip"]
    if not ran:
        return "skip"
    # records without the "compiled" flag (it is not in the schema) count as compiled
    m = [r.get("metrics") or {} for r in ran if (r.get("metrics") or {}).get("compiled", True)]
    if not m:
        return f"xfail {len(ran)}/{n}" if all(r["verdict"] == "xfail" for r in ran) else "?"
    regs, spills, shared = _worst(m, "regs"), _worst(m, "spills"), _worst(m, "shared")
    occupancy = _worst([{"occupancy": x.get("occupancy_effective", x.get("occupancy"))} for x in m],
                       "occupancy", min)   # effective: as the low-occupancy lint and the gate read it
    arch = ARCHS.get(records[0]["arch"])
    over = arch is not None and shared is not None and shared > arch.shared_per_block
    text = (f"ok {'?' if regs is None else f'{regs:.0f}'}r {spills or 0:.0f}sp {_size(shared)}"
            + (" OVER" if over else "") + ("" if occupancy is None else f" occ {occupancy:g}"))
    warned = sum(any(f["severity"] == "warning" for f in r.get("lints") or ()) for r in ran)
    if warned:
        text += f" +{warned}w"
    xf = sum(r["verdict"] == "xfail" for r in ran)
    if xf:
        text += f" ({xf} xfail)"
    return text


def compile_matrix(records: list[dict], detail_limit: int = 200) -> str:
    """The Markdown section for compile records (others are ignored): the matrix, then findings."""
    recs = [r for r in records if r.get("kind") == "compile"]
    if not recs:
        return "No compile records.\n"
    releases = sorted({(r.get("provenance") or {}).get("triton", "?") for r in recs}, key=_release_key)
    by_release = len(releases) > 1
    archs = [a for a in ARCHS if any(r["arch"] == a for r in recs)]
    archs += sorted({r["arch"] for r in recs} - set(archs))
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in recs:
        rel = (r.get("provenance") or {}).get("triton", "?")
        groups[(r["case"], rel, r["arch"])].append(r)
    rows = sorted({(c, rel) for c, rel, _ in groups}, key=lambda x: (x[0], _release_key(x[1])))
    head = ["kernel", *(["triton"] if by_release else []), *archs]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for case, rel in rows:
        cells = [cell(groups.get((case, rel, a), [])) for a in archs]
        lines.append("| " + " | ".join([_md(case), *([_md(rel)] if by_release else []),
                                        *map(_md, cells)]) + " |")
    verdicts = Counter(r["verdict"] for r in recs)
    out = [f"{len(recs)} compiles ({', '.join(f'{n} {v}' for v, n in verdicts.most_common())}) of "
           f"{len({r['case'] for r in recs})} kernels on {len(archs)} archs, Triton "
           f"{', '.join(releases)}. Cross-compiled only: nothing here ran on a GPU.", "",
           CELL_LEGEND, "", *lines, ""]
    found = [(r, f) for r in recs for f in r.get("lints") or () if f["severity"] in ("error", "warning")]
    found.sort(key=lambda rf: (rf[1]["severity"] != "error", rf[0]["case"], rf[0]["arch"], rf[0]["variant"]))
    if found:
        out += ["### Compile findings", ""]
        for r, f in found[:detail_limit]:
            rel = f" triton {(r.get('provenance') or {}).get('triton', '?')}" if by_release else ""
            out.append(f"- {f['severity']} **{_md(f['rule'])}** {_md(r['case'])} [{_md(r['variant'])}] "
                       f"on {_md(r['arch'])}{_md(rel)}: {_md(f['message'])}")
        if len(found) > detail_limit:
            out.append(f"- ... and {len(found) - detail_limit} more (results.jsonl has them all)")
        out.append("")
    # a case that declares no launch for an arch has one placeholder record there, not a variant
    skipped = Counter((r["arch"], (r.get("provenance") or {}).get("triton", "?"), r.get("message", ""),
                       r.get("variant") == NO_VARIANTS) for r in recs if r["verdict"] == "skip")
    if skipped:
        out += ["### Not compiled", ""]
        out += [f"- {_md(arch)}{_md(' triton ' + rel) if by_release else ''}: {_md(msg)}"
                + ("" if placeholder else f" ({n} variant{'s' if n != 1 else ''})")
                for (arch, rel, msg, placeholder), n in sorted(skipped.items())][:detail_limit]
        out.append("")
    info = Counter(f["rule"] for r in recs for f in r.get("lints") or () if f["severity"] == "info")
    if info:
        out += ["Info: " + ", ".join(f"{rule} x{n}" for rule, n in info.most_common()), ""]
    return "\n".join(out)
