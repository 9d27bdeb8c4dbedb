"""portcheck: compile, check against float64 oracles and time Triton kernels on NVIDIA, AMD and
the CPU interpreter.

The public API is small: declare a `Case` next to a kernel and `register()` it; portcheck's
pytest plugin, `portcheck run` and the reports then treat it like the built-in kernels.
Importing portcheck imports no kernel, so the interpreter mode can still be chosen, and not torch
either until a name below is used: the command line first chooses where its bytecode lives
(portcheck.workers.keep_bytecode).
"""
import importlib

__version__ = "0.1.0"

_WHERE = {"allocating_launcher": "adapters", "oracle_from_torch": "adapters",
          "Case": "cases", "Cost": "cases", "Variant": "cases", "all_cases": "cases", "get": "cases",
          "register": "cases", "fmt": "dtypes", "Tolerance": "tolerance", "exact": "tolerance",
          "rounding": "tolerance"}

__all__ = sorted(_WHERE) + ["__version__"]


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
        globals()[name] = value   # found once
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
