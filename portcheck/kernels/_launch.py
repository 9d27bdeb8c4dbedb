"""Small launch helpers shared by the kernel modules: input checks and grid sizes (no kernel
logic, and no device facts: those are portcheck.facts.device)."""
from __future__ import annotations

import ctypes
from functools import lru_cache

import torch
import triton

from ..facts.device import compute_units, current_arch, interpreted


def num_warps_for(elements: int, warp: int, per_thread: int = 8, most: int = 16) -> int:
    """Enough warps that each thread holds about `per_thread` elements, within 1024 threads."""
    most = min(most, 1024 // warp)
    want = max(1, elements // (warp * per_thread))
    return min(most, triton.next_power_of_2(want))


def check_2d(name: str, t, dtypes) -> None:
    """Refuse inputs a row kernel cannot take, before launch, with a clear message."""
    if t.dim() != 2:
        raise ValueError(f"{name} must be 2-D (rows, cols), got shape {tuple(t.shape)}")
    if t.stride(-1) != 1:
        raise ValueError(f"{name} must have unit stride along its last dimension, got strides {t.stride()}")
    if t.dtype not in dtypes:
        raise ValueError(f"{name} has dtype {t.dtype}; this kernel takes {', '.join(map(str, dtypes))}")


def check_vector(name: str, t, n: int, dtype) -> None:
    """An optional per-column parameter (weight, bias): None, or contiguous, shape (n,), dtype."""
    if t is None:
        return
    if t.dim() != 1 or t.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},), got {tuple(t.shape)}")
    if t.dtype != dtype:
        raise ValueError(f"{name} has dtype {t.dtype}; expected {dtype}")
    if t.stride(0) != 1:
        raise ValueError(f"{name} must be contiguous, got stride {t.stride(0)}")


def check_out(name: str, t, shape, dtype) -> None:
    """An output buffer given by the caller: exactly this shape and dtype, unit last stride."""
    if tuple(t.shape) != tuple(shape) or t.dtype != dtype:
        raise ValueError(f"{name} must be {dtype} of shape {tuple(shape)}, got {t.dtype} {tuple(t.shape)}")
    if t.numel() and t.stride(-1) != 1:
        raise ValueError(f"{name} must have unit stride along its last dimension, got strides {t.stride()}")


INTERPRETER_PROGRAMS = 2   # persistent grids on the interpreter: few, so each program loops over rows


def check_programs(programs) -> None:
    """A program count given to a persistent launcher: None (the default), or a positive int."""
    if programs is not None and (isinstance(programs, bool) or not isinstance(programs, int) or programs < 1):
        raise ValueError(f"programs must be a positive int, got {programs!r}")


def persistent_programs(n_rows: int, device, per_unit: int, programs: int | None = None,
                        balanced: bool = False) -> int:
    """Grid of a kernel whose programs stride over rows: `programs` when given, else `per_unit`
    per SM (NVIDIA) or CU (AMD) of `device` (INTERPRETER_PROGRAMS off the GPU); at most n_rows.
    `balanced` (the default grid only): the fewest programs that take no more rows each, where
    that leaves at most 1/16 of them out, so that no last row runs on a few SMs while the rest
    idle: 4096 rows on 132 SMs are 31 rows a program and 4 programs with a 32nd, against 32 each
    on 128. softmax_long (bf16 4096 x 131072) ran at 0.854-0.855 of copy on 128 programs against
    0.841-0.843 on 132 on the H200 (reports/examples/long-rows-h200/twentieth-session/). Fewer rows
    a program would leave out more SMs than a last row costs (133 rows: 67 programs), and a kernel
    whose programs with a row fewer start out of phase (_stagger) needs them (LayerNorm:
    0.840-0.843 on 128 against 0.849-0.856)."""
    check_programs(programs)
    default = programs is None
    if default:
        if interpreted() or device.type != "cuda":
            programs = INTERPRETER_PROGRAMS
        else:
            programs = per_unit * compute_units(device)
    grid = max(1, min(n_rows, programs))
    if balanced and default:
        even = triton.cdiv(n_rows, triton.cdiv(n_rows, grid))
        if 16 * (grid - even) <= grid:
            return even
    return grid


def current_stream(device) -> int:
    """The raw current stream of a CUDA / HIP device, as Triton's launches read it (0 elsewhere)."""
    return triton.runtime.driver.active.get_current_stream(device.index) if device.type == "cuda" else 0


_COUNTERS: dict = {}
_SCRATCH: dict = {}
# Under graph capture: (id of the cache, device, stream, dtype) -> (capture id, buffer), the buffer the
# launches captured on that stream share. One per capture, not one per launch: a zeroed buffer
# made in a capture is a fill kernel in every replay (0.64 us of a 12 us skinny matmul on the
# H200, reports/examples/matmul-h200/skinny/graph-profile.json), and the launches on one
# captured stream run in order, as eager launches on one stream do.
_CAPTURED: dict = {}


def _capturing(device) -> bool:
    """Whether a CUDA / HIP graph is being captured on the current stream: a captured launch keeps
    the buffers it was given, and the graph may be replayed on any stream."""
    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


@lru_cache(maxsize=None)
def _capture_info():
    """The driver's (stream, *status, *id) query of a stream's capture: cuStreamGetCaptureInfo
    (CUDA driver API, the three-argument form) or hipStreamGetCaptureInfo; None where neither loads."""
    if torch.version.hip:   # the HIP runtime torch loaded, by the names its releases carry
        libs, name = ("libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6"), "hipStreamGetCaptureInfo"
    else:
        libs, name = ("libcuda.so.1",), "cuStreamGetCaptureInfo"
    for lib in libs:
        try:
            fn = getattr(ctypes.CDLL(lib), name)
            break
        except (OSError, AttributeError):
            continue
    else:
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_ulonglong)]
    return fn


def _capture_id(stream: int) -> int | None:
    """The id of the graph capture under way on a raw stream (unique in the process: a buffer held
    for one capture is never handed to another graph), or None where it cannot be asked."""
    query = _capture_info()
    if query is None:
        return None
    status, capture = ctypes.c_int(), ctypes.c_ulonglong()
    if query(stream, ctypes.byref(status), ctypes.byref(capture)) != 0 or status.value != 1:   # 1: active
        return None
    return capture.value


def _stream_buffer(cache: dict, device, stream: int | None, elements: int, dtype: torch.dtype,
                   zeroed: bool, capturing: bool | None = None) -> torch.Tensor:
    """cache's buffer of at least `elements` for this device, stream (`stream`: the current one,
    when the caller has it) and dtype, made (zeroed or not) or grown on demand. Under graph
    capture (`capturing`: _capturing(device), when the caller has it), the capture's own (which
    the graph keeps), shared by the launches captured on that stream; one per launch where the
    capture cannot be identified."""
    alloc = torch.zeros if zeroed else torch.empty
    stream = current_stream(device) if stream is None else stream
    if _capturing(device) if capturing is None else capturing:
        capture = _capture_id(stream)
        key = (id(cache), device, stream, dtype)
        held = _CAPTURED.get(key)
        if capture is not None and held is not None and held[0] == capture and held[1].numel() >= elements:
            return held[1]
        buf = alloc(elements, dtype=dtype, device=device)
        if capture is not None:
            _CAPTURED[key] = (capture, buf)
        return buf
    key = (device, stream, dtype)
    buf = cache.get(key)
    if buf is None or buf.numel() < elements:
        buf = cache[key] = alloc(elements, dtype=dtype, device=device)
    return buf


def arrival_counters(device, n: int, stream: int | None = None, capturing: bool | None = None) -> torch.Tensor:
    """At least n int32 counters that a kernel's programs count their arrivals on, zero between
    launches (the kernel re-arms each one it used), one set per device and stream so that
    concurrent launches never share one (_stream_buffer)."""
    return _stream_buffer(_COUNTERS, device, stream, max(n, 1024), torch.int32, True, capturing)


def scratch(device, elements: int, dtype: torch.dtype, stream: int | None = None,
            capturing: bool | None = None) -> torch.Tensor:
    """At least `elements` of scratch for the partial results that a launch (or a launch and its
    reduction, queued together) writes and reads back: one buffer per device, stream and dtype
    (_stream_buffer), which each launch on that stream reuses, since a stream runs its work in
    order and no two streams share one. A planned launch takes it instead of a torch.empty of its
    own (host time)."""
    return _stream_buffer(_SCRATCH, device, stream, elements, dtype, False, capturing)


def split_buffers(device, elements: int, dtype: torch.dtype, n: int, stream: int) -> tuple:
    """(scratch(device, elements, dtype, stream), arrival_counters(device, n, stream)) with one
    capture check for both (a runtime call): a planned split-K launch takes them together."""
    capturing = _capturing(device)
    return scratch(device, elements, dtype, stream, capturing), arrival_counters(device, n, stream, capturing)


def descriptors_supported(arch=None) -> bool:
    """Host tensor descriptors (TMA) on an arch (the active device's by default): NVIDIA sm_90+,
    and the interpreter."""
    arch = arch or current_arch()
    return arch.is_interpreter or (arch.backend == "cuda" and arch.triton_arch >= 90)


# the copy engine (TMA descriptors, bulk copies and prefetches) reads 16-byte aligned addresses
COPY_ALIGN = 16


def alignment_obstacle(t, align: int = COPY_ALIGN) -> str | None:
    """Why t's rows cannot be read `align` bytes at a time (by default the copy engine's
    COPY_ALIGN): its data or a stride other than the last is not a multiple of it; None when
    they can."""
    if t.data_ptr() % align:
        return f"a tensor's data is not {align}-byte aligned"
    if any((st * t.element_size()) % align for st in t.stride()[:-1]):
        return f"strides {t.stride()} are not all multiples of {align} bytes"
    return None


def descriptor_obstacle(*tensors) -> str | None:
    """Why these tensors cannot be read through TMA descriptors, or None."""
    for t in tensors:
        why = alignment_obstacle(t)
        if why:
            return why
        if max(t.shape) >= 2**31:
            return "a dimension exceeds 2^31"
    return None
