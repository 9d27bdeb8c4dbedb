"""The gate: compare merged results with a committed baseline and name every regression and
improvement, per vendor.

A regression is any of:
- fail          a runtime, compile or bench record that passed in the baseline now fails
                (fail, error, or a strict xfail that passes)
- new-failure   a result the baseline does not have, and it fails
- missing       the baseline has a result in a scope (kind, target, arch) these results cover,
                and these results lack it
- error-growth  the worst error over its tolerance grew by more than `error_factor`
- spills        a compiled variant spills more registers than before (new spills included)
- shared-cap    shared memory / LDS per block went over the arch's cap
- occupancy     the effective occupancy (the low-occupancy lint's figure) fell
- slowdown      the median time grew by more than `slowdown` (relative) AND by more than the noise
                measured in the two runs (the larger interquartile range, at least the timer's
                resolution), so a noisy figure cannot fail a change on its own
The reverse changes are improvements. Baselines are written only by `portcheck baseline update`.
Worst errors compare best between runs of the same inputs (the derandomized ci profile, or one
--seed); the summary says when the inputs differed.
"""
from __future__ import annotations

import datetime as dt
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from tabulate import tabulate

from ..errors import UsageError
from .grid import (BASELINE_SCHEMA, PASSED, Entry, finite, in_matrix, key_of, newest, number,
                    shared_cap, timing, vendor_of)
from .output import md_escape

CHECKS = ("fail", "new-failure", "missing", "error-growth", "spills", "shared-cap", "occupancy", "slowdown")
TABLE_ROWS = 150   # per table; the rest is counted, so the summary fits a pull-request comment
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class Thresholds:
    error_factor: float = 2.0    # the worst error over its tolerance may grow by this factor
    error_floor: float = 0.05    # ratios below this count as this much (a tiny error doubling is noise)
    slowdown: float = 0.10       # relative growth of the median time that counts as a slowdown

    def __post_init__(self):
        # NaN fails every comparison below; an infinity would switch its check off
        if not 1 < self.error_factor < math.inf:
            raise UsageError(f"--error-factor must be greater than 1 and finite, got {self.error_factor}")
        if not 0 <= self.error_floor < 1:
            raise UsageError(f"--error-floor must be within [0, 1), got {self.error_floor}")
        if not 0 < self.slowdown < math.inf:
            raise UsageError(f"--slowdown must be positive and finite, got {self.slowdown}")

    def describe(self) -> str:
        return (f"worst error may grow up to x{self.error_factor:g} (ratios under {self.error_floor:g} of "
                f"the tolerance count as {self.error_floor:g}); a slowdown must exceed "
                f"{100 * self.slowdown:g}% and the noise of both runs (the larger IQR, at least the "
                "timer's resolution)")


@dataclass
class Finding:
    check: str
    regression: bool
    record: dict          # the current record (the baseline's, for 'missing')
    before: str
    after: str

    @property
    def vendor(self) -> str:
        return vendor_of(self.record["arch"], self.record["target"])

    def row(self) -> list[str]:
        r = self.record
        return [self.vendor, md_escape(r["arch"]), md_escape(r["case"]), md_escape(r["dtype"]),
                md_escape(r["kind"] + (f" [{r['variant']}]" if r.get("variant") else "")),
                self.check, md_escape(self.before), md_escape(self.after)]


@dataclass
class Outcome:
    findings: list[Finding] = field(default_factory=list)
    compared: int = 0
    new: list[dict] = field(default_factory=list)
    uncovered: dict = field(default_factory=dict)   # scope -> baseline results not compared
    input_notes: set = field(default_factory=set)   # runtime pairs that drew different inputs

    @property
    def regressions(self) -> list[Finding]:
        return [f for f in self.findings if f.regression]

    @property
    def improvements(self) -> list[Finding]:
        return [f for f in self.findings if not f.regression]

    @property
    def failed(self) -> bool:
        return bool(self.regressions)


def _scope(record: dict) -> tuple:
    return (record["kind"], record["target"], record["arch"])


def _ratio(record: dict) -> float | None:
    return number((record.get("metrics") or {}).get("worst_ratio"))


def _fmt_ratio(x: float | None) -> str:
    if x is None:
        return "-"
    return "nan" if math.isnan(x) else ("inf" if math.isinf(x) else f"{x:.3g}")


def _verdict(record: dict) -> str:
    return record["verdict"] + (f" ({record['message'][:80]})" if record["verdict"] not in PASSED
                                and record.get("message") else "")


def _noise_ms(bench: dict) -> float:
    """The spread a benchmark measured, in ms: its IQR (else relative spread x median), at
    least the timer's resolution; as portcheck.speed.timing.agree judges two measurements."""
    t = timing(bench)
    iqr = number(t.get("iqr_ms"))
    if iqr is None:
        q1, q3 = number(t.get("q1_ms")), number(t.get("q3_ms"))
        if q1 is not None and q3 is not None:
            iqr = q3 - q1
    if iqr is None:
        rel, med = number(t.get("rel_spread")), number(t.get("median_ms"))
        iqr = rel * med if rel is not None and med is not None else 0.0
    res = number(t.get("resolution_ms")) or 0.0
    return max(iqr if math.isfinite(iqr) else 0.0, res)


def _skipped_by_override(record: dict) -> bool:
    o = record.get("override") or {}
    return o.get("action") == "skip"


def _resources(base: dict, cur: dict) -> list[Finding]:
    """Compile resources that changed: spills, shared memory against the arch's cap, occupancy."""
    out = []
    bm, cm = base.get("metrics") or {}, cur.get("metrics") or {}
    bs, cs = number(bm.get("spills")), number(cm.get("spills"))
    if bs is not None and cs is not None and cs != bs:
        out.append(Finding("spills", cs > bs, cur, f"{bs:.0f} B spilled", f"{cs:.0f} B spilled"))
    cap = shared_cap(cur["arch"])
    bsh, csh = number(bm.get("shared")), number(cm.get("shared"))
    if cap is not None and bsh is not None and csh is not None and (bsh > cap) != (csh > cap):
        out.append(Finding("shared-cap", csh > cap, cur, f"{bsh:.0f} B of {cap} B", f"{csh:.0f} B of {cap} B"))
    bo, co = _effective_occupancy(bm), _effective_occupancy(cm)
    if bo is not None and co is not None and co != bo:
        out.append(Finding("occupancy", co < bo, cur, _occupancy_text(bm, cur["arch"]),
                           _occupancy_text(cm, cur["arch"])))
    return out


def _effective_occupancy(metrics: dict) -> float | None:
    """The occupancy the low-occupancy lint shows: bounded by LDS on AMD (`occupancy_effective`);
    records written before it existed have only `occupancy`."""
    return number(metrics.get("occupancy_effective", metrics.get("occupancy")))


def _occupancy_text(metrics: dict, arch: str) -> str:
    """'1 waves/SIMD effective (the compiler states 2)': on AMD both figures, since the
    compiler's ignores the LDS; NVIDIA's is computed here from every limit, so it is one figure."""
    unit = metrics.get("occupancy_unit") or ""
    text = f"{_effective_occupancy(metrics):g} {unit}".strip()
    stated = number(metrics.get("occupancy"))
    if vendor_of(arch) == "amd" and "occupancy_effective" in metrics and stated is not None:
        text += f" effective (the compiler states {stated:g})"
    return text


def _compare_pair(base: dict, cur: dict, th: Thresholds) -> list[Finding]:
    out = []
    kind = cur["kind"]
    b_ok, c_ok = base["verdict"] in PASSED, cur["verdict"] in PASSED
    resources = _resources(base, cur) if kind == "compile" else []
    if b_ok != c_ok:
        # a compile that starts (or stops) failing a hardware-limit lint is reported as that limit
        explained = [f for f in resources if f.regression == b_ok]
        return explained or [Finding("fail", b_ok, cur, _verdict(base), _verdict(cur))]
    checked = ("pass", "xfail")
    if cur["verdict"] == "skip" and base["verdict"] in checked and not _skipped_by_override(cur):
        # checked before, skipped now (a compile toolchain gone missing): nothing was verified
        return [Finding("fail", True, cur, _verdict(base), f"skip ({cur.get('message', '')[:80]})")]
    if base["verdict"] == "skip" and cur["verdict"] in checked and not _skipped_by_override(base):
        out.append(Finding("fail", False, cur, f"skip ({base.get('message', '')[:80]})", _verdict(cur)))
    if kind == "runtime" and "skip" not in (base["verdict"], cur["verdict"]):
        b, c = _ratio(base), _ratio(cur)
        if b is not None and c is not None and not (math.isnan(b) or math.isnan(c)):
            fb, fc = max(b, th.error_floor), max(c, th.error_floor)
            if fc > th.error_factor * fb:
                out.append(Finding("error-growth", True, cur, f"{_fmt_ratio(b)} of tol", f"{_fmt_ratio(c)} of tol"))
            elif fb > th.error_factor * fc:
                out.append(Finding("error-growth", False, cur, f"{_fmt_ratio(b)} of tol", f"{_fmt_ratio(c)} of tol"))
    if kind == "compile" and b_ok and c_ok:
        out += resources
    if kind == "bench" and b_ok and c_ok:
        bb, cb = base.get("bench") or {}, cur.get("bench") or {}
        bt, ct = number(timing(bb).get("median_ms")), number(timing(cb).get("median_ms"))
        if bt and ct and bt > 0:
            delta, noise = ct - bt, max(_noise_ms(bb), _noise_ms(cb))
            if abs(delta) / bt > th.slowdown and abs(delta) > noise:
                out.append(Finding("slowdown", delta > 0, cur, f"{bt:.4g} ms",
                                   f"{ct:.4g} ms ({100 * delta / bt:+.0f}%, noise {noise:.2g} ms)"))
    return out


def compare(baseline: list[Entry], current: list[Entry], th: Thresholds = Thresholds(),
            baseline_name: str = "the baseline") -> Outcome:
    # roofline-model rows and device ceilings describe the machine, not the change: not gated
    base = {e.key: e.record for e in newest(baseline)[0] if in_matrix(e.record)}
    cur = {e.key: e.record for e in newest(current)[0] if in_matrix(e.record)}
    if not set(base) & set(cur):
        bc = sorted({k[1] for k in base})
        cc = sorted({k[1] for k in cur})
        raise UsageError(
            f"{baseline_name} is for a different case set: it holds {_few(bc)} "
            f"({', '.join(sorted({k[0] for k in base}))}), these results {_few(cc)} "
            f"({', '.join(sorted({k[0] for k in cur}))}) and no result is in both; write a baseline for "
            "these results with `portcheck baseline update`")
    outcome = Outcome()
    scopes = {_scope(r) for r in cur.values()}
    for key, b in base.items():
        c = cur.get(key)
        if c is not None:
            outcome.compared += 1
            outcome.findings += _compare_pair(b, c, th)
            if b["kind"] == "runtime" and _inputs_differ(_inputs(b), _inputs(c)):
                outcome.input_notes.add((_inputs(b), _inputs(c)))
        elif _scope(b) in scopes:
            outcome.findings.append(Finding("missing", True, b, _verdict(b), "no result"))
        else:
            outcome.uncovered[_scope(b)] = outcome.uncovered.get(_scope(b), 0) + 1
    for key, c in cur.items():
        if key not in base:
            outcome.new.append(c)
            if c["verdict"] not in PASSED:
                outcome.findings.append(Finding("new-failure", True, c, "not in baseline", _verdict(c)))
    order = {name: i for i, name in enumerate(CHECKS)}
    outcome.findings.sort(key=lambda f: (f.vendor, order[f.check], f.record["arch"], f.record["case"],
                                         f.record["dtype"], f.record.get("variant", "")))
    return outcome


def _inputs(record: dict) -> tuple:
    """What decides a runtime record's inputs: the hypothesis profile and the session seed."""
    p = record.get("provenance") or {}
    return (str(p.get("profile", "?")), str(p.get("seed", "?")))


def _inputs_differ(a: tuple, b: tuple) -> bool:
    """Whether two records' inputs are known to differ: a field one of them does not record ("?",
    a baseline slimmed before it kept the profile) proves nothing."""
    return any(x != y for x, y in zip(a, b) if "?" not in (x, y))


def _few(names: list[str], n: int = 6) -> str:
    shown = ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")
    return f"{len(names)} case(s) ({shown})" if names else "no cases"


def _table(findings: list[Finding]) -> list[str]:
    rows = [f.row() for f in findings[:TABLE_ROWS]]
    out = [tabulate(rows, headers=["vendor", "arch", "kernel", "dtype", "result", "check", "before", "after"],
                    tablefmt="github", disable_numparse=True)]
    if len(findings) > TABLE_ROWS:
        out.append(f"\n... and {len(findings) - TABLE_ROWS} more")
    return out


def summary(o: Outcome, th: Thresholds, baseline_label: str, inputs: list[str]) -> str:
    regs, imps = o.regressions, o.improvements
    by_vendor: dict[str, int] = {}
    for f in regs:
        by_vendor[f.vendor] = by_vendor.get(f.vendor, 0) + 1
    verdict = (f"FAIL: {len(regs)} regression(s) (" + ", ".join(f"{v} {n}" for v, n in sorted(by_vendor.items())) + ")"
               if regs else "PASS: no regressions")
    lines = [f"## portcheck gate: {verdict}", "",
             f"Compared {o.compared} result(s) of {', '.join(md_escape(i) for i in inputs)} with "
             f"{md_escape(baseline_label)}; {len(imps)} improvement(s), {len(o.new)} new result(s).",
             f"Thresholds: {th.describe()}.", ""]
    if regs:
        lines += [f"### Regressions ({len(regs)})", "", *_table(regs), ""]
    if imps:
        lines += [f"### Improvements ({len(imps)})", "", *_table(imps), ""]
    if o.input_notes:
        pairs = "; ".join(f"baseline profile {a[0]} seed {a[1]}, now profile {b[0]} seed {b[1]}"
                          for a, b in sorted(o.input_notes)[:3])
        lines += [f"Note: runtime results were checked on other inputs than the baseline's ({md_escape(pairs)}); "
                  "errors compare best between runs of one derandomized profile (ci) or one --seed.", ""]
    if o.uncovered:
        lines += ["### Not compared", "", "The baseline has results in scopes these results do not cover "
                  "(run them to gate them):", ""]
        lines += [f"- {kind} on {md_escape(target)}/{md_escape(arch)}: {n} result(s)"
                  for (kind, target, arch), n in sorted(o.uncovered.items())]
        lines.append("")
    if o.new:
        cases = sorted({r["case"] for r in o.new})
        lines += [f"New results not in the baseline: {len(o.new)} in {_few([md_escape(c) for c in cases])}; "
                  "update the baseline on purpose with `portcheck baseline update` once they are right.", ""]
    return "\n".join(lines).rstrip() + "\n"


# ---- baselines -----------------------------------------------------------------------------------

_KEEP_PROVENANCE = ("host", "target", "arch", "device", "driver", "torch", "triton", "portcheck",
                    "timestamp", "seed", "profile", "command")   # the profile and seed: _inputs


def slim(record: dict) -> dict:
    """What a baseline keeps of a record: everything the gate compares and the provenance that
    says where it came from; digests and long messages are left out to keep the file small."""
    r = {k: v for k, v in record.items() if k != "digests"}
    r["message"] = (r.get("message") or "")[:300]
    r["provenance"] = {k: v for k, v in (record.get("provenance") or {}).items() if k in _KEEP_PROVENANCE}
    return r


def baseline_text(entries: list[Entry], name: str, command: str) -> str:
    """A baseline document: header fields, then one record per line (sorted by identity), so a
    baseline update reads as a line-by-line diff in review."""
    if not _NAME.match(name):
        raise UsageError(f"baseline name {name!r}: use letters, digits, '.', '_' and '-' (up to 64)")
    winners = [e for e in newest(entries)[0] if in_matrix(e.record)]
    winners.sort(key=lambda e: key_of(e.record))
    head = finite({
        "schema": BASELINE_SCHEMA, "name": name,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "command": command,
        "sources": list(dict.fromkeys(e.source for e in entries)),
        "cases": sorted({e.record["case"] for e in winners}),
        "scopes": sorted({"/".join(_scope(e.record)) for e in winners}),
    })
    lines = ["{"] + [f" {json.dumps(k)}: {json.dumps(v, sort_keys=True)}," for k, v in head.items()]
    lines.append(' "records": [')
    recs = [json.dumps(finite({"source": e.source, "line": e.line, "record": slim(e.record)}),
                       sort_keys=True, allow_nan=False) for e in winners]
    lines.append(",\n".join(f"  {r}" for r in recs))
    lines += [" ]", "}", ""]
    return "\n".join(lines)


def baseline_label(path: Path) -> str:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        return f"baseline {path} ({doc.get('name', '?')}, created {doc.get('created', '?')})"
    except (OSError, ValueError, AttributeError):
        return f"baseline {path}"
