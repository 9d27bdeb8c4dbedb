"""Where a figure came from: machine, device, driver, library versions, seed and command."""
from __future__ import annotations

import datetime as dt
import platform
import shlex
import sys
from functools import lru_cache


@lru_cache(maxsize=None)
def _versions() -> dict:
    import torch
    import triton
    from . import __version__
    return {"torch": torch.__version__, "triton": triton.__version__, "portcheck": __version__,
            "python": platform.python_version()}


def collect(target, arch: str, seed=None, command: str | None = None) -> dict:
    """Provenance for a record; `target` is a runtime Target (or None for compile-only work)."""
    info = {"host": platform.node(), "arch": arch, **_versions(),
            "timestamp": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "seed": seed, "command": command or shlex.join(["portcheck", *sys.argv[1:]])}
    if target is not None:
        info["target"] = target.name
        info.update(target.describe())
    return info
