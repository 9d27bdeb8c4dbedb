"""Small launch helpers shared by the kernel modules (no kernel logic here)."""
from __future__ import annotations

import os
from functools import lru_cache

import triton


def interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@lru_cache(maxsize=None)
def warp_size() -> int:
    """Threads per warp/wavefront of the active device: 64 on CDNA, 32 on NVIDIA and RDNA."""
    if interpreted():
        return 32
    return triton.runtime.driver.active.get_current_target().warp_size


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
