"""attention's cases: shapes across MHA / GQA / MQA and both layouts, the float64 oracle, the
tolerance of a convex combination of V rows, SDPA baselines, and the compile variants."""
from __future__ import annotations

import torch
from hypothesis import strategies as st

from ... import strategies as S
from ...cases import Case, Cost, Variant, register
from ...facts.device import interpreted
from ...facts.numerics import DOT_ULP, EXP2_ULP
from ...oracles.attention import attention as attention_ref
from ...oracles.attention import default_scale, expand_kv, logits
from ...tolerance import Tolerance, fmt
from .kernel import attention_fwd_kernel, attention_fwd_tma_kernel
from .launcher import DTYPES, HEAD_DIMS, MIN_BLOCK_N, arch_configs, attention, descriptors_supported

# ---- the tolerance: the output is a convex combination of V rows ---------------------------------

def convex_combination_bound(q, k, v, ref, scale, causal, in_dtype: str, out_dtype: str,
                             extra_rescales=0, min_block_n=None) -> tuple[torch.Tensor, str]:
    """Per-element absolute error bound for a one-pass online-softmax attention (first order).

    q [B, Hq, Sq, D], k and v [B, Hkv, Sk, D] in float64, ref = float64 output. With pi_j the
    exact softmax weights of row i, s_j its logits (natural units), m = max_j s_j, n_k its
    number of visible keys and T = ceil(n_k / min_block_n) + extra_rescales its running-max
    rescales (min_block_n: the narrowest key tile any configuration uses), each weight carries a relative error shared by numerator and denominator

      E_j = (DOT_ULP*d + 2) u32 A_j + u32 |s_j - m| + (T + 1) e2 + u32 max_j |s_j - m|,
      A_j = scale * sum_d |q_d k_jd|,  e2 = 2 EXP2_ULP u32,

    (the QK^T dot, the fp32 scale and its multiply; the argument of exp2; exp2 itself; the chain
    of rescales exp2(m_old - m_new)). Shared errors cancel against O, so they cost
    sum_j pi_j E_j |v_j - O| <= sum_j pi_j E_j |v_j| + E_bar |O|. P is rounded to the input type
    for the PV dot (u(in) relative, eta(in) absolute below its normal range, divided by l >= 1);
    the PV dot (DOT_ULP per add), the row sum, the T rescales of both and the final division add
    (DOT_ULP+1) n_k + 2T + 1 roundings of u32 relative to sum_j pi_j |v_j|; the output rounding
    is u(out) |O| (the rtol).
    """
    min_block_n = min_block_n or MIN_BLOCK_N
    u32 = fmt("fp32").unit_roundoff
    f_in = fmt(in_dtype)
    u_in = f_in.unit_roundoff
    eta = max(2.0 ** (f_in.min_exp - f_in.mantissa_bits - 1), 2.0 ** -126)  # half a subnormal step,
    # or a flushed exp2 result
    d = q.shape[-1]
    heads_q = q.shape[-3]
    s = logits(q, k, scale, causal)
    visible = torch.isfinite(s)
    sc = default_scale(d) if scale is None else scale
    a = (q.abs() @ expand_kv(k.abs(), heads_q).transpose(-1, -2)) * sc
    m = s.amax(dim=-1, keepdim=True)
    dist = torch.where(visible, (s - m).abs(), torch.zeros_like(s))
    max_dist = dist.amax(dim=-1, keepdim=True)
    pi = torch.softmax(s, dim=-1)
    n_k = visible.sum(dim=-1, keepdim=True).to(torch.float64)
    rescales = torch.ceil(n_k / min_block_n) + extra_rescales
    e2 = 2 * EXP2_ULP * u32
    e = ((DOT_ULP * d + 2) * u32 * a + u32 * dist + (rescales + 1) * e2 + u32 * max_dist)
    e = torch.where(visible, e, torch.zeros_like(e))
    e_bar = (pi * e).sum(dim=-1, keepdim=True)
    abs_v = expand_kv(v.abs(), heads_q)
    weighted_v = pi @ abs_v
    bound = ((pi * e) @ abs_v + e_bar * ref.abs() + u_in * weighted_v
             + ((DOT_ULP + 1) * n_k + 2 * rescales + 1) * u32 * weighted_v
             + eta * (visible.to(torch.float64) @ abs_v))
    formula = (f"|O - O_ref| <= u({out_dtype})|O_ref| + sum_j pi_j E_j |v_j| + E_bar |O_ref| "
               f"+ (u({in_dtype}) + (({DOT_ULP}+1) n_k + 2T + 1) u32) sum_j pi_j |v_j| "
               f"+ eta({in_dtype}) sum_j |v_j| + sub({out_dtype}); "
               f"E_j = ({DOT_ULP} d + 2) u32 scale sum|q k_j| + u32 |s_j - m| + (T+1) {2 * EXP2_ULP} u32 "
               f"+ u32 max|s - m|, T = ceil(n_k/{min_block_n})"
               + (f" + {extra_rescales}" if extra_rescales else "") + f", d = {d}")
    return bound, formula


def attention_tolerance(q, k, v, ref, scale, causal, in_dtype: str, out_dtype: str,
                        extra_rescales=0) -> Tolerance:
    bound, formula = convex_combination_bound(q, k, v, ref, scale, causal, in_dtype, out_dtype,
                                              extra_rescales)
    f_out = fmt(out_dtype)
    return Tolerance(f_out.unit_roundoff, bound + f_out.subnormal_step, formula)


# ---- the cases ----------------------------------------------------------------------------------

REGIMES = ("normal", "peaked", "uniform")
# "table": the arch's configured loads; "pointers" / "descriptors": forced, so both are checked
# where the table picks TMA (descriptors are drawn as the table's choice where TMA is absent)
PATHS = ("table", "pointers", "descriptors")
LAYOUTS = ("bhsd", "bshd")     # contiguous, or a [batch, seq, heads, dim] tensor viewed as bhsd


def _inputs(causal: bool):
    def inputs(dtype: str, max_elements: int):
        small = interpreted()
        tile = 16 if small else 64
        seq_cap = 64 if small else 1024

        def shaped(draw_head):
            head_dim, heads_kv, group, batch = draw_head
            heads_q = heads_kv * group
            limit = max(1, min(seq_cap, max_elements // (batch * heads_q * head_dim)))
            # causal attention is mostly self-attention (seq_q == seq_k); cross lengths also occur
            lengths = S.lengths(tile, limit).flatmap(lambda n: st.tuples(
                st.just(n), st.one_of(st.just(n), S.lengths(tile, limit)) if causal
                else S.lengths(tile, limit)))
            return st.fixed_dictionaries({
                "dtype": st.just(dtype), "batch": st.just(batch), "heads_kv": st.just(heads_kv),
                "group": st.just(group), "head_dim": st.just(head_dim), "seq": lengths,
                "scale": st.sampled_from((None, 0.05, 0.3, 1.0)),
                "regime": st.sampled_from(REGIMES), "layout": st.sampled_from(LAYOUTS),
                "path": st.sampled_from(PATHS), "seed": S.seeds()})

        # (head_dim, heads_kv, group, batch): MHA (group 1), GQA, MQA (heads_kv 1); the
        # interpreter runs programs one by one, so it gets at most 4 query heads in all
        heads = st.tuples(st.sampled_from(HEAD_DIMS), st.integers(1, 2 if small else 4),
                          st.sampled_from((1, 2, 4)), st.integers(1, 2))
        if small:
            heads = heads.filter(lambda h: h[1] * h[2] * h[3] <= 4)
        return heads.flatmap(shaped)
    return inputs


def _place(t: torch.Tensor, layout: str, device: str) -> torch.Tensor:
    if layout == "bhsd":
        return t.to(device).contiguous()
    if layout == "bshd":
        return t.transpose(1, 2).contiguous().to(device).transpose(1, 2)
    raise ValueError(f"unknown layout {layout!r}")


def _make(causal: bool):
    def make(spec: dict, device: str) -> dict:
        gen = S.generator(spec["seed"])
        b, hkv, d = spec["batch"], spec["heads_kv"], spec["head_dim"]
        hq = hkv * spec["group"]
        dtype = spec["dtype"]
        q_scale = 16.0 if spec["regime"] == "peaked" else 1.0   # logits with a spread of ~16
        seq_q, seq_k = spec["seq"]
        q = S.values((b, hq, seq_q, d), dtype, "normal", gen, scale=q_scale)
        k = S.values((b, hkv, seq_k, d), dtype, "normal", gen)
        if spec["regime"] == "uniform":   # one key repeated: every visible weight is equal
            k = k[:, :, :1].expand_as(k).clone()
        v = S.values((b, hkv, seq_k, d), dtype, "normal", gen)
        path = spec.get("path", "table")
        tma = {"table": None, "pointers": False,
               "descriptors": True if descriptors_supported() else None}[path]
        return {"q": _place(q, spec["layout"], device), "k": _place(k, spec["layout"], device),
                "v": _place(v, spec["layout"], device), "scale": spec["scale"], "causal": causal,
                "tma": tma}
    return make


def _outputs(args):
    return {"out": (tuple(args["q"].shape), args["q"].dtype)}


def _launch(args, outs):
    attention(args["q"], args["k"], args["v"], causal=args["causal"], scale=args["scale"],
              out=outs["out"], tma=args["tma"])


def _oracle(args):
    return {"out": attention_ref(args["q"], args["k"], args["v"], causal=args["causal"],
                                 scale=args["scale"])}


def _tolerance(args, refs, dtype):
    return {"out": attention_tolerance(args["q"], args["k"], args["v"], refs["out"], args["scale"],
                                       args["causal"], dtype, dtype)}


def visible_pairs(seq_q: int, seq_k: int, causal: bool) -> int:
    """(query, key) pairs the mask lets through: the work of one head."""
    if not causal:
        return seq_q * seq_k
    full = max(0, min(seq_q, seq_k))          # rows 0..n-1 see i+1 keys
    return full * (full + 1) // 2 + max(0, seq_q - seq_k) * seq_k


def _cost(args):
    q, k = args["q"], args["k"]
    b, hq, sq, d = q.shape
    pairs = visible_pairs(sq, k.shape[2], args["causal"])
    return Cost(bytes=(2 * q.numel() + 2 * k.numel()) * q.element_size(), flops=4 * b * hq * pairs * d)


EAGER_SCORE_BYTES = 4 << 30


def _baselines(args):
    """SDPA through each of torch's fused backends (the bench takes the best), and eager math."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    q, k, v, causal, scale = args["q"], args["k"], args["v"], args["causal"], args["scale"]
    gqa = q.shape[1] != k.shape[1]

    def sdpa():
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=gqa)

    def with_backend(backend):
        def run():
            with sdpa_kernel(backend):
                return sdpa()
        return run

    def eager():
        kk, vv = expand_kv(k, q.shape[1]), expand_kv(v, q.shape[1])
        s = (q @ kk.transpose(-1, -2)).float() * (default_scale(q.shape[-1]) if scale is None else scale)
        if causal:
            s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device)
                              .triu(1), float("-inf"))
        return torch.softmax(s, dim=-1).to(q.dtype) @ vv

    out = {"sdpa": sdpa,
           "sdpa_flash": with_backend(SDPBackend.FLASH_ATTENTION),
           "sdpa_efficient": with_backend(SDPBackend.EFFICIENT_ATTENTION),
           "sdpa_cudnn": with_backend(SDPBackend.CUDNN_ATTENTION)}
    # eager materializes the fp32 scores (and their softmax): only where they stay small
    if q.shape[0] * q.shape[1] * q.shape[2] * k.shape[2] * 4 <= EAGER_SCORE_BYTES:
        out["torch"] = eager
    return out


# what a launch specializes as multiples of 16: torch's allocations are 16-byte aligned, and with
# head_dim 64 or 128 every stride of a [b, h, s, d] or [b, s, h, d] tensor is a multiple of 16
DIVISIBLE = ("q_ptr", "k_ptr", "v_ptr", "o_ptr", "stride_qb", "stride_qh", "stride_qm",
             "stride_kb", "stride_kh", "stride_kn", "stride_vb", "stride_vh", "stride_vn",
             "stride_ob", "stride_oh", "stride_om")


def _variants(causal: bool):
    def variants(arch) -> list[Variant]:
        configs = arch_configs(arch)
        out = []
        for dtype in DTYPES:
            t = "*" + fmt(dtype).triton_name
            sig = {"q_ptr": t, "k_ptr": t, "v_ptr": t, "o_ptr": t, "qk_scale": "fp32",
                   "stride_qb": "i32", "stride_qh": "i32", "stride_qm": "i32",
                   "stride_kb": "i32", "stride_kh": "i32", "stride_kn": "i32",
                   "stride_vb": "i32", "stride_vh": "i32", "stride_vn": "i32",
                   "stride_ob": "i32", "stride_oh": "i32", "stride_om": "i32",
                   "heads_q": "i32", "group": "i32", "seq_q": "i32", "seq_k": "i32"}
            for head_dim in HEAD_DIMS:
                cfg = configs[head_dim]
                out.append(Variant(attention_fwd_kernel, sig,
                                   {"HEAD_DIM": head_dim, "BLOCK_M": cfg.block_m,
                                    "BLOCK_N": cfg.block_n, "CAUSAL": causal},
                                   cfg.num_warps, cfg.num_stages, dict(cfg.options),
                                   label=f"{dtype} d={head_dim} {'causal' if causal else 'full'}",
                                   divisible_by_16=DIVISIBLE))
        return out
    return variants


def descriptor_variants(arch, causal: bool) -> list[Variant]:
    """The tensor-descriptor (TMA) launches of an arch whose table picks them (sm_90a, sm_100a).

    Kept apart from the case's variants, as when portcheck compile could not declare
    tensordesc<...> arguments (compile/plan.declared_args now can; moving them in would add them
    to the compile baseline); tests/kernels/test_attention_kv.py builds these.
    """
    configs = arch_configs(arch)
    out = []
    for dtype in DTYPES:
        for head_dim in HEAD_DIMS:
            cfg = configs[head_dim]
            if not cfg.tma:
                continue
            q_desc = f"tensordesc<{fmt(dtype).triton_name}[1, 1, {cfg.block_m}, {head_dim}]>"
            kv_desc = f"tensordesc<{fmt(dtype).triton_name}[1, 1, {cfg.block_n}, {head_dim}]>"
            sig = {"q_desc": q_desc, "k_desc": kv_desc, "v_desc": kv_desc, "o_desc": q_desc,
                   "qk_scale": "fp32", "heads_q": "i32", "group": "i32", "seq_k": "i32"}
            out.append(Variant(attention_fwd_tma_kernel, sig,
                               {"HEAD_DIM": head_dim, "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n,
                                "CAUSAL": causal, "WARP_SPEC": cfg.ws}, cfg.num_warps, cfg.num_stages,
                               dict(cfg.options),
                               label=f"{dtype} d={head_dim} {'causal' if causal else 'full'} tma"
                                     + (" ws" if cfg.ws else "")))
    return out


def _bench(causal: bool) -> tuple:
    # bf16, head_dim 128, 32 heads; batch shrinks as the sequence grows (64K tokens x heads)
    return tuple({"dtype": "bf16", "batch": 16384 // seq, "heads_kv": 32, "group": 1,
                  "head_dim": 128, "seq": [seq, seq], "scale": None, "regime": "normal",
                  "layout": "bhsd", "seed": 0} for seq in (4096, 8192, 16384))


for _causal in (False, True):
    register(Case(
        name="attention_causal" if _causal else "attention", family="attention",
        dtypes=tuple(DTYPES), inputs=_inputs(_causal), make=_make(_causal), outputs=_outputs,
        launch=_launch, oracle=_oracle, tolerance=_tolerance, cost=_cost, bench=_bench(_causal),
        variants=_variants(_causal), baselines=_baselines, math=("exp2",),
        description=("causal " if _causal else "") + "attention forward, one pass with an online "
                    "softmax (FlashAttention), multi-head / grouped-query / multi-query"))
