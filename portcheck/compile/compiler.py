"""Cross-compilation for any arch without its hardware, and the resources the compiler produced.

A compile task names a kernel by module and qualified name (worker processes import it afresh,
with TRITON_INTERPRET unset) and describes one launch: either a declared Variant (signature,
constexprs, options) or a captured launch (portable arguments, see portcheck.compile.capture). The
worker specializes it exactly as Triton's JIT would for the target arch, with the JIT's own
binder (`create_function_from_signature`, the same in triton 3.4, 3.6 and 3.9) on stand-in
tensors, so AMD gets its buffer-ops pointer-range attribute and NVIDIA does not, then calls
`triton.compile` and reads registers, spills, shared memory, occupancy, the matrix-instruction
family and code size from what came out:

  NVIDIA: `cuobjdump --dump-resource-usage` (bundled in the triton wheel) on the cubin gives REG,
          STACK (spills land there) and LOCAL; shared memory is `metadata.shared` (dynamic);
          occupancy is computed from registers, shared memory and threads with the arch table.
  AMD:    the amdgcn text states VGPRs, SGPRs, AGPRs, spill counts, scratch and occupancy;
          LDS is `metadata.shared` (`.group_segment_fixed_size` says 0: Triton's LDS is dynamic).
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import math
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field

from .lints import DEFAULT as DEFAULT_LINTS
from .lints import LintConfig, findings, verdict
from ..facts.archs import ARCHS, DEFAULT_ARCHS, arch as get_arch

AMD_ONLY_OPTIONS = ("waves_per_eu", "matrix_instr_nonkdim", "kpack", "schedule_hint")
DEFAULT_TIMEOUT = 300.0      # seconds per compile: one pathological config took over 9 minutes
DEFAULT_JOBS = 2
EXTRACT_VERSION = 4          # bump when the extracted facts change (invalidates their cache)


# ---- settings (the matrix's [compile] table) ------------------------------------------------

@dataclass(frozen=True)
class CompileSettings:
    archs: tuple = DEFAULT_ARCHS
    timeout: float = DEFAULT_TIMEOUT
    jobs: int = DEFAULT_JOBS
    lints: LintConfig = field(default_factory=LintConfig)
    max_variants: int = 0      # per case x arch (0: all); CI samples, `portcheck compile` takes all

    @classmethod
    def from_table(cls, table: dict, bad) -> "CompileSettings":
        """Validate a matrix's [compile] table; `bad(key, problem)` builds the UsageError."""
        known = {"archs", "timeout", "jobs", "lints", "max_variants"}
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
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
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
        return cls(tuple(archs), float(timeout), jobs, LintConfig.from_table(lints, bad), most)


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


def decode(obj):
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
        return tuple(decode(v) for v in obj["tuple"])
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

    A case without `variants` uses `captured[case.name]` (portcheck.compile.capture.for_cases: a list
    of variants, or a message saying why capture failed); a case left with no variants gets one
    task that carries the reason, which the record reports as a failure.
    """
    tasks = []
    for case in cases:
        for arch_name in archs:
            a = get_arch(arch_name)
            got = (captured or {}).get(case.name, [])
            variants = list(case.variants(a)) if case.variants is not None else \
                (got if isinstance(got, list) else [])
            if isinstance(got, str) and case.variants is None:
                tasks.append(Task(case.name, case.family, case.dtypes[0], "(capture failed)", arch_name,
                                  {"error": got}, {}))
                continue
            if not variants:   # e.g. an fp8 kernel on an arch without fp8: nothing to build there
                tasks.append(Task(case.name, case.family, case.dtypes[0], "(no variants)", arch_name,
                                  {"skip": f"{case.name} declares no launch for {arch_name}"}, {}))
                continue
            labelled = list(zip(_unique_labels(variants), variants))
            kept = {id(v) for v in sample(variants, max_variants)}
            for label, v in labelled:
                if id(v) not in kept:
                    continue
                tasks.append(variant_task(v, arch_name, case.name, case.family, _variant_dtype(case, v), label))
    return tasks


# ---- the worker side: compile one task and read what came out --------------------------------

def resolve_kernel(ref: dict):
    """Import the kernel a reference names, in this (compiled-mode) process."""
    import triton
    from triton.runtime.jit import JITFunction
    if "<locals>" in ref["qualname"]:
        raise ImportError(f"{ref['qualname']} is defined inside a function; define kernels at module "
                          "level so that a worker process can import them")
    try:
        mod = importlib.import_module(ref["module"])
    except ImportError:
        if not ref.get("file") or ref["module"] == "__main__":
            raise
        spec = importlib.util.spec_from_file_location(ref["module"], ref["file"])
        mod = importlib.util.module_from_spec(spec)
        sys.modules[ref["module"]] = mod
        spec.loader.exec_module(mod)
    obj = mod
    for part in ref["qualname"].split("."):
        obj = getattr(obj, part)
    while not isinstance(obj, JITFunction) and hasattr(obj, "fn"):
        obj = obj.fn
    if not isinstance(obj, JITFunction):
        obj = triton.jit(obj)
    return obj


def _target(arch):
    from triton.backends.compiler import GPUTarget
    return GPUTarget(arch.backend, arch.triton_arch, arch.warp_size)


_BINDERS: dict = {}
_BACKENDS: dict = {}


def _backend(arch):
    """One backend object per arch in a worker (they hold nothing launch-specific)."""
    if arch.name not in _BACKENDS:
        from triton.compiler import make_backend
        _BACKENDS[arch.name] = make_backend(_target(arch))
    return _BACKENDS[arch.name]


def specialize(jit, backend, args, kwargs):
    """What JITFunction.run does before compiling: bind, specialize, split options from constexprs."""
    from triton._utils import find_paths_if, get_iterable_path
    from triton.runtime.jit import create_function_from_signature
    key = (id(jit), id(backend))
    if key not in _BINDERS:     # the JIT builds one binder per kernel and device, and so do we
        _BINDERS[key] = (jit, create_function_from_signature(jit.signature, jit.params, backend))
    binder = _BINDERS[key][1]
    bound, spec, opts = binder(*args, **kwargs)
    names = [p.name for p in jit.params]
    sigvals = [s[0] for s in spec]
    signature = dict(zip(names, sigvals))
    constexprs = {p: get_iterable_path(list(bound.values()), p)
                  for p in find_paths_if(sigvals, lambda _, v: v == "constexpr")}
    attrvals = ["" if s[0] == "constexpr" else s[1] for s in spec]
    attrs = {p: backend.parse_attr(get_iterable_path(attrvals, p))
             for p in find_paths_if(attrvals, lambda _, v: isinstance(v, str))}
    return signature, constexprs, attrs, dict(opts)


_ERROR_KINDS = (("rejected-precision", re.compile(r"input_precision|allowed_dot_input_precisions")),
                ("rejected-dtype", re.compile(r"not supported in this architecture|"
                                              r"fp8\w* (is )?not supported|unsupported (fp8|dtype)|"
                                              r"type \w+ not supported", re.I)))


def first_error_line(exc: BaseException, stderr_text: str = "") -> str:
    """The compiler's own first meaningful line: the message under Triton's source caret, the
    first MLIR/LLVM 'error:' line when the exception only says a pass failed, else the first line."""
    text = str(exc) or type(exc).__name__
    lines = [ln for ln in text.splitlines()]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].strip() == "^":
            lines = lines[i + 1:]
            break
    msg = next((ln.strip() for ln in lines if ln.strip()), type(exc).__name__)
    m = re.match(r"^\w+(?:Error|Exception)\((['\"])(.*)\1\)$", msg)
    if m:
        msg = m.group(2).replace("\\'", "'")
    if re.search(r"PassManager::run failed|failed to (translate|legalize)", msg) or msg == type(exc).__name__:
        for ln in stderr_text.splitlines():
            if "error:" in ln:
                msg = f"{msg}: {ln.strip()}"
                break
    return msg[:400]


def classify_error(msg: str) -> str:
    for kind, pattern in _ERROR_KINDS:
        if pattern.search(msg):
            return kind
    return "compile-error"


def _elf_text_bytes(blob: bytes) -> int | None:
    """Sum of the .text* section sizes of a 64-bit little-endian ELF (cubin, hsaco)."""
    if len(blob) < 64 or blob[:4] != b"\x7fELF" or blob[4] != 2 or blob[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", blob, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", blob, 0x3A)
    if not shoff or shoff + shnum * shentsize > len(blob):
        return None

    def section(i):
        name, _t, _f, _a, off, size = struct.unpack_from("<IIQQQQ", blob, shoff + i * shentsize)
        return name, off, size
    _, stroff, _ = section(shstrndx)
    total = 0
    for i in range(shnum):
        name_off, _, size = section(i)
        end = blob.find(b"\0", stroff + name_off)
        if blob[stroff + name_off:end].startswith(b".text"):
            total += size
    return total


_NV_FAMILIES = (("tcgen05", re.compile(r"\btcgen05\.mma\S*")), ("wgmma", re.compile(r"\bwgmma\.mma_async\S*")),
                ("mma.sync", re.compile(r"\bmma\.sync\S*")))
_AMD_FAMILIES = (("mfma", re.compile(r"\bv_s?mfma\w*")), ("wmma", re.compile(r"\bv_s?wmma\w*")))


def matrix_instructions(asm_text: str, amd: bool) -> tuple[str, list[str]]:
    """The matrix-instruction family in the assembly (mfma, wmma, mma.sync, wgmma, tcgen05 or
    none) and the distinct instructions seen (a few)."""
    for family, pattern in (_AMD_FAMILIES if amd else _NV_FAMILIES):
        found = sorted(set(pattern.findall(asm_text)))
        if found:
            return family, found[:4]
    return "none", []


# cp.async{.ca,.cg}.shared.global [dst], [src], cp-size{, src-size}: cp-size is 4, 8 or 16 bytes
_CP_ASYNC = re.compile(r"\bcp\.async\.c[ag]\.shared\.global\S*\s+\[[^]]*\],\s*\[[^]]*\],\s*(0x[0-9a-fA-F]+|\d+)")


def async_copy_sizes(ptx: str) -> dict:
    """How many cp.async instructions the PTX has per copy size in bytes (static counts). Copies
    under 16 bytes mean that the global layout does not match the shared layout, or that the
    compiler could not prove 16-byte alignment: e.g. a row-major fp32 B feeding sm_90a's tf32
    wgmma, which reads K-major operands only, is copied 4 bytes at a time."""
    sizes: dict = {}
    for size in _CP_ASYNC.findall(ptx):
        key = str(int(size, 0))
        sizes[key] = sizes.get(key, 0) + 1
    return sizes


_DOT = re.compile(r"tt\.dot(?:_scaled)?\s([^:]*):\s*tensor<([^>]*)>\s*\*\s*tensor<([^>]*)>\s*->\s*tensor<([^>]*)>")
_PRECISION = re.compile(r"inputPrecision\s*=\s*(\w+)")


def dots_in(ttir: str) -> list[dict]:
    """Each tl.dot in the TTIR: operand and result element types and input precision (TTIR
    prints the precision only when it is not the default, ieee)."""
    out = []
    for m in _DOT.finditer(ttir):
        elem = [t.split("x")[-1].split(",")[0].strip() for t in m.group(2, 3, 4)]
        given = _PRECISION.search(m.group(1))
        prec = given.group(1) if given else ("ieee" if elem[0] == "f32" else None)
        out.append({"a": elem[0], "b": elem[1], "acc": elem[2], "precision": prec})
    return out


def _cuobjdump() -> str | None:
    import triton
    path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    return path if os.path.exists(path) else None


def nvidia_resources(cubin: bytes) -> dict:
    """REG / STACK / LOCAL / static SHARED per function from the bundled cuobjdump."""
    tool = _cuobjdump()
    if tool is None:
        return {"note": "no cuobjdump in this triton wheel; registers unknown"}
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([tool, "--dump-resource-usage", f.name], capture_output=True, text=True,
                             timeout=60).stdout
    m = re.search(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)", out)
    if not m:
        return {"note": f"cuobjdump printed no resource usage: {out.strip()[:200]}"}
    reg, stack, static_shared, local = map(int, m.groups())
    return {"registers": reg, "stack_bytes": stack, "local_bytes": local, "static_shared": static_shared}


def _amd_int(pattern: str, text: str) -> int | None:
    m = re.search(pattern, text, re.M)
    return int(m.group(1)) if m else None


def amd_resources(amdgcn: str) -> dict:
    vgpr = _amd_int(r"^\s*\.vgpr_count:\s+(\d+)", amdgcn)
    return {"registers": vgpr, "vgpr": vgpr,
            "arch_vgpr": _amd_int(r"; NumVgprs: (\d+)", amdgcn),
            "agpr": _amd_int(r"; NumAgprs: (\d+)", amdgcn) or 0,
            "sgpr": _amd_int(r"^\s*\.sgpr_count:\s+(\d+)", amdgcn),
            "vgpr_spill_count": _amd_int(r"^\s*\.vgpr_spill_count:\s+(\d+)", amdgcn) or 0,
            "sgpr_spill_count": _amd_int(r"^\s*\.sgpr_spill_count:\s+(\d+)", amdgcn) or 0,
            "scratch_bytes": _amd_int(r"; ScratchSize: (\d+)", amdgcn) or 0,
            "occupancy_compiler": _amd_int(r"; Occupancy: (\d+)", amdgcn),
            "group_segment_fixed_size": _amd_int(r"^\s*\.group_segment_fixed_size:\s+(\d+)", amdgcn),
            "code_len": _amd_int(r"; codeLenInByte = (\d+)", amdgcn)}


def _read_resources(kernel, arch) -> dict:
    """Registers, spills, occupancy as stated, matrix instructions, dots and code size."""
    asm = kernel.asm
    res: dict = {}
    if arch.is_amd:
        res.update(amd_resources(asm["amdgcn"]))
        res["code_bytes"] = _elf_text_bytes(asm.get("hsaco", b"")) or res.get("code_len")
        family, instrs = matrix_instructions(asm["amdgcn"], True)
    else:
        res.update(nvidia_resources(asm["cubin"]))
        res["code_bytes"] = _elf_text_bytes(asm["cubin"])
        family, instrs = matrix_instructions(asm["ptx"], False)
        res["async_copy_sizes"] = async_copy_sizes(asm["ptx"])
    res.update(matrix_family=family, matrix_instructions=instrs, dots=dots_in(asm.get("ttir", "")))
    return res


_FACTS_FILE = f"portcheck-compile-v{EXTRACT_VERSION}.json"


def _facts_cache(src, backend, options):
    """Triton's own cache key for this compile (the same formula in 3.4, 3.6 and 3.9) and its
    cache manager: a warm run reads the facts we extracted last time (one small JSON file)
    instead of loading every artifact and running cuobjdump again."""
    import hashlib
    from triton._C.libtriton import get_cache_invalidating_env_vars
    from triton.runtime.cache import get_cache_manager
    try:
        from triton.runtime.cache import triton_key
    except ImportError:                      # triton 3.4 keeps it in the compiler module
        from triton.compiler.compiler import triton_key
    env = get_cache_invalidating_env_vars()
    key = f"{triton_key()}-{src.hash()}-{backend.hash()}-{options.hash()}-{sorted(env.items())}-portcheck"
    return get_cache_manager(hashlib.sha256(key.encode()).hexdigest())


def _cached_facts(cache) -> dict | None:
    try:
        hit = cache.get_file(_FACTS_FILE)
        if hit:
            with open(hit, encoding="utf-8") as f:
                return json.load(f)
    except (OSError, ValueError):
        pass
    return None


def _toolchain_missing(msg: str) -> bool:
    return "ld.lld not found" in msg or "TRITON_HIP_LLD_PATH" in msg or ("ptxas" in msg and "not found" in msg)


def compile_payload(payload: dict, arch_name: str, stderr_tail=lambda: "") -> dict:
    """Compile one task in this process and return the raw facts (JSON-able). Never raises."""
    import triton
    from triton.compiler import ASTSource
    arch = get_arch(arch_name)
    raw = {"triton": triton.__version__, "arch": arch_name}
    if "skip" in payload:
        return {**raw, "status": "skip", "error": payload["skip"]}
    if "error" in payload:
        return {**raw, "status": "error", "error_kind": "compile-error", "error": payload["error"]}
    try:
        jit = resolve_kernel(payload["kernel"])
        args_by_name = {k: decode(v) for k, v in payload["args"].items()} if isinstance(payload["args"], dict) else None
        args = [] if args_by_name is not None else [decode(v) for v in payload["args"]]
        kwargs = {k: decode(v) for k, v in payload["kwargs"].items()}
        if args_by_name is not None:
            kwargs = {**args_by_name, **kwargs}
    except Exception as exc:  # noqa: BLE001 - reported in the record
        return {**raw, "status": "error", "error_kind": "compile-error",
                "error": f"cannot load the kernel: {type(exc).__name__}: {exc}"[:400]}
    target = _target(arch)
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            backend = _backend(arch)
            params = {p.name for p in jit.params}
            dropped = []
            if not arch.is_amd:
                dropped = [k for k in kwargs if k in AMD_ONLY_OPTIONS and k not in params]
                kwargs = {k: v for k, v in kwargs.items() if k not in dropped}
            signature, constexprs, attrs, opts = specialize(jit, backend, args, kwargs)
            if payload.get("declared"):
                for name, ty in payload["declared"].items():
                    if ty != "constexpr" and signature.get(name) != "constexpr":
                        signature[name] = ty
            options = backend.parse_options(dict(opts))
            unknown = [k for k in opts if k not in options.__dict__]
            if unknown:
                raise KeyError(f"Keyword argument {unknown[0]} was specified but unrecognised")
            src = ASTSource(jit, signature, constexprs, attrs)
            try:
                cache = _facts_cache(src, backend, options)
                facts = _cached_facts(cache)
            except Exception:  # noqa: BLE001 - a read-only or remote cache only costs a compile
                cache, facts = None, None
            if facts is not None:
                return {**raw, **facts, "compile_s": time.perf_counter() - started, "cached": True}
            kernel = triton.compile(src, target=target, options=options.__dict__)
            compile_s = time.perf_counter() - started
            res = _read_resources(kernel, arch)
        except Exception as exc:  # noqa: BLE001 - a compiler error is a finding, not a crash
            msg = first_error_line(exc, stderr_tail())
            status = "toolchain" if _toolchain_missing(msg) else "error"
            return {**raw, "status": status, "error_kind": classify_error(msg), "error": msg,
                    "error_type": type(exc).__name__, "compile_s": time.perf_counter() - started}
    md = kernel.metadata
    warned = sorted({str(w.message).splitlines()[0][:300] for w in caught
                     if "TRITON_DEFAULT_FP_FUSION" not in str(w.message)})
    facts = {"status": "ok", "num_warps": md.num_warps, "num_stages": md.num_stages,
             "warp_size": getattr(md, "warp_size", arch.warp_size), "shared": md.shared,
             "dropped_options": dropped, "warnings": warned, "signature": signature, **res}
    if cache is not None:
        try:
            cache.put(json.dumps(facts), _FACTS_FILE, binary=False)
        except Exception:  # noqa: BLE001 - the next run compiles again, nothing worse
            pass
    return {**raw, **facts, "compile_s": compile_s}


# ---- the parent side: occupancy, lints, the record --------------------------------------------

# Per compute capability (CUDA C++ Programming Guide, "Technical Specifications per Compute
# Capability"): resident blocks per SM, and the 1 KB of shared memory the system reserves per
# block (so an SM's shared memory is the per-block maximum + 1 KB). Registers are allocated per
# warp in units of 256.
_NV_MAX_BLOCKS = {80: 32, 89: 24, 90: 32, 100: 32, 120: 32}
_NV_RESERVED_SHARED = 1024
_NV_REG_UNIT = 256
# AMD: the most waves a SIMD holds (LLVM AMDGPU getMaxWavesPerEU: 8 on gfx90a and later CDNA, 16
# on gfx10.3+), LDS a CU (RDNA: a WGP) shares between its workgroups, and its SIMD count.
_AMD_MAX_WAVES = {"gfx90a": 8, "gfx942": 8, "gfx950": 8, "gfx1100": 16, "gfx1201": 16}
_AMD_LDS_PER_CU = {"gfx90a": 65536, "gfx942": 65536, "gfx950": 163840, "gfx1100": 131072, "gfx1201": 131072}
_AMD_SIMDS = 4


def occupancy(arch, raw: dict) -> dict:
    """NVIDIA: resident warps per SM from registers, shared memory and threads. AMD: the
    compiler's waves per SIMD, bounded by how many workgroups the LDS admits."""
    warps = raw.get("num_warps") or 0
    shared = raw.get("shared") or 0
    if not warps:
        return {}
    if arch.is_amd:
        stated = raw.get("occupancy_compiler")
        most = _AMD_MAX_WAVES.get(arch.name, 8)
        if stated is None:
            return {}
        # workgroups the CU's LDS holds at once, their waves spread over its SIMDs
        lds_bound = math.ceil((_AMD_LDS_PER_CU[arch.name] // shared) * warps / _AMD_SIMDS) if shared else most
        effective = min(stated, lds_bound, most)
        return {"occupancy": stated, "occupancy_effective": effective, "occupancy_max": most,
                "occupancy_unit": "waves/SIMD", "occupancy_fraction": round(effective / most, 4)}
    regs = raw.get("registers")
    if regs is None:
        return {}
    most = arch.max_threads_per_sm // arch.warp_size
    per_warp = math.ceil(regs * arch.warp_size / _NV_REG_UNIT) * _NV_REG_UNIT
    by_regs = (arch.regs_per_sm // per_warp) // warps if per_warp else most
    by_shared = (arch.shared_per_block + _NV_RESERVED_SHARED) // (shared + _NV_RESERVED_SHARED)
    blocks = min(_NV_MAX_BLOCKS.get(arch.triton_arch, 32), most // warps, by_regs, by_shared)
    active = blocks * warps
    return {"occupancy": active, "occupancy_effective": active, "occupancy_max": most,
            "occupancy_unit": "warps/SM", "occupancy_fraction": round(active / most, 4)}


_METRIC_KEYS = ("compile_s", "num_warps", "num_stages", "warp_size", "shared", "registers", "vgpr",
                "arch_vgpr", "agpr", "sgpr", "vgpr_spill_count", "sgpr_spill_count", "scratch_bytes",
                "stack_bytes", "local_bytes", "static_shared", "group_segment_fixed_size",
                "occupancy", "occupancy_effective", "occupancy_max", "occupancy_unit",
                "occupancy_fraction", "matrix_family", "matrix_instructions", "dots", "code_bytes",
                "async_copy_sizes", "spill_bytes", "spill_count", "threads", "note", "cached")


def to_result(task: Task, raw: dict, lints: LintConfig = DEFAULT_LINTS, command: str = ""):
    """The Result record of one compile (kind='compile', evidence='compile')."""
    from ..provenance import collect
    from ..results import Result
    arch = get_arch(task.arch)
    status = raw.get("status", "error")
    if status == "ok":
        if arch.is_amd:
            # VGPR spills go to scratch memory; SGPR spills go to VGPR lanes first (cheap), so
            # they stay in the metrics (sgpr_spill_count) and are not counted as spills
            raw["spill_bytes"] = raw.get("scratch_bytes", 0)
            raw["spill_count"] = raw.get("vgpr_spill_count", 0)
        else:
            raw["spill_bytes"] = max(raw.get("stack_bytes") or 0, raw.get("local_bytes") or 0)
        raw["threads"] = (raw.get("num_warps") or 0) * (raw.get("warp_size") or arch.warp_size)
        raw.update(occupancy(arch, raw))
    found = findings(raw, arch, task.options, lints)
    v = verdict(found, status)
    metrics = {"compiled": status == "ok", **{k: raw[k] for k in _METRIC_KEYS if k in raw}}
    if status == "ok":   # the names the merged report and the gate read
        metrics.update(regs=raw.get("registers"), spills=raw.get("spill_bytes"))
    if status == "ok":
        message = "; ".join(f"{f['rule']}: {f['message']}" for f in found if f["severity"] == "error")
    else:
        message = raw.get("error", status)
    prov = collect(None, task.arch, command=command)
    prov.update(triton=raw.get("triton", prov.get("triton")), target="compile", compile_status=status)
    return Result(kind="compile", case=task.case, family=task.family, dtype=task.dtype, target="compile",
                  arch=task.arch, verdict=v, evidence="compile", message=message, metrics=metrics,
                  variant=task.label, lints=found, time_ms=None,
                  reproduce=f"portcheck compile --kernel {task.case} --arch {task.arch}",
                  provenance=prov)


def compile_tasks(tasks: list[Task], settings: CompileSettings | None = None, on_result=None,
                  command: str = "", overrides=None, claim=lambda i: True, pool=None) -> list:
    """Compile every task in worker processes; Results in task order (a timeout or a crash fails
    only its own record). `on_result(result)` is called in task order as results complete.
    `claim(i)` is asked just before task i is sent to a worker: False leaves it to another
    process sharing the task list (its result here stays None). `pool`: a compile_pool.Pool
    started earlier (it is closed here); by default one is made with the settings' jobs."""
    from .pool import Pool
    settings = settings or CompileSettings()
    results: list = [None] * len(tasks)
    next_out = 0

    finished = [False] * len(tasks)

    def advance(i: int):
        nonlocal next_out
        finished[i] = True
        while next_out < len(tasks) and finished[next_out]:
            if on_result and results[next_out] is not None:
                on_result(results[next_out])
            next_out += 1

    def done(i: int, raw: dict):
        results[i] = apply_overrides(to_result(tasks[i], raw, settings.lints, command), overrides)
        advance(i)

    def claimed(indices):
        for i in indices:
            if claim(i):
                yield i, tasks[i].payload, tasks[i].arch
            else:           # another process took it: keep the order moving here
                advance(i)

    real = [i for i, t in enumerate(tasks) if not {"skip", "error"} & set(t.payload)]
    for i, payload, arch in claimed(sorted(set(range(len(tasks))) - set(real))):
        done(i, compile_payload(payload, arch))        # nothing to compile: decided here
    with pool or Pool(settings.jobs, settings.timeout) as workers:
        workers.run(claimed(real), done)
    return results


def apply_overrides(result, overrides):
    """A manifest entry for target 'compile' turns a failure into a strict xfail (a pass under
    it becomes xpass, which fails) or skips the record; the entry travels in the record."""
    from ..overrides import find
    o = find(overrides, result.case, "compile", result.arch, result.dtype) if overrides else None
    if o is None or o.action == "tolerance":
        return result
    result.override = o.to_dict()
    if o.action == "skip":
        result.verdict = "skip"
    elif result.verdict in ("fail", "error"):
        result.verdict = "xfail"
    elif result.verdict == "pass":
        result.verdict = "xpass"
        result.message = f"passes although an xfail override covers it: {o.reason}"
    return result
