"""planted-bugs-6 (independent round, probe 6): LLM serving / training kernel bugs, each a real Triton
kernel with a correct twin.

Every pair shares its inputs, oracle and tolerance; only the launch differs (a constexpr BUG flag, or
a launcher detail). Cases: p6_bug_<what> (planted bug) and p6_ok_<what> (the correct twin).
Written against portcheck's public API only (README.md / DEVELOPING.md).

Run from this folder:
    PYTHONPATH=$PWD portcheck run --target interpreter --cases probe6 --kernel 'p6_*' --no-time --jobs 1 \
        --shrink-time 20 --out run1
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from hypothesis import strategies as st
from triton.language.extra import libdevice

import portcheck
from portcheck import strategies as S
from portcheck import tolerance as T
from portcheck.dtypes import fmt
from portcheck.facts.numerics import DIV_ULP, EXP_ULP, RSQRT_ULP, ULP_BOUNDS

BUDGET = 4096            # elements per tensor (the run's max_elements caps it too)
U32 = fmt("fp32").unit_roundoff
SUB32 = fmt("fp32").subnormal_step


def _ulp(name):
    """The largest documented / measured ULP bound of a math function (one ULP <= 2u)."""
    b = ULP_BOUNDS[name]
    return max(x for x in (b.cuda, b.hip, b.h200) if x is not None)


EXP2_U = _ulp("exp2")
LOG_U = _ulp("log")
TANH_U = _ulp("tanh")
SQRT_U = _ulp("sqrt")


def u(d):
    return fmt(d).unit_roundoff


def sub(d):
    return fmt(d).subnormal_step


def _budget(max_elements):
    return max(1, min(max_elements, BUDGET))


def _np2(n, lo=16):
    return max(lo, triton.next_power_of_2(n))


def pair(what, bug_launch, ok_launch, bug_class, **common):
    """Register p6_bug_<what> and p6_ok_<what>: same inputs, oracle and tolerance."""
    for kind, launch in (("bug", bug_launch), ("ok", ok_launch)):
        portcheck.register(portcheck.Case(
            name=f"p6_{kind}_{what}", family="probe6", launch=launch,
            description=(f"planted bug: {bug_class}" if kind == "bug" else f"correct twin of p6_bug_{what}"),
            **common))


def _need_contiguous(**tensors):
    for name, t in tensors.items():
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous")


def _need_unit_col_stride(**tensors):
    for name, t in tensors.items():
        if t.stride(-1) != 1:
            raise ValueError(f"{name} needs a contiguous last dimension")


def _plain(args, *skip):
    """Refuse any tensor argument (but those named in skip) whose last dimension is strided."""
    _need_unit_col_stride(**{k: v for k, v in args.items() if torch.is_tensor(v) and k not in skip})


def rows_spec(dtype, max_elements, tile=128, max_rows=16, allowed=S.REGIMES[:-1]):
    return S.row_inputs(dtype, _budget(max_elements), tile=tile, max_rows=max_rows, allowed=allowed)


def _with(base, **extra):
    """A row_inputs spec with extra drawn keys."""
    return base.flatmap(lambda s: st.fixed_dictionaries(extra).map(lambda t: {**s, **t}))


def _vec(spec, n, device, salt, regime="normal", dtype=None, scale=1.0):
    g = S.generator(spec["seed"] + salt)
    return S.values((n,), dtype or spec["dtype"], regime, g, scale=scale).to(device)


def _out_like(name, key="x", dtype=None):
    return lambda a: {name: (tuple(a[key].shape), dtype or a[key].dtype)}


# =================================================================================================
# 1-6. varlen causal prefill attention (packed sequences, cu_seqlens), one program per
#      (sequence, query head), with the features serving stacks add: GQA, sliding window, ALiBi,
#      logit softcap, learned attention sinks. BUG picks one planted bug:
#        1 GQA: kv head = q_head % n_kv_heads (should be q_head // group_size)
#        2 sliding window keeps i - j <= W (W + 1 keys: one too many)
#        3 ALiBi slope exponent uses h, not h + 1 (every head gets the next head's slope)
#        4 softcap applied after the -inf mask: masked keys become -cap, not -inf
#        5 causal mask compares the key's local index with the query's packed (global) index
#        6 attention sink added to the denominator as exp(sink), not exp(sink - m)
# =================================================================================================
@triton.jit
def attn_kernel(q_ptr, k_ptr, v_ptr, o_ptr, cu_ptr, sink_ptr, sqt, sqh, skt, skh, sot, soh,
                sm_scale, window, cap, alibi_step, HQ, HKV,
                D: tl.constexpr, BM: tl.constexpr, WINDOW: tl.constexpr, ALIBI: tl.constexpr,
                SOFTCAP: tl.constexpr, SINK: tl.constexpr, BUG: tl.constexpr):
    b = tl.program_id(0)
    hq = tl.program_id(1)
    start = tl.load(cu_ptr + b)
    L = tl.load(cu_ptr + b + 1) - start
    if BUG == 1:
        hk = hq % HKV
    else:
        hk = hq // (HQ // HKV)
    i = tl.arange(0, BM)
    j = tl.arange(0, BM)
    d = tl.arange(0, D)
    qrow = (start + i).to(tl.int64)
    krow = (start + j).to(tl.int64)
    q = tl.load(q_ptr + qrow[:, None] * sqt + hq * sqh + d[None, :], mask=(i < L)[:, None], other=0.0)
    k = tl.load(k_ptr + krow[:, None] * skt + hk * skh + d[None, :], mask=(j < L)[:, None], other=0.0)
    v = tl.load(v_ptr + krow[:, None] * skt + hk * skh + d[None, :], mask=(j < L)[:, None], other=0.0)
    s = tl.dot(q, tl.trans(k)) * sm_scale
    if ALIBI:
        if BUG == 3:
            slope = tl.exp2(-alibi_step * hq)
        else:
            slope = tl.exp2(-alibi_step * (hq + 1))
        s = s + slope * (j[None, :] - i[:, None]).to(tl.float32)
    if SOFTCAP:
        if BUG != 4:
            s = cap * libdevice.tanh(s / cap)
    if BUG == 5:
        qpos = start + i
    else:
        qpos = i
    vis = (j[None, :] <= qpos[:, None]) & (j < L)[None, :]
    if WINDOW:
        if BUG == 2:
            vis = vis & (j[None, :] >= i[:, None] - window)
        else:
            vis = vis & (j[None, :] > i[:, None] - window)
    s = tl.where(vis, s, float("-inf"))
    if SOFTCAP:
        if BUG == 4:
            s = cap * libdevice.tanh(s / cap)
    m = tl.max(s, axis=1)
    p = tl.exp(s - m[:, None])
    l = tl.sum(p, axis=1)
    if SINK:
        sk = tl.load(sink_ptr + hq)
        if BUG == 6:
            l = l + tl.exp(sk)
        else:
            l = l + tl.exp(sk - m)
    acc = tl.dot(p.to(v.dtype), v)
    o = acc / l[:, None]
    tl.store(o_ptr + qrow[:, None] * sot + hq * soh + d[None, :], o.to(o_ptr.dtype.element_ty),
             mask=(i < L)[:, None])


HEADS_GQA = [(1, 1), (2, 1), (4, 1), (4, 2), (6, 2), (6, 3), (8, 2), (8, 4), (4, 4)]
HEADS_SMALL = [(1, 1), (2, 1), (4, 2), (4, 4)]


def _attn_inputs(heads=HEADS_SMALL, window=False, alibi=False, softcap=False, sink=False, max_len=16):
    def build(dtype, max_elements):
        @st.composite
        def draw(drw):
            hq, hkv = drw(st.sampled_from(heads))
            D = drw(st.sampled_from([16, 32]))
            max_tok = max(1, _budget(max_elements) // (hq * D))
            nseq = drw(st.integers(1, min(3, max_tok)))
            per = max(1, min(max_len, max_tok // nseq))
            lens = drw(st.lists(st.integers(1, per), min_size=nseq, max_size=nseq))
            spec = {"dtype": dtype, "hq": hq, "hkv": hkv, "d": D, "lens": lens, "seed": drw(S.seeds()),
                    "qscale": drw(st.sampled_from([1.0, 4.0, 16.0] if softcap else [1.0, 4.0])),
                    "window": drw(st.integers(1, 8)) if window else 0,
                    "cap": drw(st.sampled_from([10.0, 30.0, 50.0])) if softcap else 0.0,
                    "alibi": bool(alibi), "sink": bool(sink)}
            return spec
        return draw()
    return build


def _attn_make(spec, device):
    g = S.generator(spec["seed"])
    Tt, hq, hkv, D = sum(spec["lens"]), spec["hq"], spec["hkv"], spec["d"]
    dt = spec["dtype"]
    cu = torch.tensor([0] + list(torch.tensor(spec["lens"]).cumsum(0).tolist()), dtype=torch.int32)
    a = {"q": S.values((Tt, hq, D), dt, "normal", g, scale=spec["qscale"]).to(device),
         "k": S.values((Tt, hkv, D), dt, "normal", g).to(device),
         "v": S.values((Tt, hkv, D), dt, "normal", g).to(device),
         "cu": cu.to(device), "window": spec["window"], "cap": spec["cap"],
         "alibi_step": (8.0 / hq) if spec["alibi"] else 0.0,
         "max_len": max(spec["lens"])}
    if spec["sink"]:
        a["sinks"] = S.values((hq,), "fp32", "normal", g).to(device)
    return a


def _attn_launch(bug):
    def launch(args, outs):
        _plain(args)
        q, k, v, cu, o = args["q"], args["k"], args["v"], args["cu"], outs["o"]
        _need_contiguous(q=q, k=k, v=v)
        B = cu.numel() - 1
        hq, hkv, D = q.shape[1], k.shape[1], q.shape[2]
        sinks = args.get("sinks")
        attn_kernel[(B, hq)](q, k, v, o, cu, sinks if sinks is not None else q,
                             q.stride(0), q.stride(1), k.stride(0), k.stride(1), o.stride(0), o.stride(1),
                             1.0 / math.sqrt(D), args["window"], args["cap"], args["alibi_step"], hq, hkv,
                             D=D, BM=_np2(args["max_len"]), WINDOW=args["window"] > 0,
                             ALIBI=args["alibi_step"] > 0, SOFTCAP=args["cap"] > 0, SINK=sinks is not None,
                             BUG=bug)
    return launch


def _attn_ref(a, u_in=0.0):
    """float64 output and its error bound (see _ATTN_FORMULA)."""
    q, k, v, cu = a["q"], a["k"], a["v"], a["cu"].tolist()
    hq, hkv, D = q.shape[1], k.shape[1], q.shape[2]
    grp = hq // hkv
    scale = 1.0 / math.sqrt(D)
    out = torch.zeros_like(q)
    bound = torch.zeros_like(q)
    for b in range(len(cu) - 1):
        s0, s1 = int(cu[b]), int(cu[b + 1])
        L = s1 - s0
        qb = q[s0:s1].transpose(0, 1)                                     # [hq, L, D]
        kb = k[s0:s1].transpose(0, 1).repeat_interleave(grp, 0)
        vb = v[s0:s1].transpose(0, 1).repeat_interleave(grp, 0)
        z = qb @ kb.transpose(1, 2) * scale
        absdot = qb.abs() @ kb.abs().transpose(1, 2) * scale
        i = torch.arange(L)[:, None]
        j = torch.arange(L)[None, :]
        bias = torch.zeros_like(z)
        if a["alibi_step"]:
            slopes = torch.tensor([2.0 ** (-a["alibi_step"] * (h + 1)) for h in range(hq)], dtype=z.dtype)
            bias = slopes[:, None, None] * (j - i).to(z.dtype)
        z = z + bias
        err = U32 * ((D + 2) * absdot + 2 * z.abs() + (2 * EXP2_U + 12) * bias.abs())
        if a["cap"]:
            s = a["cap"] * torch.tanh(z / a["cap"])
            err = err + U32 * (2 * TANH_U + 3) * s.abs()
        else:
            s = z
        vis = j <= i
        if a["window"]:
            vis = vis & (j > i - a["window"])
        vis = vis.expand(hq, L, L)
        s = s.masked_fill(~vis, float("-inf"))
        n = vis.sum(-1).to(z.dtype)
        if "sinks" in a:
            sk = a["sinks"].to(z.dtype)[:, None, None].expand(hq, L, 1)
            full = torch.cat([s, sk], -1)
            pfull = torch.softmax(full, -1)
            p = pfull[..., :-1]
            m = full.amax(-1, keepdim=True)
            spread = ((full - m).abs() * pfull).sum(-1)
            n = n + 1
        else:
            p = torch.softmax(s, -1)
            m = s.amax(-1, keepdim=True)
            spread = ((s - m).masked_fill(~vis, 0).abs() * p).sum(-1)
        emax = err.masked_fill(~vis, 0).amax(-1)
        delta = 2 * emax + U32 * spread + (2 * EXP_ULP + 2) * U32
        E = 2 * delta + (2 * n + 2 * DIV_ULP + 4) * U32 + u_in
        out[s0:s1] = (p @ vb).transpose(0, 1)
        bound[s0:s1] = (2 * E[..., None] * (p @ vb.abs())).transpose(0, 1)
    return out, bound


_ATTN_FORMULA = ("rtol = u(out); atol = 2 (2 Delta + (2n + 2 DIV_ULP + 4) u + u(in)) sum_j p_j |v_j| + sub(out), "
                 "Delta = 2 max_j e_j + u sum_j p_j |s_j - m| + (2 EXP_ULP + 2) u, "
                 "e_j = u ((D+2) scale sum_d|q k_j| + 2|s_j| + (2 EXP2_ULP + 12)|alibi_j| [+ (2 TANH_ULP + 3)|s_j| with "
                 "softcap]), u = u(fp32), n keys visible (+1 for a sink)")


def _attn_tol(a, refs, d):
    _, bound = _attn_ref(a, u(d))
    return {"o": T.Tolerance(u(d), bound + sub(d), _ATTN_FORMULA)}


def _attn_pair(what, bug, bug_class, **inp):
    pair(what, _attn_launch(bug), _attn_launch(0), bug_class,
         dtypes=("fp16",), inputs=_attn_inputs(**inp), make=_attn_make,
         outputs=_out_like("o", key="q"), oracle=lambda a: {"o": _attn_ref(a)[0]}, tolerance=_attn_tol,
         math=("exp", "tanh", "exp2"))


_attn_pair("gqa_kv_head_mod", 1, "GQA: kv head chosen as q_head % n_kv_heads instead of q_head // group",
           heads=HEADS_GQA)
_attn_pair("sliding_window_off_by_one", 2, "sliding window keeps W + 1 keys (j >= i - W, not j > i - W)",
           window=True)
_attn_pair("alibi_slope_head_off_by_one", 3, "ALiBi slope 2^(-8h/H) instead of 2^(-8(h+1)/H)",
           alibi=True, heads=[(1, 1), (2, 2), (4, 4), (8, 8), (4, 2)])
_attn_pair("softcap_after_mask", 4, "logit softcap applied after the -inf mask: masked keys get -cap",
           softcap=True)
_attn_pair("varlen_causal_global_qpos", 5, "varlen causal mask compares local key index with packed query index")
_attn_pair("attn_sink_not_rescaled", 6, "attention sink enters the denominator as exp(sink), not exp(sink - m)",
           sink=True)


# =================================================================================================
# 7. RoPE in place on q (NeoX halves) with partial rotary (rotary_dim R < head_dim D, as GPT-NeoX /
#    Phi / ChatGLM): the second half of the rotated pair is addressed at D // 2, not R // 2.
#    cos / sin come from a vLLM-style cos_sin_cache [max_pos, R] (cos | sin).
# =================================================================================================
@triton.jit
def rope_inplace_kernel(x_ptr, pos_ptr, cs_ptr, sxt, sxh, scs, H,
                        D: tl.constexpr, R: tl.constexpr, BH: tl.constexpr, BUG: tl.constexpr):
    t = tl.program_id(0)
    HALF: tl.constexpr = R // 2
    if BUG:
        X2: tl.constexpr = D // 2
    else:
        X2: tl.constexpr = R // 2
    pos = tl.load(pos_ptr + t).to(tl.int64)
    i = tl.arange(0, HALF)
    h = tl.arange(0, BH)
    hm = (h < H)[:, None]
    c = tl.load(cs_ptr + pos * scs + i)[None, :]
    sn = tl.load(cs_ptr + pos * scs + HALF + i)[None, :]
    base = x_ptr + t.to(tl.int64) * sxt + h[:, None] * sxh
    x1 = tl.load(base + i[None, :], mask=hm, other=0.0).to(tl.float32)
    x2 = tl.load(base + X2 + i[None, :], mask=hm, other=0.0).to(tl.float32)
    tl.store(base + i[None, :], (x1 * c - x2 * sn).to(x_ptr.dtype.element_ty), mask=hm)
    tl.store(base + X2 + i[None, :], (x2 * c + x1 * sn).to(x_ptr.dtype.element_ty), mask=hm)


MAX_POS = 2048


def _rope_inputs(dtype, max_elements):
    @st.composite
    def draw(drw):
        D = drw(st.sampled_from([16, 32, 64, 128]))
        R = drw(st.sampled_from([D, D // 2, D // 4]))
        H = drw(st.integers(1, 4))
        Tn = drw(st.integers(1, max(1, min(16, _budget(max_elements) // (H * D)))))
        return {"dtype": dtype, "d": D, "rot": R, "heads": H, "tokens": Tn,
                "base": drw(st.sampled_from([10000.0, 1000000.0])), "seed": drw(S.seeds()),
                "regime": drw(S.regimes(("normal", "large", "zeros")))}
    return draw()


def _rope_make(spec, device):
    g = S.generator(spec["seed"])
    D, R = spec["d"], spec["rot"]
    x = S.values((spec["tokens"], spec["heads"], D), spec["dtype"], spec["regime"], g)
    pos = S.integers(0, MAX_POS, (spec["tokens"],), g)
    inv = spec["base"] ** (-torch.arange(0, R, 2, dtype=torch.float64) / R)
    ang = torch.arange(MAX_POS, dtype=torch.float64)[:, None] * inv[None, :]
    cs = torch.cat([ang.cos(), ang.sin()], -1).to(torch.float32)          # the cache, fp32 as vLLM keeps it
    return {"q": x.to(device), "positions": pos.to(device), "cos_sin": cs.to(device)}


def _rope_launch(bug):
    def launch(args, outs):
        _plain(args)
        q, pos, cs = args["q"], args["positions"], args["cos_sin"]
        _need_contiguous(q=q, positions=pos, cos_sin=cs)
        Tn, H, D = q.shape
        R = cs.shape[1]
        if R > D or R % 2:
            raise ValueError(f"RoPE: rotary_dim {R} must be even and at most head_dim {D}")
        rope_inplace_kernel[(Tn,)](q, pos, cs, q.stride(0), q.stride(1), cs.stride(0), H,
                                   D=D, R=R, BH=triton.next_power_of_2(H), BUG=bug)
    return launch


def _rope_oracle(a):
    q, cs = a["q"].clone(), a["cos_sin"]
    R = cs.shape[1]
    c = cs[a["positions"].long(), : R // 2][:, None, :]
    s = cs[a["positions"].long(), R // 2:][:, None, :]
    x1, x2 = q[..., : R // 2].clone(), q[..., R // 2: R].clone()
    q[..., : R // 2] = x1 * c - x2 * s
    q[..., R // 2: R] = x2 * c + x1 * s
    return {"q": q}


def _rope_tol(a, refs, d):
    q, cs = a["q"], a["cos_sin"]
    R = cs.shape[1]
    c = cs[a["positions"].long(), : R // 2][:, None, :].abs()
    s = cs[a["positions"].long(), R // 2:][:, None, :].abs()
    x1, x2 = q[..., : R // 2].abs(), q[..., R // 2: R].abs()
    terms = torch.zeros_like(q)
    terms[..., : R // 2] = x1 * c + x2 * s
    terms[..., R // 2: R] = x2 * c + x1 * s
    return {"q": T.elementwise(d, "fp32", ops=3, terms=terms)}


pair("rope_partial_rotary_half", _rope_launch(True), _rope_launch(False),
     "partial-rotary RoPE pairs dim i with i + head_dim/2 instead of i + rotary_dim/2",
     dtypes=("bf16",), inputs=_rope_inputs, make=_rope_make, outputs=lambda a: {},
     in_place=("q",), oracle=_rope_oracle, tolerance=_rope_tol)


# =================================================================================================
# 8-9. W4A16 GEMM (AWQ/GPTQ-like): y = x @ dequant(W)^T, W int4 packed two per byte along K
#      (low nibble = even k), signed two's complement; per-(n, group of G along K) fp16 scales.
#        BUG 1: the high nibble is taken as (byte >> 4) on the unsigned byte: not sign-extended.
#        BUG 2: one scale per BK tile (k0 // G): wrong when a tile straddles groups (G < BK).
# =================================================================================================
@triton.jit
def w4a16_kernel(x_ptr, w_ptr, s_ptr, y_ptr, M, N, K, G, sxm, swn, ssn, sym,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, BUG: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        km = rk < K
        x = tl.load(x_ptr + rm[:, None] * sxm + rk[None, :], mask=(rm < M)[:, None] & km[None, :], other=0.0)
        byte = tl.load(w_ptr + rn[:, None] * swn + (rk // 2)[None, :], mask=(rn < N)[:, None] & km[None, :],
                       other=0).to(tl.int32)
        lo = (byte << 28) >> 28
        if BUG == 1:
            hi = byte >> 4
        else:
            hi = (byte << 24) >> 28
        qv = tl.where((rk % 2 == 0)[None, :], lo, hi)
        if BUG == 2:
            sc = tl.load(s_ptr + rn[:, None] * ssn + k0 // G, mask=(rn < N)[:, None], other=0.0)
        else:
            sc = tl.load(s_ptr + rn[:, None] * ssn + (rk // G)[None, :], mask=(rn < N)[:, None] & km[None, :],
                         other=0.0)
        w = (qv.to(tl.float32) * sc.to(tl.float32)).to(x.dtype)
        acc += tl.dot(x, tl.trans(w))
    tl.store(y_ptr + rm[:, None] * sym + rn[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=(rm < M)[:, None] & (rn < N)[None, :])


def _w4_inputs(dtype, max_elements):
    @st.composite
    def draw(drw):
        G = drw(st.sampled_from([32, 64, 128]))
        ng = drw(st.integers(1, 3))
        K = G * ng
        lim = max(1, _budget(max_elements) // K)
        return {"dtype": dtype, "M": drw(st.integers(1, min(16, lim))), "N": drw(st.integers(1, min(48, 2 * lim))),
                "K": K, "G": G, "seed": drw(S.seeds())}
    return draw()


def _w4_make(spec, device):
    g = S.generator(spec["seed"])
    M, N, K, G = spec["M"], spec["N"], spec["K"], spec["G"]
    x = S.values((M, K), spec["dtype"], "normal", g)
    codes = S.integers(-8, 8, (N, K), g)
    nib = codes & 0xF
    packed = (nib[:, 0::2] | (nib[:, 1::2] << 4)).to(torch.uint8)
    scales = (S.normal((N, K // G), g).abs() * 0.05 + 0.01).to(torch.float16)
    return {"x": x.to(device), "w": packed.to(device), "scales": scales.to(device), "G": G}


def _w4_launch(bug):
    def launch(args, outs):
        _plain(args)
        x, w, s, y = args["x"], args["w"], args["scales"], outs["y"]
        _need_contiguous(x=x, w=w, scales=s)
        M, K = x.shape
        N = w.shape[0]
        G = args["G"]
        if K < G or K % G or w.shape[1] * 2 != K or s.shape != (N, K // G):
            raise ValueError(f"W4A16: K = {K} must be a positive multiple of the group size {G}, "
                             f"with w [N, K/2] and scales [N, K/G]")
        w4a16_kernel[(triton.cdiv(M, 16), triton.cdiv(N, 32))](
            x, w, s, y, M, N, K, args["G"], x.stride(0), w.stride(0), s.stride(0), y.stride(0),
            BM=16, BN=32, BK=64, BUG=bug)
    return launch


def _w4_dequant(a):
    w = a["w"].to(torch.int64)
    lo, hi = w & 0xF, w >> 4
    codes = torch.stack([lo, hi], -1).reshape(w.shape[0], -1)
    codes = torch.where(codes >= 8, codes - 16, codes).to(torch.float64)
    return codes * a["scales"].to(torch.float64).repeat_interleave(a["G"], 1)


def _w4_tol(a, refs, d):
    K = a["x"].shape[1]
    prod = a["x"].abs() @ _w4_dequant(a).abs().t()
    return {"y": T.Tolerance(u(d), (2 * K * U32 + 2 * u(d)) * prod + sub(d),
                             "rtol = u(out); atol = (2K u(fp32) + 2 u(fp16)) (|x| @ |W_deq|^T) + sub(out) "
                             "(fp32 sums of K terms; each dequantized weight rounded to fp16 once)")}


_W4 = dict(dtypes=("fp16",), inputs=_w4_inputs, make=_w4_make,
           outputs=lambda a: {"y": ((a["x"].shape[0], a["w"].shape[0]), torch.float16)},
           oracle=lambda a: {"y": a["x"] @ _w4_dequant(a).t()}, tolerance=_w4_tol, reduction="K")
pair("int4_high_nibble_no_sign_extend", _w4_launch(1), _w4_launch(0),
     "int4 unpack: high nibble not sign-extended (byte >> 4 on an unsigned byte)", **_W4)
pair("w4_group_scale_per_tile", _w4_launch(2), _w4_launch(0),
     "group-quant scale indexed once per BK tile (k0 // G): wrong when G < BK", **_W4)


# =================================================================================================
# 10. block-scaled fp8 GEMM (DeepSeek-V3 style): A [M, K] e4m3 with per-(row, K-block) scales,
#     B [N, K] e4m3 with per-(N-block, K-block) scales, quant block QB. The B scale's N-block is
#     taken as the tile index pid_n (right only while BN == QB).
# =================================================================================================
@triton.jit
def fp8_block_mm_kernel(a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, M, N, K, sam, sbn, ssam, ssbn, scm,
                        QB: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BUG: tl.constexpr):
    pid_n = tl.program_id(1)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, QB):
        rk = k0 + tl.arange(0, QB)
        a = tl.load(a_ptr + rm[:, None] * sam + rk[None, :], mask=(rm < M)[:, None] & (rk < K)[None, :], other=0.0)
        b = tl.load(b_ptr + rn[:, None] * sbn + rk[None, :], mask=(rn < N)[:, None] & (rk < K)[None, :], other=0.0)
        kb = k0 // QB
        sa = tl.load(sa_ptr + rm * ssam + kb, mask=rm < M, other=0.0)
        if BUG:
            sb = tl.load(sb_ptr + pid_n * ssbn + kb + 0 * rn)
        else:
            sb = tl.load(sb_ptr + (rn // QB) * ssbn + kb, mask=rn < N, other=0.0)
        acc += tl.dot(a, tl.trans(b)) * sa[:, None] * sb[None, :]
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm < M)[:, None] & (rn < N)[None, :])


def _fp8mm_inputs(dtype, max_elements):
    @st.composite
    def draw(drw):
        QB = drw(st.sampled_from([32, 64]))
        K = QB * drw(st.integers(1, 2))
        return {"dtype": dtype, "QB": QB, "K": K, "M": drw(st.integers(1, 16)),
                "N": drw(st.integers(1, min(80, _budget(max_elements) * 2 // K))), "seed": drw(S.seeds())}
    return draw()


def _fp8mm_make(spec, device):
    g = S.generator(spec["seed"])
    M, N, K, QB = spec["M"], spec["N"], spec["K"], spec["QB"]
    a = (S.normal((M, K), g) * 8).clamp(-448, 448).to(torch.float8_e4m3fn)
    b = (S.normal((N, K), g) * 8).clamp(-448, 448).to(torch.float8_e4m3fn)
    sa = (S.normal((M, K // QB), g).abs() * 0.01 + 1e-3).to(torch.float32)
    sb = (S.normal((triton.cdiv(N, QB), K // QB), g).abs() * 0.01 + 1e-3).to(torch.float32)
    return {"a": a.to(device), "b": b.to(device), "a_scale": sa.to(device), "b_scale": sb.to(device), "QB": QB}


def _fp8mm_launch(bug):
    def launch(args, outs):
        _plain(args)
        a, b, sa, sb, c = args["a"], args["b"], args["a_scale"], args["b_scale"], outs["c"]
        _need_contiguous(a=a, b=b, a_scale=sa, b_scale=sb)
        M, K = a.shape
        N = b.shape[0]
        QB = args["QB"]
        if K < QB or K % QB or sa.shape != (M, K // QB) or sb.shape != (triton.cdiv(N, QB), K // QB):
            raise ValueError(f"block-scaled fp8 GEMM: K = {K} must be a positive multiple of the block {QB}, "
                             f"with scales per block")
        fp8_block_mm_kernel[(triton.cdiv(M, 16), triton.cdiv(N, 32))](
            a, b, sa, sb, c, M, N, K, a.stride(0), b.stride(0), sa.stride(0), sb.stride(0), c.stride(0),
            QB=args["QB"], BM=16, BN=32, BUG=bug)
    return launch


def _fp8mm_deq(a):
    QB = a["QB"]
    N = a["b"].shape[0]
    A = a["a"].to(torch.float64) * a["a_scale"].to(torch.float64).repeat_interleave(QB, 1)
    sb = a["b_scale"].to(torch.float64).repeat_interleave(QB, 0)[:N].repeat_interleave(QB, 1)
    return A, a["b"].to(torch.float64) * sb


def _fp8mm_tol(a, refs, d):
    A, B = _fp8mm_deq(a)
    K = A.shape[1]
    nk = K // a["QB"]
    return {"c": T.Tolerance(u("bf16"), (2 * K + 6 * nk) * U32 * (A.abs() @ B.abs().t()) + sub("bf16"),
                             "rtol = u(bf16); atol = (2K + 6 K/QB) u(fp32) (|A_deq| @ |B_deq|^T) + sub(bf16) "
                             "(exact e4m3 products, fp32 sums per block, two scale products and one add per block)")}


pair("fp8_block_scale_tile_index", _fp8mm_launch(True), _fp8mm_launch(False),
     "block-scaled fp8 GEMM: B scale N-block taken as the tile index pid_n (BN != QB)",
     dtypes=("fp8e4nv",), inputs=_fp8mm_inputs, make=_fp8mm_make,
     outputs=lambda a: {"c": ((a["a"].shape[0], a["b"].shape[0]), torch.bfloat16)},
     oracle=lambda a: (lambda AB: {"c": AB[0] @ AB[1].t()})(_fp8mm_deq(a)), tolerance=_fp8mm_tol, reduction="K")


# =================================================================================================
# 11-12. cross-entropy over a vocabulary row (logits bf16, loss fp32), ignore_index = -100.
#        11 (mean): the mean divides by all rows, ignored ones included.
#        12 (label smoothing, per-row losses): the smoothing term sums the row loaded with
#           other=-inf (for the max), so padded lanes add -inf when V is not a power of two.
# =================================================================================================
IGNORE = -100


@triton.jit
def ce_row_kernel(x_ptr, lab_ptr, loss_ptr, sx, V, confidence, eps_over_v,
                  IGN: tl.constexpr, BLOCK: tl.constexpr, SMOOTH: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < V
    x = tl.load(x_ptr + row.to(tl.int64) * sx + offs, mask=m, other=float("-inf")).to(tl.float32)
    lab = tl.load(lab_ptr + row)
    mx = tl.max(x, axis=0)
    lse = mx + tl.log(tl.sum(tl.exp(x - mx), axis=0))
    xy = tl.sum(tl.where(offs == lab, x, 0.0), axis=0)
    if SMOOTH:
        if BUG == 2:
            tot = tl.sum(x, axis=0)
        else:
            tot = tl.sum(tl.where(m, x, 0.0), axis=0)
        loss = lse - confidence * xy - eps_over_v * tot
    else:
        loss = lse - xy
    loss = tl.where(lab == IGN, 0.0, loss)
    tl.store(loss_ptr + row, loss)


@triton.jit
def ce_mean_kernel(loss_ptr, lab_ptr, out_ptr, R, IGN: tl.constexpr, BLOCK_R: tl.constexpr, BUG: tl.constexpr):
    offs = tl.arange(0, BLOCK_R)
    m = offs < R
    l = tl.load(loss_ptr + offs, mask=m, other=0.0)
    lab = tl.load(lab_ptr + offs, mask=m, other=IGN)
    total = tl.sum(l, axis=0)
    if BUG == 1:
        cnt = R + 0.0
    else:
        cnt = tl.sum((lab != IGN).to(tl.float32), axis=0)
    tl.store(out_ptr, total / cnt)


def _ce_inputs(smooth):
    def build(dtype, max_elements):
        extra = {"ignore_frac": st.sampled_from([0.0, 0.25, 0.5])}
        if smooth:
            extra["smoothing"] = st.sampled_from([0.05, 0.1, 0.2])
        return _with(rows_spec(dtype, max_elements, max_rows=32), **extra)
    return build


def _ce_make(spec, device):
    g = S.generator(spec["seed"] + 3)
    R, V = spec["rows"], spec["cols"]
    lab = S.integers(0, V, (R,), g)
    drop = S.integers(0, 1000, (R,), g) < int(1000 * spec["ignore_frac"])
    lab = torch.where(drop, torch.full_like(lab, IGNORE), lab)
    return {"x": S.row_tensor(spec, device), "labels": lab.to(device), "smoothing": spec.get("smoothing", 0.0)}


def _ce_launch(bug, mean):
    def launch(args, outs):
        _plain(args)
        x, lab = args["x"], args["labels"]
        _need_unit_col_stride(x=x)
        R, V = x.shape
        eps = args["smoothing"]
        per_row = torch.empty((R,), dtype=torch.float32, device=x.device) if mean else outs["loss"]
        ce_row_kernel[(R,)](x, lab, per_row, x.stride(0), V, 1.0 - eps, eps / V,
                            IGN=IGNORE, BLOCK=_np2(V), SMOOTH=eps > 0, BUG=bug)
        if mean:
            ce_mean_kernel[(1,)](per_row, lab, outs["loss"], R, IGN=IGNORE, BLOCK_R=_np2(R), BUG=bug)
    return launch


def _ce_rows(a):
    """float64 per-row losses and their error bounds."""
    x, lab, eps = a["x"], a["labels"].long(), a["smoothing"]
    R, V = x.shape
    ign = lab == IGNORE
    safe = torch.where(ign, torch.zeros_like(lab), lab)
    m = x.amax(-1)
    lse = torch.logsumexp(x, -1)
    xy = x.gather(1, safe[:, None]).squeeze(1)
    loss = lse - (1 - eps) * xy - eps / V * x.sum(-1)
    loss = torch.where(ign, torch.zeros_like(loss), loss)
    p = torch.softmax(x, -1)
    spread = ((x - m[:, None]).abs() * p).sum(-1)
    err = 2 * U32 * (V + 2 * EXP_ULP + 4 + spread + 2 * LOG_U * (lse - m).abs() + 2 * lse.abs() + 3 * xy.abs()
                     + (V + 3) * eps / V * x.abs().sum(-1) + 2 * loss.abs())
    err = torch.where(ign, torch.zeros_like(err), err)
    return loss, err


_CE_ROW_FORMULA = ("atol_r = 2 u (V + 2 EXP_ULP + 4 + sum_j p_j|x_j - m| + 2 LOG_ULP |lse - m| + 2|lse| + 3|x_y| "
                   "+ (V + 3) eps/V sum_j |x_j| + 2|loss_r|), u = u(fp32); 0 for ignored rows")


def _ce_mean_oracle(a):
    loss, _ = _ce_rows(a)
    cnt = (a["labels"] != IGNORE).sum().to(loss.dtype)
    return {"loss": (loss.sum() / cnt).reshape(1)}


def _ce_mean_tol(a, refs, d):
    loss, err = _ce_rows(a)
    R = loss.numel()
    cnt = max(int((a["labels"] != IGNORE).sum()), 1)
    atol = (err.sum() + (R + 2) * U32 * loss.abs().sum()) / cnt + SUB32
    return {"loss": T.Tolerance(U32, atol.reshape(1),
                                "rtol = u; atol = (sum_r atol_r + (R + 2) u sum_r |loss_r|) / n_valid + sub(fp32), "
                                + _CE_ROW_FORMULA)}


pair("ce_ignore_index_in_mean", _ce_launch(1, True), _ce_launch(0, True),
     "cross-entropy mean divides by all rows, ignore_index rows included",
     dtypes=("bf16",), inputs=_ce_inputs(False), make=_ce_make,
     outputs=lambda a: {"loss": ((1,), torch.float32)}, oracle=_ce_mean_oracle, tolerance=_ce_mean_tol,
     math=("exp", "log"))


def _ce_rows_tol(a, refs, d):
    _, err = _ce_rows(a)
    return {"loss": T.Tolerance(U32, err + SUB32, "rtol = u; " + _CE_ROW_FORMULA + " + sub(fp32)")}


pair("ce_smoothing_sum_padded_lanes", _ce_launch(2, False), _ce_launch(0, False),
     "label-smoothing term sums the -inf padded lanes of the max-oriented load",
     dtypes=("bf16",), inputs=_ce_inputs(True), make=_ce_make,
     outputs=lambda a: {"loss": ((a["x"].shape[0],), torch.float32)},
     oracle=lambda a: {"loss": _ce_rows(a)[0]}, tolerance=_ce_rows_tol, math=("exp", "log"))


# =================================================================================================
# 13. log-softmax computed as log(softmax(x)): exp underflows to 0 for x - max below about -104
#     (fp32), so log gives -inf where x - m - log(sum) is finite.
# =================================================================================================
@triton.jit
def log_softmax_kernel(x_ptr, y_ptr, sx, sy, cols, BLOCK: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    x = tl.load(x_ptr + row * sx + offs, mask=m, other=float("-inf")).to(tl.float32)
    mx = tl.max(x, axis=0)
    e = tl.exp(x - mx)
    s = tl.sum(e, axis=0)
    if BUG:
        y = tl.log(e / s)
    else:
        y = (x - mx) - tl.log(s)
    tl.store(y_ptr + row * sy + offs, y.to(y_ptr.dtype.element_ty), mask=m)


def _lsm_launch(bug):
    def launch(args, outs):
        _plain(args)
        x, y = args["x"], outs["y"]
        _need_unit_col_stride(x=x)
        log_softmax_kernel[(x.shape[0],)](x, y, x.stride(0), y.stride(0), x.shape[1], BLOCK=_np2(x.shape[1]), BUG=bug)
    return launch


def _lsm_tol(a, refs, d):
    x = a["x"]
    n = x.shape[-1]
    m = x.amax(-1, keepdim=True)
    ls = torch.logsumexp(x, -1, keepdim=True)
    p = torch.softmax(x, -1)
    spread = ((x - m).abs() * p).sum(-1, keepdim=True)
    y = x - ls
    atol = 2 * U32 * ((x - m).abs() + spread + n + 2 * EXP_ULP + 2 + 2 * LOG_U * (ls - m).abs() + y.abs()) + sub(d)
    return {"y": T.Tolerance(u(d), atol,
                             "rtol = u(out); atol = 2u(|x_i - m| + sum_j p_j|x_j - m| + n + 2 EXP_ULP + 2 "
                             "+ 2 LOG_ULP log(sum_j e^(x_j - m)) + |y_i|) + sub(out), u = u(fp32)")}


pair("log_softmax_as_log_of_softmax", _lsm_launch(True), _lsm_launch(False),
     "log-softmax as log(exp(x - m) / s): -inf where exp underflows",
     dtypes=("fp32", "bf16"), inputs=lambda d, me: rows_spec(d, me), make=lambda s, dev: {"x": S.row_tensor(s, dev)},
     outputs=_out_like("y"), oracle=lambda a: {"y": torch.log_softmax(a["x"], -1)}, tolerance=_lsm_tol,
     math=("exp", "log"))


# =================================================================================================
# 14. LayerNorm with the unbiased (N - 1) variance (torch.var's default), not the biased one
#     nn.LayerNorm uses.
# =================================================================================================
EPS = 1e-5


@triton.jit
def ln_kernel(x_ptr, w_ptr, b_ptr, y_ptr, sx, sy, cols, eps, BLOCK: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    x = tl.load(x_ptr + row * sx + offs, mask=m, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / cols
    xc = tl.where(m, x - mean, 0.0)
    if BUG:
        var = tl.sum(xc * xc, axis=0) / (cols - 1)
    else:
        var = tl.sum(xc * xc, axis=0) / cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * sy + offs, (xc * rstd * w + b).to(y_ptr.dtype.element_ty), mask=m)


def _ln_launch(bug):
    def launch(args, outs):
        _plain(args)
        x, y = args["x"], outs["y"]
        _need_unit_col_stride(x=x)
        ln_kernel[(x.shape[0],)](x, args["w"], args["b"], y, x.stride(0), y.stride(0), x.shape[1], EPS,
                                 BLOCK=_np2(x.shape[1]), BUG=bug)
    return launch


def _ln_oracle(a):
    return {"y": torch.nn.functional.layer_norm(a["x"], (a["x"].shape[-1],), a["w"], a["b"], EPS)}


pair("layernorm_unbiased_var", _ln_launch(True), _ln_launch(False),
     "LayerNorm variance divides by N - 1 (unbiased) instead of N",
     dtypes=("fp32", "bf16"), inputs=lambda d, me: rows_spec(d, me),
     make=lambda s, dev: {"x": S.row_tensor(s, dev), "w": _vec(s, s["cols"], dev, 11),
                          "b": _vec(s, s["cols"], dev, 13)},
     outputs=_out_like("y"), oracle=_ln_oracle,
     tolerance=lambda a, refs, d: {"y": T.normalization(a["x"], d, "fp32", eps=EPS, weight=a["w"], bias=a["b"])})


# =================================================================================================
# 15. vocab-parallel embedding (tensor-parallel shard [start, end) of the vocabulary): the shard
#     test is id <= end, so the id equal to the next shard's first row reads one row past the shard.
# =================================================================================================
@triton.jit
def vp_embed_kernel(ids_ptr, w_ptr, y_ptr, start, end, H, sw, sy, BLOCK_H: tl.constexpr, BUG: tl.constexpr):
    t = tl.program_id(0)
    offs = tl.arange(0, BLOCK_H)
    m = offs < H
    tok = tl.load(ids_ptr + t + 0 * offs)          # the token id, broadcast over the row
    if BUG:
        inside = (tok >= start) & (tok <= end)
    else:
        inside = (tok >= start) & (tok < end)
    local = tl.where(inside, tok - start, 0)
    row = tl.load(w_ptr + local * sw + offs, mask=m & inside, other=0.0)
    tl.store(y_ptr + t.to(tl.int64) * sy + offs, row, mask=m)


def _vp_inputs(dtype, max_elements):
    @st.composite
    def draw(drw):
        tp = drw(st.sampled_from([1, 2, 4]))
        return {"dtype": dtype, "tp": tp, "rank": drw(st.integers(0, tp - 1)), "shard": drw(st.integers(1, 16)),
                "hidden": drw(S.lengths(64, 128)), "tokens": drw(st.integers(1, 32)), "seed": drw(S.seeds())}
    return draw()


def _vp_make(spec, device):
    g = S.generator(spec["seed"])
    Vs = spec["shard"]
    ids = S.integers(0, Vs * spec["tp"], (spec["tokens"],), g)
    w = S.values((Vs, spec["hidden"]), spec["dtype"], "normal", g)
    return {"ids": ids.to(device), "weight": w.to(device), "start": spec["rank"] * Vs,
            "end": (spec["rank"] + 1) * Vs}


def _vp_launch(bug):
    def launch(args, outs):
        _plain(args)
        w, y = args["weight"], outs["y"]
        _need_unit_col_stride(weight=w)
        H = w.shape[1]
        vp_embed_kernel[(args["ids"].numel(),)](args["ids"], w, y, args["start"], args["end"], H, w.stride(0),
                                                y.stride(0), BLOCK_H=_np2(H), BUG=bug)
    return launch


def _vp_oracle(a):
    ids = a["ids"].long()
    inside = (ids >= a["start"]) & (ids < a["end"])
    local = torch.where(inside, ids - a["start"], torch.zeros_like(ids))
    y = torch.where(inside[:, None], a["weight"][local], torch.zeros_like(a["weight"][local]))
    return {"y": y.to(fmt("bf16").torch_dtype)}


pair("vocab_parallel_embed_shard_end", _vp_launch(True), _vp_launch(False),
     "vocab-parallel embedding shard mask id <= end (reads one row past the shard)",
     dtypes=("bf16",), inputs=_vp_inputs, make=_vp_make,
     outputs=lambda a: {"y": ((a["ids"].numel(), a["weight"].shape[1]), a["weight"].dtype)},
     oracle=_vp_oracle, tolerance=lambda a, refs, d: {"y": T.exact("embedding rows copied bit for bit")})


# =================================================================================================
# 16. per-token modulation y = x * (1 + scale[t]) + shift[t] (adaLN-style): the launcher accepts
#     any x layout and hands the kernel x.stride(1), which the kernel never uses (steps by 1).
# =================================================================================================
@triton.jit
def modulate_kernel(x_ptr, sc_ptr, sh_ptr, y_ptr, sxr, sxc, sy, cols, BLOCK: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    if BUG:
        xp = x_ptr + row * sxr + offs
    else:
        xp = x_ptr + row * sxr + offs * sxc
    x = tl.load(xp, mask=m, other=0.0).to(tl.float32)
    sc = tl.load(sc_ptr + row).to(tl.float32)
    sh = tl.load(sh_ptr + row).to(tl.float32)
    tl.store(y_ptr + row * sy + offs, (x * (1.0 + sc) + sh).to(y_ptr.dtype.element_ty), mask=m)


def _mod_launch(bug):
    def launch(args, outs):
        _plain(args, "x")
        x, y = args["x"], outs["y"]
        modulate_kernel[(x.shape[0],)](x, args["scale"], args["shift"], y, x.stride(0), x.stride(1), y.stride(0),
                                       x.shape[1], BLOCK=_np2(x.shape[1]), BUG=bug)
    return launch


def _mod_tol(a, refs, d):
    terms = a["x"].abs() * (1 + a["scale"][:, None]).abs() + a["shift"][:, None].abs()
    return {"y": T.elementwise(d, "fp32", ops=3, terms=terms)}


pair("modulate_col_stride_ignored", _mod_launch(True), _mod_launch(False),
     "kernel takes x's column stride and steps by 1 anyway (transposed / strided x)",
     dtypes=("fp16",), inputs=lambda d, me: rows_spec(d, me),
     make=lambda s, dev: {"x": S.row_tensor(s, dev), "scale": _vec(s, s["rows"], dev, 5, scale=0.1),
                          "shift": _vec(s, s["rows"], dev, 7)},
     outputs=_out_like("y"),
     oracle=lambda a: {"y": a["x"] * (1 + a["scale"][:, None]) + a["shift"][:, None]}, tolerance=_mod_tol)


# =================================================================================================
# 17. GPT-OSS clamped SwiGLU: gate clamped above only (max = limit), up clamped to [-limit, limit],
#     y = gate * sigmoid(alpha * gate) * (up + 1). The bug clamps the gate on both sides.
# =================================================================================================
SWI_LIMIT = 7.0
SWI_ALPHA = 1.702


@triton.jit
def swiglu_oss_kernel(x_ptr, y_ptr, sx, sy, d, limit, alpha, BLOCK: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < d
    g = tl.load(x_ptr + row * sx + offs, mask=m, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * sx + d + offs, mask=m, other=0.0).to(tl.float32)
    if BUG:
        g = tl.minimum(tl.maximum(g, -limit), limit)
    else:
        g = tl.minimum(g, limit)
    up = tl.minimum(tl.maximum(up, -limit), limit)
    z = alpha * g
    ez = tl.exp(-tl.abs(z))                       # stable sigmoid: no overflow for large |z|
    sig = tl.where(z >= 0, 1.0 / (1.0 + ez), ez / (1.0 + ez))
    y = g * sig * (up + 1.0)
    tl.store(y_ptr + row * sy + offs, y.to(y_ptr.dtype.element_ty), mask=m)


def _swi_make(spec, device):
    g = S.generator(spec["seed"])
    x = S.values((spec["rows"], 2 * spec["cols"]), spec["dtype"], spec["regime"], g)
    return {"x": S.laid_out(x, spec["layout"], device)}


def _swi_launch(bug):
    def launch(args, outs):
        _plain(args)
        x, y = args["x"], outs["y"]
        _need_unit_col_stride(x=x)
        d = x.shape[1] // 2
        swiglu_oss_kernel[(x.shape[0],)](x, y, x.stride(0), y.stride(0), d, SWI_LIMIT, SWI_ALPHA,
                                         BLOCK=_np2(d), BUG=bug)
    return launch


def _swi_parts(a):
    x = a["x"]
    d = x.shape[1] // 2
    g = x[:, :d].clamp(max=SWI_LIMIT)
    up = x[:, d:].clamp(-SWI_LIMIT, SWI_LIMIT)
    return g * torch.sigmoid(SWI_ALPHA * g), up


def _swi_oracle(a):
    silu, up = _swi_parts(a)
    return {"y": silu * (up + 1)}


def _swi_tol(a, refs, d):
    silu, up = _swi_parts(a)
    return {"y": T.elementwise(d, "fp32", ops=2 * EXP_ULP + 2 * DIV_ULP + 6, terms=silu.abs() * (up.abs() + 1))}


pair("swiglu_oss_gate_clamped_below", _swi_launch(True), _swi_launch(False),
     "GPT-OSS SwiGLU clamps the gate to [-limit, limit] (reference clamps it above only)",
     dtypes=("bf16",), inputs=lambda d, me: rows_spec(d, _budget(me) // 2),
     make=_swi_make, outputs=lambda a: {"y": ((a["x"].shape[0], a["x"].shape[1] // 2), a["x"].dtype)},
     oracle=_swi_oracle, tolerance=_swi_tol, math=("exp",))


# =================================================================================================
# 18. causal depthwise conv1d (Mamba's short conv), width W = 4, one channel per row: the causal
#     zero padding test is src > 0, so x[0] never contributes.
# =================================================================================================
CONV_W = 4


@triton.jit
def causal_conv1d_kernel(x_ptr, w_ptr, b_ptr, y_ptr, sx, sw, sy, L, W: tl.constexpr, BLOCK: tl.constexpr,
                         BUG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    t = tl.arange(0, BLOCK)
    tm = t < L
    acc = tl.zeros((BLOCK,), dtype=tl.float32) + tl.load(b_ptr + row).to(tl.float32)
    for kk in tl.static_range(W):
        src = t - (W - 1) + kk
        if BUG:
            valid = (src > 0) & tm
        else:
            valid = (src >= 0) & tm
        xv = tl.load(x_ptr + row * sx + src, mask=valid, other=0.0).to(tl.float32)
        wk = tl.load(w_ptr + row * sw + kk).to(tl.float32)
        acc += wk * xv
    tl.store(y_ptr + row * sy + t, acc.to(y_ptr.dtype.element_ty), mask=tm)


def _conv_make(spec, device):
    g = S.generator(spec["seed"] + 17)
    return {"x": S.row_tensor(spec, device),
            "w": S.values((spec["rows"], CONV_W), spec["dtype"], "normal", g).to(device),
            "bias": S.values((spec["rows"],), spec["dtype"], "normal", g).to(device)}


def _conv_launch(bug):
    def launch(args, outs):
        _plain(args)
        x, w, y = args["x"], args["w"], outs["y"]
        _need_unit_col_stride(x=x, w=w)
        causal_conv1d_kernel[(x.shape[0],)](x, w, args["bias"], y, x.stride(0), w.stride(0), y.stride(0),
                                            x.shape[1], W=CONV_W, BLOCK=_np2(x.shape[1]), BUG=bug)
    return launch


def _conv_terms(a, absval):
    x, w, b = a["x"], a["w"], a["bias"]
    f = (lambda t: t.abs()) if absval else (lambda t: t)
    L = x.shape[1]
    xp = torch.nn.functional.pad(x, (CONV_W - 1, 0))
    acc = f(b)[:, None].expand(-1, L).clone()
    for kk in range(CONV_W):
        acc = acc + f(w[:, kk:kk + 1] * xp[:, kk:kk + L])
    return acc


pair("causal_conv1d_first_tap", _conv_launch(True), _conv_launch(False),
     "causal conv1d padding test src > 0 drops x[0] from the first W - 1 outputs",
     dtypes=("bf16",), inputs=lambda d, me: rows_spec(d, me), make=_conv_make, outputs=_out_like("y"),
     oracle=lambda a: {"y": _conv_terms(a, False)},
     tolerance=lambda a, refs, d: {"y": T.elementwise(d, "fp32", ops=CONV_W + 1, terms=_conv_terms(a, True))})


# =================================================================================================
# 19. fused AdamW step (p, m, v updated in place). The launcher computes the bias corrections on
#     the host from the optimizer's step count before this update (t = step), not after (step + 1):
#     at the first step 1 - beta^0 = 0.
# =================================================================================================
@triton.jit
def adamw_kernel(p_ptr, g_ptr, m_ptr, v_ptr, n, lr, beta1, omb1, beta2, omb2, bc1, bc2, eps, decay,
                 BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    msk = offs < n
    p = tl.load(p_ptr + offs, mask=msk)
    g = tl.load(g_ptr + offs, mask=msk).to(tl.float32)
    m = tl.load(m_ptr + offs, mask=msk)
    v = tl.load(v_ptr + offs, mask=msk)
    m = beta1 * m + omb1 * g
    v = beta2 * v + omb2 * (g * g)
    mhat = m / bc1
    vhat = v / bc2
    p = p * decay - lr * (mhat / (tl.sqrt(vhat) + eps))
    tl.store(p_ptr + offs, p, mask=msk)
    tl.store(m_ptr + offs, m, mask=msk)
    tl.store(v_ptr + offs, v, mask=msk)


ADAM = dict(beta1=0.9, beta2=0.999, eps=1e-8, wd=0.01)


def _adam_inputs(dtype, max_elements):
    return st.fixed_dictionaries({"dtype": st.just(dtype), "n": S.lengths(1024, _budget(max_elements)),
                                  "step": st.sampled_from([0, 1, 2, 9, 99, 999]),
                                  "lr": st.sampled_from([1e-3, 1e-4, 3e-2]), "seed": S.seeds(),
                                  "regime": S.regimes(("normal", "zeros", "tiny"))})


def _adam_make(spec, device):
    g = S.generator(spec["seed"])
    n = spec["n"]
    p = S.values((n,), "fp32", "normal", g)
    grad = S.values((n,), spec["dtype"], spec["regime"], g, scale=0.01)
    if spec["step"] == 0:
        m = torch.zeros(n, dtype=torch.float32)
        v = torch.zeros(n, dtype=torch.float32)
    else:
        m = S.values((n,), "fp32", "normal", g, scale=0.01)
        v = S.values((n,), "fp32", "normal", g, scale=0.01).square()
    return {"p": p.to(device), "grad": grad.to(device), "m": m.to(device), "v": v.to(device),
            "step": spec["step"], "lr": spec["lr"]}


def _adam_launch(bug):
    def launch(args, outs):
        _plain(args)
        p = args["p"]
        _need_contiguous(p=p, grad=args["grad"], m=args["m"], v=args["v"])
        b1, b2 = ADAM["beta1"], ADAM["beta2"]
        t = args["step"] if bug else args["step"] + 1
        n = p.numel()
        adamw_kernel[(triton.cdiv(n, 1024),)](p, args["grad"], args["m"], args["v"], n, args["lr"], b1, 1 - b1, b2,
                                              1 - b2, 1 - b1 ** t, 1 - b2 ** t, ADAM["eps"],
                                              1 - args["lr"] * ADAM["wd"], BLOCK=1024)
    return launch


def _adam_ref(a):
    b1, b2, eps, wd = ADAM["beta1"], ADAM["beta2"], ADAM["eps"], ADAM["wd"]
    t = a["step"] + 1
    p, g, m, v, lr = a["p"], a["grad"], a["m"], a["v"], a["lr"]
    m2 = b1 * m + (1 - b1) * g
    v2 = b2 * v + (1 - b2) * g * g
    bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
    den = (v2 / bc2).sqrt() + eps
    U = m2 / bc1 / den
    p2 = p * (1 - lr * wd) - lr * U
    # bounds
    em = 4 * U32 * (b1 * m.abs() + (1 - b1) * g.abs())
    ev = 6 * U32 * (b2 * v.abs() + (1 - b2) * g * g)
    rel_den = (ev / v2.clamp_min(1e-300) + (2 * DIV_ULP + 1) * U32) / 2 + (2 * SQRT_U + 1) * U32
    rel_den = torch.where(v2 > 0, rel_den, torch.full_like(rel_den, (2 * SQRT_U + 1) * U32))
    eU = (em + (2 * DIV_ULP + 2) * U32 * m2.abs()) / bc1 / den + U.abs() * (rel_den + 2 * DIV_ULP * U32)
    ep = 3 * U32 * p.abs() + lr * eU + 2 * U32 * lr * U.abs() + U32 * p2.abs()
    return {"p": p2, "m": m2, "v": v2}, {"p": 2 * ep, "m": 2 * em, "v": 2 * ev}


def _adam_tol(a, refs, d):
    _, e = _adam_ref(a)
    f = ("rtol = 0; atol = 2 x [m: 4u(b1|m| + (1-b1)|g|); v: 6u(b2 v + (1-b2) g^2); p: 3u|p| + lr e_U + 2u lr|U| "
         "+ u|p'|, e_U = (e_m + (2 DIV_ULP + 2)u|m'|)/bc1/den + |U|(rel_den + 2 DIV_ULP u)] + sub(fp32), u = u(fp32)")
    return {k: T.Tolerance(0.0, e[k] + SUB32, f) for k in ("p", "m", "v")}


pair("adamw_bias_correction_step", _adam_launch(True), _adam_launch(False),
     "AdamW bias corrections from the step count before this update (1 - beta^0 = 0 at step 1)",
     dtypes=("fp32",), inputs=_adam_inputs, make=_adam_make, outputs=lambda a: {},
     in_place=("p", "m", "v"), oracle=lambda a: _adam_ref(a)[0], tolerance=_adam_tol, math=("sqrt",))


# =================================================================================================
# 20. AMP grad unscale with the non-finite check (torch._amp_foreach_non_finite_check_and_unscale_):
#     the check is |g| == inf, which a NaN gradient passes.
# =================================================================================================
@triton.jit
def unscale_kernel(g_ptr, y_ptr, found_ptr, sg, sy, cols, inv_scale, BLOCK: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    g = tl.load(g_ptr + row * sg + offs, mask=m, other=0.0).to(tl.float32)
    y = g * inv_scale
    if BUG:
        bad = tl.abs(y) == float("inf")
    else:
        bad = (y != y) | (tl.abs(y) == float("inf"))
    bad = bad & m
    tl.store(y_ptr + row * sy + offs, y.to(y_ptr.dtype.element_ty), mask=m)
    tl.atomic_max(found_ptr, tl.max(bad.to(tl.int32), axis=0))


def _unscale_launch(bug):
    def launch(args, outs):
        _plain(args)
        g, y, f = args["g"], outs["y"], outs["found_inf"]
        _need_unit_col_stride(g=g)
        f.zero_()
        unscale_kernel[(g.shape[0],)](g, y, f, g.stride(0), y.stride(0), g.shape[1], args["inv_scale"],
                                      BLOCK=_np2(g.shape[1]), BUG=bug)
    return launch


def _unscale_oracle(a):
    g = a["g"]
    return {"y": g * a["inv_scale"], "found_inf": (~torch.isfinite(g)).any().to(torch.int32).reshape(1)}


pair("grad_unscale_nan_not_flagged", _unscale_launch(True), _unscale_launch(False),
     "AMP unscale: non-finite check |g| == inf misses NaN gradients",
     dtypes=("fp16",), inputs=lambda d, me: _with(rows_spec(d, me, allowed=S.REGIMES),
                                                  inv_scale=st.sampled_from([2.0 ** -16, 2.0 ** -8, 1.0])),
     make=lambda s, dev: {"g": S.row_tensor(s, dev), "inv_scale": s["inv_scale"]},
     outputs=lambda a: {"y": (tuple(a["g"].shape), a["g"].dtype), "found_inf": ((1,), torch.int32)},
     oracle=_unscale_oracle,
     tolerance=lambda a, refs, d: {"y": T.elementwise(d, "fp32", ops=1), "found_inf": T.exact("flag")})


# =================================================================================================
# 21. clip_grad_norm_: coef = max_norm / (norm + 1e-6), to be clamped at 1; the bug leaves it
#     unclamped, so gradients whose norm is below max_norm are scaled up.
# =================================================================================================
@triton.jit
def sumsq_kernel(g_ptr, part_ptr, sg, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    g = tl.load(g_ptr + row * sg + offs, mask=offs < cols, other=0.0).to(tl.float32)
    tl.store(part_ptr + row, tl.sum(g * g, axis=0))


@triton.jit
def clip_coef_kernel(part_ptr, coef_ptr, R, max_norm, BLOCK_R: tl.constexpr, BUG: tl.constexpr):
    offs = tl.arange(0, BLOCK_R)
    tot = tl.sum(tl.load(part_ptr + offs, mask=offs < R, other=0.0), axis=0)
    coef = max_norm / (tl.sqrt(tot) + 1e-6)
    if not BUG:
        coef = tl.minimum(coef, 1.0)
    tl.store(coef_ptr, coef)


@triton.jit
def scale_rows_kernel(g_ptr, coef_ptr, y_ptr, sg, sy, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    g = tl.load(g_ptr + row * sg + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * sy + offs, (g * tl.load(coef_ptr)).to(y_ptr.dtype.element_ty), mask=m)


def _clip_launch(bug):
    def launch(args, outs):
        _plain(args)
        g, y = args["g"], outs["y"]
        _need_unit_col_stride(g=g)
        R, C = g.shape
        part = torch.empty((R,), dtype=torch.float32, device=g.device)
        coef = torch.empty((1,), dtype=torch.float32, device=g.device)
        sumsq_kernel[(R,)](g, part, g.stride(0), C, BLOCK=_np2(C))
        clip_coef_kernel[(1,)](part, coef, R, args["max_norm"], BLOCK_R=_np2(R), BUG=bug)
        scale_rows_kernel[(R,)](g, coef, y, g.stride(0), y.stride(0), C, BLOCK=_np2(C))
    return launch


def _clip_oracle(a):
    g = a["g"]
    norm = g.square().sum().sqrt()
    coef = (a["max_norm"] / (norm + 1e-6)).clamp(max=1.0)
    return {"y": g * coef}


pair("clip_grad_norm_coef_unclamped", _clip_launch(True), _clip_launch(False),
     "clip_grad_norm coefficient not clamped at 1: small gradients are scaled up",
     dtypes=("fp32",),
     inputs=lambda d, me: _with(rows_spec(d, me, allowed=("normal", "tiny", "zeros", "equal", "offset")),
                                max_norm=st.sampled_from([0.1, 1.0, 10.0, 100.0])),
     make=lambda s, dev: {"g": S.row_tensor(s, dev), "max_norm": s["max_norm"]},
     outputs=_out_like("y", key="g"), oracle=_clip_oracle,
     tolerance=lambda a, refs, d: {"y": T.rounding(d, "fp32", reduction=a["g"].numel(),
                                                   ops=2 * SQRT_U + 2 * DIV_ULP + 4)})


# =================================================================================================
# 22. repetition penalty (CTRL / HF): for tokens already generated, logit / theta if positive,
#     logit * theta if negative. The bug always divides (a negative logit moves up).
# =================================================================================================
@triton.jit
def rep_penalty_kernel(x_ptr, ids_ptr, y_ptr, sx, sid, sy, V, P, penalty, BLOCK_V: tl.constexpr,
                       BLOCK_P: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_V)
    m = offs < V
    x = tl.load(x_ptr + row * sx + offs, mask=m, other=0.0).to(tl.float32)
    pi = tl.arange(0, BLOCK_P)
    ids = tl.load(ids_ptr + row * sid + pi, mask=pi < P, other=-1)
    hit = tl.sum((offs[:, None] == ids[None, :]).to(tl.int32), axis=1) > 0
    if BUG:
        pen = x / penalty
    else:
        pen = tl.where(x > 0, x / penalty, x * penalty)
    y = tl.where(hit, pen, x)
    tl.store(y_ptr + row * sy + offs, y.to(y_ptr.dtype.element_ty), mask=m)


def _rep_make(spec, device):
    g = S.generator(spec["seed"] + 23)
    R, V = spec["rows"], spec["cols"]
    ids = S.integers(0, V, (R, spec["prev"]), g)
    return {"x": S.row_tensor(spec, device), "ids": ids.to(device), "penalty": spec["penalty"]}


def _rep_launch(bug):
    def launch(args, outs):
        _plain(args)
        x, ids, y = args["x"], args["ids"], outs["y"]
        _need_unit_col_stride(x=x, ids=ids)
        rep_penalty_kernel[(x.shape[0],)](x, ids, y, x.stride(0), ids.stride(0), y.stride(0), x.shape[1],
                                          ids.shape[1], args["penalty"], BLOCK_V=_np2(x.shape[1]),
                                          BLOCK_P=_np2(ids.shape[1]), BUG=bug)
    return launch


def _rep_oracle(a):
    x, ids, th = a["x"], a["ids"].long(), a["penalty"]
    hit = torch.zeros_like(x, dtype=torch.bool)
    hit.scatter_(1, ids, True)
    pen = torch.where(x > 0, x / th, x * th)
    return {"y": torch.where(hit, pen, x)}


pair("repetition_penalty_sign", _rep_launch(True), _rep_launch(False),
     "repetition penalty always divides: negative logits of seen tokens move up",
     dtypes=("fp32",),
     inputs=lambda d, me: _with(rows_spec(d, me, max_rows=8), prev=st.integers(1, 24),
                                penalty=st.sampled_from([1.1, 1.3, 2.0])),
     make=_rep_make, outputs=_out_like("y"), oracle=_rep_oracle,
     tolerance=lambda a, refs, d: {"y": T.elementwise(d, "fp32", ops=2 * DIV_ULP)})


# =================================================================================================
# 23. KV-cache write with fp8 (e4m3) quantization and a per-tensor k_scale (vLLM's
#     reshape_and_cache with kv_cache_dtype=fp8): code = sat(k / k_scale). The bug multiplies by
#     the scale (identical while k_scale = 1.0, the default).
# =================================================================================================
@triton.jit
def kv_fp8_write_kernel(k_ptr, slot_ptr, cache_ptr, scale_ptr, skt, scs, HD, BLOCK: tl.constexpr, BUG: tl.constexpr):
    t = tl.program_id(0)
    slot = tl.load(slot_ptr + t)
    if slot >= 0:
        offs = tl.arange(0, BLOCK)
        m = offs < HD
        k = tl.load(k_ptr + t.to(tl.int64) * skt + offs, mask=m, other=0.0).to(tl.float32)
        s = tl.load(scale_ptr)
        if BUG:
            qv = k * s
        else:
            qv = tl.math.div_rn(k, s)
        qv = tl.minimum(tl.maximum(qv, -448.0), 448.0)
        tl.store(cache_ptr + slot * scs + offs, qv.to(cache_ptr.dtype.element_ty), mask=m)


def _kv_inputs(dtype, max_elements):
    @st.composite
    def draw(drw):
        HD = drw(st.sampled_from([16, 32, 64, 128]))
        Tn = drw(st.integers(1, 24))
        return {"dtype": dtype, "hd": HD, "tokens": Tn, "extra": drw(st.integers(0, 16)),
                "pad": drw(st.integers(0, 3)), "k_scale": drw(st.sampled_from([1.0, 0.25, 0.0625, 2.0, 0.037])),
                "seed": drw(S.seeds())}
    return draw()


def _kv_make(spec, device):
    g = S.generator(spec["seed"])
    Tn, HD = spec["tokens"], spec["hd"]
    nslots = Tn + spec["extra"]
    perm = torch.randperm(nslots, generator=g)[:Tn]
    pad = min(spec["pad"], Tn - 1)
    if pad:
        perm[-pad:] = -1                                  # padding tokens of a CUDA-graph batch
    k = S.values((Tn, HD), spec["dtype"], "normal", g)
    cache = (S.normal((nslots, HD), g) * 4).to(torch.float8_e4m3fn)   # stale entries of earlier requests
    return {"k": k.to(device), "slots": perm.to(device), "cache": cache.to(device),
            "k_scale": torch.tensor([spec["k_scale"]], dtype=torch.float32, device=device)}


def _kv_launch(bug):
    def launch(args, outs):
        _plain(args)
        k, cache = args["k"], args["cache"]
        _need_contiguous(k=k, cache=cache)
        kv_fp8_write_kernel[(k.shape[0],)](k, args["slots"], cache, args["k_scale"], k.stride(0), cache.stride(0),
                                           k.shape[1], BLOCK=_np2(k.shape[1]), BUG=bug)
    return launch


def _kv_oracle(a):
    cache = a["cache"].clone()
    slots = a["slots"].long()
    keep = slots >= 0
    qv = (a["k"][keep] / a["k_scale"]).to(torch.float32).clamp(-448, 448)
    cache[slots[keep]] = qv.to(torch.float8_e4m3fn).to(cache.dtype)
    return {"cache": cache.to(torch.float8_e4m3fn)}


pair("kv_cache_fp8_scale_inverted", _kv_launch(True), _kv_launch(False),
     "fp8 KV-cache write multiplies by k_scale instead of dividing (same while k_scale = 1)",
     dtypes=("fp16",), inputs=_kv_inputs, make=_kv_make, outputs=lambda a: {}, in_place=("cache",),
     oracle=_kv_oracle, tolerance=lambda a, refs, d: {"cache": T.exact("e4m3 codes bit for bit")})


# =================================================================================================
# 24. dropout whose seed travels in a device tensor (CUDA-graph friendly): the launcher makes that
#     tensor int32, so a 64-bit seed loses its high word (and wraps): many seeds give one mask.
# =================================================================================================
@triton.jit
def dropout_kernel(x_ptr, y_ptr, seed_ptr, sx, sy, cols, p, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    seed = tl.load(seed_ptr)
    x = tl.load(x_ptr + row.to(tl.int64) * sx + offs, mask=m, other=0.0).to(tl.float32)
    r = tl.rand(seed, row * cols + offs)
    y = tl.where(r > p, x * scale, 0.0)
    tl.store(y_ptr + row.to(tl.int64) * sy + offs, y.to(y_ptr.dtype.element_ty), mask=m)


def _drop_launch(bug):
    def launch(args, outs):
        _plain(args)
        x = args["x"]
        _need_unit_col_stride(x=x)
        seed = torch.tensor([args["rng_seed"]], dtype=torch.int64, device=x.device)
        if bug:
            seed = seed.to(torch.int32)
        p = args["p"]
        dropout_kernel[(x.shape[0],)](x, outs["y"], seed, x.stride(0), outs["y"].stride(0), x.shape[1], p,
                                      1.0 / (1.0 - p), BLOCK=_np2(x.shape[1]))
    return launch


_M32 = (1 << 32) - 1


def _umul32(a, b):
    """hi and lo 32-bit words of a * b for uint32 values in int64 tensors."""
    a_hi, a_lo = a >> 16, a & 0xFFFF
    lo_full = a_lo * b                       # < 2^48
    hi_full = a_hi * b                       # < 2^48
    total_lo = (lo_full & _M32) + ((hi_full & 0xFFFF) << 16)
    lo = total_lo & _M32
    hi = ((hi_full >> 16) + (lo_full >> 32) + (total_lo >> 32)) & _M32
    return hi, lo


def philox_rand(seed: int, offsets: torch.Tensor) -> torch.Tensor:
    """Philox4x32-10 on counter (offset, 0, 0, 0), key (seed lo, seed hi); first word to [0, 1) as
    tl.rand does (int32 bitcast, negatives folded with ~x, times 4.6566127342e-10 in fp32)."""
    c0 = offsets.to(torch.int64) & _M32
    c1 = torch.zeros_like(c0)
    c2 = torch.zeros_like(c0)
    c3 = torch.zeros_like(c0)
    s = seed & ((1 << 64) - 1)
    k0 = s & _M32
    k1 = (s >> 32) & _M32
    RA, RB, KA, KB = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
    for _ in range(10):
        hb, lb = _umul32(c2, RB)
        ha, la = _umul32(c0, RA)
        c0, c1, c2, c3 = hb ^ c1 ^ k0, lb, ha ^ c3 ^ k1, la
        k0 = (k0 + KA) & _M32
        k1 = (k1 + KB) & _M32
    v = torch.where(c0 >= 2 ** 31, c0 - 2 ** 32, c0)
    v = torch.where(v < 0, -v - 1, v)
    return v.to(torch.float32) * torch.tensor(4.6566127342e-10, dtype=torch.float32)


def _drop_oracle(a):
    x = a["x"]
    R, C = x.shape
    offs = torch.arange(R)[:, None] * C + torch.arange(C)[None, :]
    keep = philox_rand(a["rng_seed"], offs) > torch.tensor(a["p"], dtype=torch.float32)
    return {"y": torch.where(keep.to(x.device), x / (1 - a["p"]), torch.zeros_like(x))}


pair("dropout_seed_tensor_int32", _drop_launch(True), _drop_launch(False),
     "dropout seed passed in an int32 tensor: 64-bit seeds lose their high word",
     dtypes=("fp32",),
     inputs=lambda d, me: _with(rows_spec(d, me, allowed=("normal",)), p=st.sampled_from([0.1, 0.25, 0.5]),
                                rng_seed=st.integers(0, 2 ** 63 - 1)),
     make=lambda s, dev: {"x": S.row_tensor(s, dev), "p": s["p"], "rng_seed": s["rng_seed"]},
     outputs=_out_like("y"), oracle=_drop_oracle,
     tolerance=lambda a, refs, d: {"y": T.elementwise(d, "fp32", ops=2)})


# =================================================================================================
# 25. MoE combine (unpermute): out[t] = sum_k w[t, k] * expert_out[src[t, k]]. The bug launches
#     one program per expert row and stores its weighted row into out[t] (index_copy, not
#     index_add): programs of the same token overwrite each other (right only for top-1).
# =================================================================================================
@triton.jit
def moe_combine_kernel(ye_ptr, src_ptr, w_ptr, out_ptr, H, so, TOPK: tl.constexpr, BLOCK_H: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_H)
    m = offs < H
    acc = tl.zeros((BLOCK_H,), dtype=tl.float32)
    for kk in tl.static_range(TOPK):
        r = tl.load(src_ptr + t * TOPK + kk).to(tl.int64)
        acc += tl.load(w_ptr + t * TOPK + kk) * tl.load(ye_ptr + r * H + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(out_ptr + t * so + offs, acc.to(out_ptr.dtype.element_ty), mask=m)


@triton.jit
def moe_scatter_kernel(ye_ptr, src_ptr, w_ptr, out_ptr, H, so, TOPK: tl.constexpr, BLOCK_H: tl.constexpr):
    e = tl.program_id(0).to(tl.int64)          # one (token, k) pair per program
    t = e // TOPK
    offs = tl.arange(0, BLOCK_H)
    m = offs < H
    r = tl.load(src_ptr + e).to(tl.int64)
    y = tl.load(w_ptr + e) * tl.load(ye_ptr + r * H + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(out_ptr + t * so + offs, y.to(out_ptr.dtype.element_ty), mask=m)


def _moe_inputs(dtype, max_elements):
    @st.composite
    def draw(drw):
        topk = drw(st.sampled_from([1, 2, 4]))
        H = drw(S.lengths(64, 256))
        Tn = drw(st.integers(1, max(1, min(16, _budget(max_elements) // (H * topk)))))
        return {"dtype": dtype, "topk": topk, "hidden": H, "tokens": Tn, "seed": drw(S.seeds())}
    return draw()


def _moe_make(spec, device):
    g = S.generator(spec["seed"])
    Tn, K, H = spec["tokens"], spec["topk"], spec["hidden"]
    src = torch.randperm(Tn * K, generator=g).reshape(Tn, K)           # rows sorted by expert
    w = torch.softmax(S.normal((Tn, K), g), -1).to(torch.float32)
    ye = S.values((Tn * K, H), spec["dtype"], "normal", g)
    return {"expert_out": ye.to(device), "src": src.to(device), "w": w.to(device)}


def _moe_launch(bug):
    def launch(args, outs):
        _plain(args)
        ye, src, w, out = args["expert_out"], args["src"], args["w"], outs["y"]
        _need_contiguous(expert_out=ye, src=src, w=w)
        Tn, K = src.shape
        H = ye.shape[1]
        if bug:
            moe_scatter_kernel[(Tn * K,)](ye, src, w, out, H, out.stride(0), TOPK=K, BLOCK_H=_np2(H))
        else:
            moe_combine_kernel[(Tn,)](ye, src, w, out, H, out.stride(0), TOPK=K, BLOCK_H=_np2(H))
    return launch


def _moe_oracle(a):
    ye, src, w = a["expert_out"], a["src"].long(), a["w"]
    return {"y": (w[..., None] * ye[src]).sum(1)}


pair("moe_combine_store_not_add", _moe_launch(True), _moe_launch(False),
     "MoE combine stores each expert's weighted row (write-write race) instead of summing top-k",
     dtypes=("bf16",), inputs=_moe_inputs, make=_moe_make,
     outputs=lambda a: {"y": ((a["src"].shape[0], a["expert_out"].shape[1]), a["expert_out"].dtype)},
     oracle=_moe_oracle,
     tolerance=lambda a, refs, d: {"y": T.elementwise(
         d, "fp32", ops=a["src"].shape[1] + 1,
         terms=(a["w"][..., None] * a["expert_out"][a["src"].long()]).abs().sum(1))})
