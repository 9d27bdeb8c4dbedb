"""Case: everything portcheck needs to check one kernel, and the registry that holds them.

A Case is declared next to its kernel (portcheck/kernels/*) or in a user's own repository, and
registered with `register()`. Built-in cases are found by importing every module under
portcheck.kernels; other packages add theirs through the `portcheck.cases` entry-point group
(each entry point names a module to import), by calling `register()` from a conftest, or, for
`portcheck run`, by naming modules in PORTCHECK_CASE_MODULES.
"""
from __future__ import annotations

import importlib
import os
import pkgutil
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Callable

from .errors import UsageError


@dataclass(frozen=True)
class Cost:
    """What one launch must move and compute at least: the roofline's two numbers."""
    bytes: int
    flops: int = 0


@dataclass(frozen=True)
class Variant:
    """One launch a case makes, as the compiler sees it: what cross-compilation builds per arch."""
    kernel: object                               # the @triton.jit function
    signature: dict                              # {"x_ptr": "*fp16", "n": "i32", ...}
    constexprs: dict = field(default_factory=dict)
    num_warps: int = 4
    num_stages: int | None = None                # None: the backend's default (3 on NVIDIA, 2 on
                                                 #   AMD), what a launch naming none compiles with
    options: dict = field(default_factory=dict)  # AMD: waves_per_eu, matrix_instr_nonkdim, kpack
    label: str = ""                              # e.g. "fp16 n=4096"
    # arguments a launch specializes as multiples of 16 (pointers 16-byte aligned, as from
    # torch's allocator): Triton's tt.divisibility attribute. It turns on vectorized loads and
    # the cp.async / LDS pipelines, so without it a cross-compile does not build what runs.
    divisible_by_16: tuple = ()


def launch_divisibility(signature: dict, **values: int) -> tuple:
    """Variant.divisible_by_16 for a launch with these integer values: every pointer (torch's
    allocator aligns to 16 bytes or more) and each integer given whose value is a multiple of 16,
    as Triton's JIT specializes them. Integers not given (row counts, which vary) stay general."""
    unknown = set(values) - set(signature)
    if unknown:
        raise ValueError(f"not in the signature: {', '.join(sorted(unknown))}")
    return tuple(name for name, ty in signature.items()
                 if ty.startswith("*") or (name in values and values[name] % 16 == 0))


@dataclass(frozen=True)
class Case:
    name: str                                   # unique, e.g. "softmax"
    family: str                                 # the kernel family / module, e.g. "softmax"
    dtypes: tuple[str, ...]                     # input dtypes it is checked in
    inputs: Callable                            # (dtype, max_elements) -> strategy of spec dicts
    make: Callable                              # (spec, device) -> kernel arguments (dict)
    outputs: Callable                           # args -> {name: (shape, torch dtype)}
    launch: Callable                            # (args, outs) -> None: runs the kernel into outs
    oracle: Callable                            # float64 args -> {name: reference tensor}
    tolerance: Callable                         # (args64, refs, dtype) -> {name: Tolerance}
    cost: Callable                              # args -> Cost
    bench: tuple = ()                           # specs timed by `portcheck run` / bench
    variants: Callable | None = None            # arch -> compile variants (portcheck compile)
    baselines: Callable | None = None           # args -> {name: zero-arg callable doing the same
                                                #   work}: torch eager, vendor library, peers
    math: tuple[str, ...] = ()                  # Triton math functions the kernel relies on
    description: str = ""

    def __post_init__(self):
        if not self.name or not self.dtypes:
            raise ValueError("a Case needs a name and at least one dtype")


CASE_MODULES_ENV = "PORTCHECK_CASE_MODULES"   # comma list of extra modules that register cases
_REGISTRY: dict[str, Case] = {}
LOAD_ERRORS: dict[str, str] = {}   # module -> why it could not be imported: reported, not fatal
_LOADED = False


def register(case: Case) -> Case:
    """Add a case; registering the same name twice with a different case is an error."""
    old = _REGISTRY.get(case.name)
    if old is not None and old is not case:
        raise ValueError(f"two cases are named {case.name!r}")
    _REGISTRY[case.name] = case
    return case


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    from . import kernels
    for mod in pkgutil.iter_modules(kernels.__path__):
        if not mod.name.startswith("_"):
            name = f"{kernels.__name__}.{mod.name}"
            try:
                importlib.import_module(name)
            except Exception as exc:  # one broken kernel module must not hide all the others
                LOAD_ERRORS[name] = f"{type(exc).__name__}: {exc}"
    for ep in entry_points(group="portcheck.cases"):
        ep.load()
    for name in filter(None, (m.strip() for m in os.environ.get(CASE_MODULES_ENV, "").split(","))):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise UsageError(f"{CASE_MODULES_ENV}: cannot import {name!r}: {exc}") from None


def all_cases() -> list[Case]:
    _load()
    return sorted(_REGISTRY.values(), key=lambda c: c.name)


def get(name: str) -> Case:
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UsageError(f"unknown kernel case {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None


def select(patterns: list[str] | None) -> list[Case]:
    """Cases whose name or family matches any glob pattern (all when none); unknown names fail."""
    import fnmatch
    cases = all_cases()
    if not patterns:
        return cases
    chosen = []
    for pat in patterns:
        hits = [c for c in cases if fnmatch.fnmatch(c.name, pat) or fnmatch.fnmatch(c.family, pat)]
        if not hits:
            raise UsageError(f"no kernel case matches {pat!r}; known: {', '.join(c.name for c in cases)}")
        chosen += [c for c in hits if c not in chosen]
    return chosen
