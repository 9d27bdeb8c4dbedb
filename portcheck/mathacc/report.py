"""Markdown for math-accuracy records: measured error beside the documented bounds, and the
instruction each function lowers to per arch."""
from __future__ import annotations

from tabulate import tabulate

from .functions import BOUNDS_SOURCE, FUNCTIONS


def _fmt(v) -> str:
    if v is None:
        return "-"
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def math_section(records: list[dict]) -> str:
    measured = [r for r in records if r.get("kind") == "math" and r.get("evidence") != "compile"]
    lowered = [r for r in records if r.get("kind") == "math" and r.get("evidence") == "compile"]
    if not measured and not lowered:
        return ""
    out = ["## Math functions (float32)", ""]
    for (target, arch) in sorted({(r["target"], r["arch"]) for r in measured}):
        rows = []
        for r in (r for r in measured if (r["target"], r["arch"]) == (target, arch)):
            m, fn = r["metrics"], FUNCTIONS[r["case"]]
            if r["verdict"] == "skip":
                rows.append([r["case"], "unsupported here", "", "", "", "", "", _fmt(fn.cuda_bound), _fmt(fn.hip_bound), ""])
                continue
            rows.append([r["case"], _fmt(m["max_ulp"]), _fmt(m["worst_x"]), _fmt(m["max_ulp_normal"]),
                         _fmt(m["worst_x_normal"]),
                         f"{m['flushed_inputs']}/{m['subnormal_inputs']} in, {m['flushed_outputs']}/{m['subnormal_outputs']} out",
                         "ok" if not m["special_mismatches"] else f"{len(m['special_mismatches'])} differ",
                         _fmt(fn.cuda_bound), _fmt(fn.hip_bound),
                         "ABOVE" if r["verdict"] == "fail" else ""])
        sample = any(not r["metrics"].get("exhaustive", False) for r in measured if r["target"] == target)
        what = "a stratified sample (every sign and exponent) plus special values" if sample else "all 2^32 inputs"
        p = next(r for r in measured if r["target"] == target).get("provenance", {})
        out += [f"### {target} / {arch}: {what}", "",
                f"Measured on {p.get('device')} (driver {p.get('driver')}), torch {p.get('torch')}, "
                f"triton {p.get('triton')}, host {p.get('host')}, {p.get('timestamp')}; "
                f"reproduce: `{p.get('command')}`", "",
                tabulate(rows, headers=["function", "max ULP", "at x", "max ULP (normal)", "at x",
                                        "subnormals flushed", "inf/NaN/+-0", "CUDA bound", "HIP bound",
                                        "vs bound"], tablefmt="github"), ""]
    if lowered:
        archs = sorted({r["arch"] for r in lowered})
        table = {}
        for r in lowered:
            table.setdefault(r["case"], {})[r["arch"]] = r["message"]
        out += ["### Instructions per arch (cross-compiled)", "",
                tabulate([[fn, *(table[fn].get(a, "") for a in archs)] for fn in sorted(table)],
                         headers=["function", *archs], tablefmt="github"), ""]
    out += [f"Bounds: {BOUNDS_SOURCE}. 'ABOVE' marks a measured error (normal inputs and outputs) "
            "above the bound documented by the measuring target's vendor.", ""]
    return "\n".join(out)
