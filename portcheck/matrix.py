"""Matrix files (matrices/*.toml): what a run checks. Validated on load; errors name file and line."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from . import validation as check
from .errors import UsageError, type_names
from .targets.runtime import RUNTIME_TARGETS

PROFILES = ("ci", "dev", "thorough")
_RUN_KEYS = {"targets": list, "kernels": list, "dtypes": list, "profile": str,
             "max_elements": dict, "overrides": str, "time": bool, "timeout": (int, float),
             "shrink_time": (int, float), "case_modules": list}


@dataclass
class BenchSettings:
    """The [bench] table: how `portcheck bench` and `pytest --bench` time kernels."""
    repeats: int = 100              # timed repeats per figure (do_bench samples / graph replays)
    noise_bound: float = 0.05       # IQR / median above which a figure is flagged noisy
    graph_below_us: float = 20.0    # launches shorter than this are timed by CUDA-graph replay
    compile: bool = True            # add torch.compile of each case's "torch" baseline
    repeat_check: bool = True       # time each kernel with a second timer too; report agreement
    shapes: dict = field(default_factory=dict)        # case -> [partial specs] replacing its bench
    extra_shapes: dict = field(default_factory=dict)  # case -> [partial specs] added to its bench


@dataclass
class RunPlan:
    """What a run checks: a matrix file's [run], [bench] and [compile] tables, validated."""
    path: Path
    targets: list[str] = field(default_factory=lambda: ["auto"])
    kernels: list[str] = field(default_factory=list)      # empty: every registered case
    case_modules: list[str] = field(default_factory=list)  # modules that register cases (a
                                                           #   repository that is not installed)
    dtypes: list[str] = field(default_factory=list)       # empty: each case's own dtypes
    profile: str = "dev"
    max_elements: dict = field(default_factory=lambda: {"interpreter": 1 << 15, "gpu": 1 << 22})
    overrides: Path | None = None
    time: bool = True                                     # time each case on a GPU target
    timeout: float = 900.0                                # seconds one case x dtype may run
    shrink_time: float = 60.0                             # seconds a failure's search for a smaller
                                                          #   input may take (then: the smallest so far)
    bench: BenchSettings = field(default_factory=BenchSettings)
    compile: object = None    # [compile]: portcheck.compile.plan.CompileSettings; None: defaults


def load(path: str | Path) -> RunPlan:
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read matrix file: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise UsageError(f"{path}: the matrix file is empty; it needs a [run], [compile] or [bench] table")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: invalid TOML: {exc}") from None

    def bad(key: str, problem: str):
        line = check.line_of(text, key)
        return UsageError(f"{path}{f', line {line}' if line else ''}: '{key}' {problem}")

    unknown_tables = set(data) - {"run", "bench", "compile"}
    if unknown_tables:
        raise UsageError(f"{path}: unknown table(s) {', '.join(sorted(unknown_tables))}; "
                         "expected [run], [bench], [compile]")
    run = data.get("run", {} if data else None)   # a file of [compile] or [bench] alone keeps the run defaults
    if not isinstance(run, dict):
        raise UsageError(f"{path}: missing [run] table")
    m = RunPlan(path)
    for key, value in run.items():
        if key not in _RUN_KEYS:
            raise bad(key, f"is not a known key; known: {', '.join(_RUN_KEYS)}")
        want = _RUN_KEYS[key]
        if not isinstance(value, want) or (want is not bool and isinstance(value, bool)):
            raise bad(key, f"must be {type_names(want if isinstance(want, tuple) else (want,))}, "
                           f"got {type(value).__name__}")
    for t in run.get("targets", m.targets):
        if t not in (*RUNTIME_TARGETS, "auto"):
            raise bad("targets", f"names unknown target {t!r}; known: {', '.join(RUNTIME_TARGETS)}, auto")
    for key in ("targets", "kernels", "dtypes", "case_modules"):
        if key in run and not all(isinstance(v, str) and v.strip() for v in run[key]):
            raise bad(key, "must be a list of non-empty strings")
    m.targets = list(run.get("targets", m.targets))
    m.kernels = list(run.get("kernels", []))
    m.case_modules = list(run.get("case_modules", []))
    m.dtypes = list(run.get("dtypes", []))
    m.profile = run.get("profile", m.profile)
    if m.profile not in PROFILES:
        raise bad("profile", f"must be one of {', '.join(PROFILES)}")
    for k, v in run.get("max_elements", {}).items():
        if k not in m.max_elements:
            raise bad("max_elements", f"has unknown key {k!r}; known: interpreter, gpu")
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise bad("max_elements", f"{k} must be a positive integer, got {v!r}")
        m.max_elements[k] = v
    if "overrides" in run:
        m.overrides = (path.parent / run["overrides"]).resolve()
        if not m.overrides.is_file():
            raise bad("overrides", f"names {run['overrides']!r}, which is not a file next to {path.name}")
    m.time = run.get("time", True)
    if "timeout" in run:
        if not 0 < run["timeout"] < float("inf"):   # NaN included: it would turn the hang guard off
            raise bad("timeout", f"must be a positive number of seconds, got {run['timeout']!r}")
        m.timeout = float(run["timeout"])
    if "shrink_time" in run:
        if not 0 <= run["shrink_time"] < float("inf"):
            raise bad("shrink_time", f"must be a finite number of seconds, 0 or more, got {run['shrink_time']!r}")
        m.shrink_time = float(run["shrink_time"])
    if "bench" in data:
        m.bench = _bench_settings(data["bench"], bad)
    if "compile" in data:
        m.compile = _compile_settings(data["compile"], bad)
    return m


def _compile_settings(table, bad):
    """Validate [compile] (archs, timeout, jobs, lints; see portcheck.compile.plan)."""
    if not isinstance(table, dict):
        raise bad("compile", "must be a table")
    from .compile.plan import CompileSettings
    return CompileSettings.from_table(table, bad)


_BENCH_KEYS = {"repeats": int, "noise_bound": (int, float), "graph_below_us": (int, float),
               "compile": bool, "repeat_check": bool, "shapes": dict, "extra_shapes": dict}


def _bench_settings(table, bad) -> BenchSettings:
    """Validate [bench]; shapes tables map a case name to a list of (partial) spec tables."""
    if not isinstance(table, dict):
        raise bad("bench", "must be a table")
    b = BenchSettings()
    for key, value in table.items():
        want = _BENCH_KEYS.get(key)
        if want is None:
            raise bad(key, f"is not a known [bench] key; known: {', '.join(_BENCH_KEYS)}")
        if not isinstance(value, want) or (want is not bool and isinstance(value, bool)):
            raise bad(key, f"must be {type_names(want if isinstance(want, tuple) else (want,))}, "
                           f"got {type(value).__name__}")
    if table.get("repeats", 3) < 3:
        raise bad("repeats", "must be at least 3 (a spread needs several repeats)")
    for key in ("noise_bound", "graph_below_us"):
        if key in table and not 0 <= table[key] < float("inf"):
            raise bad(key, f"must not be negative, got {table[key]!r}")
    for key in ("shapes", "extra_shapes"):
        for case, specs in table.get(key, {}).items():
            if not isinstance(specs, list) or not specs or not all(isinstance(s, dict) for s in specs):
                raise bad(case, f"in [bench.{key}] must be a non-empty list of spec tables, e.g. "
                                f"{case} = [{{rows = 65536, cols = 4096}}]")
    for key, value in table.items():
        setattr(b, key, float(value) if key in ("noise_bound", "graph_below_us") else value)
    return b
