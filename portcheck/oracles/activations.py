"""Gated activations in float64: x [rows, 2d] -> act(x[:, :d]) * x[:, d:] (vLLM's SiluAndMul,
GeluAndMul), and what a result past the output format's range becomes when it is rounded.
The GELUs come from oracles/gelu.py, written without the float64 cancellation of 1 + erf and
1 + tanh for a << 0, so the reference keeps its relative accuracy in the left tail."""
from __future__ import annotations

import torch

from ..dtypes import fmt
from .gelu import gelu

ACTIVATIONS = ("silu", "gelu", "gelu_tanh")


def halves(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    d = x.shape[-1] // 2
    return x[..., :d].to(torch.float64), x[..., d:].to(torch.float64)


def gated(x: torch.Tensor, activation: str) -> torch.Tensor:
    a, b = halves(x)
    if activation == "silu":
        g = a * torch.sigmoid(a)
    elif activation == "gelu":
        g = gelu(a, "none")
    elif activation == "gelu_tanh":
        g = gelu(a, "tanh")
    else:
        raise ValueError(f"unknown activation {activation!r}; known: {', '.join(ACTIVATIONS)}")
    return g * b


def overflow_to_inf(ref: torch.Tensor, dtype: str) -> torch.Tensor:
    """Exact values whose magnitude rounds (to nearest) past the format's largest finite value
    become +-inf, as the kernel's final rounding makes them: the threshold is max + ulp(max)/2."""
    threshold = fmt(dtype).overflow_threshold
    return torch.where(ref.abs() >= threshold, torch.sign(ref) * float("inf"), ref)
