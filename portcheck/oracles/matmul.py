"""Matrix multiply with an optional bias and activation, in float64; integer products exactly.

    C = act(scale * (A @ B) + bias),   scale = scale_a * scale_b (1 when absent)

Floating inputs arrive as float64 (every fp16, bf16, fp32 and fp8 value is exact in float64); the
float64 product is the reference the kernel's fp32 accumulation is judged against.

Integer inputs (int8) are multiplied exactly: every product is below 2^14 in magnitude, so any
sum of fewer than 2^39 of them is an integer below 2^53 and float64 arithmetic on it is exact in
any order. The exact sum (plus an int32 bias, then relu) is wrapped to int32, which is what an
int32 accumulator holds after overflow.
"""
from __future__ import annotations

import math

import torch

ACTIVATIONS = ("none", "relu", "gelu", "silu")


def activation(z: torch.Tensor, name: str) -> torch.Tensor:
    """relu, gelu (the erf form, torch's default) and silu = z * sigmoid(z), in float64."""
    if name == "none":
        return z
    if name == "relu":
        return torch.clamp(z, min=0)
    if name == "gelu":
        return 0.5 * z * (1.0 + torch.special.erf(z / math.sqrt(2.0)))
    if name == "silu":
        return z * torch.sigmoid(z)
    raise ValueError(f"unknown activation {name!r}; known: {', '.join(ACTIVATIONS)}")


def matmul(a: torch.Tensor, b: torch.Tensor, *, bias: torch.Tensor | None = None,
           activation_name: str = "none", scale: float = 1.0) -> torch.Tensor:
    """act(scale * (a @ b) + bias) in float64."""
    c = (a.to(torch.float64) @ b.to(torch.float64)) * scale
    if bias is not None:
        c = c + bias.to(torch.float64)[None, :]
    return activation(c, activation_name)


def abs_product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """|A| @ |B| in float64: the sum of the magnitudes of the terms each output adds up."""
    return a.to(torch.float64).abs() @ b.to(torch.float64).abs()


def int_matmul(a: torch.Tensor, b: torch.Tensor, *, bias: torch.Tensor | None = None,
               activation_name: str = "none") -> torch.Tensor:
    """The exact integer product (int8 x int8 summed exactly), plus bias, relu, wrapped to int32."""
    if activation_name not in ("none", "relu"):
        raise ValueError(f"an integer matmul has no exact {activation_name!r}; use 'none' or 'relu'")
    k = a.shape[1]
    largest = float(a.to(torch.float64).abs().max()) * float(b.to(torch.float64).abs().max()) * k if k else 0.0
    if largest >= 2.0 ** 53:
        raise ValueError(f"integer products up to {largest:.3g} are not exact in float64")
    c = torch.round(a.to(torch.float64) @ b.to(torch.float64)).to(torch.int64)
    if bias is not None:
        c = c + bias.to(torch.int64)[None, :]
    if activation_name == "relu":
        c = torch.clamp(c, min=0)
    return (((c + 2**31) % 2**32) - 2**31).to(torch.int32)
