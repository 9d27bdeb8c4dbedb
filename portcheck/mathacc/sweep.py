"""Measure one function: run it over float32 inputs, compare with its float64 oracle in ULP.

On a GPU: every one of the 2^32 bit patterns, in chunks, the oracle in float64 on the device.
On the interpreter: a stratified sample (every sign and exponent, random mantissas) plus the
special values, labelled as a sample. float64 carries 29 bits more than float32, so the oracle's
own error (< 1 ULP of float64) is far below the 1/2^29 ULP of float32 being resolved; only for
correctly rounded functions (sqrt_rn, div_rn) a result exactly at a float32 rounding midpoint
could be judged against a double-rounded reference, which the report notes.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch

from ..compare import ulp_of
from ..dtypes import fmt
from .functions import MathFn

F32 = fmt("fp32")
SPECIALS = [0.0, -0.0, float("inf"), float("-inf"), float("nan")]   # IEEE results are exact
TINY = 2.0 ** -126


@dataclass
class Stats:
    function: str
    inputs: int = 0
    exhaustive: bool = False
    max_ulp: float = 0.0
    worst_x: float | None = None
    max_ulp_normal: float = 0.0          # inputs and reference results both normal (or zero)
    worst_x_normal: float | None = None
    flushed_inputs: int = 0              # subnormal x whose result equals f(0)
    subnormal_inputs: int = 0
    flushed_outputs: int = 0             # subnormal reference results returned as 0
    subnormal_outputs: int = 0
    special_mismatches: list = field(default_factory=list)   # [x, got, expected]
    seconds: float = 0.0

    def merge(self, err: torch.Tensor, x: torch.Tensor, y: torch.Tensor, ref: torch.Tensor,
              f0: torch.Tensor) -> None:
        self.inputs += x.numel()
        finite_x = torch.isfinite(x)
        worst = int(torch.argmax(err))
        if err[worst] > self.max_ulp:
            self.max_ulp, self.worst_x = float(err[worst]), float(x[worst])
        ax, ar = x.abs(), ref.abs()
        normal = finite_x & ((ax >= TINY) | (ax == 0)) & torch.isfinite(ref) & ((ar >= TINY) | (ar == 0))
        if bool(normal.any()):
            e = torch.where(normal, err, torch.zeros_like(err))
            w = int(torch.argmax(e))
            if e[w] > self.max_ulp_normal:
                self.max_ulp_normal, self.worst_x_normal = float(e[w]), float(x[w])
        sub_in = finite_x & (ax < TINY) & (ax > 0)
        self.subnormal_inputs += int(sub_in.sum())
        same_as_zero = (y.double() == f0) | (torch.isnan(y) & torch.isnan(f0))
        ref_differs = ref != f0
        self.flushed_inputs += int((sub_in & same_as_zero & ref_differs & (err > 1)).sum())
        ref32 = ref.float().double()
        sub_out = (ref32.abs() < TINY) & (ref32 != 0)
        self.subnormal_outputs += int(sub_out.sum())
        self.flushed_outputs += int((sub_out & (y == 0)).sum())


def ulp_errors(y: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """|y - ref| in float32 ULPs of ref; matching inf/NaN is 0, mismatching inf/NaN is inf."""
    y64 = y.double()
    ref32 = ref.float().double()           # overflow to inf happens here, as it does for y
    special = ~torch.isfinite(y64) | ~torch.isfinite(ref32)
    agree = (y64 == ref32) | (torch.isnan(y64) & torch.isnan(ref32))
    err = (y64 - ref).abs() / ulp_of(ref, F32)
    return torch.where(special, torch.where(agree, torch.zeros_like(err), torch.full_like(err, math.inf)), err)


def _f_of_zero(fn: MathFn, x: torch.Tensor) -> torch.Tensor:
    """f(+0) or f(-0) matching each x's sign, in float32 then float64 (for flush detection)."""
    zeros = torch.where(x < 0, torch.tensor(-0.0, dtype=torch.float64, device=x.device),
                        torch.tensor(0.0, dtype=torch.float64, device=x.device))
    return fn.oracle(zeros).float().double()


def _check_specials(fn: MathFn, run, device: str, stats: Stats) -> None:
    x = torch.tensor(SPECIALS, dtype=torch.float32, device=device)
    y = run(x)
    ref = fn.oracle(x.double())
    bad = ulp_errors(y, ref) > 0
    sign_bad = (y == 0) & (ref == 0) & (torch.signbit(y) != torch.signbit(ref))
    for i in torch.nonzero(bad | sign_bad).flatten().tolist():
        stats.special_mismatches.append([repr(float(x[i])), repr(float(y[i])), repr(float(ref[i].float()))])


def sweep_gpu(fn: MathFn, chunk_log2: int = 27) -> Stats:
    """All 2^32 float32 inputs on the current GPU."""
    import triton
    from .kernels import sweep_kernel
    stats = Stats(fn.name, exhaustive=True)
    start = time.perf_counter()
    n = 1 << chunk_log2
    y = torch.empty(n, dtype=torch.float32, device="cuda")
    block = 1024
    for base in range(0, 1 << 32, n):
        sweep_kernel[(triton.cdiv(n, block),)](y, base, n, FN=fn.name, BLOCK=block)
        bits = torch.arange(base, base + n, dtype=torch.int64, device="cuda")
        x = (bits - ((bits >= (1 << 31)).long() << 32)).to(torch.int32).view(torch.float32)
        ref = fn.oracle(x.double())
        stats.merge(ulp_errors(y, ref), x, y, ref, _f_of_zero(fn, x))
        del bits, x, ref
    _check_specials(fn, lambda x: _apply(fn, x), "cuda", stats)
    torch.cuda.synchronize()
    stats.seconds = time.perf_counter() - start
    return stats


def stratified_sample(per_exponent: int, seed: int = 0) -> torch.Tensor:
    """Every sign and biased exponent (subnormals and inf/NaN included), random mantissas."""
    g = torch.Generator().manual_seed(seed)
    sign_exp = torch.arange(512, dtype=torch.int64).repeat_interleave(per_exponent)
    mant = torch.randint(0, 1 << 23, (512 * per_exponent,), generator=g, dtype=torch.int64)
    bits = (sign_exp << 23) | mant
    bits = bits - ((bits >= (1 << 31)).long() << 32)
    return torch.cat([bits.to(torch.int32).view(torch.float32), torch.tensor(SPECIALS)])


def _apply(fn: MathFn, x: torch.Tensor) -> torch.Tensor:
    import triton
    from .kernels import apply_kernel
    y = torch.empty_like(x)
    apply_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), FN=fn.name, BLOCK=1024)
    return y


def sweep_sample(fn: MathFn, device: str, per_exponent: int = 256, seed: int = 0) -> Stats:
    """A stratified sample on any target (the interpreter included)."""
    stats = Stats(fn.name, exhaustive=False)
    start = time.perf_counter()
    x = stratified_sample(per_exponent, seed).to(device)
    y = _apply(fn, x)
    ref = fn.oracle(x.double())
    stats.merge(ulp_errors(y, ref), x, y, ref, _f_of_zero(fn, x))
    _check_specials(fn, lambda v: _apply(fn, v), device, stats)
    stats.seconds = time.perf_counter() - start
    return stats
