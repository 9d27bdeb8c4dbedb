"""Rotary position embedding in float64, in the serving-engine form (vLLM's rotary_embedding).

x [tokens, heads, head_size]; positions [tokens]; cos_sin_cache [max_position, rot_dim] whose row
p holds cos(p * f_i) for i < rot_dim/2, then sin(p * f_i). Each of the rot_dim/2 pairs (x1, x2)
of the first rot_dim elements of a head is rotated by its angle:
    x1' = x1 cos - x2 sin,   x2' = x2 cos + x1 sin
NeoX layout pairs element i with i + rot_dim/2; GPT-J layout pairs 2i with 2i + 1. Elements past
rot_dim (partial rotary) pass through unchanged.
"""
from __future__ import annotations

import torch


def pairs(x: torch.Tensor, rot_dim: int, neox: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The (x1, x2) halves of every rotated pair, each [..., rot_dim/2] (views of x)."""
    half = rot_dim // 2
    if neox:
        return x[..., :half], x[..., half:rot_dim]
    return x[..., 0:rot_dim:2], x[..., 1:rot_dim:2]


def cos_sin(positions: torch.Tensor, cos_sin_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token cos and sin, [tokens, 1, rot_dim/2] (broadcast over heads), in float64."""
    rows = cos_sin_cache.to(torch.float64)[positions.to(torch.long)]
    half = rows.shape[-1] // 2
    return rows[:, None, :half], rows[:, None, half:]


def rope(x: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor, neox: bool) -> torch.Tensor:
    x = x.to(torch.float64)
    rot_dim = cos_sin_cache.shape[-1]
    cos, sin = cos_sin(positions, cos_sin_cache)
    x1, x2 = pairs(x, rot_dim, neox)
    out = x.clone()
    o1, o2 = pairs(out, rot_dim, neox)
    o1.copy_(x1 * cos - x2 * sin)
    o2.copy_(x2 * cos + x1 * sin)
    return out


def magnitudes(x: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor, neox: bool) -> torch.Tensor:
    """Per output element, the sum of |terms| its value is computed from: |x1 cos| + |x2 sin| for
    x1', |x2 cos| + |x1 sin| for x2', 0 where the element passes through (for error bounds)."""
    x = x.to(torch.float64)
    rot_dim = cos_sin_cache.shape[-1]
    cos, sin = cos_sin(positions, cos_sin_cache)
    x1, x2 = pairs(x, rot_dim, neox)
    m = torch.zeros_like(x)
    m1, m2 = pairs(m, rot_dim, neox)
    m1.copy_((x1 * cos).abs() + (x2 * sin).abs())
    m2.copy_((x2 * cos).abs() + (x1 * sin).abs())
    return m
