"""Peer kernel libraries used as extra speed baselines: Liger-Kernel and FlagGems.

Both are pure-Python wheels of Triton kernels (tools/fetch_peer_wheels.sh downloads them). They
are optional: a family's `baselines(args)` asks `load()` for a module and adds a baseline only
when it imports. Why one did not import is kept (`unavailable()`) so a report can say so rather
than silently omit a peer. A baseline named after a peer (LIGER, FLAGGEMS) is what the speed
goals compare against ("no slower than the peer's kernel for the same operation").
"""
from __future__ import annotations

import importlib

LIGER = "liger"          # baseline name; import name liger_kernel (PyPI: liger-kernel)
FLAGGEMS = "flaggems"    # baseline name; import name flag_gems (PyPI: flag-gems)
NAMES = (LIGER, FLAGGEMS)
MODULES = {LIGER: "liger_kernel", FLAGGEMS: "flag_gems"}

_loaded: dict[str, object] = {}
_missing: dict[str, str] = {}


def load(module: str):
    """Import `module` (e.g. "liger_kernel.ops.softmax", "flag_gems") once; None if it fails."""
    if module in _loaded:
        return _loaded[module]
    if module in _missing:
        return None
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # ImportError, or a peer's own device probe failing at import
        _missing[module] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        return None
    _loaded[module] = mod
    return mod


def unavailable() -> dict[str, str]:
    """{module: why it did not import} for every peer module asked for so far."""
    return dict(_missing)


def is_peer(baseline_name: str) -> bool:
    return baseline_name in NAMES


def version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version as dist_version
    dist = {LIGER: "liger-kernel", FLAGGEMS: "flag-gems"}[name]
    try:
        return dist_version(dist)
    except PackageNotFoundError:
        mod = _loaded.get(MODULES[name])
        return getattr(mod, "__version__", None)
