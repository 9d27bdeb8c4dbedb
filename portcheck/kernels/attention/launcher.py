"""attention's launcher: the configurations per arch config family (configs/attention.toml),
the checks that refuse bad input before launch, and the launch through pointers or descriptors."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import triton
from triton.tools.tensor_descriptor import TensorDescriptor

from ...facts.archs import Arch
from ...facts.device import current_arch
from ...oracles.attention import default_scale
from .._configs import amd_options, family_table, load
from .._launch import descriptor_obstacle, descriptors_supported
from .kernel import attention_fwd_kernel, attention_fwd_tma_kernel

LOG2E = 1.4426950408889634
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
HEAD_DIMS = (64, 128)
MAX_GRID_Y = 65535      # CUDA's limit on grid dimension 1 (batch * heads_q lives there)


# ---- launch configurations, as data (configs/attention.toml) ----------------------------------

@dataclass(frozen=True)
class Config:
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    options: dict = field(default_factory=dict)   # AMD compiler knobs (waves_per_eu, ...)
    tma: bool = False     # load and store through tensor descriptors (NVIDIA sm_90+)
    ws: bool = False      # warp-specialised key loop (the TMA kernel; Triton documents Blackwell)


def _config(entry: dict) -> Config:
    bm, bn = entry["block"]
    return Config(bm, bn, entry["warps"], entry["stages"], amd_options(entry), entry.get("tma", False),
                  entry.get("ws", False))


def arch_configs(arch: Arch) -> dict[int, Config]:
    """{head_dim: Config} of an arch, from configs/attention.toml (keyed by its config family)."""
    return {int(d): _config(e) for d, e in family_table("attention", arch).items()}


MIN_BLOCK_N = min(e["block"][1] for table in load("attention").values() for e in table.values())


# ---- the launcher -------------------------------------------------------------------------------

def check_tensor(name: str, t, dims: int, what: str, dtypes) -> None:
    """Refuse a tensor of the wrong type, rank or dtype, or without a unit stride along its last
    dimension (head_dim), before launch; shared by the attention and KV-cache launchers."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != dims:
        raise ValueError(f"{name} must be {dims}-D {what}, got shape {tuple(t.shape)}")
    if t.dtype not in dtypes:
        raise ValueError(f"{name} has dtype {t.dtype}; this kernel takes {', '.join(map(str, dtypes))}")
    if t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError(f"{name} must have unit stride along head_dim, got strides {t.stride()}")


def check_heads(heads_q: int, heads_kv: int, head_dim: int, kv_head_dim: int, kv_name: str) -> None:
    """Grouped-query attention needs heads_q a multiple of heads_kv and one supported head_dim."""
    if kv_head_dim != head_dim:
        raise ValueError(f"head_dim differs: query {head_dim}, {kv_name} {kv_head_dim}")
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"head_dim {head_dim} is not supported; supported: {HEAD_DIMS}")
    if heads_kv < 1 or heads_q % heads_kv:
        raise ValueError(f"heads_q ({heads_q}) must be a multiple of {kv_name}'s heads_kv ({heads_kv})")


def _check(name: str, t, dtypes) -> None:
    check_tensor(name, t, 4, "[batch, heads, seq, head_dim]", dtypes)
    if t.shape[2] * t.stride(2) >= 2**31:
        raise ValueError(f"{name}: seq * seq stride = {t.shape[2] * t.stride(2)} needs 64-bit "
                         "offsets within a head, which this kernel does not take")


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
              scale: float | None = None, out: torch.Tensor | None = None,
              config: Config | None = None, tma: bool | None = None) -> torch.Tensor:
    """softmax(q k^T * scale + causal mask) v, fp32 softmax, output in q's dtype.

    scale defaults to 1/sqrt(head_dim). `config` replaces the table's entry (for tuning sweeps).
    tma: True / False forces tensor-descriptor or pointer loads; None takes the config's choice,
    falling back to pointers for tensors TMA cannot address (unaligned views).
    """
    _check("q", q, tuple(DTYPES.values()))
    _check("k", k, (q.dtype,))
    _check("v", v, (q.dtype,))
    batch, heads_q, seq_q, head_dim = q.shape
    _, heads_kv, seq_k, _ = k.shape
    if k.shape[0] != batch or v.shape[0] != batch:
        raise ValueError(f"batch sizes differ: q {batch}, k {k.shape[0]}, v {v.shape[0]}")
    if tuple(v.shape) != tuple(k.shape):
        raise ValueError(f"k and v must have one shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    check_heads(heads_q, heads_kv, head_dim, k.shape[-1], "k")
    if seq_k == 0 and seq_q > 0:
        raise ValueError("seq_k is 0: softmax over no keys is undefined")
    if scale is not None and not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a finite positive number, got {scale!r}")
    if batch * heads_q > MAX_GRID_Y:
        raise ValueError(f"batch * heads_q = {batch * heads_q} exceeds the grid limit {MAX_GRID_Y}")
    if out is None:
        out = torch.empty_like(q)
    else:
        _check("out", out, (q.dtype,))
        if tuple(out.shape) != tuple(q.shape):
            raise ValueError(f"out has shape {tuple(out.shape)}, expected {tuple(q.shape)}")
    if q.device != k.device or q.device != v.device or q.device != out.device:
        raise ValueError("q, k, v and out must be on one device")
    if out.numel() == 0:
        return out
    cfg = config or arch_configs(current_arch())[head_dim]
    for what, n in (("BLOCK_M", cfg.block_m), ("BLOCK_N", cfg.block_n)):
        if n < 16 or n & (n - 1):
            raise ValueError(f"{what} must be a power of two of at least 16 (tl.dot), got {n}")
    use_tma = cfg.tma if tma is None else tma
    if use_tma:
        why = (None if descriptors_supported() else "this device has no TMA (NVIDIA sm_90+ only)") \
            or descriptor_obstacle(q, k, v, out)
        if why and tma:
            raise ValueError(f"tensor descriptors requested, but {why}")
        use_tma = why is None
    qk_scale = (default_scale(head_dim) if scale is None else scale) * LOG2E
    grid = (triton.cdiv(seq_q, cfg.block_m), batch * heads_q)
    if use_tma:
        q_block, kv_block = [1, 1, cfg.block_m, head_dim], [1, 1, cfg.block_n, head_dim]
        attention_fwd_tma_kernel[grid](
            TensorDescriptor.from_tensor(q, q_block), TensorDescriptor.from_tensor(k, kv_block),
            TensorDescriptor.from_tensor(v, kv_block), TensorDescriptor.from_tensor(out, q_block),
            qk_scale, heads_q, heads_q // heads_kv, seq_k,
            HEAD_DIM=head_dim, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, CAUSAL=causal,
            WARP_SPEC=cfg.ws, num_warps=cfg.num_warps, num_stages=cfg.num_stages, **cfg.options)
        return out
    attention_fwd_kernel[grid](
        q, k, v, out, qk_scale,
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2), out.stride(0), out.stride(1), out.stride(2),
        heads_q, heads_q // heads_kv, seq_q, seq_k,
        HEAD_DIM=head_dim, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, CAUSAL=causal,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages, **cfg.options)
    return out
