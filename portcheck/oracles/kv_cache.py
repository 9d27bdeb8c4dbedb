"""Writing new keys and values into a paged cache (vLLM's reshape_and_cache), exactly.

key, value [tokens, heads_kv, head_dim]; caches [num_blocks, block_size, heads_kv, head_dim];
slot_mapping [tokens]: token t goes to block slot // block_size, row slot % block_size; a slot
of -1 writes nothing. A slot no token names keeps what the cache held before (`initial`).

fp8 caches store codes of x / scale (per-tensor scale), the quotient rounded once to float32
(IEEE division) and then to the fp8 format with round-to-nearest-even, saturating at +-max.
Float64 holds the fp16/bf16 inputs and the float32 scale exactly, and rounding their float64
quotient to float32 is the correctly rounded float32 quotient: double rounding through 53 bits
is innocuous for division when 53 >= 2 * 24 + 2 (Figueroa, "When is double rounding
innocuous?", SIGNUM 1995).
"""
from __future__ import annotations

import torch

from . import fp8 as fp8_ref

FP8_DTYPES = tuple(f.torch_dtype for f in fp8_ref.FORMATS.values())


def stored(x: torch.Tensor, cache_dtype: torch.dtype, scale: float | None) -> torch.Tensor:
    """What the cache holds for values x: the same number, or fp8 codes of fl32(x / scale)."""
    if cache_dtype in FP8_DTYPES:
        q = (x.to(torch.float64) / scale).to(torch.float32)
        return fp8_ref.as_fp8(fp8_ref.encode(q, cache_dtype, saturate=True), cache_dtype)
    return x.to(cache_dtype)


def reshape_and_cache(key: torch.Tensor, value: torch.Tensor, slot_mapping: torch.Tensor,
                      initial_key_cache: torch.Tensor, initial_value_cache: torch.Tensor,
                      scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The caches after the write (new tensors, on the CPU)."""
    slots = slot_mapping.detach().cpu().to(torch.int64)
    live = slots >= 0
    out = []
    for new, initial in ((key, initial_key_cache), (value, initial_value_cache)):
        cache = initial.detach().cpu().clone()
        blocks, block_size = cache.shape[0], cache.shape[1]
        rows = cache.view(blocks * block_size, *cache.shape[2:])
        rows[slots[live]] = stored(new.detach().cpu()[live], cache.dtype, scale)
        out.append(cache)
    return out[0], out[1]
