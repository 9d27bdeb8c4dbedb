"""LayerNorm and RMSNorm over the last dimension, in float64.

Statistics are the textbook ones: the mean, the biased variance sum((x - mean)^2) / n computed
in two passes (float64 makes the two-pass result exact to about n * 2^-53), and rstd =
1 / sqrt(var + eps). Rows holding inf or NaN give NaN statistics, as IEEE arithmetic does.
"""
from __future__ import annotations

import torch


def layer_norm(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
               eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(y, mean, rstd): y = (x - mean) * rstd * weight + bias; mean and rstd per row."""
    x = x.to(torch.float64)
    mean = x.mean(dim=-1)
    centred = x - mean.unsqueeze(-1)
    var = (centred * centred).mean(dim=-1)
    rstd = 1.0 / torch.sqrt(var + eps)
    y = centred * rstd.unsqueeze(-1)
    if weight is not None:
        y = y * weight.to(torch.float64)
    if bias is not None:
        y = y + bias.to(torch.float64)
    return y, mean, rstd


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None,
             eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(y, rstd): y = x * rstd * weight with rstd = 1 / sqrt(mean(x^2) + eps) per row."""
    x = x.to(torch.float64)
    rstd = 1.0 / torch.sqrt((x * x).mean(dim=-1) + eps)
    y = x * rstd.unsqueeze(-1)
    if weight is not None:
        y = y * weight.to(torch.float64)
    return y, rstd
