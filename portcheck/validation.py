"""Typed checks for every user-supplied document (matrix, overrides, replay and bench specs,
baselines): each rejects with a UsageError that names the place (file, line, key), never lets a
NaN or a wrong type through to where it would disable a check or raise a traceback."""
from __future__ import annotations

import math
import re

from .errors import UsageError, type_names


def line_of(text: str, key: str, occurrence: int = 1) -> int:
    """The line of the n-th `key = ...` or `[[key]]` in a TOML text (0: not found)."""
    seen = 0
    for i, line in enumerate(text.splitlines(), 1):
        if re.match(rf"\s*({re.escape(key)}\s*=|\[\[\s*{re.escape(key)}\s*\]\])", line):
            seen += 1
            if seen == occurrence:
                return i
    return 0


def number(value, where: str, *, positive: bool = False, minimum: float | None = None) -> float:
    """A finite int or float (not a bool, not NaN or infinite)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{where} must be a number, got {type(value).__name__} {value!r}")
    if not math.isfinite(value):
        raise UsageError(f"{where} must be a finite number, got {value!r}")
    if positive and value <= 0:
        raise UsageError(f"{where} must be positive, got {value!r}")
    if minimum is not None and value < minimum:
        raise UsageError(f"{where} must be at least {minimum:g}, got {value!r}")
    return float(value)


def text(value, where: str, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise UsageError(f"{where} must be a string, got {type(value).__name__} {value!r}")
    if not empty and not value.strip():
        raise UsageError(f"{where} must not be empty")
    return value


def known_keys(table: dict, known, where: str) -> None:
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {', '.join(map(str, unknown))}; known: {', '.join(known)}")


def replay_spec(spec: dict, examples: list[dict], budget: int | None, where: str) -> None:
    """A replay spec must lie in its case's input domain, checked before anything runs: the keys
    of the examples the case's own strategy drew, values of a type they take, and no size above
    the element budget: no tensor under the budget has a dimension over it, so `rows = 10**9` is
    refused rather than allocated. A size is an integer key (the seed aside) that every example
    keeps within the budget; keys that the examples take beyond it (an RNG offset) are not
    sizes. A bench spec (budget None) is checked for keys and types only: it is meant to be large."""
    always = set.intersection(*(set(e) for e in examples))   # keys every example has
    keys = set.union(*(set(e) for e in examples))
    missing, extra = sorted(always - set(spec)), sorted(set(spec) - keys)
    if missing or extra:
        raise UsageError(f"{where}: keys differ from the case's inputs"
                         + (f"; missing {', '.join(missing)}" if missing else "")
                         + (f"; unknown {', '.join(extra)}" if extra else "")
                         + f" (the case draws {', '.join(sorted(keys))})")
    for key in sorted(set(spec)):
        value, seen = spec[key], [e[key] for e in examples if key in e]
        types = {type(v) for v in seen if v is not None}
        fits = value is None or not types or type(value) in types or (float in types and type(value) is int)
        if not fits:   # optional parts may be None
            raise UsageError(f"{where}: '{key}' must be {type_names(sorted(types, key=lambda t: t.__name__))} "
                             f"like {seen[0]!r}, got {type(value).__name__} {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageError(f"{where}: '{key}' must be finite, got {value!r}")
        size = types == {int} and key != "seed" and all(abs(v) <= budget for v in seen if v is not None) \
            if budget is not None else False
        if size and abs(value) > budget:
            raise UsageError(f"{where}: '{key}' = {value} is above the element budget {budget} "
                             "(the target's max_elements; on the interpreter, room for its long-row input)")
        ints = [v for v in seen if type(v) is int]
        if type(value) is int and ints and value < min(1, min(ints)) and min(ints) >= 0:
            least = min(1, min(ints))   # sizes and seeds the case never draws below 0 (or 1)
            raise UsageError(f"{where}: '{key}' must be at least {least}, as the case's inputs are, got {value}")
        if key == "seed" and type(value) is int and value >= 2**63:   # torch's generators take 64-bit seeds
            raise UsageError(f"{where}: 'seed' must be below 2**63, got {value}")
