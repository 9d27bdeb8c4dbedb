"""Writing new keys and values into a paged KV cache through a slot mapping (vLLM's
reshape_and_cache), optionally quantizing them to the arch's fp8 format with a per-tensor scale.

Layout:
  key, value    [tokens, heads_kv, head_dim]    any token / head strides, unit stride along
                                                head_dim (a slice of a fused qkv tensor works)
  key_cache,    [num_blocks, block_size, heads_kv, head_dim]   (vLLM's flash layout, the one
  value_cache                                   portcheck.kernels.paged_attention reads)
  slot_mapping  [tokens] int32 or int64: token t is written to block slot // block_size, row
                slot % block_size; -1 skips the token (padding)
  scale         fp8 caches only: a float32 tensor of one element; the cache stores
                fp8(x / scale), the quotient an IEEE float32 division, rounded to nearest even
                and saturated at the format's largest finite value
One program moves TOKENS whole tokens (all heads, all of head_dim) of both key and value: every
token's cache row is contiguous, so each program writes a few contiguous runs.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

from .. import strategies as S
from ..cases import Case, Cost, Variant, register
from ..oracles import fp8 as fp8_ref
from ..oracles.kv_cache import reshape_and_cache as reshape_and_cache_ref
from ..tolerance import exact, fmt
from ..facts.device import current_arch, interpreted, warp_size
from ._launch import num_warps_for
from .attention import check_tensor
from .quant import device_fp8, fp8_for, target_fp8_names

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
FP8_INPUTS = ("fp16", "bf16")
FP8_NAMES = {f.torch_dtype: name for name, f in fp8_ref.FORMATS.items()}
CACHE_DTYPES = (*DTYPES.values(), *FP8_NAMES)

# Elements (tokens x heads x head_dim) one program moves per tensor, per vendor. Memory-bound:
# enough bytes in flight per program that a few programs per SM / CU saturate HBM, at about 16
# elements per thread. The interpreter takes one token per program edge case more often.
ELEMENTS_PER_PROGRAM = {"cuda": 8192, "hip": 8192, "interpreter": 1024}
ELEMENTS_PER_THREAD = 16
MAX_TOKENS_PER_PROGRAM = 64


@triton.jit
def reshape_and_cache_kernel(key_ptr, value_ptr, key_cache_ptr, value_cache_ptr, slot_ptr, scale_ptr,
                             num_tokens, block_size, num_heads, head_dim,
                             stride_kt, stride_kh, stride_vt, stride_vh,
                             stride_kcb, stride_kct, stride_kch, stride_vcb, stride_vct, stride_vch,
                             TOKENS: tl.constexpr, HEADS: tl.constexpr, DIM: tl.constexpr,
                             EVEN_DIM: tl.constexpr, FP8: tl.constexpr, FP8_MAX: tl.constexpr):
    toks = tl.program_id(0) * TOKENS + tl.arange(0, TOKENS)
    slot = tl.load(slot_ptr + toks, mask=toks < num_tokens, other=-1).to(tl.int64)
    live = slot >= 0
    block = slot // block_size
    row = slot % block_size
    h = tl.arange(0, HEADS)
    d = tl.arange(0, DIM)
    mask = live[:, None, None] & (h < num_heads)[None, :, None]
    if not EVEN_DIM:
        mask = mask & (d < head_dim)[None, None, :]
    t64 = toks.to(tl.int64)[:, None, None]
    inner_k = h[None, :, None] * stride_kh + d[None, None, :]
    inner_v = h[None, :, None] * stride_vh + d[None, None, :]
    k = tl.load(key_ptr + t64 * stride_kt + inner_k, mask=mask)
    v = tl.load(value_ptr + t64 * stride_vt + inner_v, mask=mask)
    if FP8:
        scale = tl.load(scale_ptr)
        k = tl.clamp(tl.math.div_rn(k.to(tl.float32), scale), -FP8_MAX, FP8_MAX,
                     propagate_nan=tl.PropagateNan.ALL)
        v = tl.clamp(tl.math.div_rn(v.to(tl.float32), scale), -FP8_MAX, FP8_MAX,
                     propagate_nan=tl.PropagateNan.ALL)
    k_dst = key_cache_ptr + (block * stride_kcb + row * stride_kct)[:, None, None] + \
        h[None, :, None] * stride_kch + d[None, None, :]
    v_dst = value_cache_ptr + (block * stride_vcb + row * stride_vct)[:, None, None] + \
        h[None, :, None] * stride_vch + d[None, None, :]
    tl.store(k_dst, k.to(key_cache_ptr.dtype.element_ty), mask=mask)
    tl.store(v_dst, v.to(value_cache_ptr.dtype.element_ty), mask=mask)


def launch_shape(num_heads: int, head_dim: int, backend: str, warp: int) -> dict:
    """Tile sizes and warps for a token of num_heads x head_dim on a backend."""
    heads, dim = triton.next_power_of_2(num_heads), triton.next_power_of_2(head_dim)
    tokens = max(1, min(MAX_TOKENS_PER_PROGRAM, ELEMENTS_PER_PROGRAM[backend] // (heads * dim)))
    return {"TOKENS": tokens, "HEADS": heads, "DIM": dim,
            "num_warps": num_warps_for(tokens * heads * dim, warp, per_thread=ELEMENTS_PER_THREAD)}


def _active_backend() -> str:
    return current_arch().backend


def reshape_and_cache(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor,
                      value_cache: torch.Tensor, slot_mapping: torch.Tensor,
                      scale: torch.Tensor | None = None, *, validate: bool = True) -> None:
    """Write key/value rows into the caches at slot_mapping (in place); -1 slots are skipped.

    fp8 caches need `scale` (float32, one element) and store fp8(x / scale), saturated.
    validate: read slot_mapping back and refuse slots outside the cache (one device sync); a
    serving loop that builds its mapping itself may turn it off.
    """
    tokens_shape, cache_shape = "[tokens, heads_kv, head_dim]", "[num_blocks, block_size, heads_kv, head_dim]"
    check_tensor("key", key, 3, tokens_shape, tuple(DTYPES.values()))
    check_tensor("value", value, 3, tokens_shape, (key.dtype,))
    check_tensor("key_cache", key_cache, 4, cache_shape, CACHE_DTYPES)
    check_tensor("value_cache", value_cache, 4, cache_shape, CACHE_DTYPES)
    tokens, heads, head_dim = key.shape
    if tuple(value.shape) != tuple(key.shape):
        raise ValueError(f"key and value differ in shape: {tuple(key.shape)} and {tuple(value.shape)}")
    if tuple(value_cache.shape) != tuple(key_cache.shape) or value_cache.dtype != key_cache.dtype:
        raise ValueError(f"key_cache and value_cache differ: {key_cache.dtype} {tuple(key_cache.shape)} "
                         f"and {value_cache.dtype} {tuple(value_cache.shape)}")
    num_blocks, block_size, cache_heads, cache_dim = key_cache.shape
    if cache_heads != heads:
        raise ValueError(f"key has {heads} heads but the cache holds {cache_heads}")
    if cache_dim != head_dim:
        raise ValueError(f"key has head_dim {head_dim} but the cache holds {cache_dim}")
    fp8 = key_cache.dtype in FP8_NAMES
    if fp8:
        name = FP8_NAMES[key_cache.dtype]
        if key.dtype == torch.float32:
            raise ValueError("an fp8 cache takes fp16 or bf16 keys and values")
        if name not in target_fp8_names():
            raise ValueError(f"cache dtype {key_cache.dtype} ({name}) cannot be produced here; this "
                             f"device's Triton converts to {', '.join(sorted(target_fp8_names()))}")
        if not isinstance(scale, torch.Tensor) or scale.numel() != 1 or scale.dtype != torch.float32:
            raise ValueError("an fp8 cache needs scale: a float32 tensor of one element")
    elif key_cache.dtype != key.dtype:
        raise ValueError(f"cache dtype {key_cache.dtype} differs from key dtype {key.dtype} "
                         "(only fp8 caches convert)")
    elif scale is not None:
        raise ValueError("scale applies to fp8 caches only")
    if not isinstance(slot_mapping, torch.Tensor) or slot_mapping.dim() != 1 or \
            slot_mapping.dtype not in (torch.int32, torch.int64) or slot_mapping.shape[0] != tokens:
        raise ValueError(f"slot_mapping must be a 1-D int32/int64 tensor of {tokens} slots, got "
                         f"{getattr(slot_mapping, 'dtype', type(slot_mapping).__name__)} "
                         f"{tuple(getattr(slot_mapping, 'shape', ()))}")
    if tokens and slot_mapping.stride(0) != 1:
        raise ValueError("slot_mapping must be contiguous")
    devices = {t.device for t in (key, value, key_cache, value_cache, slot_mapping)}
    if fp8:
        devices.add(scale.device)
    if len(devices) > 1:
        raise ValueError(f"all tensors must be on one device, got {sorted(map(str, devices))}")
    if tokens == 0 or heads == 0 or head_dim == 0:
        return
    if validate:
        lo, hi = (int(x) for x in torch.stack([slot_mapping.min(), slot_mapping.max()]).tolist())
        if lo < -1 or hi >= num_blocks * block_size:
            bad = int(torch.nonzero((slot_mapping < -1) | (slot_mapping >= num_blocks * block_size))[0])
            raise ValueError(f"slot_mapping[{bad}] = {int(slot_mapping[bad])} is outside the cache's "
                             f"{num_blocks} x {block_size} = {num_blocks * block_size} slots "
                             "(-1 skips a token)")
    backend = _active_backend()
    shape = launch_shape(heads, head_dim, backend, warp_size())
    fp8_max = float(torch.finfo(key_cache.dtype).max) if fp8 else 0.0
    if not fp8:     # the kernel never reads it; a float32 buffer keeps the signature the same
        scale = torch.empty(1, dtype=torch.float32, device=key.device)
    reshape_and_cache_kernel[(triton.cdiv(tokens, shape["TOKENS"]),)](
        key, value, key_cache, value_cache, slot_mapping, scale,
        tokens, block_size, heads, head_dim,
        key.stride(0), key.stride(1), value.stride(0), value.stride(1),
        key_cache.stride(0), key_cache.stride(1), key_cache.stride(2),
        value_cache.stride(0), value_cache.stride(1), value_cache.stride(2),
        TOKENS=shape["TOKENS"], HEADS=shape["HEADS"], DIM=shape["DIM"],
        EVEN_DIM=shape["DIM"] == head_dim, FP8=fp8, FP8_MAX=fp8_max, num_warps=shape["num_warps"],
        num_stages=1)   # the stages its compile variant declares (a copy: nothing to pipeline)


# ---- the cases ----------------------------------------------------------------------------------

def _inputs(quantized: bool):
    def inputs(dtype: str, max_elements: int):
        small = interpreted()

        def with_shape(shape):
            heads, head_dim, block_size = shape
            per_token = heads * head_dim
            tokens = max(1, min(64 if small else 65536, max_elements // (2 * per_token)))
            regimes = ("normal", "large", "tiny", "ties") if quantized else ("normal", "special")
            return st.fixed_dictionaries({
                "dtype": st.just(dtype), "heads": st.just(heads), "head_dim": st.just(head_dim),
                "block_size": st.just(block_size), "tokens": S.lengths(16, tokens),
                "skip": st.sampled_from((0.0, 0.25)),          # share of tokens with slot -1
                "spare_blocks": st.integers(0, 3),
                "layout": st.sampled_from(("contiguous", "fused_qkv")),
                "slots": st.sampled_from(("int64", "int32")),
                "scale": st.sampled_from((1.0, 0.0371, 4.5)) if quantized else st.just(None),
                "regime": st.sampled_from(regimes), "seed": S.seeds()})

        # head_dim 80 is not a power of two: the masked-dim path
        shape = st.tuples(st.integers(1, 4 if small else 8), st.sampled_from((64, 80, 128)),
                          st.sampled_from((8, 16, 32)))
        return shape.flatmap(with_shape)
    return inputs


def _values(spec: dict, shape, gen, cache_dtype) -> torch.Tensor:
    regime = spec["regime"]
    if regime == "ties":     # midpoints of the fp8 grid times the scale: rounding ties
        f = fp8_ref.fp8_format(cache_dtype)
        grid = fp8_ref.decode(torch.arange(0, f.max_code + 1, dtype=torch.uint8), f)
        mids = (grid[:-1] + grid[1:]) / 2
        pick = mids[torch.randint(0, mids.numel(), shape, generator=gen)]
        sign = torch.where(torch.rand(shape, generator=gen) < 0.5, -1.0, 1.0)
        # exact in fp16/bf16 only where the midpoint needs few bits; the rest still probe near-ties
        return (pick * sign * spec["scale"]).to(fmt(spec["dtype"]).torch_dtype)
    scale = 1.0
    if regime == "large":        # past the fp8 range after division: saturation
        scale, regime = 2.0 * float(torch.finfo(cache_dtype).max) * spec["scale"], "normal"
    elif regime == "tiny":       # near the fp8 subnormals after division
        f = fp8_ref.fp8_format(cache_dtype)
        scale, regime = 4 * f.min_subnormal * spec["scale"], "normal"
    return S.values(shape, spec["dtype"], regime, gen, scale=scale)


def _make(quantized: bool):
    def make(spec: dict, device: str) -> dict:
        gen = S.generator(spec["seed"])
        heads, d, bs, n = spec["heads"], spec["head_dim"], spec["block_size"], spec["tokens"]
        dtype = fmt(spec["dtype"]).torch_dtype
        cache_dtype = device_fp8() if quantized else dtype
        live = torch.rand(n, generator=gen) >= spec["skip"]
        num_blocks = triton.cdiv(int(live.sum()), bs) + spec["spare_blocks"]
        slots = torch.full((n,), -1, dtype=torch.int64)
        slots[live] = torch.randperm(num_blocks * bs, generator=gen)[:int(live.sum())]
        kv = []
        for _ in range(2):
            x = _values(spec, (n, heads, d), gen, cache_dtype)
            if spec["layout"] == "fused_qkv":   # key/value as slices of a [tokens, q+k+v heads, d] tensor
                fused = torch.full((n, 3 * heads, d), float("nan"), dtype=dtype)
                fused[:, heads:2 * heads] = x
                x = fused.to(device)[:, heads:2 * heads]
            else:
                x = x.to(device)
            kv.append(x)
        slot_dtype = torch.int32 if spec["slots"] == "int32" else torch.int64
        return {"key": kv[0], "value": kv[1], "slot_mapping": slots.to(device=device, dtype=slot_dtype),
                "cache_shape": (num_blocks, bs, heads, d), "cache_dtype": cache_dtype,
                "scale": (torch.tensor([spec["scale"]], dtype=torch.float32, device=device)
                          if quantized else None),
                "validate": spec.get("validate", True)}
    return make


def _outputs(args):
    return {"key_cache": (args["cache_shape"], args["cache_dtype"]),
            "value_cache": (args["cache_shape"], args["cache_dtype"])}


def _launch(args, outs):
    reshape_and_cache(args["key"], args["value"], outs["key_cache"], outs["value_cache"],
                      args["slot_mapping"], args["scale"], validate=args["validate"])


def _poison(shape, dtype) -> torch.Tensor:
    """The harness pre-fills outputs with NaN (runner.poisoned): slots no token names keep it."""
    return torch.full(shape, float("nan"), dtype=dtype)


def _oracle(args):
    shape, dtype = args["cache_shape"], args["cache_dtype"]
    scale = float(args["scale"].item()) if args["scale"] is not None else None
    k, v = reshape_and_cache_ref(args["key"], args["value"], args["slot_mapping"],
                                 _poison(shape, dtype), _poison(shape, dtype), scale)
    return {"key_cache": k, "value_cache": v}


def _tolerance(args, refs, dtype):
    what = ("bitwise equality of fp8 codes of fl32(x / scale), RNE, saturating"
            if args["scale"] is not None else "bitwise equality (a copy)")
    return {"key_cache": exact(what), "value_cache": exact(what)}


def _cost(args):
    key, slots = args["key"], args["slot_mapping"]
    written = int((slots >= 0).sum())
    per_token = key.shape[1] * key.shape[2]
    out_size = torch.empty((), dtype=args["cache_dtype"]).element_size()
    return Cost(bytes=2 * written * per_token * (key.element_size() + out_size)
                + slots.numel() * slots.element_size())


def _baselines(args):
    """torch eager: index_copy_ into the caches viewed as rows (dropping -1 slots first)."""
    key, value, slots, scale = args["key"], args["value"], args["slot_mapping"], args["scale"]
    shape, dtype = args["cache_shape"], args["cache_dtype"]
    key_cache = torch.zeros(shape, dtype=dtype, device=key.device)
    value_cache = torch.zeros(shape, dtype=dtype, device=key.device)
    all_live = bool((slots >= 0).all())

    def run():
        idx, k, v = slots, key, value
        if not all_live:
            keep = slots >= 0
            idx, k, v = slots[keep], key[keep], value[keep]
        if scale is not None:
            top = torch.finfo(dtype).max
            k = (k.float() / scale).clamp(-top, top).to(dtype)
            v = (v.float() / scale).clamp(-top, top).to(dtype)
        rows = shape[0] * shape[1]
        key_cache.view(rows, *shape[2:]).index_copy_(0, idx.long(), k)
        value_cache.view(rows, *shape[2:]).index_copy_(0, idx.long(), v)

    return {"torch": run}


DIVISIBLE = ("key_ptr", "value_ptr", "key_cache_ptr", "value_cache_ptr", "slot_ptr", "scale_ptr",
             "stride_kt", "stride_kh", "stride_vt", "stride_vh", "stride_kcb", "stride_kct",
             "stride_kch", "stride_vcb", "stride_vct", "stride_vch")


def _variants(quantized: bool):
    def variants(arch) -> list[Variant]:
        out = []
        cache_fp8 = FP8_NAMES[fp8_for(arch)]
        for dtype in (FP8_INPUTS if quantized else tuple(DTYPES)):
            t = "*" + fmt(dtype).triton_name
            c = "*" + (cache_fp8 if quantized else fmt(dtype).triton_name)
            sig = {"key_ptr": t, "value_ptr": t, "key_cache_ptr": c, "value_cache_ptr": c,
                   "slot_ptr": "*i64", "scale_ptr": "*fp32",
                   **{n: "i32" for n in ("num_tokens", "block_size", "num_heads", "head_dim",
                                         "stride_kt", "stride_kh", "stride_vt", "stride_vh",
                                         "stride_kcb", "stride_kct", "stride_kch", "stride_vcb",
                                         "stride_vct", "stride_vch")}}
            for heads, head_dim in ((8, 128), (4, 80)):
                shape = launch_shape(heads, head_dim, arch.backend, arch.warp_size)
                fp8_max = float(torch.finfo(fp8_ref.fp8_format(cache_fp8).torch_dtype).max) if quantized else 0.0
                out.append(Variant(
                    reshape_and_cache_kernel, sig,
                    {"TOKENS": shape["TOKENS"], "HEADS": shape["HEADS"], "DIM": shape["DIM"],
                     "EVEN_DIM": shape["DIM"] == head_dim, "FP8": quantized, "FP8_MAX": fp8_max},
                    shape["num_warps"], 1,
                    label=f"{dtype} heads={heads} d={head_dim}" + (f" -> {cache_fp8}" if quantized else ""),
                    divisible_by_16=DIVISIBLE))
        return out
    return variants


def _bench(dtype: str, quantized: bool) -> tuple:
    # 65536 tokens x 8 heads x 128: 128 MB per tensor in bf16, 512 MB moved (256 MB in, 256 out)
    return ({"dtype": dtype, "heads": 8, "head_dim": 128, "block_size": 16, "tokens": 65536,
             "skip": 0.0, "spare_blocks": 0, "layout": "contiguous", "slots": "int64",
             "scale": 0.0371 if quantized else None, "regime": "normal", "seed": 0,
             "validate": False},)   # timing the kernel: a serving loop trusts its own mapping


for _q in (False, True):
    register(Case(
        name="kv_cache_write_fp8" if _q else "kv_cache_write", family="kv_cache",
        dtypes=FP8_INPUTS if _q else tuple(DTYPES), inputs=_inputs(_q), make=_make(_q),
        outputs=_outputs, launch=_launch, oracle=_oracle, tolerance=_tolerance, cost=_cost,
        bench=_bench("bf16", _q), variants=_variants(_q), baselines=_baselines,
        description=("write keys/values into a paged fp8 KV cache (x / scale, the arch's fp8 "
                     "format) through a slot mapping" if _q else
                     "write keys/values into a paged KV cache through a slot mapping "
                     "(reshape_and_cache)")))
