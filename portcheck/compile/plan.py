"""What to cross-compile: the matrix's [compile] settings, the tasks (one variant of one case on one
arch) and the JSON payload a worker process compiles.

A task names its kernel by module and qualified name (the worker imports it afresh, with
TRITON_INTERPRET unset) and describes one launch: either a declared Variant (signature,
constexprs, options) or a captured launch (portable arguments, see portcheck.compile.capture).
portcheck.compile.worker compiles the payload; portcheck.compile.records turns its facts into
Result records.
"""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field

from .lints import FAIL_ON, LintConfig
from ..facts.archs import ARCHS, DEFAULT_ARCHS, arch as get_arch

DEFAULT_TIMEOUT = 300.0      # seconds per compile: one pathological config took over 9 minutes
DEFAULT_JOBS = 2
NO_VARIANTS = "(no variants)"   # the label of the one record of a case with no launch on an arch


# ---- settings (the matrix's [compile] table) ------------------------------------------------

@dataclass(frozen=True)
class CompileSettings:
    archs: tuple = DEFAULT_ARCHS
    timeout: float = DEFAULT_TIMEOUT
    jobs: int = DEFAULT_JOBS
    lints: LintConfig = field(default_factory=LintConfig)
    max_variants: int = 0      # per case x arch (0: all); CI samples, `portcheck compile` takes all
    fail_on: str = "error"     # the least severity that fails a record: error or warning

    @classmethod
    def from_table(cls, table: dict, bad) -> "CompileSettings":
        """Validate a matrix's [compile] table; `bad(key, problem)` builds the UsageError."""
        known = {"archs", "timeout", "jobs", "lints", "max_variants", "fail_on"}
        for key in table:
            if key not in known:
                raise bad(key, f"is not a known [compile] key; known: {', '.join(sorted(known))}")
        archs = table.get("archs", list(DEFAULT_ARCHS))
        if not isinstance(archs, list) or not archs or not all(isinstance(a, str) for a in archs):
            raise bad("archs", "must be a non-empty list of arch names")
        for a in archs:
            if a not in ARCHS:
                raise bad("archs", f"names unknown arch {a!r}; known: {', '.join(ARCHS)}")
        timeout = table.get("timeout", DEFAULT_TIMEOUT)
        # not 0 < t < inf: a NaN limit would turn the compile time limit off
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
            raise bad("timeout", f"must be a positive number of seconds, got {timeout!r}")
        jobs = table.get("jobs", DEFAULT_JOBS)
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
            raise bad("jobs", f"must be a positive integer, got {jobs!r}")
        lints = table.get("lints", {})
        if not isinstance(lints, dict):
            raise bad("lints", "must be a table of rule = severity or {severity, threshold}")
        most = table.get("max_variants", 0)
        if isinstance(most, bool) or not isinstance(most, int) or most < 0:
            raise bad("max_variants", f"must be an integer >= 0 (0: every variant), got {most!r}")
        fail_on = table.get("fail_on", "error")
        if fail_on not in FAIL_ON:
            raise bad("fail_on", f"must be one of {', '.join(FAIL_ON)}, got {fail_on!r}")
        return cls(tuple(archs), float(timeout), jobs, LintConfig.from_table(lints, bad), most, fail_on)


# ---- the portable form of launch arguments ---------------------------------------------------
# JSON that crosses into a worker process: tensors become their dtype, 16-byte alignment and
# whether they lie within 2 GB (all Triton's specialization looks at); JIT callables passed as
# constexprs become references the worker imports.

def kernel_ref(kernel) -> dict:
    """Module, qualified name and file of a @triton.jit function (or an autotune/heuristics wrapper)."""
    if isinstance(kernel, dict):          # already a reference (a variant captured elsewhere)
        return kernel
    fn = kernel
    while hasattr(fn, "fn"):
        fn = fn.fn
    if not callable(fn) or not hasattr(fn, "__qualname__"):
        raise ValueError(f"{kernel!r} is not a Triton kernel")
    try:
        path = inspect.getsourcefile(fn)
    except TypeError:
        path = None
    return {"module": fn.__module__, "qualname": fn.__qualname__, "file": path}


def encode(value):
    """A launch argument or constexpr as JSON; raises ValueError for what cannot cross."""
    import torch
    import triton.language as tl
    if isinstance(value, tl.constexpr):
        return encode(value.value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value if not isinstance(value, float) or math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, torch.Tensor):
        nbytes = value.untyped_storage().nbytes() if value.device.type != "meta" else value.numel() * value.element_size()
        return {"tensor": str(value.dtype).removeprefix("torch."), "align16": value.data_ptr() % 16 == 0,
                "within_2gb": nbytes <= 2**31 - 1}
    if isinstance(value, tl.dtype):
        return {"tl_dtype": value.name}
    if isinstance(value, torch.dtype):
        return {"torch_dtype": str(value).removeprefix("torch.")}
    if isinstance(value, (tuple, list)):
        return {"tuple": [encode(v) for v in value]}
    if hasattr(value, "fn") and hasattr(value, "run"):
        return {"jit": kernel_ref(value)}
    raise ValueError(f"cannot describe a launch argument of type {type(value).__name__} for cross-compilation")


class StandIn:
    """What Triton's specialization reads from a tensor argument, without the tensor."""

    def __init__(self, dtype, align16: bool = True, within_2gb: bool = True):
        self.dtype = dtype
        self._ptr = 0 if align16 else 8
        self._range = 1 << 20 if within_2gb else 1 << 32

    def data_ptr(self) -> int:
        return self._ptr

    def ptr_range(self) -> int:
        return self._range


def decode(obj, resolve_kernel):
    """The inverse of encode, in the worker: tensors become StandIns, and JIT functions passed as
    constexprs are imported by `resolve_kernel(ref)` (the worker passes its own: planning never
    imports the worker)."""
    import torch
    import triton.language as tl
    if not isinstance(obj, dict):
        return obj
    if "tensor" in obj:
        return StandIn(getattr(torch, obj["tensor"]), obj.get("align16", True), obj.get("within_2gb", True))
    if "float" in obj:
        return float(obj["float"])
    if "tl_dtype" in obj:
        by_name = {t.name: t for t in vars(tl).values() if isinstance(t, tl.dtype)}
        return by_name[obj["tl_dtype"]]
    if "torch_dtype" in obj:
        return getattr(torch, obj["torch_dtype"])
    if "tuple" in obj:
        return tuple(decode(v, resolve_kernel) for v in obj["tuple"])
    if "jit" in obj:
        return resolve_kernel(obj["jit"])
    raise ValueError(f"unknown argument description {obj!r}")


# Placeholders for declared scalar types: their values only pick the type (never 1, never a
# multiple of 16, so no value specialization is assumed that the declaration did not state).
_PLACEHOLDER = {"i1": True, "i8": 3, "i16": 3, "i32": 3, "i64": 2**40 + 3, "u32": 2**31 + 3,
                "u64": 2**63 + 3, "fp16": 1.5, "bf16": 1.5, "fp32": 1.5, "fp64": 1.5}


def declared_args(signature: dict, divisible: tuple = ()) -> dict:
    """Stand-in arguments for a declared signature. `divisible` (Variant.divisible_by_16) names
    the arguments a launch specializes as multiples of 16; when a variant names none, pointers
    are taken as 16-byte aligned (what torch's allocator hands out) and integers as not."""
    import torch
    from ..dtypes import FORMATS
    by_triton = {f.triton_name: f.torch_dtype for f in FORMATS.values()}
    by_triton.update({"i16": torch.int16, "u32": torch.uint32, "u64": torch.uint64, "i1": torch.bool})
    args = {}
    for name, ty in signature.items():
        if ty.startswith("*"):
            base = ty.lstrip("*k")
            if base not in by_triton:
                raise ValueError(f"{name}: unknown pointer type {ty!r}")
            args[name] = {"tensor": str(by_triton[base]).removeprefix("torch."),
                          "align16": name in divisible or not divisible, "within_2gb": True}
        elif ty == "constexpr":
            continue
        elif ty.startswith("tensordesc<"):
            # a host tensor descriptor: specialized here as a pointer to its element type, then
            # declared as the descriptor type itself (the worker applies declared types last)
            base = ty.removeprefix("tensordesc<").split("[", 1)[0]
            if base not in by_triton:
                raise ValueError(f"{name}: unknown descriptor element type {ty!r}")
            args[name] = {"tensor": str(by_triton[base]).removeprefix("torch."), "align16": True,
                          "within_2gb": True}
        elif ty in _PLACEHOLDER:
            value = _PLACEHOLDER[ty]
            if name in divisible and isinstance(value, int) and not isinstance(value, bool):
                value += 13     # 3 -> 16, 2**40 + 3 -> 2**40 + 16: the same width, divisible by 16
            args[name] = value
        else:
            raise ValueError(f"{name}: unsupported signature type {ty!r}")
    return args


# ---- what to compile ------------------------------------------------------------------------

@dataclass(frozen=True)
class Task:
    """One variant of one case on one arch, as a worker compiles it."""
    case: str
    family: str
    dtype: str
    label: str
    arch: str
    payload: dict          # JSON for the worker: kernel ref, arguments, options
    options: dict          # the launch's compiler options, for the lints

    @property
    def key(self) -> tuple:
        return (self.case, self.label, self.arch)


def variant_payload(variant) -> dict:
    """JSON the worker compiles: a captured launch keeps its arguments, a declared one its signature."""
    launch = getattr(variant, "launch", None)
    opts = {"num_warps": variant.num_warps, "num_stages": variant.num_stages, **variant.options}
    opts = {k: v for k, v in opts.items() if v is not None}
    if launch is not None:
        return {"kernel": kernel_ref(variant.kernel), "args": launch["args"],
                "kwargs": {**launch.get("kwargs", {}), **opts}, "declared": None}
    divisible = tuple(getattr(variant, "divisible_by_16", ()))
    return {"kernel": kernel_ref(variant.kernel), "args": declared_args(variant.signature, divisible),
            "kwargs": {**{k: encode(v) for k, v in variant.constexprs.items()}, **opts},
            "declared": dict(variant.signature)}


def _variant_dtype(case, variant) -> str:
    if getattr(variant, "dtype", ""):
        return variant.dtype
    first = (variant.label or "").split(" ")[0]
    if first in case.dtypes:
        return first
    from ..dtypes import FORMATS
    by_triton = {f.triton_name: f.name for f in FORMATS.values()}
    for ty in variant.signature.values():
        if ty.startswith("*") and ty.lstrip("*k") in by_triton:
            return by_triton[ty.lstrip("*k")]
    return case.dtypes[0]


def _unique_labels(variants) -> list[str]:
    seen: dict[str, int] = {}
    labels = []
    for i, v in enumerate(variants):
        label = v.label or f"variant {i}"
        n = seen.get(label, 0)
        seen[label] = n + 1
        labels.append(label if n == 0 else f"{label} #{n + 1}")
    return labels


def variant_task(variant, arch: str, case: str = "", family: str = "", dtype: str = "",
                 label: str = "") -> Task:
    """The task for one variant on one arch (outside a registered case too: lint kernels, tools)."""
    try:
        payload = variant_payload(variant)
    except ValueError as exc:
        payload = {"error": f"cannot describe this launch: {exc}"}
    return Task(case or kernel_ref(variant.kernel)["qualname"], family or case, dtype,
                label or variant.label, arch, payload, dict(variant.options))


def sample(variants: list, most: int) -> list:
    """At most `most` variants (0: all): the first of each dtype, then evenly spaced others, in
    their declared order, so a sampled run still sees every dtype and the default configs."""
    if not most or len(variants) <= most:
        return variants
    keys = [getattr(v, "dtype", "") or (v.label or "").split(" ")[0] for v in variants]
    chosen = [i for i, k in enumerate(keys) if k not in keys[:i]][:most]
    rest = [i for i in range(len(variants)) if i not in chosen]
    need = most - len(chosen)
    if need > 0 and rest:
        step = len(rest) / need
        chosen += [rest[int(j * step)] for j in range(need)]
    return [variants[i] for i in sorted(chosen)]


def plan(cases, archs, captured: dict | None = None, max_variants: int = 0) -> list[Task]:
    """Tasks for every case x variant x arch, in a fixed order (case, arch, variant).

    A case without `variants` uses `captured[case.name]` (portcheck.compile.capture.for_cases: per
    arch or for all archs, a list of variants or a message saying why capture failed); a case left
    with no variants gets one task that carries the reason, which the record reports as a failure.
    """
    tasks = []
    for case in cases:
        for arch_name in archs:
            a = get_arch(arch_name)
            got = (captured or {}).get(case.name, [])
            if isinstance(got, dict):   # captured per arch (portcheck.compile.capture.for_cases)
                got = got.get(arch_name, [])
            variants = list(case.variants(a)) if case.variants is not None else \
                (got if isinstance(got, list) else [])
            if isinstance(got, str) and case.variants is None:
                tasks.append(Task(case.name, case.family, case.dtypes[0], "(capture failed)", arch_name,
                                  {"error": got}, {}))
                continue
            if not variants:   # e.g. an fp8 kernel on an arch without fp8: nothing to build there
                tasks.append(Task(case.name, case.family, case.dtypes[0], NO_VARIANTS, arch_name,
                                  {"skip": f"{case.name} declares no launch for {arch_name}"}, {}))
                continue
            labelled = list(zip(_unique_labels(variants), variants))
            kept = {id(v) for v in sample(variants, max_variants)}
            for label, v in labelled:
                if id(v) not in kept:
                    continue
                tasks.append(variant_task(v, arch_name, case.name, case.family, _variant_dtype(case, v), label))
    return tasks

