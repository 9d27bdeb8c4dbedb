"""Ceilings measured on the device at the start of a benchmark run.

- copy bandwidth (bytes read plus written) of a large device-to-device copy, timed two ways:
  torch's `copy_` (the driver's device memcpy) and a plain Triton streaming kernel; the ceiling is
  the faster, and the run records whether the two agree within COPY_AGREEMENT;
- the vendor library's dense matmul rate per dtype (cuBLAS / hipBLASLt through torch.matmul,
  torch._scaled_mm for fp8, torch._int_mm for int8), at sizes large enough to saturate it.

Measured figures are what a kernel's "fraction of ceiling" divides by; datasheet peaks (the arch
table) are reported beside them, never instead of them.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .timing import time_callables
from ..facts.device import fp32_matmul, warp_size

COPY_BYTES = 1 << 30            # per buffer: 1 GiB read + 1 GiB written per copy
COPY_AGREEMENT = 0.10           # the copy ceiling must be within 10% of torch's own copy
MATMUL_REPEATS = 20
# (M, N, K) per rate key: big enough that the library runs at its best rate on current parts.
MATMUL_SHAPES = {"bf16": (8192, 8192, 8192), "fp16": (8192, 8192, 8192),
                 "tf32": (8192, 8192, 8192), "fp32": (4096, 4096, 4096),
                 "fp8": (8192, 8192, 8192), "int8": (8192, 8192, 8192)}


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def triton_copy(src: torch.Tensor, dst: torch.Tensor, block: int = 8192, num_warps: int = 8) -> None:
    n = src.numel()
    copy_kernel[(triton.cdiv(n, block),)](src, dst, n, BLOCK=block, num_warps=num_warps)


def measure_copy(nbytes: int = COPY_BYTES, repeats: int = 50) -> dict:
    """Copy bandwidth in GB/s of read + written bytes; the ceiling is the faster method."""
    n = nbytes // 4
    src = torch.randint(-2**31, 2**31 - 1, (n,), dtype=torch.int32, device="cuda")
    dst = torch.empty_like(src)
    moved = 2 * n * 4
    out = {"bytes_moved": moved}
    timings = {"torch_copy": time_callables([lambda: dst.copy_(src)], repeats=repeats)}
    warps = max(1, 256 // warp_size())    # 256 threads per program on any vendor
    timings["triton_copy"] = time_callables([lambda: triton_copy(src, dst, num_warps=warps)],
                                            repeats=repeats)
    if not torch.equal(src, dst):
        raise RuntimeError("the Triton copy kernel did not reproduce its input")
    for name, t in timings.items():
        out[name] = {"gbs": moved / (t.stats.median_ms * 1e6), **t.to_dict()}
    best = max(timings, key=lambda k: out[k]["gbs"])
    out["gbs"] = out[best]["gbs"]
    out["method"] = best
    out["vs_torch_copy"] = out["gbs"] / out["torch_copy"]["gbs"]
    out["agrees_with_torch_copy"] = abs(out["vs_torch_copy"] - 1.0) <= COPY_AGREEMENT
    del src, dst
    torch.cuda.empty_cache()
    return out


def _fp8_dtype(arch) -> torch.dtype | None:
    from ..dtypes import torch_dtype
    pair = arch.fp8_formats() if arch is not None else None
    return torch_dtype(pair[0]) if pair else None


def _matmul_callable(key: str, shape, arch):
    """A zero-argument call of the vendor library for one rate key, and its library name."""
    m, n, k = shape
    dev = "cuda"
    if key in ("bf16", "fp16", "tf32", "fp32"):
        dt = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(key, torch.float32)
        a = torch.randn(m, k, device=dev, dtype=dt)
        b = torch.randn(k, n, device=dev, dtype=dt)
        c = torch.empty(m, n, device=dev, dtype=dt)
        return (lambda: torch.matmul(a, b, out=c)), "torch.matmul"
    if key == "fp8":
        dt = _fp8_dtype(arch)
        if dt is None:
            raise RuntimeError("this arch has no fp8 matrix format")
        a = torch.randn(m, k, device=dev).to(dt)
        b = torch.randn(n, k, device=dev).to(dt).t()       # column-major, as cuBLASLt wants
        one = torch.ones((), device=dev, dtype=torch.float32)
        return (lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)), \
            "torch._scaled_mm"
    if key == "int8":
        a = torch.randint(-64, 64, (m, k), device=dev, dtype=torch.int8)
        b = torch.randint(-64, 64, (n, k), device=dev, dtype=torch.int8).t()
        return (lambda: torch._int_mm(a, b)), "torch._int_mm"
    raise ValueError(f"no matmul ceiling for {key!r}")


def measure_matmul(keys=tuple(MATMUL_SHAPES), arch=None, repeats: int = MATMUL_REPEATS) -> dict:
    """Dense matmul TFLOP/s (TOP/s for int8) of the vendor library per rate key; a key the
    device or library cannot do records its error instead of a number."""
    out = {}
    for key in keys:
        shape = MATMUL_SHAPES[key]
        try:
            with fp32_matmul(key == "tf32"):
                fn, library = _matmul_callable(key, shape, arch)
                t = time_callables([fn], repeats=repeats, method="do_bench")
        except Exception as exc:  # unsupported dtype / library on this device
            text = str(exc).strip()
            out[key] = {"error": f"{type(exc).__name__}: {text.splitlines()[0][:200] if text else ''}"}
            continue
        finally:
            torch.cuda.empty_cache()
        m, n, k = shape
        out[key] = {"tflops": 2 * m * n * k / (t.stats.median_ms * 1e9), "shape": [m, n, k],
                    "library": library, **t.to_dict()}
    return out


def measure(arch=None, copy_bytes: int = COPY_BYTES) -> dict:
    """All ceilings of the current device: {"copy": {...}, "matmul": {key: {...}}}."""
    return {"copy": measure_copy(copy_bytes), "matmul": measure_matmul(arch=arch)}
