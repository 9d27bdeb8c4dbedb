"""Rotary position embedding on query and key, in the serving-engine form (vLLM's
`rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox)`):

  query [tokens, q_heads * head_size] or [tokens, q_heads, head_size], key likewise (or None),
  positions [tokens] (int64 or int32), cos_sin_cache [max_position, rot_dim]: row p holds the
  rot_dim/2 cosines of p's angles, then their sines (fp32, or the query's dtype).

NeoX layout rotates element i with i + rot_dim/2, GPT-J layout 2i with 2i + 1; elements past
rot_dim (partial rotary) pass through. In place by default, as vLLM does; given outputs it writes
there and copies the pass-through part. Math in fp32: x1 cos - x2 sin, x2 cos + x1 sin.

One program handles TOKENS tokens: their cos/sin rows are loaded once and reused for every query
and key head, which go through in blocks of BLOCK_H heads.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

from .. import strategies as S
from ..cases import Case, Cost, Variant, launch_divisibility, register
from ..dtypes import fmt
from ..oracles import rope as rope_ref
from ..tolerance import Tolerance
from ..facts.device import warp_size
from . import _plans
from ._launch import num_warps_for

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
ELEMS_PER_PROGRAM = 4096      # elements of one head block times tokens, per loop step
# elements per thread: 4 warps a 4096-element step reach 0.91-0.92 of copy on the H200 (bf16,
# 32 query / 8 key heads of 128), against 0.74-0.86 at 8192 elements and 16 warps
# (tools/sweep_launch.py, 2026-11-30)
ELEMS_PER_THREAD = 32
MAX_HEAD_SIZE = 1024


@triton.jit
def _rotate_heads(x_ptr, o_ptr, t64, t_ok, n_heads, x_ts, x_hs, o_ts, o_hs, cos, sin,
                  HALF: tl.constexpr, BLOCK_HALF: tl.constexpr, TAIL: tl.constexpr,
                  BLOCK_TAIL: tl.constexpr, BLOCK_H: tl.constexpr, TOKENS: tl.constexpr,
                  NEOX: tl.constexpr, COPY_TAIL: tl.constexpr):
    """Rotate the first 2*HALF elements of every head of TOKENS tokens; cos, sin: [TOKENS, 1, BLOCK_HALF]."""
    h = tl.arange(0, BLOCK_H)[None, :, None]
    i = tl.arange(0, BLOCK_HALF)[None, None, :]
    t64 = t64[:, None, None]
    t_ok = t_ok[:, None, None]
    for h0 in range(0, n_heads, BLOCK_H):
        hh = h0 + h
        row_ok = t_ok & (hh < n_heads)
        m = row_ok & (i < HALF)
        xb = x_ptr + t64 * x_ts + hh * x_hs
        ob = o_ptr + t64 * o_ts + hh * o_hs
        if NEOX:
            x1 = tl.load(xb + i, mask=m).to(tl.float32)
            x2 = tl.load(xb + HALF + i, mask=m).to(tl.float32)
            tl.store(ob + i, (x1 * cos - x2 * sin).to(o_ptr.dtype.element_ty), mask=m)
            tl.store(ob + HALF + i, (x2 * cos + x1 * sin).to(o_ptr.dtype.element_ty), mask=m)
        else:
            # pairs are adjacent: load the rotated span contiguously (vector loads), view it as
            # [.., BLOCK_HALF, 2] and split the pair dimension, which each thread holds whole
            c = tl.arange(0, 2 * BLOCK_HALF)[None, None, :]
            mc = row_ok & (c < 2 * HALF)
            x = tl.load(xb + c, mask=mc).to(tl.float32)
            x1, x2 = tl.split(tl.reshape(x, [TOKENS, BLOCK_H, BLOCK_HALF, 2]))
            o = tl.reshape(tl.join(x1 * cos - x2 * sin, x2 * cos + x1 * sin), [TOKENS, BLOCK_H, 2 * BLOCK_HALF])
            tl.store(ob + c, o.to(o_ptr.dtype.element_ty), mask=mc)
        if COPY_TAIL:
            c = tl.arange(0, BLOCK_TAIL)[None, None, :]
            mt = row_ok & (c < TAIL)
            tl.store(ob + 2 * HALF + c, tl.load(xb + 2 * HALF + c, mask=mt), mask=mt)


@triton.jit
def rope_kernel(q_ptr, k_ptr, qo_ptr, ko_ptr, pos_ptr, cache_ptr, n_tokens, n_qh, n_kh,
                q_ts, q_hs, k_ts, k_hs, qo_ts, qo_hs, ko_ts, ko_hs, cache_stride,
                HALF: tl.constexpr, BLOCK_HALF: tl.constexpr, TAIL: tl.constexpr,
                BLOCK_TAIL: tl.constexpr, BLOCK_H: tl.constexpr, TOKENS: tl.constexpr,
                NEOX: tl.constexpr, HAS_KEY: tl.constexpr, COPY_TAIL: tl.constexpr):
    t = tl.program_id(0) * TOKENS + tl.arange(0, TOKENS)
    t_ok = t < n_tokens
    pos = tl.load(pos_ptr + t, mask=t_ok, other=0).to(tl.int64)
    i = tl.arange(0, BLOCK_HALF)[None, :]
    cm = t_ok[:, None] & (i < HALF)
    row = cache_ptr + pos[:, None] * cache_stride
    cos = tl.load(row + i, mask=cm, other=0.0).to(tl.float32)[:, None, :]
    sin = tl.load(row + HALF + i, mask=cm, other=0.0).to(tl.float32)[:, None, :]
    t64 = t.to(tl.int64)
    _rotate_heads(q_ptr, qo_ptr, t64, t_ok, n_qh, q_ts, q_hs, qo_ts, qo_hs, cos, sin,
                  HALF, BLOCK_HALF, TAIL, BLOCK_TAIL, BLOCK_H, TOKENS, NEOX, COPY_TAIL)
    if HAS_KEY:
        _rotate_heads(k_ptr, ko_ptr, t64, t_ok, n_kh, k_ts, k_hs, ko_ts, ko_hs, cos, sin,
                      HALF, BLOCK_HALF, TAIL, BLOCK_TAIL, BLOCK_H, TOKENS, NEOX, COPY_TAIL)


def _floor_pow2(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


def config(head_size: int, rot_dim: int, max_heads: int, warp: int, copy_tail: bool) -> dict:
    half = rot_dim // 2
    block_half = triton.next_power_of_2(half)
    tail = head_size - rot_dim
    block_tail = triton.next_power_of_2(tail) if copy_tail and tail else 1
    per_head = 2 * block_half + (block_tail if copy_tail and tail else 0)
    block_h = min(triton.next_power_of_2(max(1, max_heads)), _floor_pow2(ELEMS_PER_PROGRAM // per_head))
    tokens = _floor_pow2(ELEMS_PER_PROGRAM // (block_h * per_head))
    return {"HALF": half, "BLOCK_HALF": block_half, "TAIL": tail, "BLOCK_TAIL": block_tail,
            "BLOCK_H": block_h, "TOKENS": tokens, "COPY_TAIL": bool(copy_tail and tail),
            "num_warps": num_warps_for(tokens * block_h * 2 * block_half, warp, per_thread=ELEMS_PER_THREAD)}


def _heads_view(name: str, x: torch.Tensor, tokens: int, head_size: int) -> torch.Tensor:
    """x as [tokens, heads, head_size] (a view), or a ValueError saying why it cannot be."""
    if x.dim() == 2:
        if x.shape[1] % head_size:
            raise ValueError(f"{name} has {x.shape[1]} columns, not a multiple of head_size {head_size}")
        if x.stride(1) != 1:
            raise ValueError(f"{name} must have unit stride along its last dimension, got strides {x.stride()}")
        return x.as_strided((x.shape[0], x.shape[1] // head_size, head_size), (x.stride(0), head_size, 1))
    if x.dim() == 3:
        if x.shape[2] != head_size:
            raise ValueError(f"{name} has head size {x.shape[2]}, expected head_size {head_size}")
        if x.stride(2) != 1:
            raise ValueError(f"{name} must have unit stride along its last dimension, got strides {x.stride()}")
        return x
    raise ValueError(f"{name} must be 2-D [tokens, heads * head_size] or 3-D [tokens, heads, head_size], "
                     f"got shape {tuple(x.shape)}")


def _check_pair(name: str, x: torch.Tensor, out: torch.Tensor) -> None:
    if tuple(out.shape) != tuple(x.shape) or out.dtype != x.dtype:
        raise ValueError(f"{name}_out is {tuple(out.shape)} {out.dtype}; expected {tuple(x.shape)} {x.dtype}")


# launch plans (_plans.py): a serving loop calls this once per layer and step with few tokens,
# where the checks and Triton's dispatch would cost more than the kernel
_PLANS = _plans.Plans()
_TENSOR_ARGS = 6      # q_ptr, k_ptr, qo_ptr, ko_ptr, pos_ptr, cache_ptr: given on every launch


def rotary_embedding(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor | None,
                     head_size: int, cos_sin_cache: torch.Tensor, is_neox: bool = True,
                     query_out: torch.Tensor | None = None, key_out: torch.Tensor | None = None):
    """Apply RoPE to query and key (in place unless outputs are given); returns (query', key')."""
    plan_key = _plans.key((query, key, query_out, key_out, positions, cos_sin_cache), (head_size, is_neox))
    plan = _PLANS.get(plan_key)
    if plan is not None:     # the key proves every check below passed for these arguments
        qo = query if query_out is None else query_out
        k, ko = (query, qo) if key is None else (key, key if query_out is None else key_out)
        # the tensors' addresses, as paged decode's plan passes them (Triton's launcher then
        # skips a data_ptr() call and a driver query per pointer)
        plan.launch(_plans.stream(plan_key), query.data_ptr(), k.data_ptr(), qo.data_ptr(), ko.data_ptr(),
                    positions.data_ptr(), cos_sin_cache.data_ptr())
        return qo, (key if query_out is None else key_out)
    if query.dtype not in DTYPES.values():
        raise ValueError(f"query has dtype {query.dtype}; RoPE takes {', '.join(map(str, DTYPES.values()))}")
    if not 2 <= head_size <= MAX_HEAD_SIZE:
        raise ValueError(f"head_size {head_size} is outside 2..{MAX_HEAD_SIZE}")
    if positions.dim() != 1 or positions.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"positions must be a 1-D int64 or int32 tensor, got {tuple(positions.shape)} {positions.dtype}")
    if positions.shape[0] > 1 and positions.stride(0) != 1:   # the kernel reads positions[t] at t
        raise ValueError(f"positions must be contiguous, got stride {positions.stride(0)}")
    tokens = positions.shape[0]
    if query.shape[0] != tokens:
        raise ValueError(f"query has {query.shape[0]} tokens but positions has {tokens}")
    q3 = _heads_view("query", query, tokens, head_size)
    k3 = None
    if key is not None:
        if key.dtype != query.dtype:
            raise ValueError(f"key has dtype {key.dtype} but query has {query.dtype}")
        if key.shape[0] != tokens:
            raise ValueError(f"key has {key.shape[0]} tokens but positions has {tokens}")
        k3 = _heads_view("key", key, tokens, head_size)
    if cos_sin_cache.dim() != 2 or cos_sin_cache.stride(1) != 1:
        raise ValueError(f"cos_sin_cache must be 2-D [max_position, rot_dim] with unit stride, "
                         f"got shape {tuple(cos_sin_cache.shape)} strides {cos_sin_cache.stride()}")
    rot_dim = cos_sin_cache.shape[1]
    if rot_dim % 2 or not 2 <= rot_dim <= head_size:
        raise ValueError(f"cos_sin_cache has rot_dim {rot_dim}; it must be even and within 2..head_size ({head_size})")
    if cos_sin_cache.dtype not in (torch.float32, query.dtype):
        raise ValueError(f"cos_sin_cache has dtype {cos_sin_cache.dtype}; expected float32 or the query's {query.dtype}")
    out_of_place = query_out is not None or key_out is not None
    if out_of_place and (query_out is None or (key is not None) != (key_out is not None)):
        raise ValueError("give both query_out and key_out (key_out only with a key), or neither (in place)")
    qo3, ko3 = q3, k3
    if query_out is not None:
        _check_pair("query", query, query_out)
        qo3 = _heads_view("query_out", query_out, tokens, head_size)
    if key_out is not None:
        _check_pair("key", key, key_out)
        ko3 = _heads_view("key_out", key_out, tokens, head_size)
    for name, t in (("positions", positions), ("key", key), ("cos_sin_cache", cos_sin_cache),
                    ("query_out", query_out), ("key_out", key_out)):
        if t is not None and t.device != query.device:
            raise ValueError(f"{name} is on {t.device} but query is on {query.device}")
    result = (query_out if out_of_place else query, key_out if out_of_place else key)
    if tokens == 0:
        return result
    n_kh = k3.shape[1] if k3 is not None else 0
    cfg = config(head_size, rot_dim, max(q3.shape[1], n_kh), warp_size(), out_of_place)
    kk, kko = (k3, ko3) if k3 is not None else (q3, qo3)    # unused when HAS_KEY is False
    grid = (triton.cdiv(tokens, cfg["TOKENS"]),)
    args = (q3, kk, qo3, kko, positions, cos_sin_cache, tokens, q3.shape[1], n_kh,
            q3.stride(0), q3.stride(1), kk.stride(0), kk.stride(1), qo3.stride(0), qo3.stride(1),
            kko.stride(0), kko.stride(1), cos_sin_cache.stride(0))
    consts = {k: cfg[k] for k in ("HALF", "BLOCK_HALF", "TAIL", "BLOCK_TAIL", "BLOCK_H", "TOKENS",
                                  "COPY_TAIL")}
    consts.update(NEOX=bool(is_neox), HAS_KEY=k3 is not None)
    kernel = rope_kernel[grid](*args, **consts, num_warps=cfg["num_warps"])
    if plan_key is not None:
        _PLANS.put(plan_key, _plans.record(rope_kernel, kernel, grid, args, consts, _TENSOR_ARGS))
    return result


def cos_sin_cache(max_position: int, rot_dim: int, base: float, dtype: torch.dtype) -> torch.Tensor:
    """vLLM's cache: inv_freq_i = base^(-2i/rot_dim); row p = [cos(p f), sin(p f)], computed in
    float64 and rounded once to `dtype`."""
    inv_freq = base ** (-torch.arange(0, rot_dim, 2, dtype=torch.float64) / rot_dim)
    freqs = torch.arange(max_position, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return torch.cat([freqs.cos(), freqs.sin()], dim=-1).to(dtype)


# ---- the case -------------------------------------------------------------------------------

HEAD_SIZES = (8, 16, 32, 64, 80, 96, 128, 256)
BASES = (10000.0, 1000000.0)


def _inputs(dtype: str, max_elements: int):
    def with_head(d):
        most_heads = max(1, min(32, max_elements // d))
        return st.fixed_dictionaries({
            "dtype": st.just(dtype), "head_size": st.just(d),
            "rot_dim": st.one_of(st.just(d), st.just(max(2, d // 2)), st.integers(1, d // 2).map(lambda r: 2 * r)),
            "q_heads": st.integers(1, most_heads), "neox": st.booleans(),
            "cache": st.sampled_from(("fp32", "same")), "base": st.sampled_from(BASES),
            "positions": st.sampled_from(("int64", "int32")), "layout": st.sampled_from(("heads", "fused")),
            "regime": S.regimes(), "seed": S.seeds()})

    def with_tokens(spec):
        d, hq = spec["head_size"], spec["q_heads"]
        most_tokens = max(1, min(256, max_elements // (hq * d)))
        return st.fixed_dictionaries({
            "kv_heads": st.integers(0, hq), "tokens": st.integers(1, most_tokens),
            "max_position": st.integers(1, max(1, min(4096, max_elements // spec["rot_dim"])))}
        ).map(lambda more: {**spec, **more})

    heads = [d for d in HEAD_SIZES if d <= max_elements]
    return st.sampled_from(heads).flatmap(with_head).flatmap(with_tokens)


def _make(spec: dict, device: str) -> dict:
    gen = S.generator(spec["seed"])
    t, hq, hk, d = spec["tokens"], spec["q_heads"], spec["kv_heads"], spec["head_size"]
    dt = fmt(spec["dtype"]).torch_dtype
    q = S.values((t, hq * d), spec["dtype"], spec["regime"], gen)
    k = S.values((t, hk * d), spec["dtype"], spec["regime"], gen) if hk else None
    positions = torch.randint(0, spec["max_position"], (t,), generator=gen)
    positions[0] = spec["max_position"] - 1         # the cache's last row is always read
    cache = cos_sin_cache(spec["max_position"], spec["rot_dim"], spec["base"],
                          torch.float32 if spec["cache"] == "fp32" else dt)
    if spec["layout"] == "fused":
        # q and k are column slices of one [tokens, (hq + 2 hk) * d] qkv buffer whose v part is NaN
        buf = torch.full((t, (hq + 2 * hk) * d), float("nan"), dtype=dt)
        buf[:, :hq * d] = q
        if k is not None:
            buf[:, hq * d:(hq + hk) * d] = k
        buf = buf.to(device)
        q, k = buf[:, :hq * d], (buf[:, hq * d:(hq + hk) * d] if k is not None else None)
    else:
        q = q.reshape(t, hq, d).to(device)
        k = k.reshape(t, hk, d).to(device) if k is not None else None
    return {"query": q, "key": k, "positions": positions.to(getattr(torch, spec["positions"])).to(device),
            "cache": cache.to(device), "head_size": d, "neox": spec["neox"]}


def _outputs(args):
    outs = {"query_out": (tuple(args["query"].shape), args["query"].dtype)}
    if args["key"] is not None:
        outs["key_out"] = (tuple(args["key"].shape), args["key"].dtype)
    return outs


def _launch(args, outs):
    rotary_embedding(args["positions"], args["query"], args["key"], args["head_size"], args["cache"],
                     args["neox"], outs["query_out"], outs.get("key_out"))


def _heads(x: torch.Tensor, head_size: int) -> torch.Tensor:
    return x.reshape(x.shape[0], -1, head_size)


def _oracle(args):
    refs = {}
    for name in ("query", "key"):
        x = args[name]
        if x is not None:
            out = rope_ref.rope(_heads(x, args["head_size"]), args["positions"], args["cache"], args["neox"])
            refs[f"{name}_out"] = out.reshape(x.shape)
    return refs


def _tolerance(args, refs, dtype):
    """Each rotated element is a two-term sum a*b - c*d of exact fp32 inputs: at most two
    roundings (one with FMA contraction), so |err| <= 2 u(fp32) (|ab| + |cd|) (Higham, gamma_2);
    then one rounding to the output. Pass-through elements are copied exactly."""
    u32, uo = fmt("fp32").unit_roundoff, fmt(dtype).unit_roundoff
    tols = {}
    for name in ("query", "key"):
        x = args[name]
        if x is None:
            continue
        m = rope_ref.magnitudes(_heads(x, args["head_size"]), args["positions"], args["cache"], args["neox"])
        atol = (1 + uo) * 2 * u32 * m.reshape(x.shape) + fmt(dtype).subnormal_step
        tols[f"{name}_out"] = Tolerance(uo, atol, f"rtol = u({dtype}); atol_i = (1 + u({dtype})) * 2 u(fp32) "
                                        f"(|x1 cos| + |x2 sin|)_i + sub({dtype})")
    return tols


def _cost(args):
    q, k, cache = args["query"], args["key"], args["cache"]
    elems = q.numel() + (k.numel() if k is not None else 0)
    tokens, rot = q.shape[0], cache.shape[1]
    heads = elems // (tokens * args["head_size"]) if tokens else 0
    return Cost(bytes=2 * elems * q.element_size() + tokens * (args["positions"].element_size()
                                                               + rot * cache.element_size()),
                flops=3 * tokens * heads * rot)


def _torch_rope(positions, query, key, head_size, cache, neox):
    """vLLM's forward_native: gather the cache rows, rotate in the input dtype's promotion."""
    rot = cache.shape[1]

    def apply(x):
        x3 = _heads(x, head_size)
        cos, sin = cache.index_select(0, positions.long()).chunk(2, dim=-1)
        cos, sin = cos[:, None, :].to(x.dtype), sin[:, None, :].to(x.dtype)
        r, rest = x3[..., :rot], x3[..., rot:]
        if neox:
            x1, x2 = r.chunk(2, dim=-1)
            o = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
        else:
            x1, x2 = r[..., ::2], r[..., 1::2]
            o = torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)
        return torch.cat((o, rest), dim=-1).reshape(x.shape)

    return lambda: (apply(query), apply(key) if key is not None else None)


def _baselines(args):
    """torch eager; FlagGems (full rotary, both layouts) and Liger (NeoX, full rotary, in place)
    where they import, with their cos/sin inputs prepared outside the timed call."""
    from ..speed import peers
    q, k, pos, cache, d, neox = (args["query"], args["key"], args["positions"], args["cache"],
                                 args["head_size"], args["neox"])
    out = {"torch": _torch_rope(pos, q, k, d, cache, neox)}
    if k is None or cache.shape[1] != d:
        return out
    half = d // 2
    cos, sin = cache[:, :half].to(q.dtype).contiguous(), cache[:, half:].to(q.dtype).contiguous()
    q3, k3 = _heads(q, d), _heads(k, d)
    gems = peers.load("flag_gems")
    if gems is not None:
        out[peers.FLAGGEMS] = lambda: gems.apply_rotary_pos_emb(q3, k3, cos, sin, pos, rotary_interleaved=not neox)
    liger = peers.load("liger_kernel.ops.rope")
    if liger is not None and neox:
        t = q.shape[0]
        # Liger's layout: [batch, heads, seq, head_dim] views of [batch, seq, heads, head_dim] memory
        lq = q3.contiguous().view(1, t, -1, d).transpose(1, 2)
        lk = k3.contiguous().view(1, t, -1, d).transpose(1, 2)
        lcos = torch.cat((cos, cos), dim=-1)[pos.long()][None]
        lsin = torch.cat((sin, sin), dim=-1)[pos.long()][None]
        out[peers.LIGER] = lambda: liger.LigerRopeFunction.apply(lq, lk, lcos, lsin)
    return out


def _variants(arch) -> list[Variant]:
    out = []
    bench = _bench()
    qh, kh = bench["q_heads"], bench["kv_heads"]
    for dtype in DTYPES:
        t = "*" + fmt(dtype).triton_name
        for head, rot, neox, copy in ((128, 128, True, False), (128, 128, False, False),
                                      (128, 64, True, True), (64, 32, False, True)):
            cfg = config(head, rot, 32, arch.warp_size, copy)
            sig = {"q_ptr": t, "k_ptr": t, "qo_ptr": t, "ko_ptr": t, "pos_ptr": "*i64", "cache_ptr": "*fp32",
                   **{n: "i32" for n in ("n_tokens", "n_qh", "n_kh", "q_ts", "q_hs", "k_ts", "k_hs",
                                         "qo_ts", "qo_hs", "ko_ts", "ko_hs", "cache_stride")}}
            consts = {k: cfg[k] for k in ("HALF", "BLOCK_HALF", "TAIL", "BLOCK_TAIL", "BLOCK_H", "TOKENS",
                                          "COPY_TAIL")}
            consts.update(NEOX=neox, HAS_KEY=True)
            label = f"{dtype} head={head} rot={rot} {'neox' if neox else 'gptj'}{' out-of-place' if copy else ''}"
            # strides of the bench's contiguous [tokens, heads, head] tensors, as the JIT
            # specializes them (the token count varies)
            divisible = launch_divisibility(
                sig, n_qh=qh, n_kh=kh, q_ts=qh * head, q_hs=head, k_ts=kh * head, k_hs=head,
                qo_ts=qh * head, qo_hs=head, ko_ts=kh * head, ko_hs=head, cache_stride=rot)
            out.append(Variant(rope_kernel, sig, consts, cfg["num_warps"], label=label,
                               divisible_by_16=divisible))
    # the benchmarked configuration first: a CI compile of one variant per arch builds that one
    return sorted(out, key=lambda v: v.label != "bf16 head=128 rot=128 neox")


def _bench(dtype="bf16", **over) -> dict:
    spec = {"dtype": dtype, "tokens": 16384, "q_heads": 32, "kv_heads": 8, "head_size": 128, "rot_dim": 128,
            "neox": True, "cache": "fp32", "base": 10000.0, "positions": "int64", "layout": "heads",
            "max_position": 8192, "regime": "normal", "seed": 0}
    spec.update(over)
    return spec


register(Case(
    name="rope", family="rope", dtypes=tuple(DTYPES), inputs=_inputs, make=_make, outputs=_outputs,
    launch=_launch, oracle=_oracle, tolerance=_tolerance, cost=_cost,
    bench=(_bench(), _bench(neox=False), _bench(rot_dim=64, layout="fused")),
    variants=_variants, baselines=_baselines,
    description="rotary embedding of query and key from a cos/sin cache, NeoX or GPT-J layout, partial rotary"))
