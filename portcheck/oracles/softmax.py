"""Softmax along the last dimension, in float64, with IEEE semantics for inf and NaN."""
import torch


def softmax(x: torch.Tensor) -> torch.Tensor:
    x = x.to(torch.float64)
    m = x.amax(dim=-1, keepdim=True)
    e = torch.exp(x - m)
    return e / e.sum(dim=-1, keepdim=True)
