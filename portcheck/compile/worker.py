"""The compile worker: compile one task's payload for its arch and return what came out.

Each worker is `python -m portcheck.compile.worker`, started by portcheck.compile.pool: a fresh
interpreter with TRITON_INTERPRET unset (kernels must be compiled, not interpreted, whatever mode
the parent is in). Jobs come as JSON lines on stdin ({"i", "payload", "arch"}); it answers
{"ready": true} once, then {"i", "raw"} per job on stdout.

The payload is specialized exactly as Triton's JIT would for the target arch, with the JIT's own
binder (`create_function_from_signature`, the same in triton 3.4, 3.6 and 3.9) on stand-in
tensors, so AMD gets its buffer-ops pointer-range attribute and NVIDIA does not; then
`triton.compile` runs and portcheck.compile.binary reads registers, spills, shared memory, the
matrix-instruction family and code size from what came out.
"""
from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import sys
import time
import warnings

from .binary import read_resources
from .plan import decode
from ..facts.archs import arch as get_arch

AMD_ONLY_OPTIONS = ("waves_per_eu", "matrix_instr_nonkdim", "kpack", "schedule_hint")
EXTRACT_VERSION = 5          # bump when the extracted facts change (invalidates their cache)


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


def _decode(obj):
    """A payload argument as the launch would pass it, JIT functions imported in this process."""
    return decode(obj, resolve_kernel)


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
    """What JITFunction.run does before compiling: bind, specialize, split options from constexprs
    (with the JIT's own `_pack_args` where it has one, so that a kernel compiled here is keyed as a
    launch would key it: under 3.6 the hand-written split gave constexprs an empty attribute list
    that the JIT does not, which changes no code but every cache key)."""
    from triton._utils import find_paths_if, get_iterable_path
    from triton.runtime.jit import create_function_from_signature
    key = (id(jit), id(backend))
    if key not in _BINDERS:     # the JIT builds one binder per kernel and device, and so do we
        _BINDERS[key] = (jit, create_function_from_signature(jit.signature, jit.params, backend))
    binder = _BINDERS[key][1]
    bound, spec, opts = binder(*args, **kwargs)
    if hasattr(jit, "_pack_args"):   # the JIT's own (3.6 and 3.9): a constexpr's attributes differ between them
        _, signature, constexprs, attrs = jit._pack_args(backend, dict(kwargs), bound, spec, opts)
        return signature, constexprs, attrs, dict(opts)
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
    first MLIR/LLVM 'error:' line when the exception only says a pass failed, else the first line.
    A call into another jit function wraps the callee's CompilationError in one whose message ends
    at the caret: the innermost one along the causes that says why is the one read."""
    reason = exc
    while exc is not None:
        reason = exc if getattr(exc, "error_message", None) else reason
        exc = exc.__cause__
    exc = reason
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
        args_by_name = {k: _decode(v) for k, v in payload["args"].items()} if isinstance(payload["args"], dict) else None
        args = [] if args_by_name is not None else [_decode(v) for v in payload["args"]]
        kwargs = {k: _decode(v) for k, v in payload["kwargs"].items()}
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
            res = read_resources(kernel, arch)
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



def main() -> int:
    """One worker: read jobs from stdin, write one JSON result per job to stdout."""
    os.environ.pop("TRITON_INTERPRET", None)         # before any kernel module is imported
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)                                    # stray prints go to the log, not the protocol
    log = os.environ.get("PORTCHECK_WORKER_LOG")
    out.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        start = os.path.getsize(log) if log and os.path.exists(log) else 0

        def stderr_tail(start=start):
            if not log:
                return ""
            sys.stderr.flush()
            with open(log, "rb") as f:
                f.seek(start)
                return f.read(1 << 16).decode("utf-8", "replace")
        raw = compile_payload(job["payload"], job["arch"], stderr_tail)
        out.write(json.dumps({"i": job["i"], "raw": raw}, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
