"""Cross-vendor diff: the outputs two runs gave for identical inputs, compared bit for bit.

Each runtime record carries digests (portcheck.digests) of a fixed set of small inputs. For each
input both runs digested, the diff reports whether the outputs are bitwise equal, and where they
are not, how many elements differ and by how many ULP of the output format (integers: by how
many units), beside each run's own error against the float64 oracle. Those errors are
recomputed here from inputs regenerated from the recorded spec and seed (case.make on the CPU),
so a diff also shows whether an input is really reproducible on another machine; where the case
is not registered in this process, the errors the runs recorded are shown instead. Each difference
is classified by those errors (portcheck.diagnose.vendors): within both tolerances, a genuine bug
on one side, or an environment artifact.
"""
from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass, field

from tabulate import tabulate

from ..diagnose import vendors
from ..diagnose.finding import Finding
from ..errors import UsageError
from .grid import Entry, newest
from .progress import Progress
from .output import md_escape

MAX_ROWS = 300


@dataclass
class Side:
    label: str               # target/arch (host)
    records: dict            # (case, dtype) -> record
    target: str = ""
    arch: str = ""

    def facts(self, which: str, key: tuple) -> vendors.Side:
        """What classifying a difference needs to know of this side, for one case x dtype."""
        numerics = ((self.records.get(key) or {}).get("provenance") or {}).get("numerics") or ""
        return vendors.Side(which, self.target, self.arch, numerics)


@dataclass
class Row:
    case: str
    dtype: str
    spec: dict
    output: str
    agreement: str
    max_ulp: float | None          # between the runs; None when not comparable
    a_error: str
    b_error: str
    note: str = ""
    classification: Finding | None = None   # of a difference: portcheck.diagnose.vendors


@dataclass
class DiffResult:
    a: Side
    b: Side
    rows: list[Row] = field(default_factory=list)
    only_a: list[tuple] = field(default_factory=list)
    only_b: list[tuple] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)   # (case, dtype) whose inputs differ
    errors: list[str] = field(default_factory=list)


def pick(entries: list[Entry], arch: str | None, name: str, flag: str) -> Side:
    """The runtime records of one target/arch in a run (the newest of each case x dtype)."""
    winners, _ = newest([e for e in entries if e.record["kind"] == "runtime"])
    groups: dict[tuple, list[dict]] = {}
    for e in winners:
        groups.setdefault((e.record["target"], e.record["arch"]), []).append(e.record)
    if arch is not None:
        groups = {k: v for k, v in groups.items() if k[1] == arch}
    if not groups:
        raise UsageError(f"{name}: no runtime results" + (f" for arch {arch!r}" if arch else ""))
    if len(groups) > 1:
        raise UsageError(f"{name} holds runtime results of {', '.join(f'{t}/{a}' for t, a in sorted(groups))}; "
                         f"choose one with {flag} ARCH")
    (target, arch_), recs = next(iter(groups.items()))
    hosts = sorted({(r.get("provenance") or {}).get("host") or "?" for r in recs})
    side = Side(f"{target}/{arch_} ({', '.join(hosts)})", {(r["case"], r["dtype"]): r for r in recs}, target, arch_)
    if not any((r.get("digests") or {}).get("entries") for r in recs):
        if all(r.get("evidence") == "as-arch" for r in recs):   # their launches ran on another device
            raise UsageError(f"{name}: its {target}/{arch_} results come from --as-arch, which records no output "
                             "digests (the arch's configurations ran on this machine's device, not on the arch): "
                             "diff compares runs on the archs themselves")
        raise UsageError(f"{name}: its runtime results hold no output digests; they come from a run by "
                         "a portcheck that records them (portcheck run / pytest with digests enabled)")
    return side


def _torch_dtype(name: str):
    import torch
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown torch dtype {name!r}")
    return dtype


def tensor_of(out: dict):
    """The output tensor a digest kept, or None when only its hash was kept."""
    if "data" not in out:
        return None
    import torch
    raw = bytearray(base64.b64decode(out["data"]))
    t = torch.frombuffer(raw, dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
    return t.view(_torch_dtype(out["dtype"])).reshape(out["shape"])


def distance(a, b) -> tuple[int, float, str]:
    """(elements that differ, largest distance, unit): ULP for floats, units for integers."""
    import torch

    from ..compare import ulp_distance
    if a.dtype.is_floating_point:
        d = ulp_distance(a, b)
        unit = "ULP"
    else:
        d = (a.to(torch.int64) - b.to(torch.int64)).abs().to(torch.float64)
        unit = "units"
    differ = int((d != 0).sum())
    return differ, float(d.max()) if d.numel() else 0.0, unit


def _reference(case_name: str, spec: dict):
    """(refs, tolerances) from the spec: inputs regenerated on the CPU, the float64 oracle."""
    from .. import cases
    from ..cases import float64_args
    case = cases.get(case_name)
    args = case.make(spec, "cpu")
    args64 = float64_args(args, "cpu")
    refs = case.oracle(args64)
    return refs, case.tolerance(args64, refs, spec["dtype"])


def _error_text(max_ulp, ratio) -> str:
    def f(x):
        return "nan" if math.isnan(x) else ("inf" if math.isinf(x) else f"{x:.3g}")
    if max_ulp is None and ratio is None:
        return "-"
    return f"{f(max_ulp)} ULP ({f(ratio)} of tol)" if ratio is not None else f"{f(max_ulp)} ULP"


def _errors(name: str, out: dict, tensor, ref_info) -> tuple[str, str, float | None]:
    """A run's error against float64 (text, a note, its worst error over the tolerance):
    recomputed from regenerated inputs when possible."""
    recorded = (out.get("max_ulp"), out.get("worst_ratio"))
    if tensor is None or ref_info is None or name not in ref_info[0]:
        return _error_text(*recorded) + (" (recorded)" if recorded != (None, None) else ""), "", recorded[1]
    from ..compare import compare
    refs, tols = ref_info
    comp = compare(name, tensor, refs[name], tols[name])
    note = ""
    if recorded[0] is not None and not _close(recorded[0], comp.max_ulp):
        note = (f"recorded error {recorded[0]:.3g} ULP, recomputed {comp.max_ulp:.3g}: the regenerated "
                "input differs from the one the run used")
    return _error_text(comp.max_ulp, comp.worst_ratio), note, comp.worst_ratio


def _close(a, b) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return str(a) == str(b)
    if math.isnan(a) or math.isnan(b) or math.isinf(a) or math.isinf(b):
        return (math.isnan(a) and math.isnan(b)) or a == b
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))


def spec_text(spec: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(spec.items()) if k != "dtype")


def diff(entries_a: list[Entry], entries_b: list[Entry], *, arch_a: str | None = None,
         arch_b: str | None = None, quiet: bool = True) -> DiffResult:
    a = pick(entries_a, arch_a, "RUN_A", "--arch-a")
    b = pick(entries_b, arch_b, "RUN_B", "--arch-b")
    res = DiffResult(a, b)
    common = sorted(set(a.records) & set(b.records))
    res.only_a = sorted(set(a.records) - set(b.records))
    res.only_b = sorted(set(b.records) - set(a.records))
    work = []
    for key in common:
        da = {json.dumps(d["spec"], sort_keys=True): d for d in (a.records[key].get("digests") or {}).get("entries", ())}
        db = {json.dumps(d["spec"], sort_keys=True): d for d in (b.records[key].get("digests") or {}).get("entries", ())}
        shared = [s for s in da if s in db]
        if not shared and (da or db):
            how_a = (a.records[key].get("digests") or {}).get("drawn_by", "?")
            how_b = (b.records[key].get("digests") or {}).get("drawn_by", "?")
            res.unmatched.append(f"{key[0]} {key[1]}: no input in common (A: {how_a}; B: {how_b})")
        work += [(key, da[s], db[s]) for s in shared]
    with Progress("diffing outputs", len(work), quiet=quiet) as bar:
        for key, ea, eb in work:
            res.rows += _compare_entry(key, ea, eb, res)
            bar.advance(note=key[0])
    res.rows.sort(key=lambda r: (-(r.max_ulp if r.max_ulp is not None else -1), r.case, r.dtype))
    return res


def _compare_entry(key, ea: dict, eb: dict, res: DiffResult) -> list[Row]:
    case, dtype = key
    spec = ea["spec"]
    if "error" in ea or "error" in eb:
        res.errors.append(f"{case} {dtype} {spec_text(spec)}: A: {ea.get('error', 'ok')}; B: {eb.get('error', 'ok')}")
        return []
    try:
        ref_info = _reference(case, spec)
    except Exception:  # not registered here, or its inputs cannot be made on the CPU
        ref_info = None
    rows = []
    for name in sorted(set(ea["outputs"]) | set(eb["outputs"])):
        oa, ob = ea["outputs"].get(name), eb["outputs"].get(name)
        if oa is None or ob is None:
            rows.append(Row(case, dtype, spec, name, f"only in {'A' if ob is None else 'B'}", None, "-", "-"))
            continue
        ta, tb = tensor_of(oa), tensor_of(ob)
        a_err, note_a, ratio_a = _errors(name, oa, ta, ref_info)
        b_err, note_b, ratio_b = _errors(name, ob, tb, ref_info)
        note = "; ".join(n for n in (note_a and f"A: {note_a}", note_b and f"B: {note_b}") if n)
        if (oa["dtype"], oa["shape"]) != (ob["dtype"], ob["shape"]):
            rows.append(Row(case, dtype, spec, name, f"A {oa['dtype']}{oa['shape']} vs B {ob['dtype']}{ob['shape']}",
                            None, a_err, b_err, note))
        elif oa["sha256"] == ob["sha256"]:
            rows.append(Row(case, dtype, spec, name, "bitwise equal", 0.0, a_err, b_err, note))
        elif ta is None or tb is None:
            rows.append(Row(case, dtype, spec, name, "differ (digest only: output too large to keep)", None,
                            a_err, b_err, note))
        else:
            n, worst, unit = distance(ta, tb)
            rows.append(Row(case, dtype, spec, name, f"{n} of {ta.numel()} differ, max {_num(worst)} {unit}",
                            worst, a_err, b_err, note, vendors.classify(
                                dtype, ratio_a, ratio_b, res.a.facts("A", key), res.b.facts("B", key))))
    return rows


def _num(x: float) -> str:
    return "inf (NaN vs number)" if math.isinf(x) else f"{x:.3g}"


def render(res: DiffResult) -> str:
    equal = sum(1 for r in res.rows if r.agreement == "bitwise equal")
    differ = [r for r in res.rows if r.agreement != "bitwise equal"]
    worst = max((r.max_ulp for r in res.rows if r.max_ulp is not None), default=0.0)
    lines = [f"## portcheck diff: {md_escape(res.a.label)} vs {md_escape(res.b.label)}", "",
             f"{len(res.rows)} output(s) of identical inputs compared: {equal} bitwise equal, {len(differ)} differ"
             + (f" (largest distance {_num(worst)})" if differ else "") + ". Errors against float64 are "
             "recomputed from inputs regenerated from each recorded spec and seed.", ""]
    if res.rows:
        table = [[md_escape(r.case), md_escape(r.dtype), md_escape(spec_text(r.spec)), md_escape(r.output),
                  md_escape(r.agreement), md_escape(r.a_error), md_escape(r.b_error),
                  md_escape(r.classification.cause if r.classification else "")] for r in res.rows[:MAX_ROWS]]
        lines += [tabulate(table, headers=["kernel", "dtype", "input", "output", "A vs B", "A error vs float64",
                                           "B error vs float64", "classification"], tablefmt="github",
                           disable_numparse=True), ""]
        if len(res.rows) > MAX_ROWS:
            lines += [f"... and {len(res.rows) - MAX_ROWS} more", ""]
    classified = [f"- {md_escape(r.case)} {md_escape(r.dtype)} {md_escape(spec_text(r.spec))} {md_escape(r.output)}: "
                  f"**{md_escape(r.classification.cause)}** ({md_escape(r.classification.evidence)})"
                  for r in res.rows[:MAX_ROWS] if r.classification]
    if classified:
        lines += ["### Differences classified", "", "Each difference by the two runs' own errors against float64: "
                  "within both tolerances, a genuine bug on one side (it fails its own check), or an environment "
                  "artifact (an interpreter limitation, a format the arch lacks).", "", *classified, ""]
    notes = [f"- {md_escape(r.case)} {md_escape(r.dtype)} {md_escape(spec_text(r.spec))}: {md_escape(r.note)}"
             for r in res.rows if r.note]
    if notes:
        lines += ["### Inputs that did not regenerate", "", *notes, ""]
    if res.unmatched:
        lines += ["### Not comparable", "", "The runs digested different inputs (another hypothesis version "
                  "draws other specs): rerun B with PORTCHECK_DIGEST_SPECS=<A's results.jsonl>.", ""]
        lines += [f"- {md_escape(u)}" for u in res.unmatched] + [""]
    if res.errors:
        lines += ["### Digest runs that failed", ""] + [f"- {md_escape(e)}" for e in res.errors] + [""]
    for label, keys in (("Only in A", res.only_a), ("Only in B", res.only_b)):
        if keys:
            lines += [f"{label}: " + ", ".join(f"{md_escape(c)} {md_escape(d)}" for c, d in keys), ""]
    return "\n".join(lines).rstrip() + "\n"
