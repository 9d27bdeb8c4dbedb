"""Mixture-of-experts references: top-k routing, token-to-expert alignment, the grouped GEMM.

Float64 for values and plain integer code for indices; written from the definitions, sharing
nothing with portcheck/kernels/moe_*.py.
"""
from __future__ import annotations

import torch


def topk_softmax(logits: torch.Tensor, top_k: int, renormalize: bool):
    """Routing weights [T, k] (float64) and expert ids [T, k] (int32) of softmax(logits) per row.

    Selection is on the logits, which orders experts exactly as the softmax does. Ties go to the
    lower expert index, and the k picks are listed by descending logit, ties by ascending index:
    a stable descending sort gives exactly that order.
    """
    x = logits.to(torch.float64)
    ids = torch.sort(x, dim=-1, descending=True, stable=True).indices[:, :top_k]
    p = torch.softmax(x, dim=-1)
    w = torch.gather(p, 1, ids)
    if renormalize:
        w = w / w.sum(dim=-1, keepdim=True)
    return w, ids.to(torch.int32)


def max_padded_len(numel: int, num_experts: int, block_m: int) -> int:
    """Longest sorted-id list: every assignment, plus block_m - 1 pad slots per used expert."""
    return numel + min(num_experts, numel) * (block_m - 1)


def align_block_size(topk_ids: torch.Tensor, num_experts: int, block_m: int):
    """Assignments grouped by expert, each expert's run padded to a multiple of block_m.

    An assignment is the flat index i = t * k + j of topk_ids[t, j]. Experts come in index order,
    an expert's assignments in increasing i, then pad slots holding the sentinel T * k. Experts
    with no assignment get no block; ids outside [0, num_experts) are not placed. Past the used
    length the ids are the sentinel and the block experts are -1.
    """
    flat = topk_ids.flatten().to(device="cpu", dtype=torch.int64)
    numel = flat.numel()
    sentinel = numel
    placed = (flat >= 0) & (flat < num_experts)
    # a stable sort by expert keeps each expert's assignments in increasing flat index
    order = torch.sort(torch.where(placed, flat, num_experts), stable=True).indices
    counts = torch.bincount(flat[placed], minlength=num_experts).tolist()
    pieces, block_experts, start = [], [], 0
    for e, count in enumerate(counts):
        if count == 0:
            continue
        blocks = -(-count // block_m)
        pieces.append(order[start:start + count])
        pieces.append(torch.full((blocks * block_m - count,), sentinel, dtype=torch.int64))
        block_experts += [e] * blocks
        start += count
    used = sum(p.numel() for p in pieces)
    length = max_padded_len(numel, num_experts, block_m)
    n_blocks = -(-length // block_m)
    pieces.append(torch.full((length - used,), sentinel, dtype=torch.int64))
    block_experts += [-1] * (n_blocks - len(block_experts))
    i32 = dict(dtype=torch.int32, device=topk_ids.device)
    return (torch.cat(pieces).to(**i32), torch.tensor(block_experts, **i32),
            torch.tensor([used], **i32))


def grouped_gemm(a: torch.Tensor, w: torch.Tensor, topk_ids: torch.Tensor,
                 topk_weights: torch.Tensor | None) -> torch.Tensor:
    """out[t * k + j] = topk_weights[t, j] * (a[t] @ w[topk_ids[t, j]].T), looping over experts.

    a [T, K], w [E, N, K], topk_ids [T, k]; float64 throughout. Rows whose id lies outside
    [0, E) stay zero. Without topk_weights the routing weight is 1.
    """
    a, w = a.to(torch.float64), w.to(torch.float64)
    n_tokens, top_k = topk_ids.shape
    flat = topk_ids.flatten().to(torch.int64)
    out = torch.zeros(n_tokens * top_k, w.shape[1], dtype=torch.float64, device=a.device)
    for e in range(w.shape[0]):
        rows = (flat == e).nonzero().flatten()
        if rows.numel():
            out[rows] = a[rows // top_k] @ w[e].T
    if topk_weights is not None:
        out = out * topk_weights.to(torch.float64).flatten()[:, None]
    return out
