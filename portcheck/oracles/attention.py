"""Scaled dot-product attention in float64: dense (causal or not, grouped-query) and paged decode.

softmax(Q K^T * scale + mask) V, computed directly from the definition with float64 products and
sums: no tiling, no online softmax. Layouts:
  dense:  q [batch, heads_q, seq_q, head_dim]; k, v [batch, heads_kv, seq_k, head_dim]
  paged:  query [num_seqs, heads_q, head_dim]; key/value cache [num_blocks, block_size,
          heads_kv, head_dim]; block_tables [num_seqs, max_blocks]; context_lens [num_seqs]
Query head h reads key/value head h // (heads_q // heads_kv) (grouped-query attention; MQA when
heads_kv == 1). The causal mask is aligned top-left, as torch's scaled_dot_product_attention
is_causal: query i sees keys j <= i.
"""
from __future__ import annotations

import math

import torch


def default_scale(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)


def expand_kv(t: torch.Tensor, heads_q: int) -> torch.Tensor:
    """[..., heads_kv, s, d] -> [..., heads_q, s, d]: each key/value head serves its query group."""
    return t.repeat_interleave(heads_q // t.shape[-3], dim=-3)


def causal_mask(seq_q: int, seq_k: int, device) -> torch.Tensor:
    """True where query i may attend key j (j <= i)."""
    i = torch.arange(seq_q, device=device)[:, None]
    j = torch.arange(seq_k, device=device)[None, :]
    return j <= i


def logits(q: torch.Tensor, k: torch.Tensor, scale: float | None, causal: bool) -> torch.Tensor:
    """scale * q k^T in float64, -inf where the mask forbids; [batch, heads_q, seq_q, seq_k]."""
    q = q.to(torch.float64)
    k = expand_kv(k.to(torch.float64), q.shape[-3])
    s = (q @ k.transpose(-1, -2)) * (default_scale(q.shape[-1]) if scale is None else scale)
    if causal:
        s = s.masked_fill(~causal_mask(q.shape[-2], k.shape[-2], s.device), float("-inf"))
    return s


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
              scale: float | None = None) -> torch.Tensor:
    """softmax(q k^T * scale + mask) v in float64; [batch, heads_q, seq_q, head_dim]."""
    p = torch.softmax(logits(q, k, scale, causal), dim=-1)
    return p @ expand_kv(v.to(torch.float64), q.shape[-3])


def gather_context(cache: torch.Tensor, block_table: torch.Tensor, context_len: int) -> torch.Tensor:
    """The first context_len tokens of one sequence from a paged cache: [heads_kv, ctx, head_dim]."""
    block_size = cache.shape[1]
    pos = torch.arange(context_len, device=cache.device)
    blocks = block_table.to(cache.device).long()[pos // block_size]
    return cache[blocks, pos % block_size].transpose(0, 1)


def paged_decode_attention(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                           block_tables: torch.Tensor, context_lens: torch.Tensor,
                           scale: float | None = None) -> torch.Tensor:
    """One query token per sequence attending its whole context: [num_seqs, heads_q, head_dim]."""
    out = torch.empty(query.shape, dtype=torch.float64, device=query.device)
    for s, n in enumerate(context_lens.tolist()):
        k = gather_context(key_cache, block_tables[s], n)[None]
        v = gather_context(value_cache, block_tables[s], n)[None]
        out[s] = attention(query[s][None, :, None, :], k, v, scale=scale)[0, :, 0, :]
    return out
