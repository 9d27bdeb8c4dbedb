"""Result records and the crash-safe JSONL file they are appended to.

One JSON object per line, written with a single os.write on an O_APPEND descriptor and fsync'd,
so records from parallel workers never interleave and a crash loses at most the record in flight.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

SCHEMA = "portcheck.result/1"
VERDICTS = ("pass", "fail", "xfail", "xpass", "skip", "error")
# a runtime record's `phases`: seconds per phase of its check (portcheck.runner; shrink: everything
# after the first failure), then the session's median-time measurement and digests
PHASES = ("inputs", "compile", "launches", "oracle", "compare", "diagnosis", "shrink", "timing", "digests")


@dataclass
class Result:
    kind: str                 # runtime | compile | bench
    case: str
    family: str
    dtype: str
    target: str
    arch: str
    verdict: str
    evidence: str             # gpu | interpreter | compile | as-arch
    message: str = ""
    examples: int = 0
    metrics: dict = field(default_factory=dict)
    tolerance: dict = field(default_factory=dict)
    failing_input: dict | None = None
    override: dict | None = None
    time_ms: float | None = None
    variant: str = ""         # compile variant or bench spec label
    lints: list = field(default_factory=list)   # compile: [{rule, severity, message}]
    bench: dict = field(default_factory=dict)   # bench: times, spread, rates, ceilings, baselines
    reproduce: str = ""
    provenance: dict = field(default_factory=dict)
    schema: str = SCHEMA
    digests: dict = field(default_factory=dict)  # runtime: outputs of fixed small inputs (portcheck.digests)
    diagnosis: list = field(default_factory=list)  # runtime failures: likely causes, strongest first (portcheck.diagnose)
    as_arch: dict = field(default_factory=dict)   # runtime --as-arch: the arch forced, the local one, what changed
    sanitizer: dict | None = None  # runtime under --sanitize: the checker's report (portcheck.sanitize)
    phases: dict = field(default_factory=dict)   # runtime: seconds per phase (portcheck.runner.PHASES)
    first_failure: dict | None = None   # runtime failures: the search's first failing input and message,
                                        # where shrinking ended on another

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def passed(self) -> bool:
        return self.verdict in ("pass", "xfail", "skip")


def append(path: Path, record: dict) -> None:
    append_many(path, [record])


def _lines(records: list[dict]) -> str:
    return "".join(json.dumps(r, sort_keys=True, default=str) + "\n" for r in records)


def rewrite(path: Path, records: list[dict]) -> None:
    """Replace the file's records (atomically: a reader sees the old file or the new one)."""
    from .reports.output import atomic_write
    atomic_write(Path(path), _lines(records))


def append_many(path: Path, records: list[dict]) -> None:
    """Several records with one write and one fsync (a compile matrix writes thousands)."""
    if not records:
        return
    line = _lines(records).encode()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


class BatchedAppender:
    """Appends records as they come, written and fsync'd at most once a second (a compile matrix
    makes thousands; an fsync each costs more than the compiles). Use as a context manager: the
    rest is written on the way out, whatever ends the block."""

    def __init__(self, path: Path, every_s: float = 1.0):
        self.path, self.every_s = path, every_s
        self.pending: list[dict] = []
        self.last = time.monotonic()

    def add(self, record: dict) -> None:
        self.pending.append(record)
        if time.monotonic() - self.last > self.every_s:
            self.flush()

    def flush(self) -> None:
        append_many(self.path, self.pending)
        self.pending = []
        self.last = time.monotonic()

    def __enter__(self) -> "BatchedAppender":
        return self

    def __exit__(self, *exc) -> None:
        self.flush()


def phase_totals(records: list[dict]) -> dict[str, float]:
    """Seconds per phase summed over the records, in the order of PHASES."""
    totals = {phase: 0.0 for phase in PHASES}
    for r in records:
        for phase, seconds in (r.get("phases") or {}).items():
            totals[phase] = totals.get(phase, 0.0) + seconds
    return {phase: seconds for phase, seconds in totals.items() if seconds > 0}


def read(path: Path) -> list[dict]:
    """All complete records; a torn last line (a crash mid-write) is dropped."""
    records = []
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break
            raise
    return records
