"""Roofline arithmetic: the least time a launch can take, and how close a measured time came.

    floor = max(bytes / bandwidth, flops / matrix rate)

With datasheet peaks from the arch table this is a *model* (labelled so in every report); with the
copy bandwidth and matmul rates measured in the same run it is the *measured ceiling*. The same
formula serves both, so a fraction of one is comparable with a fraction of the other.

Units: bytes, flops, milliseconds, GB/s (1e9 bytes per second), TFLOP/s (1e12 per second).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

# The matrix-unit rates a kernel in this input dtype could at best run at, by arch-table key. For
# fp32 the faster of tf32 and plain fp32 counts: a floor must never exceed the true least time.
_RATE_KEYS = {"fp32": ("tf32", "fp32"), "fp16": ("fp16",), "bf16": ("bf16",), "int8": ("int8",),
              "fp8e4nv": ("fp8",), "fp8e5": ("fp8",), "fp8e4b8": ("fp8",), "fp8e5b16": ("fp8",)}


def rate_keys(dtype: str) -> tuple[str, ...]:
    """Arch-table / ceiling keys whose rate applies to a kernel whose inputs are in `dtype`."""
    return _RATE_KEYS.get(dtype, ())


def best_rate(rates: dict, dtype: str) -> tuple[str | None, float | None]:
    """The highest rate among those that apply to `dtype` in a {key: TFLOP/s} table, or (None, None).

    Entries that are not positive numbers (a ceiling that failed to measure) are ignored.
    """
    best = (None, None)
    for key in rate_keys(dtype):
        value = rates.get(key)
        if isinstance(value, (int, float)) and value > 0 and (best[1] is None or value > best[1]):
            best = (key, float(value))
    return best


@dataclass(frozen=True)
class Floor:
    """The least time of one launch under a bandwidth and a compute rate."""
    ms: float
    bound: str                  # "memory" or "compute": which term sets the floor
    memory_ms: float
    compute_ms: float | None    # None: the kernel has flops but no rate applies to its dtype
    bw_gbs: float
    tflops: float | None
    rate_key: str | None        # which rate was used (e.g. "bf16", "tf32")

    def to_dict(self) -> dict:
        return asdict(self)


def memory_ms(nbytes: int, bw_gbs: float) -> float:
    if bw_gbs <= 0:
        raise ValueError(f"bandwidth must be positive, got {bw_gbs} GB/s")
    return nbytes / (bw_gbs * 1e6)


def compute_ms(flops: int, tflops: float) -> float:
    if tflops <= 0:
        raise ValueError(f"compute rate must be positive, got {tflops} TFLOP/s")
    return flops / (tflops * 1e9)


def floor(nbytes: int, flops: int, bw_gbs: float, rates: dict, dtype: str) -> Floor:
    """Roofline floor of a launch moving `nbytes` and doing `flops` in a kernel of `dtype`."""
    if nbytes < 0 or flops < 0:
        raise ValueError(f"bytes and flops must be non-negative, got {nbytes} and {flops}")
    mem = memory_ms(nbytes, bw_gbs)
    key, tflops = best_rate(rates, dtype)
    comp = compute_ms(flops, tflops) if tflops else (0.0 if flops == 0 else None)
    bound = "compute" if comp is not None and comp > mem else "memory"
    return Floor(max(mem, comp or 0.0), bound, mem, comp, bw_gbs, tflops, key)


def achieved(nbytes: int, flops: int, ms: float) -> dict:
    """Bandwidth and compute rate a measured time stands for."""
    if ms <= 0:
        raise ValueError(f"a measured time must be positive, got {ms} ms")
    return {"gbs": nbytes / (ms * 1e6), "tflops": flops / (ms * 1e9)}


def fraction(floor_ms: float, measured_ms: float) -> float:
    """How close a measured time came to a floor: 1.0 means at the roofline."""
    if measured_ms <= 0:
        raise ValueError(f"a measured time must be positive, got {measured_ms} ms")
    return floor_ms / measured_ms


def model_floor(nbytes: int, flops: int, arch, dtype: str) -> Floor:
    """The datasheet roofline of an arch-table entry (portcheck.facts.archs.Arch): a model."""
    return floor(nbytes, flops, arch.peak_bw_gbs, arch.peak_tflops, dtype)
