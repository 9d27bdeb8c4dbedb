"""Merge result records from many runs (hosts, vendors, runtime and compile-only) into one matrix.

A record's identity is (kind, case, dtype, target, arch, variant). When two runs hold the same
identity, the record with the newer provenance timestamp wins (the later input on a tie) and the
matrix keeps the loser in `superseded`, so a report can say which result replaced which.

Cells are (case, dtype, arch): the accuracy of the runtime record(s), the compile record(s) of
that arch, and the benchmark record(s). Every cell says what evidence it rests on: `gpu` (ran on
the device), `interpreter` (Triton's CPU interpreter: the algorithm, not the GPU's arithmetic),
`as-arch` (the arch's launch configuration run on another device, `--as-arch`) or `compile`
(cross-compiled only).
"""
from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from .progress import Progress
from ..schema import Invalid, check_result
from ..facts.archs import ARCHS
from ..targets.runtime import INTERPRETER_ARCH

MATRIX_SCHEMA = "portcheck.matrix/1"
BASELINE_SCHEMA = "portcheck.baseline/1"
# the top-level keys each document kind is written with (grid.to_document, gate.baseline)
_DOCUMENT_KEYS = {MATRIX_SCHEMA: {"schema", "archs", "cells", "counts", "generated", "overrides", "records", "rows",
                                  "sources", "superseded"},
                  BASELINE_SCHEMA: {"schema", "name", "created", "command", "sources", "cases", "scopes", "records"}}
_DOCUMENTS = ("portcheck.matrix/", "portcheck.baseline/")
KEY_FIELDS = ("kind", "case", "dtype", "target", "arch", "variant")
PASSED = ("pass", "xfail", "skip")
# worst first: the verdict a cell shows when it holds several records
SEVERITY = {"error": 5, "fail": 4, "xpass": 3, "xfail": 2, "skip": 1, "pass": 0}
EVIDENCE_ORDER = ("gpu", "interpreter", "as-arch", "compile")
_TARGET_VENDOR = {"cuda": "nvidia", "rocm": "amd", "hip": "amd", "interpreter": "cpu"}


def vendor_of(arch: str, target: str = "") -> str:
    if arch in ARCHS:
        return ARCHS[arch].vendor
    if arch == INTERPRETER_ARCH:
        return "cpu"
    return _TARGET_VENDOR.get(target, "other")


def arch_order(archs) -> list[str]:
    """The arch table's order (NVIDIA then AMD), the interpreter, then anything else by name."""
    known = [a for a in ARCHS if a in archs]
    rest = sorted(a for a in archs if a not in ARCHS and a != INTERPRETER_ARCH)
    return known + ([INTERPRETER_ARCH] if INTERPRETER_ARCH in archs else []) + rest


def key_of(record: dict) -> tuple:
    """What a newer record replaces an older one by. A check of an arch's launch configuration
    on another device (--as-arch, evidence X) is other evidence than that arch's own run (G),
    so neither replaces the other: a cell holds both."""
    key = tuple(record.get(f, "") for f in KEY_FIELDS)
    return key + ("as-arch",) if record.get("evidence") == "as-arch" else key


def timestamp_of(record: dict) -> dt.datetime:
    text = (record.get("provenance") or {}).get("timestamp") or ""
    try:
        t = dt.datetime.fromisoformat(text)
    except ValueError:
        return dt.datetime.min.replace(tzinfo=dt.timezone.utc)
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def finite(obj):
    """JSON-safe copy: inf/nan (a NaN output's error) become the strings 'inf', '-inf', 'nan'."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {str(k): finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def number(value) -> float | None:
    """A metric as a float (strings 'inf'/'nan' from matrix.json included), or None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if value in ("inf", "-inf", "nan"):
        return float(value)
    return None


# ---- reading -----------------------------------------------------------------------------------

@dataclass
class Entry:
    """One record and where it came from."""
    record: dict
    source: str
    line: int
    order: int = 0

    @property
    def key(self) -> tuple:
        return key_of(self.record)

    @property
    def timestamp(self) -> dt.datetime:
        return timestamp_of(self.record)

    def where(self) -> str:
        return f"{self.source}:{self.line}" if self.line else self.source


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory without results.jsonl") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start}); expected results.jsonl") from None


def _checked(record, where: str) -> dict:
    try:
        check_result(record)
    except Invalid as exc:
        raise UsageError(f"{where}: {exc}") from None
    return record


def read_results(path: Path, notes: list | None = None) -> list[Entry]:
    """Every record of a results.jsonl file, each validated against the schema.

    Unlike results.read (which drops a torn last line, so a crashed run keeps its finished
    records), reports and gates refuse a file that is cut off: a verdict must not rest on part
    of a run without saying so. With `notes`, `portcheck math` records (which have their own
    report, math.md) are passed by with a note there rather than refused.
    """
    passed_by = 0
    text = _read_text(path)
    if text.lstrip().startswith("{") and text.lstrip().split("\n", 1)[0].strip() == "{":
        return read_document(path, text)   # an indented matrix.json or baseline
    entries = []
    lines = text.split("\n")
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            cut = i == len(lines) and not text.endswith("\n")
            why = ("is cut off (the file ends mid-record: was the run that wrote it interrupted?)"
                   if cut else f"is not JSON ({exc.msg} at column {exc.colno})")
            raise UsageError(f"{path}, line {i} {why}; a report needs whole results files") from None
        if isinstance(record, dict) and str(record.get("schema", "")).startswith(_DOCUMENTS):
            return read_document(path, text)   # a matrix.json or baseline on one line
        if notes is not None and isinstance(record, dict) and record.get("kind") == "math":
            passed_by += 1
            continue
        entries.append(Entry(_checked(record, f"{path}, line {i}"), str(path), i))
    if passed_by:
        notes.append(f"{path}: {passed_by} `portcheck math` record(s) passed by: the math sweep has its "
                     "own report (math.md)")
    elif not entries:
        raise UsageError(f"{path}: holds no result records")
    return entries


def read_document(path: Path, text: str | None = None) -> list[Entry]:
    """The records kept in a matrix.json or a baseline file."""
    text = _read_text(path) if text is None else text
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not JSON ({exc.msg} at line {exc.lineno}); the file may be "
                         "truncated") from None
    if not isinstance(doc, dict) or doc.get("schema") not in (MATRIX_SCHEMA, BASELINE_SCHEMA):
        got = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        if isinstance(got, str) and got.split("/")[0] in ("portcheck.matrix", "portcheck.baseline"):
            raise UsageError(f"{path}: schema version {got!r} is not one this portcheck reads "
                             f"({MATRIX_SCHEMA}, {BASELINE_SCHEMA})")
        raise UsageError(f"{path}: not a portcheck matrix or baseline (schema {got!r}); "
                         "expected results.jsonl, matrix.json or a baseline")
    unknown = sorted(set(doc) - _DOCUMENT_KEYS[doc["schema"]])
    if unknown:   # a misspelt key would be silently ignored otherwise
        raise UsageError(f"{path}: unknown top-level key(s) {', '.join(map(repr, unknown))} for {doc['schema']}")
    records = doc.get("records")
    if not isinstance(records, list):
        raise UsageError(f"{path}: has no 'records' list")
    entries = []
    for i, item in enumerate(records):
        if (not isinstance(item, dict) or not isinstance(item.get("record"), dict)
                or set(item) - {"source", "line", "record"}):
            raise UsageError(f"{path}: records[{i}] is not {{'source', 'line', 'record'}}")
        line, source = item.get("line", 0), item.get("source")
        if not (isinstance(line, int) and not isinstance(line, bool) and line >= 0):
            raise UsageError(f"{path}: records[{i}].line must be a line number (a whole number >= 0), got {line!r}")
        if source is not None and not isinstance(source, str):
            raise UsageError(f"{path}: records[{i}].source must be a file name, got {source!r}")
        record = dict(item["record"])
        for numeric in ("metrics", "tolerance", "bench", "digests"):   # where `finite` wrote strings
            if numeric in record:
                record[numeric] = _unfinite(record[numeric])
        entries.append(Entry(_checked(record, f"{path}: records[{i}]"), source or str(path), line))
    if not entries:
        raise UsageError(f"{path}: holds no result records")
    return entries


def _unfinite(obj):
    """Undo `finite` for the metric fields, so a reloaded matrix compares like the original."""
    if isinstance(obj, dict):
        return {k: _unfinite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_unfinite(v) for v in obj]
    if obj in ("inf", "-inf", "nan"):
        return float(obj)
    return obj


def result_files(path: str | Path) -> list[Path]:
    """A results file, or a directory: its results.jsonl, else every results.jsonl below it."""
    path = Path(path)
    if path.is_dir():
        direct = path / "results.jsonl"
        if direct.is_file():
            return [direct]
        found = sorted(path.rglob("results.jsonl"))
        if not found:
            raise UsageError(f"{path}: no results.jsonl in this directory or below it")
        return found
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    return [path]


def load(paths, *, quiet: bool = True, notes: list | None = None) -> list[Entry]:
    """All records of all inputs, in input order (the order breaks timestamp ties)."""
    files = [f for p in paths for f in result_files(p)]
    entries: list[Entry] = []
    with Progress("reading results", len(files), quiet=quiet) as bar:
        for f in files:
            entries += read_results(f, notes)
            bar.advance(note=f.name)
    for i, e in enumerate(entries):
        e.order = i
    return entries


# ---- merging -----------------------------------------------------------------------------------

@dataclass
class Superseded:
    kept: Entry
    dropped: Entry

    def describe(self) -> str:
        k, d = self.kept, self.dropped
        return (f"{d.record['kind']} {d.record['case']} {d.record['dtype']} on "
                f"{d.record['target']}/{d.record['arch']}"
                + (f" [{d.record['variant']}]" if d.record.get("variant") else "")
                + f": {k.where()} ({k.record['verdict']}, {_stamp(k)}) replaces "
                f"{d.where()} ({d.record['verdict']}, {_stamp(d)})")


def _stamp(e: Entry) -> str:
    return (e.record.get("provenance") or {}).get("timestamp") or "no timestamp"


def newest(entries: list[Entry]) -> tuple[list[Entry], list[Superseded]]:
    """One winner per identity: the newest timestamp, then the later input."""
    groups: dict[tuple, list[Entry]] = {}
    for e in entries:
        groups.setdefault(e.key, []).append(e)
    winners, superseded = [], []
    for group in groups.values():
        group.sort(key=lambda e: (e.timestamp, e.order))
        winners.append(group[-1])
        superseded += [Superseded(group[-1], old) for old in group[:-1]]
    winners.sort(key=lambda e: e.order)
    return winners, superseded


def roofline(bench: dict) -> tuple[float | None, str]:
    """The fraction of the roofline a benchmark reached, and its basis: the ceiling measured in
    the same run when the record has one, else the datasheet peak (a lead, labelled as such)."""
    for key, basis in (("fraction_of_ceiling", "measured ceiling"),
                       ("fraction_of_datasheet", "datasheet peak")):
        value = number(bench.get(key))
        if value is not None and math.isfinite(value):
            return value, basis
    return None, ""


def timing(bench: dict) -> dict:
    """The kernel's timing statistics of a bench record (portcheck.speed.timing.Timing.to_dict)."""
    kernel = bench.get("kernel")
    return kernel if isinstance(kernel, dict) else bench


def in_matrix(record: dict) -> bool:
    """Whether a record is evidence about a kernel on an arch. Left out: roofline *model* rows
    (datasheet floors, never measured) and the device-ceilings record of a bench run."""
    if record["kind"] != "bench":
        return True
    b = record.get("bench") or {}
    device_ceilings = "ceilings" in b and "kernel" not in b and "spec" not in b
    return record["evidence"] != "model" and not device_ceilings


def shared_cap(arch: str) -> int | None:
    return ARCHS[arch].shared_per_block if arch in ARCHS else None


@dataclass
class Cell:
    case: str
    dtype: str
    arch: str
    runtime: list[Entry] = field(default_factory=list)
    compile: list[Entry] = field(default_factory=list)
    bench: list[Entry] = field(default_factory=list)

    @property
    def entries(self) -> list[Entry]:
        return self.runtime + self.compile + self.bench

    @property
    def vendor(self) -> str:
        target = self.entries[0].record["target"] if self.entries else ""
        return vendor_of(self.arch, target)

    def evidence(self) -> list[str]:
        """Where the cell's verdicts come from; a skipped record ran nothing, so it counts only
        when the cell holds nothing else."""
        have = ({e.record["evidence"] for e in self.entries if e.record["verdict"] != "skip"}
                or {e.record["evidence"] for e in self.entries})
        return [e for e in EVIDENCE_ORDER if e in have]

    def status(self) -> str:
        """The worst verdict of every record in the cell."""
        return max((e.record["verdict"] for e in self.entries), key=SEVERITY.__getitem__, default="")

    def accuracy(self) -> dict | None:
        """Worst error over its tolerance, from the runtime record(s)."""
        if not self.runtime:
            return None
        recs = [e.record for e in self.runtime]
        ratios = [number(r["metrics"].get("worst_ratio")) for r in recs]
        ulps = [number(r["metrics"].get("max_ulp")) for r in recs]
        ratios = [x for x in ratios if x is not None]
        ulps = [x for x in ulps if x is not None]
        worst = max(recs, key=lambda r: SEVERITY[r["verdict"]])
        return {"verdict": worst["verdict"],
                "worst_ratio": max(ratios) if ratios else None,
                "max_ulp": max(ulps) if ulps else None,
                "evidence": worst["evidence"],
                "examples": sum(r.get("examples", 0) for r in recs)}

    def compiled(self) -> dict | None:
        """Compile verdict over the variants built, and the worst resources among them; "skip"
        when nothing was built (the case declares no launch there), never a pass."""
        if not self.compile:
            return None
        skipped = sum(1 for e in self.compile if e.record["verdict"] == "skip")
        recs = [e.record for e in self.compile if e.record["verdict"] != "skip"]
        if not recs:
            return {"verdict": "skip", "variants": 0, "failed": 0, "skipped": skipped, "regs": None,
                    "spills": None, "shared": None, "occupancy": None, "shared_cap": shared_cap(self.arch),
                    "over_cap": False, "lints": 0}
        m = [r.get("metrics") or {} for r in recs]

        def most(name, pick=max):
            vals = [number(x.get(name)) for x in m]
            vals = [v for v in vals if v is not None]
            return pick(vals) if vals else None
        cap = shared_cap(self.arch)
        shared = most("shared")
        failed = [r for r in recs if r["verdict"] not in PASSED]
        return {"verdict": max((r["verdict"] for r in recs), key=SEVERITY.__getitem__),
                "variants": len(recs), "failed": len(failed), "skipped": skipped,
                "regs": most("regs"), "spills": most("spills"), "shared": shared,
                "occupancy": most("occupancy", min), "shared_cap": cap,
                "over_cap": bool(cap is not None and shared is not None and shared > cap),
                "lints": sum(len(r.get("lints") or []) for r in recs)}

    def speed(self) -> dict | None:
        """The lowest fraction of the roofline among the benchmarked specs (the cell's weakest)."""
        rows = []
        for e in self.bench:
            b = e.record.get("bench") or {}
            frac, basis = roofline(b)
            if frac is not None:
                rows.append((frac, basis, number(timing(b).get("median_ms"))))
        if not rows:
            return None
        frac, basis, ms = min(rows, key=lambda r: r[0])
        return {"fraction": frac, "basis": basis, "median_ms": ms, "specs": len(rows)}


@dataclass
class ResultGrid:
    entries: list[Entry]                          # the winning records, in input order
    superseded: list[Superseded]
    sources: list[str]
    overrides: list[dict] = field(default_factory=list)   # in force: manifest + recorded
    cells: dict = field(default_factory=dict)     # (case, dtype, arch) -> Cell
    archs: list[str] = field(default_factory=list)
    rows: list[tuple] = field(default_factory=list)

    def cell(self, case: str, dtype: str, arch: str) -> Cell | None:
        return self.cells.get((case, dtype, arch))

    def counts(self, kind: str) -> dict:
        out: dict[str, int] = {}
        for e in self.entries:
            if e.record["kind"] == kind and in_matrix(e.record):
                out[e.record["verdict"]] = out.get(e.record["verdict"], 0) + 1
        return dict(sorted(out.items(), key=lambda kv: -SEVERITY[kv[0]]))

    def records(self, kind: str | None = None) -> list[dict]:
        return [e.record for e in self.entries if kind is None or e.record["kind"] == kind]

    def to_json(self, generated: str | None = None) -> dict:
        """matrix.json: the merged matrix, strict JSON (non-finite numbers as strings)."""
        index = {id(e): i for i, e in enumerate(self.entries)}
        cells = []
        for (case, dtype, arch), c in sorted(self.cells.items(), key=lambda kv: self._sort(kv[0])):
            cells.append({"case": case, "dtype": dtype, "arch": arch, "vendor": c.vendor,
                          "status": c.status(), "evidence": c.evidence(),
                          "accuracy": c.accuracy(), "compile": c.compiled(), "speed": c.speed(),
                          "records": [index[id(e)] for e in c.entries]})
        return finite({
            "schema": MATRIX_SCHEMA,
            "generated": generated or dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "sources": self.sources,
            "archs": [{"arch": a, "vendor": vendor_of(a)} for a in self.archs],
            "rows": [list(r) for r in self.rows],
            "counts": {k: self.counts(k) for k in ("runtime", "compile", "bench")},
            "cells": cells,
            "superseded": [{"kept": {"source": s.kept.source, "line": s.kept.line},
                            "dropped": {"source": s.dropped.source, "line": s.dropped.line,
                                        "record": s.dropped.record},
                            "note": s.describe()} for s in self.superseded],
            "overrides": self.overrides,
            "records": [{"source": e.source, "line": e.line, "record": e.record} for e in self.entries],
        })

    def _sort(self, key):
        case, dtype, arch = key
        return (case, dtype, self.archs.index(arch) if arch in self.archs else len(self.archs))


def build(entries: list[Entry], overrides: list[dict] | None = None) -> ResultGrid:
    winners, superseded = newest(entries)
    sources = list(dict.fromkeys(e.source for e in entries))
    m = ResultGrid(winners, superseded, sources, overrides if overrides is not None else recorded_overrides(winners))
    for e in winners:
        r = e.record
        if not in_matrix(r):
            continue
        c = m.cells.setdefault((r["case"], r["dtype"], r["arch"]), Cell(r["case"], r["dtype"], r["arch"]))
        getattr(c, r["kind"]).append(e)
    m.archs = arch_order({arch for _, _, arch in m.cells})
    m.rows = sorted({(case, dtype) for case, dtype, _ in m.cells})
    return m


def from_records(records: list[dict], source: str = "results.jsonl") -> ResultGrid:
    """A matrix of one run's records as they are (no validation): for `portcheck run` and pytest."""
    return build([Entry(r, source, i + 1, i) for i, r in enumerate(records)])


# ---- overrides ---------------------------------------------------------------------------------

def _override_key(o: dict) -> tuple:
    return tuple(str(o.get(k, "*")) for k in ("case", "target", "arch", "dtype", "action"))


def recorded_overrides(entries: list[Entry]) -> list[dict]:
    """The overrides the records were judged under, each with the cells it covered."""
    found: dict[tuple, dict] = {}
    for e in entries:
        o = e.record.get("override")
        if o:
            item = found.setdefault(_override_key(o), {**o, "applied": 0, "source": "records"})
            item["applied"] += 1
    return list(found.values())


def overrides_in_force(entries: list[Entry], manifest: list | None, manifest_path: str | None,
                       today: dt.date | None = None) -> list[dict]:
    """Every override in force: the manifest's entries (already checked for expiry by
    overrides.load) and those recorded in the results. A recorded override whose expiry has
    passed fails, like an expired manifest entry: the workaround has outlived its date."""
    today = today or dt.date.today()
    expired = []
    for e in entries:
        o = e.record.get("override")
        if o and o.get("expires") and o["expires"] < today.isoformat():
            expired.append(f"{e.where()}: {o['action']} {o['case']} on {o.get('target', '*')}/"
                           f"{o.get('arch', '*')} {o.get('dtype', '*')} expired on {o['expires']} "
                           f"({o['reason']})")
    if expired:
        more = f" (and {len(expired) - 3} more)" if len(expired) > 3 else ""
        raise UsageError("expired override(s) in the results: " + "; ".join(expired[:3]) + more
                         + "; re-check the cause, renew or remove the entry, and rerun")
    out = {_override_key(o): o for o in recorded_overrides(entries)}
    for o in manifest or ():
        d = o.to_dict()
        item = out.get(_override_key(d))
        if item is None:
            out[_override_key(d)] = {**d, "applied": 0, "source": manifest_path or "manifest"}
        else:
            item["source"] = manifest_path or "manifest"
    return sorted(out.values(), key=_override_key)
