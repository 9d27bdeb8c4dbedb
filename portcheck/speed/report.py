"""The speed section of a report: `bench_matrix(records) -> str` (Markdown).

Measured figures (evidence "gpu") are grouped per device with the ceilings measured in the same
run; roofline floors for archs with no device (evidence "model") get their own table, labelled a
model, and are never mixed into the measured one. Noisy figures, disagreeing repeats and unmet
speed goals are flagged in the table, not dropped.
"""
from __future__ import annotations

from tabulate import tabulate

from ..reports.output import md_code, md_escape


def _us(ms) -> str:
    if ms is None:
        return "-"
    us = ms * 1e3
    return f"{us:.3g}" if us < 1000 else f"{us:,.0f}"


def _sig(x: float) -> str:
    """Three significant digits below 1000, thousands separators above."""
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}"


def _tflops(x) -> str:
    return "-" if x is None else _sig(x)


def _num(x, fmt=",.0f") -> str:
    return "-" if x is None else format(x, fmt)


def _pct(x) -> str:
    return "-" if x is None else f"{x:.0%}" if x >= 0.095 else f"{x:.1%}"


def _device_key(r: dict) -> tuple:
    p = r.get("provenance", {})
    return (p.get("host") or "?", r.get("target"), r.get("arch"),
            p.get("gpu_uuid") or p.get("device") or "?")


def _latest(records: list[dict], key) -> dict:
    """Later records win (a rerun replaces an earlier figure), in first-seen order."""
    out: dict = {}
    for r in records:
        k = key(r)
        out.pop(k, None)
        out[k] = r
    return out


def _clock_text(clk: dict | None) -> str:
    if not clk:
        return "-"

    def one(c):
        if not c or "error" in c:
            return "?"
        sm = c.get("clocks.sm", c.get("sclk_mhz"))
        return "?" if sm is None else str(sm)
    return f"{one(clk.get('before'))}→{one(clk.get('after'))}"


def _baselines_text(b: dict) -> str:
    parts = []
    for name, v in b.items():
        if "error" in v:
            parts.append(f"{name}: error")
        else:
            mark = " (noisy)" if v.get("noisy") else ""
            parts.append(f"{name} {v['speedup']:.2f}x{mark}")
    return ", ".join(parts) or "-"


def _flags(r: dict) -> str:
    b = r.get("bench", {})
    flags = []
    if b.get("noisy"):
        flags.append(f"NOISY ({b['kernel']['rel_spread']:.1%} > {b['noise_bound']:.0%})")
    if b.get("repeat_agrees") is False:
        flags.append("repeat disagrees")
    for g in b.get("goals", []):
        if not g["met"]:
            flags.append(f"goal unmet: {g['goal']}")
    if b.get("kernel", {}).get("note"):
        flags.append(b["kernel"]["note"])
    after = (b.get("clocks") or {}).get("after") or {}
    slowed = [x for x in after.get("throttle_reasons") or () if x != "gpu_idle"]
    if slowed:
        flags.append(f"clocks held back after the run: {', '.join(slowed)}")
    return "; ".join(flags)


def _ceiling_lines(c: dict | None, arch_row) -> list[str]:
    if c is None:
        return ["No ceilings record for this device: fractions of ceiling are missing."]
    ce = c["bench"]["ceilings"]
    cp = ce["copy"]
    lines = [f"Ceilings measured in this run: copy **{cp['gbs']:,.0f} GB/s** (bytes read + written; "
             f"torch copy_ {cp['torch_copy']['gbs']:,.0f}, Triton copy kernel "
             f"{cp['triton_copy']['gbs']:,.0f}; best/torch {cp['vs_torch_copy']:.3f}, "
             f"{'within' if cp['agrees_with_torch_copy'] else 'OUTSIDE'} 10%)."]
    mm = []
    for key, v in ce["matmul"].items():
        mm.append(f"{key} {v['tflops']:,.0f}" if "tflops" in v else f"{key} n/a ({md_escape(str(v.get('error', ''))[:80])})")
    lines.append(f"Vendor-library matmul TFLOP/s: {', '.join(mm)}.")
    if arch_row:
        lines.append(f"Datasheet ({md_escape(arch_row.get('example'))}): {arch_row.get('peak_gbs', 0):,.0f} GB/s; "
                     + ", ".join(f"{k} {v:g}" for k, v in arch_row.get("peak_tflops", {}).items())
                     + " TFLOP/s.")
    return lines


def _arch_row(arch: str) -> dict | None:
    from ..facts.archs import ARCHS
    a = ARCHS.get(arch)
    return None if a is None else {"example": a.example, "peak_gbs": a.peak_bw_gbs,
                                   "peak_tflops": a.peak_tflops}


def _measured_section(recs: list[dict], ceilings: dict | None) -> list[str]:
    first = recs[0] if recs else ceilings
    p = first.get("provenance", {})
    uuid = p.get("gpu_uuid")
    title = (f"### {md_escape(p.get('device', '?'))} ({first['target']}/{first['arch']}), host "
             f"{md_escape(p.get('host', '?'))}" + (f", GPU {md_escape(str(uuid)[:13])}" if uuid else ""))
    lines = [title, ""] + _ceiling_lines(ceilings, _arch_row(first["arch"])) + [""]
    rows = []
    for r in recs:
        b = r.get("bench", {})
        if r["verdict"] in ("error", "skip") or "kernel" not in b:
            rows.append([md_escape(r["case"]), md_escape(r.get("variant", "")),
                         "ERROR" if r["verdict"] == "error" else "not timed", "", "", "", "", "", "",
                         "", md_escape(r.get("message", ""))])
            continue
        k = b["kernel"]
        rows.append([md_escape(r["case"]), md_escape(r.get("variant", "")),
                     f"{_us(k['median_ms'])} ±{k['rel_spread']:.1%}",
                     k["method"] + ("" if k["sets"] == 1 else f" x{k['sets']} sets"),
                     _num(b.get("gbs")), _tflops(b.get("tflops")),
                     f"{_pct(b.get('fraction_of_ceiling'))} ({b.get('ceiling', {}).get('bound', '?')[0]})",
                     _pct(b.get("fraction_of_datasheet")),
                     md_escape(_baselines_text(b.get("baselines", {}))), _clock_text(b.get("clocks")),
                     md_escape(_flags(r))])
    lines.append(tabulate(rows, headers=["kernel", "spec", "time µs ±IQR/median", "timing", "GB/s",
                                         "TFLOP/s", "of ceiling (bound)", "of datasheet",
                                         "speed-up vs baselines", "SM MHz before→after", "flags"],
                          tablefmt="github", disable_numparse=True))
    return lines + [""] + _host_time_lines(recs)


# the phases of one figure, in the order benchrun runs them
PHASES = ("inputs", "warm_up", "kernel", "baselines", "torch.compile", "timing")


def _host_time_lines(recs: list[dict]) -> list[str]:
    """Where this device's run spent its host time, summed over its figures by phase (cold
    compiles and autotuning show as warm-up, baselines and torch.compile)."""
    total: dict[str, float] = {}
    timed = [r["bench"]["wall_s"] for r in recs if r.get("bench", {}).get("wall_s")]
    for wall in timed:
        for phase, s in wall.items():
            total[phase] = total.get(phase, 0.0) + s
    if not total:
        return []
    order = {phase: i for i, phase in enumerate(PHASES)}
    phases = sorted(total, key=lambda phase: order.get(phase, len(order)))
    parts = ", ".join(f"{phase} {total[phase]:,.1f} s" for phase in phases)
    return [f"Host time of these {len(timed)} figures by phase: {parts}; "
            f"{sum(total.values()):,.1f} s in all. Inputs are drawn on the device.", ""]


def _goals_section(measured: list[dict]) -> list[str]:
    rows = [[md_escape(r["case"]), md_escape(r.get("variant", "")), md_escape(g["goal"]),
             f"{g['value']:.3f}", "met" if g["met"] else "**NOT MET**"]
            for r in measured for g in r.get("bench", {}).get("goals", [])]
    if not rows:
        return []
    return ["### Speed goals", "", tabulate(rows, headers=["kernel", "spec", "goal", "value", "verdict"],
                                              tablefmt="github", disable_numparse=True), ""]


def _repeat_section(measured: list[dict]) -> list[str]:
    rows = []
    for r in measured:
        b = r.get("bench", {})
        if "repeat" not in b:
            continue
        k, rep = b["kernel"], b["repeat"]
        allowed = max(k["iqr_ms"], rep["iqr_ms"], k.get("resolution_ms", 0), rep.get("resolution_ms", 0))
        rows.append([md_escape(r["case"]), md_escape(r.get("variant", "")), _us(k["median_ms"]), _us(rep["median_ms"]),
                     _us(abs(k["median_ms"] - rep["median_ms"])), _us(allowed),
                     "yes" if b["repeat_agrees"] else "**NO**",
                     f"{k['drift']:.1%}" if "drift" in k else "-"])
    if not rows:
        return []
    interleaved = any("rounds" in r["bench"]["kernel"] for r in measured
                      if "repeat" in r.get("bench", {}))
    how = ("A second timer of the kernel, prepared on its own (warm-up, graph capture), is "
           "sampled in the same interleaved rounds as the first and the baselines" if interleaved
           else "The kernel was timed again after its baselines (records from before interleaved "
                "timing)")
    return ["### Same kernel timed twice in the run", "",
            f"{how}; the two medians must differ by no more than the larger interquartile range. "
            "Drift: how far the first timer's round medians spread, over its median (the "
            "device's clocks moving during the figure).", "",
            tabulate(rows, headers=["kernel", "spec", "first µs", "repeat µs", "|difference| µs",
                                    "allowed µs", "agree", "drift"], tablefmt="github",
                     disable_numparse=True), ""]


def _baseline_errors_section(measured: list[dict]) -> list[str]:
    """Each baseline that failed, with its error: the table above says only "error"."""
    rows = [[md_escape(r["case"]), md_escape(r.get("variant", "")), md_escape(name), md_escape(v["error"])]
            for r in measured for name, v in r.get("bench", {}).get("baselines", {}).items() if "error" in v]
    if not rows:
        return []
    return ["### Baselines that failed", "",
            tabulate(rows, headers=["kernel", "spec", "baseline", "error"], tablefmt="github",
                     disable_numparse=True), ""]


def _model_section(models: list[dict]) -> list[str]:
    if not models:
        return []
    archs = list(dict.fromkeys(r["arch"] for r in models))
    table: dict[tuple, dict] = {}
    for r in models:
        b = r["bench"]
        m = b["model"]
        cell = f"{_us(m['ms'])} {m['bound'][0]}"
        if m.get("compute_ms") is None and b["flops"]:
            cell += "*"
        table.setdefault((r["case"], r.get("variant", ""), b["bytes"], b["flops"]), {})[r["arch"]] = cell
    rows = [[md_escape(c), md_escape(v), _sig(nb / 1e6), _sig(nf / 1e9), *(cells.get(a, "") for a in archs)]
            for (c, v, nb, nf), cells in table.items()]
    return ["### Roofline model for archs with no device here (datasheet peaks; a model, not a measurement)",
            "", "Floor = max(bytes / peak bandwidth, flops / peak matrix rate of the dtype), in µs; "
            "m = memory-bound, c = compute-bound; * = no matrix rate for the dtype in the arch table "
            "(bandwidth term only).", "",
            tabulate(rows, headers=["kernel", "spec", "MB moved", "GFLOP", *archs], tablefmt="github", disable_numparse=True), ""]


def _provenance_section(measured: list[dict], ceilings: list[dict]) -> list[str]:
    rows, seen = [], set()
    for r in ceilings + measured:
        p = r.get("provenance", {})
        key = (p.get("host"), p.get("device"), p.get("gpu_uuid"), p.get("driver"), p.get("torch"),
               p.get("triton"), p.get("command"))
        if key in seen:
            continue
        seen.add(key)
        rows.append([md_escape(x if x is not None else "-") for x in key[:6]]
                     + [md_escape(p.get("CUDA_VISIBLE_DEVICES", p.get("HIP_VISIBLE_DEVICES", "-"))),
                        md_escape(p.get("timestamp", "-")), md_code(key[6])])
    if not rows:
        return []
    return ["### Provenance of the measured figures", "",
            "Clocks are read (never set) before and after each figure; see the SM MHz column.", "",
            tabulate(rows, headers=["host", "device", "gpu uuid", "driver", "torch", "triton",
                                    "visible devices", "time (UTC)", "command"], tablefmt="github", disable_numparse=True), ""]


def bench_matrix(records: list[dict]) -> str:
    """Markdown for every kind="bench" record: measured per device, then the roofline model."""
    bench = [r for r in records if r.get("kind") == "bench"]
    if not bench:
        return ""
    ceilings = list(_latest([r for r in bench if r["case"] == "ceilings" and r.get("evidence") == "gpu"],
                            _device_key).values())
    measured = list(_latest([r for r in bench if r["case"] != "ceilings" and r.get("evidence") == "gpu"],
                            lambda r: (_device_key(r), r["case"], r.get("variant"))).values())
    models = list(_latest([r for r in bench if r.get("evidence") == "model"],
                          lambda r: (r["case"], r.get("variant"), r["arch"])).values())
    lines = ["## Speed", ""]
    if measured or ceilings:
        lines += ["Time: median of the repeats ± interquartile range over the median. Fractions: the "
                  "roofline floor (bytes / bandwidth, flops / matrix rate) over the measured time, with "
                  "the ceilings measured in this run and with the datasheet peaks; (m) memory-bound, "
                  "(c) compute-bound. Speed-up: baseline time / kernel time (above 1: the kernel is "
                  "faster).", ""]
    by_device: dict[tuple, list[dict]] = {}
    for r in measured:
        by_device.setdefault(_device_key(r), []).append(r)
    ceil_by = {_device_key(c): c for c in ceilings}
    for key in list(dict.fromkeys([*ceil_by, *by_device])):
        lines += _measured_section(by_device.get(key, []), ceil_by.get(key))
    lines += _goals_section(measured) + _repeat_section(measured) + _baseline_errors_section(measured)
    missing = {}
    for r in measured:
        missing.update(r.get("bench", {}).get("peers_unavailable", {}))
    if missing:
        lines += ["Peers that did not import (their baselines are absent): "
                  + "; ".join(f"`{m}`: {md_escape(why)}" for m, why in missing.items()), ""]
    lines += _model_section(models) + _provenance_section(measured, ceilings)
    return "\n".join(lines) + "\n"
