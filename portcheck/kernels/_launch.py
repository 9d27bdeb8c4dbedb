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
