"""The active device, as kernels need it: interpreted or not, warp size, compute units, its arch row.

The one place kernels learn about the device they launch on (portcheck.targets is the harness's
view of targets; kernels never import it). Under TRITON_INTERPRET the answer is the interpreter's
own row, archs.INTERPRETER, so launchers pick its small configurations, as they always have.

`forced_arch(arch)` (`portcheck run --as-arch`) makes current_arch() and warp_size() answer as
another arch for its duration, so launchers pick that arch's configurations and run them on the
local device; `local_arch()` still names the device itself. Under it, a check that drew an
autotune configuration (spec["config"]) hands it to the launcher through `drawn_config()`.
"""
from __future__ import annotations

import os
import warnings
from contextlib import contextmanager
from functools import lru_cache

from .archs import INTERPRETER, Arch, arch_from_triton_target, nearest_row


def interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _triton_target():
    import triton
    return triton.runtime.driver.active.get_current_target()


class NotRunnableHere(Exception):
    """A forced arch's configuration that the local device cannot run (an fp8 format it lacks,
    shared memory over its cap): the check records a skip with this reason, never a failure."""


_FORCED: list = []          # the forced arch, innermost last (one checking process: global)
_DRAWN: list = []           # the autotune configuration index the check drew, innermost last


@contextmanager
def forced_arch(arch: Arch):
    """current_arch() and warp_size() answer as `arch` inside: a launcher picks the constexprs,
    num_warps and stages that arch uses, and they run on the local device."""
    _FORCED.append(arch)
    try:
        yield arch
    finally:
        _FORCED.pop()


def forced() -> Arch | None:
    return _FORCED[-1] if _FORCED else None


@contextmanager
def drawing(config: int | None):
    """The autotune configuration index hypothesis drew for this example (None: none drawn)."""
    _DRAWN.append(config)
    try:
        yield
    finally:
        _DRAWN.pop()


def drawn_config(choices):
    """Under a forced arch, the configuration of `choices` (the arch's autotune list, as the
    case's `configs` field declares it) that the check drew: the launcher launches it explicitly
    instead of timing an autotuner. None otherwise: autotune as usual."""
    index = _DRAWN[-1] if _DRAWN and _FORCED else None
    if index is None:
        return None
    if not 0 <= index < len(choices):
        raise ValueError(f"drawn configuration {index} is not one of the {len(choices)} that "
                         f"{_FORCED[-1].name} declares")
    return choices[index]


def warp_size() -> int:
    """Threads per warp/wavefront of the active device (64 on CDNA, 32 on NVIDIA and RDNA), or
    of the forced arch: a launcher then picks the num_warps it picks there."""
    return _FORCED[-1].warp_size if _FORCED else _local_warp_size()


@lru_cache(maxsize=None)
def _local_warp_size() -> int:
    if interpreted():
        return INTERPRETER.warp_size
    return _triton_target().warp_size


def current_arch() -> Arch:
    """The arch row launches are configured for: the forced arch (forced_arch), else the local
    device's (local_arch)."""
    return _FORCED[-1] if _FORCED else local_arch()


@lru_cache(maxsize=None)
def local_arch() -> Arch:
    """The arch row of the device kernels launch on now (INTERPRETER under TRITON_INTERPRET). A
    device with no row of its own runs as the nearest row of its generation (archs.nearest_row,
    said once as a warning and by arch_note()); one that no row of its vendor fits is refused:
    its configurations would be guesses."""
    if interpreted():
        return INTERPRETER
    row, why = nearest_row(_device_arch_name())
    if why:
        warnings.warn(why, stacklevel=2)
    return row


# compile.capture answers device questions as another arch and clears these caches around it
warp_size.cache_clear = _local_warp_size.cache_clear
current_arch.cache_clear = local_arch.cache_clear


def arch_note() -> str:
    """Why the active device runs as another arch's row, for where the device is described;
    "" when it has its own row (or runs in the interpreter)."""
    if interpreted():
        return ""
    return nearest_row(_device_arch_name())[1]


def _device_arch_name() -> str:
    target = _triton_target()
    return arch_from_triton_target(target.backend, target.arch)


def dot_fp32_precision(arch: Arch) -> str:
    """The input precision fp32 tl.dot runs at on an arch: tf32 where its matrix units take it,
    exact ieee elsewhere (the interpreter multiplies in numpy fp32 whatever is asked)."""
    return arch.fp32_dot_precision()


def fp8_accumulation(arch: Arch) -> str:
    """How fp8 dots reach the fp32 accumulator on `arch` (Arch.fp8_accumulation), where they run.
    Under a forced arch (--as-arch), a local device whose fp8 matrix unit sums into fewer bits
    than fp32 (NVIDIA's 13 fraction bits) keeps its own promotion: the forced arch's would run on
    the local accumulator, and check the local arithmetic instead of the forced arch's tiling."""
    if _FORCED and arch is _FORCED[-1]:
        local = local_arch()
        if local.fp8_accumulation != "fused":
            return local.fp8_accumulation
    return arch.fp8_accumulation


def compute_units(device=None) -> int:
    """SMs (NVIDIA) or CUs (AMD) of a GPU: a torch device, or None (or one without an index)
    for the current device."""
    import torch
    index = getattr(device, "index", None)
    return _compute_units(torch.cuda.current_device() if index is None else index)


@lru_cache(maxsize=None)
def _compute_units(index: int) -> int:
    import torch
    return torch.cuda.get_device_properties(index).multi_processor_count   # asked once per device


@contextmanager
def fp32_matmul(tf32: bool):
    """torch's fp32 matmuls on tensor cores (tf32) or exact (ieee) for the duration; restored after.
    torch 2.9+ spells it fp32_precision and refuses a mix of that and the older allow_tf32."""
    import torch
    m = torch.backends.cuda.matmul
    if hasattr(m, "fp32_precision"):
        old = m.fp32_precision
        m.fp32_precision = "tf32" if tf32 else "ieee"
        try:
            yield
        finally:
            m.fp32_precision = old
    else:
        old = m.allow_tf32
        m.allow_tf32 = tf32
        try:
            yield
        finally:
            m.allow_tf32 = old
