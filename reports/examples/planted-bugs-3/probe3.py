"""Planted-bug probe 3 for portcheck (public API only; written by a helper outside the project, kept
here as evidence). Each bug_* case has an ok_* twin that must pass (twins shared where the kernel is
the same: see README.md). Run from this folder:
    PYTHONPATH=$PWD portcheck run --target interpreter --cases probe3 --kernel 'bug_*,ok_*' --no-time

Bug classes NOT repeated from probe2 (reports/examples/memory-watch/probe2.py).
Block pointers (tl.make_block_ptr / tl.advance) were removed in Triton 3.9 (this venv's release:
"Block pointers have been removed in favor of the tensor descriptor API"), so the block-pointer
class is probed through tl.make_tensor_descriptor instead.
"""
import math

import numpy as np
import torch
import triton
import triton.language as tl
from hypothesis import strategies as st
from triton.language.extra import libdevice

import portcheck
from portcheck import strategies as S
from portcheck import tolerance as T
from portcheck.facts.numerics import DIV_ULP, EXP_ULP   # in ULP; one ULP <= 2u
from portcheck.oracles import philox                    # the bit-exact model of tl.rand (as the built-in dropout)
from portcheck.tolerance import Tolerance

CAP = 4096            # elements per input (the interpreter is slow)
U32 = 2.0 ** -24
SUB32 = 2.0 ** -149
FAM = "bugprobe3"


def case(name, **kw):
    kw.setdefault("family", FAM)
    return portcheck.register(portcheck.Case(name=name, **kw))


def rows_spec(tile=32, max_rows=8, allowed=None):
    def inputs(dtype, max_elements):
        kw = {} if allowed is None else {"allowed": allowed}
        return S.row_inputs(dtype, min(max_elements, CAP), tile=tile, max_rows=max_rows, **kw)
    return inputs


def x_rows(spec, device):
    return {"x": S.row_tensor(spec, device)}


def same_shape(name="y"):
    return lambda a: {name: (tuple(a["x"].shape), a["x"].dtype)}


# =================================================================================== 1. matmul
# One pointer-based kernel; each flag plants one bug. BK = 16 so that K % BK != 0 is common.
@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, MASK_K: tl.constexpr,
              ACC16: tl.constexpr, IEEE: tl.constexpr, UNIT_BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    if ACC16:
        acc = tl.zeros((BM, BN), dtype=tl.float16)          # BUG (ACC16): fp16 accumulator
    else:
        acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        if MASK_K:
            am = (rm[:, None] < M) & (kk[None, :] < K)
            bm = (kk[:, None] < K) & (rn[None, :] < N)
        else:                                                # BUG (not MASK_K): assumes K % BK == 0
            am = rm[:, None] < M
            bm = rn[None, :] < N
        a = tl.load(a_ptr + rm[:, None] * sam + kk[None, :] * sak, mask=am, other=0.0)
        if UNIT_BN:                                          # BUG (UNIT_BN): B's column stride taken as 1
            b = tl.load(b_ptr + kk[:, None] * sbk + rn[None, :], mask=bm, other=0.0)
        else:
            b = tl.load(b_ptr + kk[:, None] * sbk + rn[None, :] * sbn, mask=bm, other=0.0)
        if IEEE:
            acc = tl.dot(a, b, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc)                          # BUG for fp32 inputs: tf32 on NVIDIA by default
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def mm_launch(bug=None):
    def launch(args, outs):
        a, b, c = args["a"], args["b"], outs["c"]
        M, K = a.shape
        N = b.shape[1]
        fp32 = a.dtype == torch.float32
        # the unit-stride bug's launcher hands no column stride for B (as a kernel written without one)
        sbn = 1 if bug == "unit_bn" else b.stride(1)
        mm_kernel[(triton.cdiv(M, 32), triton.cdiv(N, 32))](
            a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), sbn, c.stride(0), c.stride(1),
            BM=32, BN=32, BK=16, MASK_K=bug != "k_tail", ACC16=bug == "acc16",
            IEEE=fp32 and bug != "tf32", UNIT_BN=bug == "unit_bn")
    return launch


def mm_make(spec, device):
    a, b = S.matmul_tensors(spec, device)
    return {"a": a, "b": b}


_mm = dict(inputs=lambda dtype, max_elements: S.matmul_inputs(dtype, min(max_elements, CAP), tile=32),
           make=mm_make, outputs=lambda a: {"c": ((a["a"].shape[0], a["b"].shape[1]), a["a"].dtype)},
           oracle=lambda a: {"c": a["a"] @ a["b"]},
           tolerance=lambda a, refs, dtype: {"c": T.dot(a["a"], a["b"], dtype, "fp32", inputs=dtype)},
           reduction="K")
case("ok_mm", dtypes=("fp16", "fp32"), launch=mm_launch(), **_mm)
case("bug_mm_k_tail", dtypes=("fp16",), launch=mm_launch("k_tail"), **_mm)
case("bug_mm_fp16_acc", dtypes=("fp16",), launch=mm_launch("acc16"), **_mm)
case("bug_mm_tf32_default", dtypes=("fp32",), launch=mm_launch("tf32"), **_mm)
case("bug_mm_b_unit_col_stride", dtypes=("fp16",), launch=mm_launch("unit_bn"), **_mm)


# =================================================================================== 2. tensor descriptors (TMA)
# Device-side descriptors need 16-byte-aligned row strides and base (Triton's make_tensor_descriptor
# docstring; TensorDescriptor asserts it on the host). The bug launches them on any tensor.
@triton.jit
def desc_scale_kernel(x_ptr, y_ptr, rows, cols, xs, ys, BR: tl.constexpr, BC: tl.constexpr):
    xd = tl.make_tensor_descriptor(x_ptr, shape=[rows, cols], strides=[xs, 1], block_shape=[BR, BC])
    yd = tl.make_tensor_descriptor(y_ptr, shape=[rows, cols], strides=[ys, 1], block_shape=[BR, BC])
    r0 = tl.program_id(0) * BR
    c0 = tl.program_id(1) * BC
    x = xd.load([r0, c0]).to(tl.float32)
    yd.store([r0, c0], (2.0 * x).to(y_ptr.dtype.element_ty))


@triton.jit
def ptr_scale_kernel(x_ptr, y_ptr, rows, cols, xs, ys, BR: tl.constexpr, BC: tl.constexpr):
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    c = tl.program_id(1) * BC + tl.arange(0, BC)
    m = (r[:, None] < rows) & (c[None, :] < cols)
    x = tl.load(x_ptr + r[:, None].to(tl.int64) * xs + c[None, :], mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + r[:, None].to(tl.int64) * ys + c[None, :], (2.0 * x).to(y_ptr.dtype.element_ty), mask=m)


def _tma_ok(t):
    return t.data_ptr() % 16 == 0 and (t.stride(0) * t.element_size()) % 16 == 0 and t.stride(1) == 1


def desc_launch(check):
    def launch(args, outs):
        x, y = args["x"], outs["y"]
        rows, cols = x.shape
        grid = (triton.cdiv(rows, 16), triton.cdiv(cols, 16))
        if check and not (_tma_ok(x) and _tma_ok(y)):
            ptr_scale_kernel[grid](x, y, rows, cols, x.stride(0), y.stride(0), BR=16, BC=16)
        else:                                                # BUG (not check): unaligned strides too
            desc_scale_kernel[grid](x, y, rows, cols, x.stride(0), y.stride(0), BR=16, BC=16)
    return launch


_desc = dict(dtypes=("fp16",), inputs=rows_spec(16, max_rows=40), make=x_rows, outputs=same_shape(),
             oracle=lambda a: {"y": 2.0 * a["x"]},
             tolerance=lambda a, refs, dtype: {"y": T.rounding(dtype, "fp32")})
case("ok_tma_aligned_or_fallback", launch=desc_launch(True), **_desc)
case("bug_tma_unaligned_stride", launch=desc_launch(False), **_desc)


# =================================================================================== 3. flash attention
@triton.jit
def attn_kernel(q_ptr, k_ptr, v_ptr, o_ptr, kvlen_ptr, S_, D, scale,
                BM: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr, CAUSAL: tl.constexpr,
                CAUSAL_LT: tl.constexpr, RESCALE: tl.constexpr, INF_GUARD: tl.constexpr):
    pm = tl.program_id(0)
    bh = tl.program_id(1)
    base = bh.to(tl.int64) * S_ * D
    rm = pm * BM + tl.arange(0, BM)
    rd = tl.arange(0, BD)
    q = tl.load(q_ptr + base + rm[:, None] * D + rd[None, :], mask=(rm[:, None] < S_) & (rd[None, :] < D), other=0.0)
    kvlen = tl.load(kvlen_ptr + bh)
    m_i = tl.full([BM], -float("inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, BD], tl.float32)
    for n0 in range(0, S_, BN):
        rn = n0 + tl.arange(0, BN)
        kv_m = (rn[:, None] < kvlen) & (rd[None, :] < D)
        k = tl.load(k_ptr + base + rn[:, None] * D + rd[None, :], mask=kv_m, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        valid = (rn < kvlen)[None, :] & (rm < S_)[:, None]
        if CAUSAL:
            if CAUSAL_LT:
                valid = valid & (rn[None, :] < rm[:, None])      # BUG: the diagonal masked out
            else:
                valid = valid & (rn[None, :] <= rm[:, None])
        s = tl.where(valid, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        if INF_GUARD:
            m_use = tl.where(m_new == -float("inf"), 0.0, m_new)
        else:
            m_use = m_new                                        # BUG: -inf - -inf = NaN on empty rows
        alpha = tl.exp(m_i - m_use)
        p = tl.exp(s - m_use[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        if RESCALE:
            acc = acc * alpha[:, None]
        # else BUG: the accumulator keeps the old max's scale
        v = tl.load(v_ptr + base + rn[:, None] * D + rd[None, :], mask=kv_m, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    if INF_GUARD:
        l_i = tl.where(l_i == 0.0, 1.0, l_i)
    o = acc / l_i[:, None]
    tl.store(o_ptr + base + rm[:, None] * D + rd[None, :], o.to(o_ptr.dtype.element_ty),
             mask=(rm[:, None] < S_) & (rd[None, :] < D))


def attn_inputs(dtype, max_elements):
    return st.fixed_dictionaries({
        "dtype": st.just(dtype), "BH": st.integers(1, 3), "S": S.lengths(16, 64),
        "D": st.sampled_from([16, 24, 32, 40, 64]), "causal": st.booleans(), "seed": S.seeds(),
        "regime": S.regimes(("normal", "large", "equal"))})


def attn_make(spec, device):
    g = S.generator(spec["seed"])
    shape = (spec["BH"], spec["S"], spec["D"])
    q, k, v = (S.values(shape, spec["dtype"], spec["regime"] if i < 2 else "normal", g, 0.5) for i in range(3))
    # keys past kvlen are padding; a length of 0 (a fully padded sequence) gives rows with no key
    kvlen = S.integers(0, spec["S"] + 1, (spec["BH"],), g).to(torch.int32)
    kvlen[0] = spec["S"]
    if spec["BH"] > 1 and spec["seed"] % 3 == 0:
        kvlen[-1] = 0
    return {"q": q.to(device), "k": k.to(device), "v": v.to(device), "kvlen": kvlen.to(device),
            "causal": spec["causal"]}


def attn_valid(a):
    bh, s_ = a["q"].shape[:2]
    j = torch.arange(s_, device=a["q"].device)
    valid = (j[None, None, :] < a["kvlen"].long()[:, None, None]).expand(bh, s_, s_)
    if a["causal"]:
        valid = valid & (j[None, None, :] <= j[None, :, None])
    return valid


def attn_oracle(a):
    valid = attn_valid(a)
    s = (a["q"] @ a["k"].transpose(1, 2)) * a["q"].shape[-1] ** -0.5
    s = s.masked_fill(~valid, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(nan=0.0)       # a row with no key: output 0 by definition
    return {"o": p @ a["v"]}


def attn_tol(a, refs, dtype):
    """Relative error of each p_ij = softmax(s)_ij (u = u(fp32), one ULP <= 2u):
        logit error  e_ij = scale (D + 2) u (|q_i| . |k_j|) + u |s_ij|   (fp32 dot of exact products, the scale)
        R_i = 2 max_j e_ij + max_j |s_ij - m_i| u + (2 EXP_ULP + 2)(nb + 1) u   (shift, exp arguments and
              results, the online rescales over nb key blocks)
    o_id = sum_j p_ij v_jd / l_i: |err| <= (2 R_i + (2 S + 2 + 2 DIV_ULP) u + u(in)) sum_j p_ij |v_jd|
              + S sub(in) max_j |v_jd| + sub(out)   (l_i's S adds and the PV dot's; p cast to the input format)."""
    q, k, v = a["q"], a["k"], a["v"]
    s_, d = q.shape[1], q.shape[2]
    scale = d ** -0.5
    valid = attn_valid(a)
    s = (q @ k.transpose(1, 2)) * scale
    e = scale * (d + 2) * U32 * (q.abs() @ k.abs().transpose(1, 2)) + U32 * s.abs()
    sm = s.masked_fill(~valid, float("-inf"))
    m = sm.amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    dist = torch.where(valid, (s - m).abs(), torch.zeros_like(s)).amax(-1, keepdim=True)
    emax = torch.where(valid, e, torch.zeros_like(e)).amax(-1, keepdim=True)
    nb = -(-s_ // 16)
    r = 2 * emax + dist * U32 + (2 * EXP_ULP + 2) * (nb + 1) * U32
    p = torch.softmax(sm, dim=-1).nan_to_num(nan=0.0)
    uin = portcheck.fmt(dtype).unit_roundoff
    rel = 2 * r + (2 * s_ + 2 + 2 * DIV_ULP) * U32 + uin
    atol = (rel * (p @ v.abs()) + s_ * portcheck.fmt(dtype).subnormal_step * v.abs().amax(1, keepdim=True)
            + portcheck.fmt(dtype).subnormal_step)
    return {"o": Tolerance(uin, atol, "rtol = u(out); atol_id = (2 R_i + (2S + 2 + 2 DIV_ULP) u + u(in)) "
                                      "sum_j p_ij |v_jd| + S sub(in) max|v_d| + sub(out); R_i = 2 max_j e_ij + "
                                      "max_j |s_ij - m_i| u + (2 EXP_ULP + 2)(nb + 1) u, e_ij = scale (D+2) u "
                                      "|q_i|.|k_j| + u |s_ij|, u = u(fp32)")}


def attn_launch(bug=None):
    def launch(args, outs):
        q, o = args["q"], outs["o"]
        bh, s_, d = q.shape
        bd = triton.next_power_of_2(d)
        scale = (bd if bug == "scale_pow2" else d) ** -0.5     # BUG (scale_pow2): the padded head dim
        attn_kernel[(triton.cdiv(s_, 16), bh)](q, args["k"], args["v"], o, args["kvlen"], s_, d, scale,
                                              BM=16, BN=16, BD=bd, CAUSAL=args["causal"],
                                              CAUSAL_LT=bug == "causal_lt", RESCALE=bug != "no_rescale",
                                              INF_GUARD=bug != "masked_row_nan")
    return launch


_attn = dict(dtypes=("fp16",), inputs=attn_inputs, make=attn_make,
             outputs=lambda a: {"o": (tuple(a["q"].shape), a["q"].dtype)},
             oracle=attn_oracle, tolerance=attn_tol, math=("exp",))
case("ok_attn", launch=attn_launch(), **_attn)
case("bug_attn_causal_lt", launch=attn_launch("causal_lt"), **_attn)
case("bug_attn_no_rescale", launch=attn_launch("no_rescale"), **_attn)
case("bug_attn_scale_pow2", launch=attn_launch("scale_pow2"), **_attn)
case("bug_attn_masked_row_nan", launch=attn_launch("masked_row_nan"), **_attn)


# =================================================================================== 4. RoPE (rotate-half), positions per token
@triton.jit
def rope_kernel(x_ptr, pos_ptr, cos_ptr, sin_ptr, y_ptr, H, D, HALF_BLOCK: tl.constexpr, USE_POS: tl.constexpr):
    t = tl.program_id(0)
    h = tl.program_id(1)
    half = D // 2
    if USE_POS:
        p = tl.load(pos_ptr + t)
    else:
        p = t                                                    # BUG: the token's index as its position
    offs = tl.arange(0, HALF_BLOCK)
    m = offs < half
    base = (t * H + h).to(tl.int64) * D
    x1 = tl.load(x_ptr + base + offs, mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + base + half + offs, mask=m, other=0.0).to(tl.float32)
    c = tl.load(cos_ptr + p * half + offs, mask=m, other=0.0)
    s = tl.load(sin_ptr + p * half + offs, mask=m, other=0.0)
    tl.store(y_ptr + base + offs, (x1 * c - x2 * s).to(y_ptr.dtype.element_ty), mask=m)
    tl.store(y_ptr + base + half + offs, (x2 * c + x1 * s).to(y_ptr.dtype.element_ty), mask=m)


def rope_inputs(dtype, max_elements):
    return st.fixed_dictionaries({"dtype": st.just(dtype), "lens": st.lists(st.integers(1, 6), min_size=1, max_size=3),
                                  "H": st.integers(1, 3), "D": st.sampled_from([2, 4, 8, 16, 24, 64]),
                                  "seed": S.seeds(), "regime": S.regimes(("normal", "large", "equal"))})


def rope_make(spec, device):
    g = S.generator(spec["seed"])
    starts = S.integers(0, 40, (len(spec["lens"]),), g)
    pos = torch.cat([s + torch.arange(n) for s, n in zip(starts.tolist(), spec["lens"])]).to(torch.int32)
    t, h, d = int(pos.numel()), spec["H"], spec["D"]
    inv = 10000.0 ** (-torch.arange(0, d // 2, dtype=torch.float64) * 2 / d)
    ang = torch.arange(64, dtype=torch.float64)[:, None] * inv[None, :]
    return {"x": S.values((t, h, d), spec["dtype"], spec["regime"], g).to(device), "pos": pos.to(device),
            "cos": ang.cos().to(torch.float32).to(device), "sin": ang.sin().to(torch.float32).to(device)}


def rope_oracle(a):
    x, d = a["x"], a["x"].shape[-1]
    c, s = a["cos"][a["pos"].long()][:, None, :], a["sin"][a["pos"].long()][:, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return {"y": torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)}


def rope_tol(a, refs, dtype):
    x, d = a["x"], a["x"].shape[-1]
    c, s = a["cos"][a["pos"].long()][:, None, :].abs(), a["sin"][a["pos"].long()][:, None, :].abs()
    x1, x2 = x[..., : d // 2].abs(), x[..., d // 2:].abs()
    terms = torch.cat([x1 * c + x2 * s, x2 * c + x1 * s], dim=-1)
    return {"y": T.elementwise(dtype, "fp32", ops=2, terms=terms)}


def rope_launch(use_pos):
    def launch(args, outs):
        x = args["x"]
        t, h, d = x.shape
        rope_kernel[(t, h)](x, args["pos"], args["cos"], args["sin"], outs["y"], h, d,
                            HALF_BLOCK=triton.next_power_of_2(max(1, d // 2)), USE_POS=use_pos)
    return launch


_rope = dict(dtypes=("fp16",), inputs=rope_inputs, make=rope_make, outputs=same_shape(),
             oracle=rope_oracle, tolerance=rope_tol)
case("ok_rope", launch=rope_launch(True), **_rope)
case("bug_rope_token_index_as_position", launch=rope_launch(False), **_rope)


# =================================================================================== 5. paged KV-cache write, padding slots -1
@triton.jit
def kv_write_kernel(key_ptr, slot_ptr, cache_ptr, HD, BS, BLOCK: tl.constexpr, SKIP_PAD: tl.constexpr):
    t = tl.program_id(0)
    slot = tl.load(slot_ptr + t)
    offs = tl.arange(0, BLOCK)
    m = offs < HD
    k = tl.load(key_ptr + t.to(tl.int64) * HD + offs, mask=m, other=0.0)
    blk = slot // BS
    off = slot % BS
    dst = cache_ptr + (blk * BS + off) * HD + offs
    if SKIP_PAD:
        # (a block mask & a scalar bool fails in Triton 3.9's interpreter: 'mask has unsupported dtype')
        m = m & ((tl.zeros([BLOCK], tl.int64) + slot) >= 0)
    # else BUG: a padding token (slot -1) is written to block 0, offset -1
    tl.store(dst, k, mask=m)


def kv_inputs(dtype, max_elements):
    return st.fixed_dictionaries({"dtype": st.just(dtype), "T": st.integers(1, 12), "H": st.integers(1, 2),
                                  "D": st.sampled_from([8, 16, 24]), "BS": st.sampled_from([4, 16]),
                                  "NB": st.integers(1, 4), "seed": S.seeds(), "pad": st.integers(0, 3)})


def kv_make(spec, device):
    g = S.generator(spec["seed"])
    nslots = spec["NB"] * spec["BS"]
    t = min(spec["T"], nslots)
    slots = torch.randperm(nslots, generator=g)[:t]
    pad = min(spec["pad"], t)
    if pad:
        slots[torch.randperm(t, generator=g)[:pad]] = -1
    key = S.values((t, spec["H"], spec["D"]), spec["dtype"], "normal", g)
    return {"key": key.to(device), "slot": slots.to(torch.int64).to(device),
            "cache_shape": (spec["NB"], spec["BS"], spec["H"], spec["D"]), "BS": spec["BS"]}


def kv_oracle(a):
    cache = torch.full(a["cache_shape"], float("nan"), dtype=torch.float64)
    flat = cache.view(-1, a["key"].shape[1] * a["key"].shape[2])
    for i, s in enumerate(a["slot"].tolist()):
        if s >= 0:
            flat[s] = a["key"][i].reshape(-1).cpu()
    return {"cache": cache.to(a["key"].device)}


def kv_launch(skip):
    def launch(args, outs):
        key = args["key"]
        hd = key.shape[1] * key.shape[2]
        kv_write_kernel[(key.shape[0],)](key, args["slot"], outs["cache"], hd, args["BS"],
                                         BLOCK=triton.next_power_of_2(hd), SKIP_PAD=skip)
    return launch


_kv = dict(dtypes=("fp16",), inputs=kv_inputs, make=kv_make,
           outputs=lambda a: {"cache": (a["cache_shape"], a["key"].dtype)}, oracle=kv_oracle,
           tolerance=lambda a, refs, dtype: {"cache": T.rounding(dtype, "fp32")})
case("ok_kv_write", launch=kv_launch(True), **_kv)
case("bug_kv_write_pad_slot", launch=kv_launch(False), **_kv)


# =================================================================================== 6. MoE top-2 routing weights
@triton.jit
def topk2_kernel(x_ptr, ids_ptr, w_ptr, E, xs, BLOCK: tl.constexpr, RENORM: tl.constexpr, FAST_TIES: tl.constexpr):
    t = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < E
    x = tl.load(x_ptr + t.to(tl.int64) * xs + offs, mask=m, other=-float("inf")).to(tl.float32)
    mx = tl.max(x, 0)
    e = tl.where(m, tl.exp(x - mx), 0.0)
    p = e / tl.sum(e, 0)
    # FAST_TIES BUG: ties go to whichever lane the reduction tree meets last on a GPU (torch.topk and
    # the routing spec take the lower index)
    i1 = tl.argmax(x, 0, tie_break_left=not FAST_TIES)
    x2 = tl.where(offs == i1, -float("inf"), x)
    i2 = tl.argmax(x2, 0, tie_break_left=not FAST_TIES)
    p1 = tl.sum(tl.where(offs == i1, p, 0.0), 0)
    p2 = tl.sum(tl.where(offs == i2, p, 0.0), 0)
    if RENORM:
        tot = p1 + p2
        p1 = p1 / tot
        p2 = p2 / tot
    # else BUG: top-k weights not renormalised
    tl.store(ids_ptr + 2 * t, i1)
    tl.store(ids_ptr + 2 * t + 1, i2)
    tl.store(w_ptr + 2 * t, p1)
    tl.store(w_ptr + 2 * t + 1, p2)


def moe_inputs(dtype, max_elements):
    return st.fixed_dictionaries({"dtype": st.just(dtype), "rows": st.integers(1, 16),
                                  "cols": st.sampled_from([2, 3, 8, 13, 64]), "seed": S.seeds(),
                                  "regime": S.regimes(("normal", "large", "equal", "offset")),
                                  "layout": S.layouts()})


def moe_oracle(a):
    x = a["x"]
    order = torch.sort(x, dim=-1, descending=True, stable=True).indices[:, :2]   # ties: the lower index
    p = torch.softmax(x, dim=-1).gather(1, order)
    return {"ids": order.to(torch.int32), "w": p / p.sum(-1, keepdim=True)}


def moe_tol(a, refs, dtype):
    """w_k = e_k / (e_1 + e_2), e_k = exp(x_k - m): each e_k errs by (2 EXP_ULP + |x_k - m|) u, p = e / sum
    adds 2 DIV_ULP u + n u (the sum), and the renormalisation 2 DIV_ULP u + u (sum cancels): rtol =
    u + 2 (2 EXP_ULP + max|x_k - m|) u + 4 DIV_ULP u + 2 n u + 2u."""
    x = a["x"]
    top = torch.sort(x, dim=-1, descending=True, stable=True).values[:, :2]
    dist = (top - x.amax(-1, keepdim=True)).abs().amax(-1, keepdim=True)
    n = x.shape[-1]
    rtol = U32 * (1 + 2 * (2 * EXP_ULP + dist) + 4 * DIV_ULP + 2 * n + 2)
    return {"ids": T.exact("top-2 expert ids, ties to the lower index"),
            "w": Tolerance(rtol.expand(-1, 2), 4 * SUB32, "rtol_t = u (1 + 2 (2 EXP_ULP + max|x_k - m|) + "
                                                         "4 DIV_ULP + 2n + 2), u = u(fp32); atol = 4 sub(fp32)")}


def moe_launch(renorm, fast_ties=False):
    def launch(args, outs):
        x = args["x"]
        topk2_kernel[(x.shape[0],)](x, outs["ids"], outs["w"], x.shape[1], x.stride(0),
                                    BLOCK=triton.next_power_of_2(x.shape[1]), RENORM=renorm, FAST_TIES=fast_ties)
    return launch


def moe_make(spec, device):
    return {"x": S.row_tensor(spec, device)}


_moe = dict(dtypes=("fp32",), inputs=moe_inputs, make=moe_make,
            outputs=lambda a: {"ids": ((a["x"].shape[0], 2), torch.int32), "w": ((a["x"].shape[0], 2), torch.float32)},
            oracle=moe_oracle, tolerance=moe_tol, math=("exp",))
case("ok_moe_top2", launch=moe_launch(True), **_moe)
case("bug_moe_top2_not_renormalised", launch=moe_launch(False), **_moe)
case("bug_moe_top2_fast_tie_break", launch=moe_launch(True, fast_ties=True), **_moe)


# =================================================================================== 7. dropout: per-element offsets
@triton.jit
def dropout_kernel(x_ptr, y_ptr, keep_ptr, xs, cols, p, scale, seed, BLOCK: tl.constexpr, PER_ROW: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    x = tl.load(x_ptr + row.to(tl.int64) * xs + offs, mask=m, other=0.0).to(tl.float32)
    if PER_ROW:
        r = tl.rand(seed, row * cols + offs)
    else:
        r = tl.rand(seed, offs)                                  # BUG: the same mask in every row
    keep = r > p
    tl.store(y_ptr + row * cols + offs, tl.where(keep, x * scale, 0.0).to(y_ptr.dtype.element_ty), mask=m)
    tl.store(keep_ptr + row * cols + offs, keep.to(tl.uint8), mask=m)


def dropout_inputs(dtype, max_elements):
    return st.tuples(S.row_inputs(dtype, min(max_elements, CAP), tile=64, max_rows=8),
                     st.sampled_from([0.1, 0.5, 0.9]), st.integers(0, 2**31 - 1)).map(
        lambda t: {**t[0], "p": t[1], "rng_seed": t[2]})


def dropout_make(spec, device):
    return {"x": S.row_tensor(spec, device), "p": spec["p"], "rng_seed": spec["rng_seed"]}


def dropout_keep(a):
    rows, cols = a["x"].shape
    r = philox.rand(a["rng_seed"], np.arange(rows * cols, dtype=np.int64))
    return torch.from_numpy(r > np.float32(a["p"])).reshape(rows, cols).to(a["x"].device)


def dropout_oracle(a):
    keep = dropout_keep(a)
    return {"y": torch.where(keep, a["x"] / (1.0 - a["p"]), torch.zeros_like(a["x"])), "keep": keep.to(torch.uint8)}


def dropout_tol(a, refs, dtype):
    scale = 1.0 / (1.0 - a["p"])
    return {"y": T.elementwise(dtype, "fp32", ops=2, terms=a["x"].abs() * scale),
            "keep": T.exact("Philox keep mask: tl.rand(seed, row * cols + col) > p")}


def dropout_launch(per_row):
    def launch(args, outs):
        x = args["x"]
        dropout_kernel[(x.shape[0],)](x, outs["y"], outs["keep"], x.stride(0), x.shape[1], args["p"],
                                      1.0 / (1.0 - args["p"]), args["rng_seed"],
                                      BLOCK=triton.next_power_of_2(x.shape[1]), PER_ROW=per_row)
    return launch


_drop = dict(dtypes=("fp16",), inputs=dropout_inputs, make=dropout_make,
             outputs=lambda a: {"y": (tuple(a["x"].shape), a["x"].dtype), "keep": (tuple(a["x"].shape), torch.uint8)},
             oracle=dropout_oracle, tolerance=dropout_tol)
case("ok_dropout", launch=dropout_launch(True), **_drop)
case("bug_dropout_same_mask_every_row", launch=dropout_launch(False), **_drop)


# =================================================================================== 8. LayerNorm using its input as scratch
@triton.jit
def ln_looped_kernel(x_ptr, y_ptr, xs, ys, cols, eps, BLOCK: tl.constexpr, SCRATCH: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    ar = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for c0 in range(0, cols, BLOCK):
        offs = c0 + ar
        acc += tl.load(x_ptr + row * xs + offs, mask=offs < cols, other=0.0).to(tl.float32)
    mean = tl.sum(acc, 0) / cols
    acc = tl.zeros([BLOCK], tl.float32)
    for c0 in range(0, cols, BLOCK):
        offs = c0 + ar
        d = tl.where(offs < cols, tl.load(x_ptr + row * xs + offs, mask=offs < cols, other=0.0).to(tl.float32) - mean, 0.0)
        if SCRATCH:
            tl.store(x_ptr + row * xs + offs, d, mask=offs < cols)     # BUG: the input holds x - mean now
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, 0) / cols + eps)
    for c0 in range(0, cols, BLOCK):
        offs = c0 + ar
        x = tl.load(x_ptr + row * xs + offs, mask=offs < cols, other=0.0).to(tl.float32)
        d = x if SCRATCH else x - mean
        tl.store(y_ptr + row * ys + offs, (d * rstd).to(y_ptr.dtype.element_ty), mask=offs < cols)


def ln_launch(scratch):
    def launch(args, outs):
        x, y = args["x"], outs["y"]
        ln_looped_kernel[(x.shape[0],)](x, y, x.stride(0), y.stride(0), x.shape[1], args["eps"], BLOCK=32,
                                        SCRATCH=scratch)
    return launch


_ln = dict(dtypes=("fp32",), inputs=rows_spec(32), make=lambda spec, device: {"x": S.row_tensor(spec, device), "eps": 1e-5},
           outputs=same_shape(),
           oracle=lambda a: {"y": torch.nn.functional.layer_norm(a["x"], a["x"].shape[-1:], eps=a["eps"])},
           tolerance=lambda a, refs, dtype: {"y": T.normalization(a["x"], dtype, "fp32", eps=a["eps"])},
           math=("sqrt",))
case("ok_ln_looped", launch=ln_launch(False), **_ln)
case("bug_ln_input_as_scratch", launch=ln_launch(True), **_ln)


# =================================================================================== 9. column sums: atomic_add without its mask
@triton.jit
def colsum_kernel(x_ptr, y_ptr, rows, cols, xs, BR: tl.constexpr, BC: tl.constexpr, MASKED: tl.constexpr):
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    c = tl.arange(0, BC)
    x = tl.load(x_ptr + r[:, None].to(tl.int64) * xs + c[None, :], mask=(r < rows)[:, None] & (c < cols)[None, :],
                other=0.0).to(tl.float32)
    part = tl.sum(x, 0)
    if MASKED:
        tl.atomic_add(y_ptr + c, part, mask=c < cols)
    else:
        tl.atomic_add(y_ptr + c, part)                           # BUG: lanes past cols add 0.0 past y's end


def colsum_launch(masked):
    def launch(args, outs):
        x, y = args["x"], outs["y"]
        y.zero_()
        colsum_kernel[(triton.cdiv(x.shape[0], 4),)](x, y, x.shape[0], x.shape[1], x.stride(0), BR=4,
                                                     BC=triton.next_power_of_2(x.shape[1]), MASKED=masked)
    return launch


_colsum = dict(dtypes=("fp32",), inputs=rows_spec(32, max_rows=32), make=x_rows,
               outputs=lambda a: {"y": ((a["x"].shape[1],), torch.float32)},
               oracle=lambda a: {"y": a["x"].sum(0)},
               tolerance=lambda a, refs, dtype: {"y": T.row_reduction(a["x"].transpose(0, 1), "fp32", "fp32")},
               nondeterministic=True)
case("ok_colsum_atomic", launch=colsum_launch(True), **_colsum)
case("bug_colsum_atomic_unmasked", launch=colsum_launch(False), **_colsum)


# =================================================================================== 10-11. row sums: fp16 tl.sum, load without other
@triton.jit
def rowsum_kernel(x_ptr, y_ptr, xs, cols, BLOCK: tl.constexpr, UPCAST: tl.constexpr, OTHER: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    if OTHER:
        x = tl.load(x_ptr + row * xs + offs, mask=offs < cols, other=0.0)
    else:
        x = tl.load(x_ptr + row * xs + offs, mask=offs < cols)  # BUG: masked-off lanes undefined, then summed
    if UPCAST:
        s = tl.sum(x.to(tl.float32), 0)
    else:
        s = tl.sum(x, 0)                                         # BUG: accumulates in the input format
    tl.store(y_ptr + row, s.to(y_ptr.dtype.element_ty))


def rowsum_launch(upcast=True, other=True):
    def launch(args, outs):
        x = args["x"]
        rowsum_kernel[(x.shape[0],)](x, outs["y"], x.stride(0), x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]),
                                     UPCAST=upcast, OTHER=other)
    return launch


_rowsum = dict(inputs=rows_spec(32), make=x_rows,
               outputs=lambda a: {"y": ((a["x"].shape[0],), a["x"].dtype)},
               oracle=lambda a: {"y": a["x"].sum(-1)},
               tolerance=lambda a, refs, dtype: {"y": T.row_reduction(a["x"], dtype, "fp32")})
case("ok_rowsum", dtypes=("fp16", "bf16"), launch=rowsum_launch(), **_rowsum)
case("bug_rowsum_half_accumulator", dtypes=("fp16", "bf16"), launch=rowsum_launch(upcast=False), **_rowsum)
case("bug_rowsum_load_without_other", dtypes=("fp16",), launch=rowsum_launch(other=False), **_rowsum)


# =================================================================================== 12. a lying alignment hint
# Rows of a power-of-two length (no column mask); the bug claims every row starts 16 elements aligned,
# which padded rows (row stride cols + 17) are not: on a GPU the hint licenses 16-byte vector loads.
@triton.jit
def pow2_rowsum_kernel(x_ptr, y_ptr, xs, BLOCK: tl.constexpr, LIE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    start = row * xs
    if LIE:
        start = tl.multiple_of(start, 16)                        # BUG: not true for padded rows
    x = tl.load(x_ptr + start + tl.arange(0, BLOCK)).to(tl.float32)
    tl.store(y_ptr + row, tl.sum(x, 0).to(y_ptr.dtype.element_ty))


def pow2_inputs(dtype, max_elements):
    return st.fixed_dictionaries({"dtype": st.just(dtype), "rows": st.integers(1, 8),
                                  "cols": st.sampled_from([16, 32, 64, 128, 256]), "seed": S.seeds(),
                                  "regime": S.regimes(), "layout": S.layouts()})


def pow2_launch(lie):
    def launch(args, outs):
        x = args["x"]
        if x.shape[1] & (x.shape[1] - 1) or x.stride(1) != 1:
            raise ValueError("rows of a power-of-two length, contiguous, only")
        pow2_rowsum_kernel[(x.shape[0],)](x, outs["y"], x.stride(0), BLOCK=x.shape[1], LIE=lie)
    return launch


_pow2 = dict(dtypes=("fp16",), inputs=pow2_inputs, make=x_rows,
             outputs=lambda a: {"y": ((a["x"].shape[0],), a["x"].dtype)},
             oracle=lambda a: {"y": a["x"].sum(-1)},
             tolerance=lambda a, refs, dtype: {"y": T.row_reduction(a["x"], dtype, "fp32")})
case("ok_aligned_rowsum", launch=pow2_launch(False), **_pow2)
case("bug_rowsum_multiple_of_lie", launch=pow2_launch(True), **_pow2)


# =================================================================================== 13-15. autotuning
# 13. atomic counts under @triton.autotune without reset_to_zero: every benchmark run of the first
#     call adds into counts (the launcher zeroes it once, before the call)
@triton.jit
def bincount_kernel(ids_ptr, counts_ptr, n, E: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ids = tl.load(ids_ptr + offs, mask=offs < n, other=-1)
    for e in tl.static_range(E):
        tl.atomic_add(counts_ptr + e, tl.sum((ids == e).to(tl.int32), axis=0))


_BIN_CONFIGS = [triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})]
bincount_reset = triton.autotune(_BIN_CONFIGS, key=["n"], reset_to_zero=["counts_ptr"])(bincount_kernel)
bincount_noreset = triton.autotune(_BIN_CONFIGS, key=["n"])(bincount_kernel)     # BUG: no reset_to_zero


def bincount_inputs(dtype, max_elements):
    return st.fixed_dictionaries({"dtype": st.just(dtype), "n": S.lengths(64, min(max_elements, CAP)),
                                  "E": st.sampled_from([4, 8]), "seed": S.seeds()})


def bincount_launch(kernel):
    def launch(args, outs):
        ids, c = args["ids"], outs["counts"]
        c.zero_()
        kernel[lambda meta: (triton.cdiv(ids.numel(), meta["BLOCK"]),)](ids, c, ids.numel(), E=args["E"])
    return launch


_bin = dict(dtypes=("int32",), inputs=bincount_inputs,
            make=lambda spec, device: {"ids": S.integers(0, spec["E"], (spec["n"],), S.generator(spec["seed"]))
                                       .to(torch.int32).to(device), "E": spec["E"]},
            outputs=lambda a: {"counts": ((a["E"],), torch.int32)},
            oracle=lambda a: {"counts": torch.bincount(a["ids"].long(), minlength=a["E"]).to(torch.int32)},
            tolerance=lambda a, refs, dtype: {"counts": T.exact()})
case("ok_autotune_reset_to_zero", launch=bincount_launch(bincount_reset), **_bin)
case("bug_autotune_no_reset_to_zero", launch=bincount_launch(bincount_noreset), **_bin)


# 14. an unmasked chunk loop made safe by pruning configs to divisors of cols, but `cols` is not in the
#     autotune key: the config chosen for one cols is reused for another
@triton.jit
def even_rowsum_kernel(x_ptr, y_ptr, rows, xs, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], tl.float32)
    for c0 in range(0, cols, BLOCK):
        acc += tl.load(x_ptr + row * xs + c0 + tl.arange(0, BLOCK)).to(tl.float32)
    tl.store(y_ptr + row, tl.sum(acc, 0))


def _divisors_of_cols(configs, named_args, **kwargs):
    return [c for c in configs if named_args["cols"] % c.kwargs["BLOCK"] == 0]


_EVEN_CONFIGS = [triton.Config({"BLOCK": b}) for b in (1, 2, 4, 8, 16, 32)]
even_rowsum_keyed = triton.autotune(_EVEN_CONFIGS, key=["rows", "cols"],
                                    prune_configs_by={"early_config_prune": _divisors_of_cols})(even_rowsum_kernel)
even_rowsum_unkeyed = triton.autotune(_EVEN_CONFIGS, key=["rows"],                    # BUG: cols not in the key
                                      prune_configs_by={"early_config_prune": _divisors_of_cols})(even_rowsum_kernel)


def even_launch(kernel):
    def launch(args, outs):
        x = args["x"]
        kernel[(x.shape[0],)](x, outs["y"], x.shape[0], x.stride(0), x.shape[1])
    return launch


_even = dict(dtypes=("fp32",), inputs=rows_spec(32), make=x_rows,
             outputs=lambda a: {"y": ((a["x"].shape[0],), torch.float32)},
             oracle=lambda a: {"y": a["x"].sum(-1)},
             tolerance=lambda a, refs, dtype: {"y": T.row_reduction(a["x"], "fp32", "fp32")})
case("ok_autotune_key_has_cols", launch=even_launch(even_rowsum_keyed), **_even)
case("bug_autotune_key_missing_cols", launch=even_launch(even_rowsum_unkeyed), **_even)


# 15. one autotune configuration of three left EVEN=True (no masks) from tuning at a power-of-two size
@triton.jit
def scale_vec_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        x = tl.load(x_ptr + offs).to(tl.float32)
        tl.store(y_ptr + offs, (3.0 * x).to(y_ptr.dtype.element_ty))
    else:
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
        tl.store(y_ptr + offs, (3.0 * x).to(y_ptr.dtype.element_ty), mask=offs < n)


scale_vec_good = triton.autotune([triton.Config({"BLOCK": b, "EVEN": False}) for b in (32, 64, 128)],
                                 key=["n"])(scale_vec_kernel)
scale_vec_bad = triton.autotune([triton.Config({"BLOCK": 32, "EVEN": False}), triton.Config({"BLOCK": 64, "EVEN": False}),
                                 triton.Config({"BLOCK": 128, "EVEN": True})],           # BUG: one config unmasked
                                key=["n"])(scale_vec_kernel)


def scale_vec_launch(kernel):
    def launch(args, outs):
        x = args["x"]
        kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, outs["y"], x.numel())
    return launch


_svec = dict(dtypes=("fp32",),
             inputs=lambda dtype, max_elements: st.fixed_dictionaries(
                 {"dtype": st.just(dtype), "n": S.lengths(128, min(max_elements, CAP)), "seed": S.seeds(),
                  "regime": S.regimes()}),
             make=lambda spec, device: {"x": S.values((spec["n"],), spec["dtype"], spec["regime"],
                                                      S.generator(spec["seed"])).to(device)},
             outputs=same_shape(), oracle=lambda a: {"y": 3.0 * a["x"]},
             tolerance=lambda a, refs, dtype: {"y": T.rounding(dtype, "fp32", ops=1)})
case("ok_autotune_configs", launch=scale_vec_launch(scale_vec_good), **_svec)
case("bug_autotune_one_config_unmasked", launch=scale_vec_launch(scale_vec_bad), **_svec)


# =================================================================================== 16. last arriver: atomic scope / semantics
@triton.jit
def arrive_kernel(x_ptr, ws_ptr, cnt_ptr, y_ptr, xs, cols, nsplit, CHUNK: tl.constexpr, NSB: tl.constexpr,
                  MODE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    sp = tl.program_id(1)
    offs = sp * CHUNK + tl.arange(0, CHUNK)
    part = tl.sum(tl.load(x_ptr + row * xs + offs, mask=offs < cols, other=0.0).to(tl.float32), axis=0)
    tl.store(ws_ptr + row * nsplit + sp, part)
    if MODE == 0:
        arrived = tl.atomic_add(cnt_ptr + row, 1)                       # acq_rel, gpu scope
    elif MODE == 1:
        arrived = tl.atomic_add(cnt_ptr + row, 1, scope="cta")          # BUG: orders nothing across programs
    else:
        arrived = tl.atomic_add(cnt_ptr + row, 1, sem="relaxed")        # BUG: no release / acquire
    if arrived == nsplit - 1:
        i = tl.arange(0, NSB)
        parts = tl.load(ws_ptr + row * nsplit + i, mask=i < nsplit, other=0.0)
        tl.store(y_ptr + row, tl.sum(parts, axis=0))


def arrive_launch(mode):
    def launch(args, outs):
        x = args["x"]
        nsplit = triton.cdiv(x.shape[1], 32)
        ws = torch.empty((x.shape[0], nsplit), dtype=torch.float32, device=x.device)
        cnt = torch.zeros((x.shape[0],), dtype=torch.int32, device=x.device)
        arrive_kernel[(x.shape[0], nsplit)](x, ws, cnt, outs["y"], x.stride(0), x.shape[1], nsplit, CHUNK=32,
                                            NSB=triton.next_power_of_2(nsplit), MODE=mode)
    return launch


_arrive = dict(dtypes=("fp32",), inputs=rows_spec(32), make=x_rows,
               outputs=lambda a: {"y": ((a["x"].shape[0],), torch.float32)},
               oracle=lambda a: {"y": a["x"].sum(-1)},
               tolerance=lambda a, refs, dtype: {"y": T.row_reduction(a["x"], "fp32", "fp32")})
case("ok_last_arriver_gpu_scope", launch=arrive_launch(0), **_arrive)
case("bug_last_arriver_cta_scope", launch=arrive_launch(1), **_arrive)
case("bug_last_arriver_relaxed", launch=arrive_launch(2), **_arrive)


# =================================================================================== 17-19. per-row quantisers
@triton.jit
def quant_kernel(x_ptr, q_ptr, s_ptr, xs, qs, cols, QMAX: tl.constexpr, BLOCK: tl.constexpr, INT: tl.constexpr,
                 HALF_AWAY: tl.constexpr, NAN_PROP: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    x = tl.load(x_ptr + row * xs + offs, mask=m, other=0.0).to(tl.float32)
    amax = tl.max(tl.abs(x), axis=0)                # Triton's max drops NaN (max.f32 / fmax)
    if NAN_PROP:
        amax = tl.where(tl.sum((x != x).to(tl.int32), axis=0) > 0, float("nan"), amax)
    # else BUG (special values): a NaN in the row is dropped from the scale
    scale = tl.maximum(amax, 1e-12, propagate_nan=tl.PropagateNan.ALL) / QMAX
    v = tl.clamp(x / scale, -QMAX, QMAX, propagate_nan=tl.PropagateNan.ALL)
    if INT:
        if HALF_AWAY:
            q = libdevice.round(v).to(tl.int8)      # BUG: ties away from zero (torch rounds ties to even)
        else:
            q = libdevice.rint(v).to(tl.int8)
    else:
        q = v.to(q_ptr.dtype.element_ty)
    tl.store(q_ptr + row * qs + offs, q, mask=m)
    tl.store(s_ptr + row, scale)


def quant_oracle(qmax, qdtype):
    def oracle(a):
        x32 = a["x"].to(torch.float32)
        scale32 = x32.abs().amax(-1).clamp(min=1e-12) / qmax
        v = (x32 / scale32[:, None]).clamp(-qmax, qmax)
        q = torch.round(v).to(torch.int8) if qdtype == torch.int8 else v.to(qdtype)
        return {"q": q, "scale": scale32.to(torch.float64)}
    return oracle


def quant_launch(qmax, integer=False, half_away=False, nan_prop=True):
    def launch(args, outs):
        x, q = args["x"], outs["q"]
        quant_kernel[(x.shape[0],)](x, q, outs["scale"], x.stride(0), q.stride(0), x.shape[1], QMAX=qmax,
                                    BLOCK=triton.next_power_of_2(x.shape[1]), INT=integer, HALF_AWAY=half_away,
                                    NAN_PROP=nan_prop)
    return launch


def quant_case(name, launch, qmax, qdtype, allowed=None):
    case(name, dtypes=("fp32",), inputs=rows_spec(32, max_rows=8, allowed=allowed), make=x_rows,
         outputs=lambda a: {"q": (tuple(a["x"].shape), qdtype), "scale": ((a["x"].shape[0],), torch.float32)},
         launch=launch, oracle=quant_oracle(qmax, qdtype),
         tolerance=lambda a, refs, dtype: {"q": T.exact("the codes of the fp32 quantiser, bit for bit"),
                                           "scale": T.rounding("fp32", ops=1)})


quant_case("ok_int8_quant_rne", quant_launch(127.0, integer=True), 127.0, torch.int8)
quant_case("bug_int8_quant_round_half_away", quant_launch(127.0, integer=True, half_away=True), 127.0, torch.int8)
# FNUZ e4m3 (gfx942) has max 240; 448 is OCP e4m3fn's
quant_case("ok_fp8_fnuz_quant", quant_launch(240.0), 240.0, torch.float8_e4m3fnuz)
quant_case("bug_fp8_fnuz_quant_ocp_max", quant_launch(448.0), 240.0, torch.float8_e4m3fnuz)
# NaN in a row must make its scale (and codes) NaN, as torch's amax does
quant_case("ok_fp8_quant_nan_propagates", quant_launch(448.0), 448.0, torch.float8_e4m3fn, allowed=S.REGIMES)
quant_case("bug_fp8_quant_nan_dropped", quant_launch(448.0, nan_prop=False), 448.0, torch.float8_e4m3fn,
           allowed=S.REGIMES)
