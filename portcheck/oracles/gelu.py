"""GELU (exact erf form and tanh approximation) and bias + GELU + dropout, in float64.

    gelu(a)      = a/2 * (1 + erf(a / sqrt 2))
    gelu_tanh(a) = a/2 * (1 + tanh(sqrt(2/pi) * (a + 0.044715 a^3)))        (Hendrycks & Gimpel)

gelu(-inf) is -inf * 0 = NaN in either form, as in torch. The dropout keep mask comes from
portcheck.oracles.philox, the bit-exact model of Triton's Philox: with g = offset + r * cols + c
(the element's row-major index plus the stream offset), element (r, c) is kept when
uniform(Philox4x32-10(seed, counter = g // 4)[g % 4]) > p, one Philox call per four elements.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from . import philox

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
TANH_CUBIC = 0.044715
APPROXIMATIONS = ("none", "tanh")


def gelu(a: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """Written without the cancellation of 1 + erf (or 1 + tanh) for very negative a, so it keeps
    float64's relative accuracy in the left tail: (1 + erf(w)) / 2 = erfc(-w) / 2 and
    (1 + tanh(z)) / 2 = sigmoid(2z)."""
    a = a.to(torch.float64)
    if approximate == "none":
        return 0.5 * a * torch.erfc(-a / math.sqrt(2.0))
    if approximate == "tanh":
        return a * torch.sigmoid(2.0 * SQRT_2_OVER_PI * (a + TANH_CUBIC * a * a * a))
    raise ValueError(f"approximate must be one of {APPROXIMATIONS}, got {approximate!r}")


def keep_mask(shape, p: float, seed: int, offset: int, device) -> torch.Tensor:
    """Element (r, c) of a row-major (rows, cols) tensor is kept when, with g = offset + r * cols + c,
    uniform(Philox4x32-10(seed, g // 4)[g % 4]) > float32(p); p == 0 keeps everything."""
    n = math.prod(shape)
    keep = philox.dropout_keep(seed, offset + np.arange(n, dtype=np.int64), p)
    return torch.from_numpy(keep.reshape(shape)).to(device)


def bias_gelu_dropout(x: torch.Tensor, bias: torch.Tensor | None, p: float, seed: int, offset: int,
                      approximate: str = "none") -> tuple[torch.Tensor, torch.Tensor]:
    """(y, keep): y = keep * gelu(x + bias) / (1 - p); dropped elements are exactly 0."""
    a = x.to(torch.float64)
    if bias is not None:
        a = a + bias.to(torch.float64)
    g = gelu(a, approximate)
    keep = keep_mask(tuple(x.shape), p, seed, offset, x.device)
    scale = 1.0 / (1.0 - p) if p < 1 else 0.0
    y = torch.where(keep, g * scale, torch.zeros_like(g))
    return y, keep
