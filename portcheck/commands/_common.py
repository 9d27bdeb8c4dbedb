"""Argument helpers shared by the commands (and the pytest plugin)."""
from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

from ..errors import UsageError

DEFAULT_MATRIX = Path("matrices/default.toml")
DEFAULT_OVERRIDES = Path("matrices/overrides.toml")
# What a folder without matrices/default.toml gets: copies of portcheck's own default matrix and
# overrides shipped in the package (tests/harness/test_byo.py keeps them equal to matrices/)
PACKAGED_MATRIX = Path(__file__).resolve().parent.parent / "data" / "default.toml"


def csv(text: str | None) -> list[str]:
    """The names of a comma list; a list given but naming nothing (',' or '') is a usage error,
    not "everything"."""
    names = [t.strip() for t in (text or "").split(",") if t.strip()]
    if text is not None and not names:
        raise UsageError(f"the comma list {text!r} names nothing; leave the option out to mean all")
    return names


def check_dtypes(selected, dtypes) -> None:
    """Each named dtype must be known and taken by at least one selected case."""
    from ..dtypes import fmt
    for d in dtypes or ():
        fmt(d)  # an unknown name is a usage error listing the known ones
        if not any(d in c.dtypes for c in selected):
            raise UsageError(f"no selected kernel takes dtype {d!r}")


def json_spec(flag: str, text: str, what: str) -> dict:
    """The spec dict a flag carries as JSON (it must name its dtype); UsageError otherwise."""
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{flag} is not JSON: {exc}") from None
    if not isinstance(spec, dict) or "dtype" not in spec:
        raise UsageError(f"{flag} needs {what}")
    return spec


def named_case(selected: list, kernel: str | None) -> list:
    """The one case a single --kernel names exactly, else the selection as it was."""
    names = csv(kernel)
    exact = [c for c in selected if c.name in names]
    return exact if len(names) == 1 and len(exact) == 1 else selected


def writable_dir(path: str | Path) -> Path:
    """Create (if needed) and check an output directory before any work starts."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create output directory {path}: {exc.strerror}") from None
    if not path.is_dir() or not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"output directory {path} is not writable")
    return path


def timestamped(base: str | Path) -> Path:
    """A new directory name under base: the time, then the process id, so that two runs started
    in the same second never share one (and a counter for the same process)."""
    name = f"{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    path, n = Path(base) / name, 1
    while path.exists():
        n += 1
        path = Path(base) / f"{name}-{n}"
    return path


def load_run_plan(path: str | Path | None, default: Path = DEFAULT_MATRIX):
    """The run plan of the matrix file given, else of `default` when it exists, else of the
    default matrix shipped in the package: the same defaults in any folder."""
    from ..matrix import load
    if path:
        return load(path)
    return load(default if default.exists() else PACKAGED_MATRIX)


def plan_sources(matrix) -> str:
    """Which matrix and overrides a run used, for its console, run.json and report header."""
    return f"matrix {matrix.path}; overrides {matrix.overrides or 'none'}"


def add_cases_argument(p) -> None:
    p.add_argument("--cases", metavar="MODULES",
                   help="comma list of modules that register cases (imported from the current "
                        "directory or the installed packages), besides the matrix's case_modules")


def load_cases(args, matrix) -> None:
    """Register the cases of --cases and of the matrix's case_modules before any selection."""
    from .. import cases
    cases.add_modules(matrix.case_modules, f"{matrix.path}: case_modules")
    cases.add_modules(csv(getattr(args, "cases", None)))


def add_overrides_argument(p) -> None:
    p.add_argument("--overrides", metavar="TOML",
                   help=f"overrides manifest to enforce and list (default: {DEFAULT_OVERRIDES} if present); "
                        "an expired entry fails the command")


def overrides_in_force(args, entries) -> list[dict]:
    """Load the manifest (expired entries raise UsageError) and list every override in force."""
    from ..overrides import load as load_overrides
    from ..reports.grid import overrides_in_force as in_force
    path = Path(args.overrides) if args.overrides else (DEFAULT_OVERRIDES if DEFAULT_OVERRIDES.exists() else None)
    manifest = load_overrides(path) if path else None
    return in_force(entries, manifest, str(path) if path else None)
