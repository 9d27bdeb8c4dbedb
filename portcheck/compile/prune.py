"""From compile records to the pruned autotune lists (portcheck.kernels._pruned reads them).

A launch is kept on an arch when it compiled clean there: it passed, no finding at error severity
(over the shared memory or thread caps, emulated or unsupported fp8, ...), and its effective
occupancy not under `min_occupancy` (a fraction of the arch's most; by default only an occupancy
of 0 drops: nothing resident at once. The low-occupancy lint's 25% would drop the
one-block-per-SM tiles a GEMM is built on, which the autotuner should time). Warnings do not
drop a launch, spills included, unless `max_spill_bytes` is given: on the H200 the fastest
8192^3 fp16 / bf16 tile (128x256x64, 8 warps, 3 stages) spills 168 B, and dropping the 16 B-spill
16x32x256 tile made bf16 M = 1 1.25x slower (tools/bench_pruned.py,
reports/examples/pruned-h200/). Every dropped launch carries the reason in words.
"""
from __future__ import annotations

import json
from pathlib import Path

from .plan import NO_VARIANTS, Task
from ..facts.archs import arch as get_arch

DROPPING = ("error",)


def params(task: Task) -> tuple[dict, int, int | None]:
    """The configuration a task launches: its constexprs and AMD options (JSON scalars), warps
    and stages, as a triton.Config holds them."""
    kwargs = dict(task.payload.get("kwargs") or {})
    warps, stages = kwargs.pop("num_warps", 4), kwargs.pop("num_stages", None)
    scalars = {k: v for k, v in kwargs.items() if v is None or isinstance(v, (bool, int, float, str))}
    return scalars, warps, stages


def reason(record: dict, min_occupancy: float = 0.0, max_spill_bytes: int | None = None) -> str:
    """Why a compile record is not clean, in words ('' when it is)."""
    metrics = record.get("metrics") or {}
    lints = [f for f in record.get("lints") or () if f["rule"] != "low-occupancy"]
    if record["verdict"] not in ("pass", "fail") and not lints:
        return f"{record['verdict']}: {record.get('message', '')}".strip()
    why = []
    for f in lints:
        if f["rule"] == "shared-over-limit":
            cap = get_arch(record["arch"]).shared_per_block
            why.append(f"over shared memory by {metrics['shared'] - cap} B ({metrics['shared']} B > {cap} B)")
        elif f["rule"] == "spills":
            if max_spill_bytes is not None and (metrics.get("spills") or 0) > max_spill_bytes:
                why.append(f"{metrics['spills']} B of spills")
        elif f["severity"] in DROPPING:
            why.append(f"{f['rule']}: {f['message']}")
    fraction = metrics.get("occupancy_fraction")
    if fraction is not None and (fraction == 0 or fraction < min_occupancy):
        threshold = f"{min_occupancy:.0%} of the most" if min_occupancy else "none resident"
        why.append(f"occupancy under the threshold ({threshold}): "
                   f"{metrics.get('occupancy_effective', metrics.get('occupancy'))}/"
                   f"{metrics.get('occupancy_max')} {metrics.get('occupancy_unit', '')} effective")
    if not why and record["verdict"] != "pass":
        why.append(record.get("message") or record["verdict"])
    return "; ".join(why)


def entries(tasks: list[Task], records: list[dict], min_occupancy: float = 0.0,
            max_spill_bytes: int | None = None) -> dict[str, list[dict]]:
    """{arch: [entry, ...]} for the records of these tasks (matched by case, variant, arch), in
    task order; placeholders of cases without a launch on an arch are left out."""
    by_key = {(r["case"], r["variant"], r["arch"]): r for r in records}
    out: dict[str, list[dict]] = {}
    for t in tasks:
        r = by_key.get(t.key)
        if r is None or t.label == NO_VARIANTS:
            continue
        kwargs, warps, stages = params(t)
        why = reason(r, min_occupancy, max_spill_bytes)
        entry = {"case": t.case, "dtype": t.dtype, "label": t.label, "kept": not why,
                 "params": kwargs, "num_warps": warps, "num_stages": stages}
        if why:
            entry["reason"] = why
        out.setdefault(t.arch, []).append(entry)
    return out


def document(family: str, found: dict[str, list[dict]], command: str, triton_version: str) -> str:
    """The committed file: a header, then one launch per line (a re-prune reads as a line diff)."""
    head = {"family": family, "command": command, "triton": triton_version,
            "rule": "kept: passed, no error finding, effective occupancy above 0 and not under "
                    "--min-occupancy, spills not over --max-spill-bytes when given "
                    "(portcheck/compile/prune.py)"}
    lines = ["{"] + [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()] + [' "archs": {']
    archs = list(found)
    for i, arch in enumerate(archs):
        rows = [f"  {json.dumps(e, sort_keys=True)}" for e in found[arch]]
        lines.append(f"  {json.dumps(arch)}: [")
        lines.append(",\n".join(f"  {r}" for r in rows))
        lines.append("  ]" + ("," if i < len(archs) - 1 else ""))
    lines += [" }", "}", ""]
    return "\n".join(lines)


def stale(committed: dict, fresh: dict[str, list[dict]]) -> list[str]:
    """Where freshly computed entries disagree with the committed lists: a dropped launch that now
    compiles clean, a kept one that no longer does, a launch the lists do not hold. Only the
    launches in `fresh` are compared (a subset, e.g. CI's sampled compile run)."""
    old = {(arch, e["case"], e["label"]): e for arch, es in (committed.get("archs") or {}).items() for e in es}
    problems = []
    for arch, es in fresh.items():
        for e in es:
            before = old.get((arch, e["case"], e["label"]))
            where = f"{e['case']} [{e['label']}] on {arch}"
            if before is None:
                problems.append(f"{where}: not in the lists")
            elif before["kept"] and not e["kept"]:
                problems.append(f"{where}: kept, but no longer compiles clean ({e['reason']})")
            elif not before["kept"] and e["kept"]:
                problems.append(f"{where}: dropped ({before.get('reason', '?')}), but now compiles clean")
            elif (before["params"], before["num_warps"], before["num_stages"]) != \
                    (e["params"], e["num_warps"], e["num_stages"]):
                problems.append(f"{where}: its configuration changed")
    return problems


def load_committed(path: Path) -> dict:
    """The committed lists at path ({} when there are none: every launch is then stale)."""
    return json.loads(Path(path).read_text(encoding="utf-8")) if Path(path).exists() else {}


def table(found: dict[str, list[dict]]) -> str:
    """Markdown: launches kept and dropped per arch, with the reasons' rules."""
    lines = ["| arch | kept | dropped | why dropped |", "|---|---|---|---|"]
    for arch, es in found.items():
        dropped = [e for e in es if not e["kept"]]
        why: dict[str, int] = {}
        for e in dropped:
            first = e["reason"].split(";")[0].split(":")[0].split(" by ")[0]
            why[first] = why.get(first, 0) + 1
        lines.append(f"| {arch} | {len(es) - len(dropped)} | {len(dropped)} | "
                     + ", ".join(f"{k} x{n}" for k, n in why.items()) + " |")
    return "\n".join(lines)
