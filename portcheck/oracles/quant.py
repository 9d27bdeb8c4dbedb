"""Symmetric quantization to int8 / fp8 and dequantization, following the kernels' documented
fp32 arithmetic step by step (numpy float32 operations round to nearest even, as the GPU's do).

The documented semantics (portcheck/kernels/quant.py implements them; this file does not read it):
  amax   = max |x| over the row (per token) or the tensor, ignoring inf and NaN     (exact)
  scale  = max(fl32(amax / qmax), min_scale)         qmax = 127 (int8) or the fp8 format's max
           min_scale = fl32(1 / (qmax * 512))        (vLLM's floor; a zero row gets it too)
  inv    = fl32(1 / scale)                           one correctly rounded fp32 division
  y      = clamp(fl32(x * inv), -qmax, qmax)         +-inf saturate; NaN stays NaN
  q      = int8: round half to even, NaN -> 0;  fp8: round to nearest even on the format's grid
A static per-tensor scale is given instead of computed (no floor). Dequantization:
  x' = fl_out(fl32(decode(q) * scale)).
So codes can be compared bit for bit; scales are compared with the rounding of the one division.
"""
from __future__ import annotations

import numpy as np
import torch

from . import fp8

INT8_MAX = 127.0
SCALE_FLOOR_FACTOR = 512.0


def qmax(out: str) -> float:
    """Largest code magnitude of the output format ('int8' or an fp8 name)."""
    return INT8_MAX if out == "int8" else fp8.fp8_format(out).max_finite


def min_scale(out: str) -> np.float32:
    return np.float32(1.0 / (qmax(out) * SCALE_FLOOR_FACTOR))


def _f32(t: torch.Tensor) -> np.ndarray:
    """float64 tensor holding fp16/bf16/fp32 values -> the same values as numpy float32 (exact)."""
    a = t.detach().to(device="cpu", dtype=torch.float64).numpy()
    b = a.astype(np.float32)
    if not np.array_equal(b.astype(np.float64), a, equal_nan=True):
        raise ValueError("quantization oracle input holds values that are not float32 numbers")
    return b


def _amax(x32: np.ndarray, axis) -> np.ndarray:
    a = np.abs(x32)
    a = np.where(np.isfinite(a), a, np.float32(0))
    return np.max(a, axis=axis, keepdims=True).astype(np.float32)


def dynamic_scale(amax: np.ndarray, out: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        s = (amax / np.float32(qmax(out))).astype(np.float32)
    return np.maximum(s, min_scale(out)).astype(np.float32)


def codes(x32: np.ndarray, scale: np.ndarray, out: str) -> torch.Tensor:
    """x (float32) with its scale (float32, broadcastable) -> codes in the output dtype."""
    m = np.float32(qmax(out))
    with np.errstate(all="ignore"):
        inv = (np.float32(1.0) / scale).astype(np.float32)
        y = (x32 * inv).astype(np.float32)
    y = np.where(np.isnan(y), y, np.clip(y, -m, m)).astype(np.float32)
    if out == "int8":
        r = np.rint(np.where(np.isnan(y), np.float32(0), y))          # rint: half to even
        return torch.from_numpy(r.astype(np.int8))
    f = fp8.fp8_format(out)
    return fp8.as_fp8(fp8.encode(torch.from_numpy(y.astype(np.float64)), f, saturate=True), f)


def quantize_per_token(x: torch.Tensor, out: str) -> dict:
    """x [rows, cols] -> {"q": codes [rows, cols], "scale": exact float64 scale [rows, 1]}."""
    x32 = _f32(x)
    amax = _amax(x32, axis=1)
    scale32 = dynamic_scale(amax, out)
    return {"q": codes(x32, scale32, out), "scale": _exact_scale(amax, out)}


def quantize_per_tensor(x: torch.Tensor, out: str, scale: torch.Tensor | None = None) -> dict:
    """Dynamic (scale None: from the tensor's amax) or static (the given fp32 scale, shape [1])."""
    x32 = _f32(x)
    if scale is not None:
        return {"q": codes(x32, _f32(scale).reshape(1, 1), out)}
    amax = _amax(x32, axis=None).reshape(1, 1)
    return {"q": codes(x32, dynamic_scale(amax, out), out), "scale": _exact_scale(amax, out).reshape(1)}


def _exact_scale(amax: np.ndarray, out: str) -> torch.Tensor:
    """max(amax / qmax, min_scale) in float64: the value the kernel's fp32 division rounds."""
    s = amax.astype(np.float64) / qmax(out)
    return torch.from_numpy(np.maximum(s, np.float64(min_scale(out))))


def dequantize(q: torch.Tensor, scale: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    """codes [rows, cols] times an fp32 scale ([rows, 1] or [1]), rounded to fp32, then to out.

    decode(q) has at most 8 significant bits and the scale 24, so their float64 product is
    exact and .to(float32) is the one rounding of the kernel's fp32 multiply."""
    if q.dtype == torch.int8:
        v = q.detach().cpu().to(torch.float64)
    else:
        v = fp8.decode(q.detach().cpu(), fp8.fp8_format(q.dtype))
    s = scale.detach().to(device="cpu", dtype=torch.float64)
    return (v * s).to(torch.float32).to(out_dtype)
