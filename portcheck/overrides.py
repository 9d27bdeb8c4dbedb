"""The overrides manifest: per-(case, target, arch, dtype) skip, strict xfail or tolerance factor.

Each entry carries a reason, a link and an expiry date; an expired entry is an error, so a
workaround cannot outlive its cause unnoticed. xfails are strict: a case that passes while an
xfail covers it fails, which forces the entry out once the cause is fixed. An entry with action
"none" states that nothing applies to what it matches: placed before a broader entry, it exempts
a combination that entry's cause cannot reach (its reason says why).
"""
from __future__ import annotations

import datetime as dt
import fnmatch
import tomllib
from dataclasses import dataclass
from pathlib import Path

from . import validation as check
from .errors import UsageError

ACTIONS = ("xfail", "skip", "tolerance", "none")
_FIELDS = {"case", "target", "arch", "dtype", "action", "reason", "link", "expires", "factor"}


@dataclass(frozen=True)
class Override:
    case: str
    target: str
    arch: str
    dtype: str
    action: str
    reason: str
    link: str
    expires: dt.date
    factor: float = 1.0

    def matches(self, case: str, target: str, arch: str, dtype: str) -> bool:
        return all(fnmatch.fnmatch(v, p) for v, p in
                   ((case, self.case), (target, self.target), (arch, self.arch), (dtype, self.dtype)))

    def to_dict(self) -> dict:
        return {"case": self.case, "target": self.target, "arch": self.arch, "dtype": self.dtype,
                "action": self.action, "reason": self.reason, "link": self.link,
                "expires": self.expires.isoformat(), "factor": self.factor}


def load(path: Path, today: dt.date | None = None) -> list[Override]:
    """Read and validate a manifest; problems name the file and entry."""
    try:
        text = Path(path).read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except FileNotFoundError:
        raise UsageError(f"{path}: overrides file not found") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the overrides file: {exc.strerror}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    check.known_keys(data, ["override"], f"{path}: top level (entries are [[override]] tables)")
    tables = data.get("override", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise UsageError(f"{path}: 'override' must be [[override]] tables")
    today = today or dt.date.today()
    entries = []
    for i, raw in enumerate(tables, 1):
        line = check.line_of(text, "override", i)
        where = f"{path}{f', line {line}' if line else ''}: [[override]] #{i}"
        check.known_keys(raw, sorted(_FIELDS), where)
        for key in ("case", "action", "reason", "link", "expires"):
            if key not in raw:
                raise UsageError(f"{where}: missing '{key}'")
        for key in ("case", "target", "arch", "dtype", "action", "reason"):
            if key in raw:
                check.text(raw[key], f"{where}: '{key}'")
        check.text(raw["link"], f"{where}: 'link'", empty=True)
        if raw["action"] not in ACTIONS:
            raise UsageError(f"{where}: action {raw['action']!r} is not one of {', '.join(ACTIONS)}")
        # a TOML datetime is a date too in Python: only a plain date is an expiry
        if type(raw["expires"]) is not dt.date:
            raise UsageError(f"{where}: 'expires' must be a TOML date like 2027-06-30, got {raw['expires']!r}")
        if raw["expires"] < today:
            raise UsageError(f"{where}: expired on {raw['expires']} ({raw['reason']}); "
                             "re-check the cause and remove or renew the entry")
        factor = check.number(raw.get("factor", 1.0), f"{where}: 'factor'")
        if raw["action"] == "tolerance" and factor <= 1.0:
            raise UsageError(f"{where}: a tolerance override needs factor > 1")
        entries.append(Override(raw["case"], raw.get("target", "*"), raw.get("arch", "*"),
                                raw.get("dtype", "*"), raw["action"], raw["reason"], raw["link"],
                                raw["expires"], factor))
    return entries


def find(overrides: list[Override], case: str, target: str, arch: str, dtype: str) -> Override | None:
    """The first entry that matches (the manifest's order is its priority); "none" matches nothing."""
    for o in overrides:
        if o.matches(case, target, arch, dtype):
            return None if o.action == "none" else o
    return None
