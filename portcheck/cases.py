"""Case: everything portcheck needs to check one kernel, and the registry that holds them.

A Case is declared next to its kernel (portcheck/kernels/*) or in a user's own repository, and
registered with `register()`. Built-in cases are found by importing every module under
portcheck.kernels; other packages add theirs through the `portcheck.cases` entry-point group
(each entry point names a module to import), by calling `register()` from a conftest, or by
naming modules: `--cases MODULE` (portcheck run / compile / bench, pytest), the matrix's
`case_modules` key, or PORTCHECK_CASE_MODULES. Named modules are imported with the current
directory importable, and every replay command names them again (`cases_flag`).

Selection (`--kernel`, a matrix's `kernels`) matches case names, exactly or as globs; a whole
family is chosen with an explicit prefix, `family:softmax`.
"""
from __future__ import annotations

import contextlib
import importlib
import math
import os
import pkgutil
import sys
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
    cost: Callable | None = None                # args -> Cost; None: the bytes of the inputs and
                                                #   outputs, no flops (io_cost)
    bench: tuple = ()                           # specs timed by `portcheck run` / bench
    variants: Callable | None = None            # arch -> compile variants (portcheck compile)
    baselines: Callable | None = None           # args -> {name: zero-arg callable doing the same
                                                #   work}: torch eager, vendor library, peers
    math: tuple[str, ...] = ()                  # Triton math functions the kernel relies on
    description: str = ""
    # launches may differ (atomics in any order, split reductions): each launch is judged by the
    # tolerance and their spread is reported, instead of requiring bitwise-equal launches
    nondeterministic: bool = False
    # argument names the kernel updates in place: the oracle sees them as they were before the
    # launch, and where it returns a reference under such a name, the value the kernel left in
    # that argument is compared with it, as an output is (launched_in_place)
    in_place: tuple[str, ...] = ()
    # the spec key of the reduction length ("K"), which a failure's diagnosis varies to see
    # whether the error grows with it; None: guessed from common names (portcheck.diagnose)
    reduction: str | None = None
    # (arch, dtype) -> the autotune configurations the launcher chooses among on that arch. Under
    # --as-arch hypothesis draws an index into it (spec["config"]) and the launcher launches that
    # one, found by facts.device.drawn_config(list), instead of timing an autotuner; [] means the
    # case makes no launch in that dtype on that arch (a recorded skip)
    configs: Callable | None = None

    def __post_init__(self):
        if not self.name or not self.dtypes:
            raise ValueError("a Case needs a name and at least one dtype")
        if self.cost is None:
            object.__setattr__(self, "cost", lambda args: io_cost(args, self.outputs(args)))


def arch_config(table: dict, default=None):
    """A launcher's configuration for the arch it launches for: table[the arch's name], else
    table[its config family], else `default`. The arch is facts.device.current_arch(), which
    `--as-arch` forces: a case that picks its configuration here (or from current_arch() and
    warp_size() itself) is checked under every arch's choice on the local device."""
    from .facts.device import current_arch
    arch = current_arch()
    return table.get(arch.name, table.get(arch.config_family, default))


def float64_args(args: dict, device=None) -> dict:
    """The oracle's view of a case's arguments: floating tensors as float64 (on `device`, by
    default where they are), other tensors moved likewise, everything else as it is."""
    import torch
    out = {}
    for k, v in args.items():
        if isinstance(v, torch.Tensor):
            v = v.detach().to(device=device, dtype=torch.float64 if v.dtype.is_floating_point else v.dtype)
        out[k] = v
    return out


class CaseContractError(Exception):
    """A case whose parts disagree (an oracle without a reference for a declared output, a
    tolerance missing or of the wrong type, a reference of another shape than its output): the
    case's fault, not the kernel's, recorded as an error that says which part."""


@contextlib.contextmanager
def launched_in_place(case: "Case", args: dict, outs: dict):
    """Around a launch: afterwards each argument the case updates in place (Case.in_place) holds
    its value from before the launch again, and the value the kernel left in it is in `outs`
    under its name (an output, compared where the oracle returns a reference for it). So the
    oracle, and a next launch, see the inputs the kernel saw. The copies run on the launch's
    stream, after it: no synchronize is needed."""
    import torch
    before = {n: args[n].clone() for n in case.in_place if isinstance(args.get(n), torch.Tensor)}
    clash = sorted(set(before) & set(outs))
    if clash:
        raise CaseContractError(f"{', '.join(clash)}: both an output (outputs()) and an argument "
                                "updated in place (in_place); give them different names")
    try:
        yield
    finally:   # a launch that raised (a grid refused) leaves its arguments as they are
        for n, value in before.items():
            outs[n] = args[n].clone()
            args[n].copy_(value)


def contract_errors(case: "Case", outs: dict, refs: dict, tols: dict) -> str:
    """What makes a case's oracle, tolerance and outputs disagree ("" when nothing does): every
    declared output needs a reference and a Tolerance of its name, every reference an output (or
    an argument updated in place) of its shape."""
    import torch

    from .tolerance import Tolerance
    if not isinstance(refs, dict) or not isinstance(tols, dict):
        bad = "the oracle" if not isinstance(refs, dict) else "tolerance()"
        return f"{bad} returned a {type(refs if bad == 'the oracle' else tols).__name__}, not a dict of names"
    problems = []
    declared = [n for n in outs if n not in case.in_place]
    missing = [n for n in declared if n not in refs]
    if missing:
        problems.append(f"the oracle returns no reference for output {', '.join(missing)} (declared by "
                        "outputs(), so it would never be compared)")
    extra = [n for n in refs if n not in outs]
    if extra:
        problems.append(f"the oracle returns {', '.join(extra)}, which is neither an output (outputs()) nor "
                        "an argument updated in place (in_place)")
    for n in [n for n in refs if not isinstance(refs[n], torch.Tensor)]:
        problems.append(f"the oracle's {n} is a {type(refs[n]).__name__}, not a tensor")
    for n in refs:
        if n in outs and isinstance(refs[n], torch.Tensor) and tuple(refs[n].shape) != tuple(outs[n].shape):
            what = "argument" if n in case.in_place else "output"
            problems.append(f"the oracle's {n} has shape {tuple(refs[n].shape)}, the {what} {n} "
                            f"{tuple(outs[n].shape)}")
    for n in refs:
        if n not in tols:
            problems.append(f"tolerance() returns no Tolerance for {n}")
        elif not isinstance(tols[n], Tolerance):
            problems.append(f"tolerance()[{n!r}] is a {type(tols[n]).__name__}, not a "
                            "portcheck.tolerance.Tolerance (rounding(), elementwise(), ... say their formula)")
    return "; ".join(problems)


def io_cost(args: dict, outputs: dict) -> Cost:
    """The default cost: every input tensor read once and every output written once, no flops
    (enough for a roofline of a memory-bound kernel; declare `cost` for anything else)."""
    import torch
    read = sum(v.numel() * v.element_size() for v in args.values() if isinstance(v, torch.Tensor))
    written = sum(math.prod(shape) * torch.empty((), dtype=dtype).element_size()
                  for shape, dtype in outputs.values())
    return Cost(bytes=read + written)


CASE_MODULES_ENV = "PORTCHECK_CASE_MODULES"   # comma list of extra modules that register cases
_REGISTRY: dict[str, Case] = {}
BUILTIN_KERNELS = "portcheck.kernels"
LOAD_ERRORS: dict[str, str] = {}   # module -> why it could not be imported: reported, not fatal
_LOADED = False
_NAMED: dict[str, str] = {}        # module -> where it was named: --cases, a matrix, the environment
_ORIGIN: dict[str, str] = {}       # case name -> the module a replay must name to register it
_REGISTERED_BY: dict[str, str] = {}  # case name -> the module that registered it (for clashes)
_loading: str | None = None        # the module being loaded by name ("" while loading built-ins
                                   #   and entry points, which every process finds by itself)


def register(case: Case) -> Case:
    """Add a case; registering the same name twice with a different case is an error."""
    # a case registered outside any loading (from a conftest or a test module) is found again by
    # importing the module that registered it
    caller = sys._getframe(1).f_globals.get("__name__", "")
    origin = _loading if _loading is not None else caller
    old = _REGISTRY.get(case.name)
    if old is not None and old is not case:
        # the same words from `portcheck run` (a failing row) and pytest (a collection error)
        first = _REGISTERED_BY.get(case.name) or "another module"
        kind = "a built-in case" if first.startswith(BUILTIN_KERNELS + ".") else "a case"
        raise ValueError(f"two cases are named {case.name!r}: {kind} of {first}, and one of "
                         f"{origin or 'this module'}; give yours another name")
    _REGISTRY[case.name] = case
    _REGISTERED_BY.setdefault(case.name, caller)
    if origin and origin != "__main__" and not origin.startswith(BUILTIN_KERNELS + "."):
        _ORIGIN.setdefault(case.name, origin)
    return case


def _import_named(name: str, source: str) -> None:
    global _loading
    if name.partition(".")[0] in sys.stdlib_module_names:
        raise UsageError(f"{source}: {name!r} is the name of a standard-library module; give the case "
                         "module another name")
    cwd = os.getcwd()
    # a repository that is not installed: its modules lie here. First while its module imports,
    # then last, where a user's random.py or json.py cannot shadow what torch and Triton import later
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    _loading = name
    try:
        importlib.import_module(name)
    except ImportError as exc:
        raise UsageError(f"{source}: cannot import {name!r} from {cwd}: {exc}") from None
    except Exception as exc:   # it exists but breaks (a SyntaxError, a raise, a second softmax):
        LOAD_ERRORS[name] = f"{type(exc).__name__}: {exc}"   # it fails alone, as a built-in would
    finally:
        _loading = None
        if added:
            sys.path.remove(cwd)
            sys.path.append(cwd)


def add_modules(names, source: str = "--cases") -> None:
    """Register the cases of these modules (`--cases`, a matrix's `case_modules`): now if the
    registry is loaded, else when it loads."""
    for name in names:
        if name not in _NAMED:
            _NAMED[name] = source
            if _LOADED:
                _import_named(name, source)


def cases_flag(case_name: str) -> list[str]:
    """The `--cases MODULE` a command line needs to find this case in a fresh process ([] for
    built-in cases and those of installed entry points)."""
    origin = _ORIGIN.get(case_name)
    return ["--cases", origin] if origin else []


def _load() -> None:
    global _LOADED, _loading
    if _LOADED:
        return
    _LOADED = True
    _loading = ""
    try:
        # Families are plug-ins found by name, as entry points are: the kernels sit above the Case
        # API that they import, so the registry never imports them statically.
        kernels = importlib.import_module(BUILTIN_KERNELS)
        for mod in pkgutil.iter_modules(kernels.__path__):
            if not mod.name.startswith("_"):
                name = f"{kernels.__name__}.{mod.name}"
                try:
                    importlib.import_module(name)
                except Exception as exc:  # one broken kernel module must not hide all the others
                    LOAD_ERRORS[name] = f"{type(exc).__name__}: {exc}"
        for ep in entry_points(group="portcheck.cases"):
            try:
                ep.load()
            except Exception as exc:   # an installed package's broken module fails alone too
                LOAD_ERRORS[ep.value] = f"{type(exc).__name__}: {exc}"
    finally:
        _loading = None
    for name in filter(None, (m.strip() for m in os.environ.get(CASE_MODULES_ENV, "").split(","))):
        _NAMED.setdefault(name, CASE_MODULES_ENV)
    for name, source in list(_NAMED.items()):
        _import_named(name, source)


def all_cases() -> list[Case]:
    _load()
    return sorted(_REGISTRY.values(), key=lambda c: c.name)


def get(name: str) -> Case:
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UsageError(f"unknown kernel case {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None


FAMILY_PREFIX = "family:"


def select(patterns: list[str] | None) -> list[Case]:
    """Cases whose name matches any glob pattern, or whose family matches a `family:` pattern
    (all when none); a pattern that matches nothing fails."""
    import fnmatch
    cases = all_cases()
    if not patterns:
        return cases
    chosen = []
    for pat in patterns:
        if pat.startswith(FAMILY_PREFIX):
            hits = [c for c in cases if fnmatch.fnmatch(c.family, pat[len(FAMILY_PREFIX):])]
            known = sorted({c.family for c in cases})
        else:
            hits = [c for c in cases if fnmatch.fnmatch(c.name, pat)]
            known = [c.name for c in cases]
        if not hits:
            unloaded = "".join(f"; module {m} does not import: {why}" for m, why in LOAD_ERRORS.items())
            raise UsageError(f"no kernel case matches {pat!r}{unloaded}; known: {', '.join(known)} "
                             f"(a family: {FAMILY_PREFIX}NAME)")
        chosen += [c for c in hits if c not in chosen]
    return chosen
