"""Argument helpers shared by the commands (and the pytest plugin)."""
from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

from ..errors import UsageError

DEFAULT_MATRIX = Path("matrices/default.toml")
DEFAULT_OVERRIDES = Path("matrices/overrides.toml")


def csv(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


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
    """The one case a single --kernel names exactly (`softmax` names a case and its family),
    else the selection as it was."""
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
    return Path(base) / dt.datetime.now().strftime("%Y%m%d-%H%M%S")


def load_run_plan(path: str | Path | None, default: Path = DEFAULT_MATRIX):
    """The run plan of the matrix file given, else of `default` when it exists, else the
    built-in defaults."""
    from ..matrix import RunPlan, load
    if path:
        return load(path)
    if default.exists():
        return load(default)
    return RunPlan(path=Path("<built-in defaults>"))


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
