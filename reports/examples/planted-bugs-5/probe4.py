"""planted-bugs-4 (independent round): LLM-kernel bugs, each a real Triton kernel with a correct twin.

Every pair shares its inputs, oracle and tolerance; only the launch differs (a constexpr BUG flag,
or a launcher detail). Cases: p4_bug_<what> (planted bug) and p4_ok_<what> (the correct twin).

Run from this folder:
    portcheck run --target interpreter --cases probe4 --kernel 'p4_*' --jobs 1 --no-time
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
from portcheck.facts.numerics import DIV_ULP, ERF_ULP, EXP2_ULP, EXP_ULP, RSQRT_ULP

BUDGET = 4096            # elements per tensor on the interpreter (the run's max_elements caps it too)
U32 = fmt("fp32").unit_roundoff
SUB32 = fmt("fp32").subnormal_step
EPS = 1e-5


def _budget(max_elements):
    return max(1, min(max_elements, BUDGET))


def pair(what, bug_launch, ok_launch, bug_class, **common):
    """Register p4_bug_<what> and p4_ok_<what>: same inputs, oracle and tolerance."""
    for kind, launch in (("bug", bug_launch), ("ok", ok_launch)):
        portcheck.register(portcheck.Case(
            name=f"p4_{kind}_{what}", family="probe4", launch=launch,
            description=(f"planted bug: {bug_class}" if kind == "bug" else f"correct twin of p4_bug_{what}"),
            **common))


def rows_spec(dtype, max_elements, tile=128, max_rows=8, allowed=S.REGIMES[:-1]):
    return S.row_inputs(dtype, _budget(max_elements), tile=tile, max_rows=max_rows, allowed=allowed)


def _row_x(spec, device):
    return S.row_tensor(spec, device)


def _vec(spec, n, device, salt, regime="normal", dtype=None):
    g = S.generator(spec["seed"] + salt)
    return S.values((n,), dtype or spec["dtype"], regime, g).to(device)


def _out_like(name, key="x", dtype=None):
    return lambda a: {name: (tuple(a[key].shape), dtype or a[key].dtype)}


def _np2(n, lo=16):
    return max(lo, triton.next_power_of_2(n))


# =================================================================================================
# 1. fused add + RMSNorm: the residual is updated in place (declared in_place); the bug writes x
#    (not x + residual) back into the residual. y is right either way.
# =================================================================================================
@triton.jit
def fadd_rms_kernel(x_ptr, r_ptr, w_ptr, y_ptr, sx, sr, sy, cols, eps,
                    BLOCK: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    x = tl.load(x_ptr + row * sx + offs, mask=m, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row * sr + offs, mask=m, other=0.0).to(tl.float32)
    h = x + r
    if BUG:
        tl.store(r_ptr + row * sr + offs, x.to(r_ptr.dtype.element_ty), mask=m)   # typo: x, not h
    else:
        tl.store(r_ptr + row * sr + offs, h.to(r_ptr.dtype.element_ty), mask=m)
    rstd = tl.rsqrt(tl.sum(h * h, axis=0) / cols + eps)
    w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * sy + offs, (h * rstd * w).to(y_ptr.dtype.element_ty), mask=m)


def _fadd_make(spec, device):
    x = _row_x(spec, device)
    r = S.laid_out(S.values((spec["rows"], spec["cols"]), spec["dtype"], spec["regime"],
                            S.generator(spec["seed"] + 7)), spec["layout"], device)
    return {"x": x, "residual": r, "w": _vec(spec, spec["cols"], device, 11)}


def _fadd_launch(bug):
    def launch(args, outs):
        x, r, w, y = args["x"], args["residual"], args["w"], outs["y"]
        fadd_rms_kernel[(x.shape[0],)](x, r, w, y, x.stride(0), r.stride(0), y.stride(0), x.shape[1], EPS,
                                       BLOCK=_np2(x.shape[1]), BUG=bug)
    return launch


def _fadd_oracle(a):
    h = a["x"] + a["residual"]
    return {"y": h * torch.rsqrt(h.square().mean(-1, keepdim=True) + EPS) * a["w"]}


pair("fused_add_rmsnorm_residual", _fadd_launch(True), _fadd_launch(False),
     "in-place residual update wrong (declared in_place); output y right",
     dtypes=("fp32", "bf16"), inputs=lambda d, me: rows_spec(d, me), make=_fadd_make,
     outputs=_out_like("y"), oracle=_fadd_oracle, in_place=("residual",),
     tolerance=lambda a, refs, d: {"y": T.normalization(a["x"] + a["residual"], d, "fp32", eps=EPS,
                                                        centered=False, weight=a["w"])})


# 1b. the same kernels, the oracle reading a copy of the residual kept before the launch
#     (the harness hands the oracle the arguments after the launches: see README)
def _fadd_make_kept(spec, device):
    a = _fadd_make(spec, device)
    a["residual_before"] = a["residual"].clone()
    return a


def _fadd_oracle_kept(a):
    h = a["x"] + a["residual_before"]
    return {"y": h * torch.rsqrt(h.square().mean(-1, keepdim=True) + EPS) * a["w"]}


pair("fused_add_rmsnorm_residual_kept", _fadd_launch(True), _fadd_launch(False),
     "in-place residual update wrong (declared in_place; oracle reads a kept copy); output y right",
     dtypes=("fp32", "bf16"), inputs=lambda d, me: rows_spec(d, me), make=_fadd_make_kept,
     outputs=_out_like("y"), oracle=_fadd_oracle_kept, in_place=("residual",),
     tolerance=lambda a, refs, d: {"y": T.normalization(a["x"] + a["residual_before"], d, "fp32", eps=EPS,
                                                        centered=False, weight=a["w"])})


# 1c. ... and the launcher copying the updated residual into an output the oracle checks
def _fadd_launch_out(bug):
    inner = _fadd_launch(bug)

    def launch(args, outs):
        inner(args, outs)
        outs["residual_out"].copy_(args["residual"])
    return launch


def _fadd_oracle_out(a):
    return {**_fadd_oracle_kept(a), "residual_out": a["x"] + a["residual_before"]}


pair("fused_add_rmsnorm_residual_out", _fadd_launch_out(True), _fadd_launch_out(False),
     "in-place residual update wrong (declared in_place; launcher copies it to an output); output y right",
     dtypes=("fp32", "bf16"), inputs=lambda d, me: rows_spec(d, me), make=_fadd_make_kept,
     outputs=lambda a: {"y": (tuple(a["x"].shape), a["x"].dtype),
                        "residual_out": (tuple(a["x"].shape), a["residual"].dtype)},
     oracle=_fadd_oracle_out, in_place=("residual",),
     tolerance=lambda a, refs, d: {"y": T.normalization(a["x"] + a["residual_before"], d, "fp32", eps=EPS,
                                                        centered=False, weight=a["w"]),
                                   "residual_out": T.elementwise(d, "fp32", ops=1,
                                                                 terms=a["x"].abs() + a["residual_before"].abs())})



# =================================================================================================
# 2. RMSNorm that stores x_hat (the normalized activations) into x's buffer: undeclared clobber.
# =================================================================================================
@triton.jit
def rms_clobber_kernel(x_ptr, w_ptr, y_ptr, sx, sy, cols, eps, BLOCK: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    x = tl.load(x_ptr + row * sx + offs, mask=m, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / cols + eps)
    w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * sy + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=m)
    if BUG:   # "save x_hat for backward in x's buffer, x is dead after this op"
        tl.store(x_ptr + row * sx + offs, (x * rstd).to(x_ptr.dtype.element_ty), mask=m)


def _rms_launch(bug):
    def launch(args, outs):
        x, w, y = args["x"], args["w"], outs["y"]
        rms_clobber_kernel[(x.shape[0],)](x, w, y, x.stride(0), y.stride(0), x.shape[1], EPS,
                                          BLOCK=_np2(x.shape[1]), BUG=bug)
    return launch


pair("rmsnorm_clobbers_x", _rms_launch(True), _rms_launch(False),
     "kernel writes into its input x (undeclared in-place clobber); output right",
     dtypes=("fp16",), inputs=lambda d, me: rows_spec(d, me),
     make=lambda s, dev: {"x": _row_x(s, dev), "w": _vec(s, s["cols"], dev, 11)},
     outputs=_out_like("y"),
     oracle=lambda a: {"y": a["x"] * torch.rsqrt(a["x"].square().mean(-1, keepdim=True) + EPS) * a["w"]},
     tolerance=lambda a, refs, d: {"y": T.normalization(a["x"], d, "fp32", eps=EPS, centered=False, weight=a["w"])})


# =================================================================================================
# 3. LayerNorm forward with saved mean / rstd (for backward): the saved rstd leaves out eps.
# =================================================================================================
@triton.jit
def ln_stats_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, sx, sy, cols, eps,
                    BLOCK: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    x = tl.load(x_ptr + row * sx + offs, mask=m, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / cols
    d = tl.where(m, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * sy + offs, (d * rstd * w + b).to(y_ptr.dtype.element_ty), mask=m)
    tl.store(mean_ptr + row, mean)
    if BUG:
        tl.store(rstd_ptr + row, 1.0 / tl.sqrt(var))   # saved stat recomputed without eps
    else:
        tl.store(rstd_ptr + row, rstd)


def _ln_launch(bug):
    def launch(args, outs):
        x = args["x"]
        ln_stats_kernel[(x.shape[0],)](x, args["w"], args["b"], outs["y"], outs["mean"], outs["rstd"],
                                       x.stride(0), outs["y"].stride(0), x.shape[1], EPS,
                                       BLOCK=_np2(x.shape[1]), BUG=bug)
    return launch


def _ln_oracle(a):
    x = a["x"]
    mean = x.mean(-1, keepdim=True)
    rstd = ((x - mean).square().mean(-1, keepdim=True) + EPS).rsqrt()
    return {"y": (x - mean) * rstd * a["w"] + a["b"], "mean": mean.squeeze(-1), "rstd": rstd.squeeze(-1)}


def _ln_tol(a, refs, d):
    x = a["x"]
    s = refs["rstd"].unsqueeze(-1)
    _, _, e = T.normalization_terms(x, s, "fp32", True)
    return {"y": T.normalization(x, d, "fp32", eps=EPS, weight=a["w"], bias=a["b"]),
            "mean": T.row_reduction(x / x.shape[-1], "fp32", "fp32", ops=1),
            "rstd": T.Tolerance(e.squeeze(-1) + (DIV_ULP + 1) * U32, SUB32,
                                "rtol = e + (DIV_ULP + 1) u(fp32), e = normalization's rstd bound "
                                "((n+4) u + 2t + t^2)/2 + RSQRT_ULP u; atol = sub(fp32)")}


pair("layernorm_saved_rstd_no_eps", _ln_launch(True), _ln_launch(False),
     "second output (saved rstd) wrong: eps left out; y right",
     dtypes=("fp32",), inputs=lambda d, me: rows_spec(d, me),
     make=lambda s, dev: {"x": _row_x(s, dev), "w": _vec(s, s["cols"], dev, 11), "b": _vec(s, s["cols"], dev, 13)},
     outputs=lambda a: {"y": (tuple(a["x"].shape), a["x"].dtype), "mean": ((a["x"].shape[0],), torch.float32),
                        "rstd": ((a["x"].shape[0],), torch.float32)},
     oracle=_ln_oracle, tolerance=_ln_tol)


# =================================================================================================
# 4. softmax + log-sum-exp (flash-attention style, exp2 domain): lse forgets the ln(2) factor.
# =================================================================================================
@triton.jit
def softmax_lse_kernel(x_ptr, y_ptr, lse_ptr, sx, sy, cols, BLOCK: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    x = tl.load(x_ptr + row * sx + offs, mask=m, other=-float("inf")).to(tl.float32)
    mx = tl.max(x, axis=0)
    p = tl.exp2((x - mx) * 1.4426950408889634)
    l = tl.sum(p, axis=0)
    tl.store(y_ptr + row * sy + offs, (p / l).to(y_ptr.dtype.element_ty), mask=m)
    if BUG:
        lse = mx + tl.log2(l)                        # base-2 log stored as the natural lse
    else:
        lse = mx + tl.log2(l) * 0.6931471805599453
    tl.store(lse_ptr + row, lse)


def _lse_launch(bug):
    def launch(args, outs):
        x = args["x"]
        softmax_lse_kernel[(x.shape[0],)](x, outs["y"], outs["lse"], x.stride(0), outs["y"].stride(0), x.shape[1],
                                          BLOCK=_np2(x.shape[1]), BUG=bug)
    return launch


def _lse_tol(a, refs, d):
    x, y = a["x"], refs["y"]
    n = x.shape[-1]
    m = x.amax(-1)
    spread = (y * (x - m.unsqueeze(-1)).abs()).sum(-1)
    lnl = (refs["lse"] - m).abs()
    atol = (n + 2 * EXP2_ULP + 6 + 2 * spread) * U32 + 8 * U32 * lnl + SUB32
    return {"y": T.softmax(x, y, d),
            "lse": T.Tolerance(U32, atol, "rtol = u(fp32); atol_r = (n + 2 EXP2_ULP + 6 + 2 sum_j y_j|x_j-m|) u "
                                          "+ 8 u |ln l| + sub(fp32) (the row sum's relative error, log2's ULP)")}


pair("softmax_lse_missing_ln2", _lse_launch(True), _lse_launch(False),
     "second output (log-sum-exp) in the wrong log base; y right",
     dtypes=("fp32",), inputs=lambda d, me: rows_spec(d, me, allowed=("normal", "large", "equal", "zeros")),
     make=lambda s, dev: {"x": _row_x(s, dev)},
     outputs=lambda a: {"y": (tuple(a["x"].shape), a["x"].dtype), "lse": ((a["x"].shape[0],), torch.float32)},
     oracle=lambda a: {"y": torch.softmax(a["x"], -1), "lse": torch.logsumexp(a["x"], -1)},
     tolerance=_lse_tol, math=("exp2", "log2"))


# =================================================================================================
# 5. softmax whose masked-off lanes load other=0.0 instead of -inf (the sum is masked, so only the
#    max is affected: wrong only when a whole row lies below about -87, where exp underflows).
# =================================================================================================
@triton.jit
def softmax_other_kernel(x_ptr, y_ptr, sx, sy, cols, BLOCK: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    if BUG:
        x = tl.load(x_ptr + row * sx + offs, mask=m, other=0.0).to(tl.float32)
    else:
        x = tl.load(x_ptr + row * sx + offs, mask=m, other=-float("inf")).to(tl.float32)
    mx = tl.max(x, axis=0)
    e = tl.where(m, tl.exp(x - mx), 0.0)
    tl.store(y_ptr + row * sy + offs, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=m)


def _sm_launch(bug):
    def launch(args, outs):
        x = args["x"]
        softmax_other_kernel[(x.shape[0],)](x, outs["y"], x.stride(0), outs["y"].stride(0), x.shape[1],
                                            BLOCK=_np2(x.shape[1]), BUG=bug)
    return launch


pair("softmax_masked_other_zero", _sm_launch(True), _sm_launch(False),
     "masked lanes other=0 instead of -inf (wrong only for all-negative rows below ~-87)",
     dtypes=("fp32", "fp16"), inputs=lambda d, me: rows_spec(d, me),
     make=lambda s, dev: {"x": _row_x(s, dev)}, outputs=_out_like("y"),
     oracle=lambda a: {"y": torch.softmax(a["x"], -1)},
     tolerance=lambda a, refs, d: {"y": T.softmax(a["x"], refs["y"], d)}, math=("exp",))


# =================================================================================================
# 6/7. per-row symmetric int8 quantizer (scale = absmax / 127, codes round half to even).
#    MODE 1: scale from max(x), not max|x|. MODE 2: no zero-row guard and no clamp: a zero row
#    divides 0 / 0 and casts NaN to int8 (undefined; 0 on today's CPUs and GPUs).
# =================================================================================================
@triton.jit
def quant_row_kernel(x_ptr, q_ptr, s_ptr, sx, sq, cols, BLOCK: tl.constexpr, MODE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    x = tl.load(x_ptr + row * sx + offs, mask=m, other=0.0).to(tl.float32)
    if MODE == 1:
        amax = tl.max(tl.where(m, x, -float("inf")), axis=0)
    else:
        amax = tl.max(tl.abs(x), axis=0)
    scale = tl.math.div_rn(amax, 127.0)
    if MODE == 2:
        q = libdevice.rint(tl.math.div_rn(x, scale))
    else:
        q = tl.where(scale > 0, libdevice.rint(tl.math.div_rn(x, scale)), 0.0)
        q = tl.minimum(tl.maximum(q, -127.0), 127.0)
    tl.store(q_ptr + row * sq + offs, q.to(tl.int8), mask=m)
    tl.store(s_ptr + row, scale)


def _quant_launch(mode):
    def launch(args, outs):
        x = args["x"]
        quant_row_kernel[(x.shape[0],)](x, outs["q"], outs["scale"], x.stride(0), outs["q"].stride(0), x.shape[1],
                                        BLOCK=_np2(x.shape[1]), MODE=mode)
    return launch


def _quant_oracle(a):
    x = a["x"]
    amax = x.abs().amax(-1, keepdim=True)
    scale = (amax / 127).to(torch.float32).to(torch.float64)        # the scale as stored, fp32
    quot = torch.where(scale > 0, x / scale, torch.zeros_like(x)).to(torch.float32).to(torch.float64)
    q = torch.round(quot).clamp(-127, 127).to(torch.int8)           # torch.round: half to even
    return {"q": q, "scale": scale.squeeze(-1).to(torch.float32)}


_QUANT = dict(dtypes=("fp32", "bf16"), inputs=lambda d, me: rows_spec(d, me),
              make=lambda s, dev: {"x": _row_x(s, dev)},
              outputs=lambda a: {"q": (tuple(a["x"].shape), torch.int8), "scale": ((a["x"].shape[0],), torch.float32)},
              oracle=_quant_oracle,
              tolerance=lambda a, refs, d: {"q": T.exact("int8 codes bit for bit"),
                                            "scale": T.exact("fp32 scale: one correctly rounded division")})
pair("quant_scale_from_max", _quant_launch(1), _quant_launch(0),
     "int8 quantizer takes scale from max(x), not max|x| (negative-dominant rows)", **_QUANT)
pair("quant_zero_row_nan_to_int", _quant_launch(2), _quant_launch(0),
     "zero row: 0/0 = NaN cast to int8 (undefined behaviour, 0 on today's hardware)", **_QUANT)


# =================================================================================================
# 8. static (per-tensor, calibrated) int8 quantization without saturation: out-of-range values
#    wrap on the interpreter (numpy casts), saturate or wrap on a GPU depending on the lowering.
# =================================================================================================
@triton.jit
def static_quant_kernel(x_ptr, s_ptr, q_ptr, n, BLOCK: tl.constexpr, BUG: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0).to(tl.float32)
    s = tl.load(s_ptr)
    q = libdevice.rint(tl.math.div_rn(x, s))
    if not BUG:
        q = tl.clamp(q, -128.0, 127.0)
    tl.store(q_ptr + offs, q.to(tl.int8), mask=m)


def _sq_inputs(dtype, max_elements):
    return st.fixed_dictionaries({"dtype": st.just(dtype), "n": S.lengths(1024, _budget(max_elements)),
                                  "calib": st.sampled_from([0.25, 0.5, 1.0, 2.0]), "seed": S.seeds(),
                                  "regime": S.regimes(("normal", "zeros", "offset"))})


def _sq_make(spec, device):
    x = S.values((spec["n"],), spec["dtype"], spec["regime"], S.generator(spec["seed"]))
    # calibrated on other data: the calibration absmax is calib times this tensor's
    amax = max(float(x.double().abs().max()), 1e-3) * spec["calib"]
    return {"x": x.to(device), "scale": torch.tensor([amax / 127], dtype=torch.float32, device=device)}


def _sq_launch(bug):
    def launch(args, outs):
        n = args["x"].numel()
        static_quant_kernel[(triton.cdiv(n, 1024),)](args["x"], args["scale"], outs["q"], n, BLOCK=1024, BUG=bug)
    return launch


def _sq_oracle(a):
    quot = (a["x"] / a["scale"]).to(torch.float32).to(torch.float64)
    return {"q": torch.round(quot).clamp(-128, 127).to(torch.int8)}


pair("static_quant_no_saturate", _sq_launch(True), _sq_launch(False),
     "static int8 quant without clamp: out-of-range codes rely on the float->int8 cast",
     dtypes=("fp32",), inputs=_sq_inputs, make=_sq_make, outputs=_out_like("q", dtype=torch.int8),
     oracle=_sq_oracle, tolerance=lambda a, refs, d: {"q": T.exact("int8 codes bit for bit")})


# =================================================================================================
# 9. int8 weight dequant with a per-output-row scale, 2-D tiles: the scale's offsets forget the
#    tile's row start (right only while every row lies in the first tile, R <= 16).
# =================================================================================================
@triton.jit
def dequant_kernel(w_ptr, s_ptr, y_ptr, R, C, swr, syr, BM: tl.constexpr, BN: tl.constexpr, BUG: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm < R)[:, None] & (rn < C)[None, :]
    w = tl.load(w_ptr + rm[:, None].to(tl.int64) * swr + rn[None, :], mask=mask, other=0).to(tl.float32)
    if BUG:
        s = tl.load(s_ptr + tl.arange(0, BM), mask=rm < R, other=0.0)
    else:
        s = tl.load(s_ptr + rm, mask=rm < R, other=0.0)
    tl.store(y_ptr + rm[:, None].to(tl.int64) * syr + rn[None, :], (w * s[:, None]).to(y_ptr.dtype.element_ty), mask=mask)


def _dq_inputs(dtype, max_elements):
    return st.tuples(S.rows_and_cols(64, _budget(max_elements), max_rows=64), S.seeds()).map(
        lambda t: {"dtype": dtype, "rows": t[0][0], "cols": t[0][1], "seed": t[1]})


def _dq_make(spec, device):
    g = S.generator(spec["seed"])
    w = S.integers(-127, 128, (spec["rows"], spec["cols"]), g).to(torch.int8)
    s = (S.normal((spec["rows"],), g).abs() * 0.01 + 1e-3).to(torch.float32)
    return {"w": w.to(device), "scale": s.to(device)}


def _dq_launch(bug):
    def launch(args, outs):
        w, y = args["w"], outs["y"]
        R, C = w.shape
        dequant_kernel[(triton.cdiv(R, 16), triton.cdiv(C, 64))](w, args["scale"], y, R, C, w.stride(0), y.stride(0),
                                                                 BM=16, BN=64, BUG=bug)
    return launch


pair("dequant_scale_tile_offset", _dq_launch(True), _dq_launch(False),
     "per-row dequant scale indexed without the tile's row offset (wrong only when rows > BLOCK_M)",
     dtypes=("fp16",), inputs=_dq_inputs, make=_dq_make,
     outputs=lambda a: {"y": (tuple(a["w"].shape), torch.float16)},
     oracle=lambda a: {"y": a["w"].to(torch.float64) * a["scale"].unsqueeze(-1)},
     tolerance=lambda a, refs, d: {"y": T.elementwise(d, "fp32", ops=1)})


# =================================================================================================
# 10. paged-attention decode (one query per sequence, vLLM-style block table): the token mask of
#     the last block is `<=` instead of `<`, so one stale slot after the context is attended to.
# =================================================================================================
@triton.jit
def paged_decode_kernel(q_ptr, k_ptr, v_ptr, bt_ptr, ctx_ptr, o_ptr,
                        sq0, sq1, sk0, sk1, sk2, sbt, so0, so1, scale,
                        BS: tl.constexpr, D: tl.constexpr, BUG: tl.constexpr):
    s = tl.program_id(0)
    h = tl.program_id(1)
    offs_d = tl.arange(0, D)
    offs_t = tl.arange(0, BS)
    ctx = tl.load(ctx_ptr + s)
    q = tl.load(q_ptr + s * sq0 + h * sq1 + offs_d).to(tl.float32) * scale
    m_i = -float("inf")
    l_i = 0.0
    acc = tl.zeros([D], dtype=tl.float32)
    for b in range(0, tl.cdiv(ctx, BS)):
        phys = tl.load(bt_ptr + s * sbt + b).to(tl.int64)
        t = b * BS + offs_t
        if BUG:
            tm = t <= ctx
        else:
            tm = t < ctx
        kv_off = phys * sk0 + offs_t[:, None] * sk1 + h * sk2 + offs_d[None, :]
        k = tl.load(k_ptr + kv_off, mask=tm[:, None], other=0.0).to(tl.float32)
        v = tl.load(v_ptr + kv_off, mask=tm[:, None], other=0.0).to(tl.float32)
        sc = tl.where(tm, tl.sum(k * q[None, :], axis=1), -float("inf"))
        m_new = tl.maximum(m_i, tl.max(sc, axis=0))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(sc - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        m_i = m_new
    tl.store(o_ptr + s * so0 + h * so1 + offs_d, (acc / l_i).to(o_ptr.dtype.element_ty))


def _pa_inputs(dtype, max_elements):
    return st.fixed_dictionaries({
        "dtype": st.just(dtype), "seqs": st.integers(1, 4), "heads": st.integers(1, 2),
        "d": st.sampled_from([16, 32]), "block": st.sampled_from([4, 8, 16]),
        "ctx": st.lists(st.integers(1, 48), min_size=4, max_size=4), "extra_blocks": st.integers(0, 3),
        "seed": S.seeds()})


def _pa_make(spec, device):
    g = S.generator(spec["seed"])
    n, H, D, BS = spec["seqs"], spec["heads"], spec["d"], spec["block"]
    ctx = spec["ctx"][:n]
    nblk = [-(-c // BS) for c in ctx]
    total = sum(nblk) + spec["extra_blocks"]
    perm = torch.randperm(total, generator=g)
    maxb = max(nblk)
    bt = torch.zeros((n, maxb), dtype=torch.int32)
    at = 0
    for i, k in enumerate(nblk):
        bt[i, :k] = perm[at:at + k].to(torch.int32)
        at += k
    dt = spec["dtype"]
    # every slot holds data (stale tokens of earlier sequences in the unused slots), as a real pool does
    kc = S.values((total, BS, H, D), dt, "normal", g)
    vc = S.values((total, BS, H, D), dt, "normal", g)
    q = S.values((n, H, D), dt, "normal", g)
    return {"q": q.to(device), "k_cache": kc.to(device), "v_cache": vc.to(device), "block_table": bt.to(device),
            "ctx_lens": torch.tensor(ctx, dtype=torch.int32, device=device), "block": BS}


def _pa_launch(bug):
    def launch(args, outs):
        q, kc, vc, bt, o = args["q"], args["k_cache"], args["v_cache"], args["block_table"], outs["o"]
        n, H, D = q.shape
        for t in (q, kc, vc, bt):
            if t.stride(-1) != 1:
                raise ValueError("paged decode needs contiguous last dimensions")
        paged_decode_kernel[(n, H)](q, kc, vc, bt, args["ctx_lens"], o, q.stride(0), q.stride(1),
                                    kc.stride(0), kc.stride(1), kc.stride(2), bt.stride(0), o.stride(0), o.stride(1),
                                    1.0 / math.sqrt(D), BS=args["block"], D=D, BUG=bug)
    return launch


def _pa_gather(a):
    """float64 K and V per sequence (ctx tokens), from the block table."""
    BS = a["block"]
    out = []
    for i, c in enumerate(a["ctx_lens"].tolist()):
        toks = torch.arange(c)
        phys = a["block_table"][i, toks // BS].long()
        out.append((a["k_cache"][phys, toks % BS], a["v_cache"][phys, toks % BS]))   # [c, H, D]
    return out


def _pa_oracle(a):
    q = a["q"]
    o = torch.empty_like(q)
    for i, (k, v) in enumerate(_pa_gather(a)):
        sc = torch.einsum("hd,thd->ht", q[i], k) / math.sqrt(q.shape[-1])
        o[i] = torch.einsum("ht,thd->hd", torch.softmax(sc, -1), v)
    return {"o": o}


def _pa_tol(a, refs, d):
    q = a["q"]
    D = q.shape[-1]
    atol = torch.empty_like(q)
    for i, (k, v) in enumerate(_pa_gather(a)):
        n = k.shape[0]
        sc = torch.einsum("hd,thd->ht", q[i], k) / math.sqrt(D)
        y = torch.softmax(sc, -1)
        # each score errs by (D + 2) u sum_d |q k| / sqrt(D); a weight y_j by twice the largest such
        # error plus the softmax's own rounding (n + 4 EXP_ULP + 2 DIV_ULP + 4 + 2 sum y|s - m|) u
        se = (D + 2) * U32 * torch.einsum("hd,thd->ht", q[i].abs(), k.abs()) / math.sqrt(D)
        spread = (y * (sc - sc.amax(-1, keepdim=True)).abs()).sum(-1, keepdim=True)
        rel = 2 * se.amax(-1, keepdim=True) + (n + 4 * EXP_ULP + 2 * DIV_ULP + 4 + 2 * spread) * U32
        atol[i] = (rel + (n + 2) * U32) * torch.einsum("ht,thd->hd", y, v.abs())
    return {"o": T.Tolerance(fmt(d).unit_roundoff, atol + fmt(d).subnormal_step,
                             "rtol = u(out); atol = (2 max_j e_j + (n + 4 EXP_ULP + 2 DIV_ULP + 4 + 2 sum y|s-m|) u "
                             "+ (n + 2) u) sum_j y_j |v_j| + sub(out), e_j = (D+2) u sum|q k_j|/sqrt(D), u = u(fp32)")}


pair("paged_decode_mask_le", _pa_launch(True), _pa_launch(False),
     "paged KV decode: last block's token mask <= (one stale slot attended)",
     dtypes=("fp16",), inputs=_pa_inputs, make=_pa_make,
     outputs=lambda a: {"o": (tuple(a["q"].shape), a["q"].dtype)}, oracle=_pa_oracle, tolerance=_pa_tol,
     math=("exp",))


# =================================================================================================
# 11. RoPE (NeoX half-split): the second half is addressed at the padded block size, not at
#     head_dim / 2 (right only when head_dim / 2 is a power of two).
# =================================================================================================
@triton.jit
def rope_kernel(x_ptr, pos_ptr, inv_ptr, y_ptr, sxt, sxh, syt, syh, HALF,
                BLOCK_H: tl.constexpr, BUG: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    i = tl.arange(0, BLOCK_H)
    m = i < HALF
    pos = tl.load(pos_ptr + t).to(tl.float32)
    th = pos * tl.load(inv_ptr + i, mask=m, other=0.0)
    c = tl.cos(th)
    sn = tl.sin(th)
    if BUG:
        off2 = BLOCK_H
    else:
        off2 = HALF
    xb = x_ptr + t * sxt + h * sxh
    yb = y_ptr + t * syt + h * syh
    x1 = tl.load(xb + i, mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(xb + off2 + i, mask=m, other=0.0).to(tl.float32)
    tl.store(yb + i, (x1 * c - x2 * sn).to(y_ptr.dtype.element_ty), mask=m)
    tl.store(yb + off2 + i, (x2 * c + x1 * sn).to(y_ptr.dtype.element_ty), mask=m)


def _rope_inputs(dtype, max_elements):
    return st.fixed_dictionaries({"dtype": st.just(dtype), "tokens": st.integers(1, 8), "heads": st.integers(1, 4),
                                  "d": st.sampled_from([16, 24, 32, 48, 64, 80, 96, 128]),
                                  "base": st.sampled_from([10000.0, 500000.0]), "seed": S.seeds(),
                                  "regime": S.regimes(("normal", "large", "zeros"))})


def _rope_make(spec, device):
    g = S.generator(spec["seed"])
    T_, H, D = spec["tokens"], spec["heads"], spec["d"]
    x = S.values((T_, H, D), spec["dtype"], spec["regime"], g)
    pos = S.integers(0, 4096, (T_,), g)
    inv = (spec["base"] ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)).to(torch.float32)
    return {"x": x.to(device), "positions": pos.to(device), "inv_freq": inv.to(device)}


def _rope_launch(bug):
    def launch(args, outs):
        x, y = args["x"], outs["y"]
        T_, H, D = x.shape
        if x.stride(-1) != 1:
            raise ValueError("rope needs a contiguous head dimension")
        rope_kernel[(T_, H)](x, args["positions"], args["inv_freq"], y, x.stride(0), x.stride(1), y.stride(0),
                             y.stride(1), D // 2, BLOCK_H=triton.next_power_of_2(D // 2), BUG=bug)
    return launch


def _rope_parts(a):
    x = a["x"]
    half = x.shape[-1] // 2
    th = a["positions"].to(torch.float64)[:, None, None] * a["inv_freq"][None, None, :]
    return x[..., :half], x[..., half:], th


def _rope_oracle(a):
    x1, x2, th = _rope_parts(a)
    return {"y": torch.cat([x1 * th.cos() - x2 * th.sin(), x2 * th.cos() + x1 * th.sin()], -1)}


def _rope_tol(a, refs, d):
    x1, x2, th = _rope_parts(a)
    e = (x1.abs() + x2.abs()) * (th.abs() + 8) * U32
    return {"y": T.Tolerance(fmt(d).unit_roundoff, torch.cat([e, e], -1) + fmt(d).subnormal_step,
                             "rtol = u(out); atol = (|x1| + |x2|)(|theta| + 8) u(fp32) + sub(out): theta = pos * "
                             "inv_freq rounds once in fp32, cos/sin and the products a few u")}


pair("rope_half_offset_pow2", _rope_launch(True), _rope_launch(False),
     "RoPE second half at BLOCK (next pow2) instead of head_dim/2 (wrong for head_dim 48/80/96)",
     dtypes=("fp32",), inputs=_rope_inputs, make=_rope_make, outputs=_out_like("y"),
     oracle=_rope_oracle, tolerance=_rope_tol, math=("cos", "sin"))


# =================================================================================================
# 12. GELU specified with erf; the bug uses the tanh approximation.
# =================================================================================================
@triton.jit
def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, BUG: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0).to(tl.float32)
    if BUG:
        inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        th = 2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0
        y = 0.5 * x * (1.0 + th)
    else:
        y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=m)


def _ew_inputs(allowed):
    def inputs(dtype, max_elements):
        return st.fixed_dictionaries({"dtype": st.just(dtype), "n": S.lengths(1024, _budget(max_elements)),
                                      "seed": S.seeds(), "regime": S.regimes(allowed)})
    return inputs


def _ew_make(spec, device):
    return {"x": S.values((spec["n"],), spec["dtype"], spec["regime"], S.generator(spec["seed"])).to(device)}


def _gelu_launch(bug):
    def launch(args, outs):
        n = args["x"].numel()
        gelu_kernel[(triton.cdiv(n, 1024),)](args["x"], outs["y"], n, BLOCK=1024, BUG=bug)
    return launch


def _gelu_tol(a, refs, d):
    x = a["x"]
    terms = 0.5 * x.abs() * (1 + torch.erf(x / math.sqrt(2)).abs())
    return {"y": T.elementwise(d, "fp32", ops=4 + 2 * ERF_ULP, terms=terms)}


pair("gelu_tanh_for_erf", _gelu_launch(True), _gelu_launch(False),
     "GELU: tanh approximation where erf is specified",
     dtypes=("fp32", "bf16"), inputs=_ew_inputs(("normal", "large", "tiny", "zeros")), make=_ew_make,
     outputs=_out_like("y"), oracle=lambda a: {"y": 0.5 * a["x"] * (1 + torch.erf(a["x"] / math.sqrt(2)))},
     tolerance=_gelu_tol, math=("erf",))


# =================================================================================================
# 13. row sum reduced in the input's 16-bit format (tl.sum of fp16 / bf16 values: no upcast).
# =================================================================================================
@triton.jit
def rowsum_kernel(x_ptr, y_ptr, sx, cols, BLOCK: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * sx + offs, mask=offs < cols, other=0.0)
    if not BUG:
        x = x.to(tl.float32)
    tl.store(y_ptr + row, tl.sum(x, axis=0).to(y_ptr.dtype.element_ty))


def _rowsum_launch(bug):
    def launch(args, outs):
        x = args["x"]
        rowsum_kernel[(x.shape[0],)](x, outs["y"], x.stride(0), x.shape[1], BLOCK=_np2(x.shape[1]), BUG=bug)
    return launch


pair("rowsum_16bit_tree", _rowsum_launch(True), _rowsum_launch(False),
     "reduction accumulated in fp16/bf16 (tl.sum without upcast)",
     dtypes=("fp16", "bf16"), inputs=lambda d, me: rows_spec(d, me, tile=1024),
     make=lambda s, dev: {"x": _row_x(s, dev)},
     outputs=lambda a: {"y": ((a["x"].shape[0],), a["x"].dtype)},
     oracle=lambda a: {"y": a["x"].sum(-1)},
     tolerance=lambda a, refs, d: {"y": T.row_reduction(a["x"], d, "fp32")})


# =================================================================================================
# 14. looped RMSNorm whose sum of squares is carried in the input's format across chunks.
# =================================================================================================
@triton.jit
def rms_loop_kernel(x_ptr, w_ptr, y_ptr, sx, sy, cols, eps, BLOCK: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    if BUG:
        acc = tl.zeros([BLOCK], dtype=x_ptr.dtype.element_ty)
    else:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * sx + offs, mask=offs < cols, other=0.0)
        if not BUG:
            x = x.to(tl.float32)
        acc += x * x
    rstd = tl.rsqrt(tl.sum(acc.to(tl.float32), axis=0) / cols + eps)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < cols
        x = tl.load(x_ptr + row * sx + offs, mask=m, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * sy + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=m)


def _rmsloop_launch(bug):
    def launch(args, outs):
        x = args["x"]
        rms_loop_kernel[(x.shape[0],)](x, args["w"], outs["y"], x.stride(0), outs["y"].stride(0), x.shape[1], EPS,
                                       BLOCK=64, BUG=bug)
    return launch


pair("rmsnorm_16bit_loop_acc", _rmsloop_launch(True), _rmsloop_launch(False),
     "sum of squares carried in bf16/fp16 across chunks",
     dtypes=("bf16", "fp16"), inputs=lambda d, me: rows_spec(d, me, tile=64),
     make=lambda s, dev: {"x": _row_x(s, dev), "w": _vec(s, s["cols"], dev, 11)}, outputs=_out_like("y"),
     oracle=lambda a: {"y": a["x"] * torch.rsqrt(a["x"].square().mean(-1, keepdim=True) + EPS) * a["w"]},
     tolerance=lambda a, refs, d: {"y": T.normalization(a["x"], d, "fp32", eps=EPS, centered=False, weight=a["w"])})


# =================================================================================================
# 15. persistent row-norm kernel (grid = SM count): the accumulator is not reset per row.
# =================================================================================================
@triton.jit
def rownorm_persistent_kernel(x_ptr, y_ptr, sx, rows, cols, BLOCK: tl.constexpr, BUG: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for row in range(pid, rows, nprog):
        if not BUG:
            acc = tl.zeros([BLOCK], dtype=tl.float32)
        x = tl.load(x_ptr + tl.cast(row, tl.int64) * sx + offs, mask=offs < cols, other=0.0).to(tl.float32)
        acc += x * x
        tl.store(y_ptr + row, tl.sqrt(tl.sum(acc, axis=0)).to(y_ptr.dtype.element_ty))


def _num_sms(device):
    if torch.device(device).type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132   # an H100's SM count where there is no GPU to ask


def _persist_launch(bug):
    def launch(args, outs):
        x = args["x"]
        grid = (max(1, min(x.shape[0], _num_sms(x.device))),)
        rownorm_persistent_kernel[grid](x, outs["y"], x.stride(0), x.shape[0], x.shape[1],
                                        BLOCK=_np2(x.shape[1]), BUG=bug)
    return launch


pair("persistent_acc_not_reset", _persist_launch(True), _persist_launch(False),
     "persistent kernel carries its accumulator into the next row (wrong once a program takes 2 rows)",
     dtypes=("fp16",), inputs=lambda d, me: rows_spec(d, me, max_rows=64),
     make=lambda s, dev: {"x": _row_x(s, dev)}, outputs=lambda a: {"y": ((a["x"].shape[0],), a["x"].dtype)},
     oracle=lambda a: {"y": a["x"].square().sum(-1).sqrt()},
     tolerance=lambda a, refs, d: {"y": T.rounding(d, "fp32", reduction=a["x"].shape[-1], ops=4)})


# =================================================================================================
# 16. row offset computed in int32 (program_id * stride): wraps past 2**31 elements.
# =================================================================================================
@triton.jit
def bias_add_kernel(x_ptr, b_ptr, y_ptr, sx, sy, cols, BLOCK: tl.constexpr, BUG: tl.constexpr):
    if BUG:
        row = tl.program_id(0)
    else:
        row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    x = tl.load(x_ptr + row * sx + offs, mask=m, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * sy + offs, (x + b).to(y_ptr.dtype.element_ty), mask=m)


def _bias_launch(bug):
    def launch(args, outs):
        x = args["x"]
        bias_add_kernel[(x.shape[0],)](x, args["b"], outs["y"], x.stride(0), outs["y"].stride(0), x.shape[1],
                                       BLOCK=_np2(x.shape[1]), BUG=bug)
    return launch


pair("int32_row_offset", _bias_launch(True), _bias_launch(False),
     "row * stride in int32 (wraps past 2**31 elements)",
     dtypes=("fp16",), inputs=lambda d, me: rows_spec(d, me),
     make=lambda s, dev: {"x": _row_x(s, dev), "b": _vec(s, s["cols"], dev, 3)}, outputs=_out_like("y"),
     oracle=lambda a: {"y": a["x"] + a["b"]},
     tolerance=lambda a, refs, d: {"y": T.elementwise(d, "fp32", ops=1, terms=a["x"].abs() + a["b"].abs())})


# =================================================================================================
# 17. column sums split over row blocks: programs read-modify-write the output without atomics.
# =================================================================================================
@triton.jit
def colsum_kernel(x_ptr, y_ptr, sx, rows, cols, BR: tl.constexpr, BC: tl.constexpr, BUG: tl.constexpr):
    rc = tl.program_id(1) * BC + tl.arange(0, BC)
    cm = rc < cols
    if BUG:
        rr = tl.program_id(0) * BR + tl.arange(0, BR)
        x = tl.load(x_ptr + rr[:, None].to(tl.int64) * sx + rc[None, :],
                    mask=(rr < rows)[:, None] & cm[None, :], other=0.0).to(tl.float32)
        cur = tl.load(y_ptr + rc, mask=cm, other=0.0)
        tl.store(y_ptr + rc, cur + tl.sum(x, axis=0), mask=cm)
    else:
        acc = tl.zeros([BC], dtype=tl.float32)
        for r0 in range(0, rows, BR):
            rr = r0 + tl.arange(0, BR)
            x = tl.load(x_ptr + rr[:, None].to(tl.int64) * sx + rc[None, :],
                        mask=(rr < rows)[:, None] & cm[None, :], other=0.0).to(tl.float32)
            acc += tl.sum(x, axis=0)
        tl.store(y_ptr + rc, acc, mask=cm)


def _colsum_launch(bug):
    def launch(args, outs):
        x, y = args["x"], outs["y"]
        R, C = x.shape
        if bug:
            y.zero_()
            grid = (triton.cdiv(R, 4), triton.cdiv(C, 64))
        else:
            grid = (1, triton.cdiv(C, 64))
        colsum_kernel[grid](x, y, x.stride(0), R, C, BR=4, BC=64, BUG=bug)
    return launch


pair("colsum_rmw_race", _colsum_launch(True), _colsum_launch(False),
     "split reduction: programs load+store the same output (no atomics)",
     dtypes=("fp32",), inputs=lambda d, me: rows_spec(d, me, tile=64, max_rows=32, allowed=("normal",)),
     make=lambda s, dev: {"x": _row_x(s, dev)}, outputs=lambda a: {"y": ((a["x"].shape[1],), torch.float32)},
     oracle=lambda a: {"y": a["x"].sum(0)},
     tolerance=lambda a, refs, d: {"y": T.row_reduction(a["x"].t(), "fp32", "fp32")})


# =================================================================================================
# 18. RoPE with a host-side cos/sin cache keyed on head_dim only (not on the rope base): a later
#     call with another base reuses the stale table. State across calls, not across launches.
# =================================================================================================
@triton.jit
def rope_cached_kernel(x_ptr, pos_ptr, cos_ptr, sin_ptr, y_ptr, sxt, syt, HALF, BLOCK_H: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    i = tl.arange(0, BLOCK_H)
    m = i < HALF
    pos = tl.load(pos_ptr + t).to(tl.int64)
    c = tl.load(cos_ptr + pos * HALF + i, mask=m, other=0.0)
    sn = tl.load(sin_ptr + pos * HALF + i, mask=m, other=0.0)
    x1 = tl.load(x_ptr + t * sxt + i, mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + t * sxt + HALF + i, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + t * syt + i, (x1 * c - x2 * sn).to(y_ptr.dtype.element_ty), mask=m)
    tl.store(y_ptr + t * syt + HALF + i, (x2 * c + x1 * sn).to(y_ptr.dtype.element_ty), mask=m)


MAX_POS = 2048
_COS_SIN = {True: {}, False: {}}


def _cos_sin(d, base, device, bug):
    key = (d, str(device)) if bug else (d, base, str(device))
    cache = _COS_SIN[bug]
    if key not in cache:
        inv = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        th = torch.arange(MAX_POS, dtype=torch.float64)[:, None] * inv[None, :]
        cache[key] = (th.cos().to(torch.float32).to(device), th.sin().to(torch.float32).to(device))
    return cache[key]


def _ropec_inputs(dtype, max_elements):
    return st.fixed_dictionaries({"dtype": st.just(dtype), "tokens": st.integers(1, 16),
                                  "d": st.sampled_from([32, 64]), "base": st.sampled_from([10000.0, 1000000.0]),
                                  "seed": S.seeds()})


def _ropec_make(spec, device):
    g = S.generator(spec["seed"])
    return {"x": S.values((spec["tokens"], spec["d"]), spec["dtype"], "normal", g).to(device),
            "positions": S.integers(0, MAX_POS, (spec["tokens"],), g).to(device), "base": spec["base"]}


def _ropec_launch(bug):
    def launch(args, outs):
        x, y = args["x"], outs["y"]
        cos, sin = _cos_sin(x.shape[-1], args["base"], x.device, bug)
        rope_cached_kernel[(x.shape[0],)](x, args["positions"], cos, sin, y, x.stride(0), y.stride(0), x.shape[-1] // 2,
                                          BLOCK_H=triton.next_power_of_2(x.shape[-1] // 2))
    return launch


def _ropec_parts(a):
    x = a["x"]
    d = x.shape[-1]
    inv = a["base"] ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    th = a["positions"].to(torch.float64)[:, None] * inv[None, :]
    return x[:, :d // 2], x[:, d // 2:], th


def _ropec_oracle(a):
    x1, x2, th = _ropec_parts(a)
    return {"y": torch.cat([x1 * th.cos() - x2 * th.sin(), x2 * th.cos() + x1 * th.sin()], -1)}


def _ropec_tol(a, refs, d):
    x1, x2, _ = _ropec_parts(a)
    e = (x1.abs() + x2.abs()) * 4 * U32
    return {"y": T.Tolerance(fmt(d).unit_roundoff, torch.cat([e, e], -1) + fmt(d).subnormal_step,
                             "rtol = u(out); atol = 4 u(fp32)(|x1| + |x2|) + sub(out): cos and sin round once "
                             "to fp32, two products and a sum")}


pair("rope_cache_key_misses_base", _ropec_launch(True), _ropec_launch(False),
     "launcher's cos/sin cache keyed without the rope base (stale across calls)",
     dtypes=("fp32",), inputs=_ropec_inputs, make=_ropec_make, outputs=_out_like("y"),
     oracle=_ropec_oracle, tolerance=_ropec_tol)


# =================================================================================================
# 19. dropout with Philox: the random offset is the column only, so every row gets the same mask.
# =================================================================================================
@triton.jit
def dropout_kernel(x_ptr, y_ptr, sx, sy, cols, p, scale, seed, BLOCK: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    x = tl.load(x_ptr + row.to(tl.int64) * sx + offs, mask=m, other=0.0).to(tl.float32)
    if BUG:
        rnd = tl.rand(seed, offs)
    else:
        rnd = tl.rand(seed, row * cols + offs)
    y = tl.where(rnd > p, x * scale, 0.0)
    tl.store(y_ptr + row.to(tl.int64) * sy + offs, y.to(y_ptr.dtype.element_ty), mask=m)


def _drop_inputs(dtype, max_elements):
    return rows_spec(dtype, max_elements, allowed=("normal",)).flatmap(
        lambda s: st.fixed_dictionaries({"p": st.sampled_from([0.1, 0.25, 0.5]), "rng": st.integers(0, 2**31 - 1)}).map(
            lambda t: {**s, **t}))


def _drop_launch(bug):
    def launch(args, outs):
        x = args["x"]
        p = args["p"]
        dropout_kernel[(x.shape[0],)](x, outs["y"], x.stride(0), outs["y"].stride(0), x.shape[1], p, 1.0 / (1.0 - p),
                                      args["rng"], BLOCK=_np2(x.shape[1]), BUG=bug)
    return launch


_M32 = 0xFFFFFFFF


def _mul32(a, b):
    """(hi, lo) 32-bit words of a * b for uint32 values held in int64 tensors (no int64 overflow)."""
    ah, al = a >> 16, a & 0xFFFF
    P, Q = ah * b, al * b                       # each < 2**48
    hi = (P + (Q >> 16)) >> 16
    lo = (((P & 0xFFFF) << 16) + Q) & _M32
    return hi & _M32, lo


def philox_uniform(seed: int, offsets: torch.Tensor) -> torch.Tensor:
    """Triton's tl.rand(seed, offsets) for int32 offsets, re-derived: Philox4x32-10 on
    (offset, 0, 0, 0) with key (seed lo, seed hi), first word to a float in [0, 1)."""
    c0 = offsets.to(torch.int64) & _M32
    c1 = torch.zeros_like(c0)
    c2 = torch.zeros_like(c0)
    c3 = torch.zeros_like(c0)
    k0 = torch.full_like(c0, seed & _M32)
    k1 = torch.full_like(c0, (seed >> 32) & _M32)
    A, B = 0xD2511F53, 0xCD9E8D57
    for _ in range(10):
        hb, lb = _mul32(torch.full_like(c2, B), c2)
        ha, la = _mul32(torch.full_like(c0, A), c0)
        c0, c1, c2, c3 = hb ^ c1 ^ k0, lb, ha ^ c3 ^ k1, la
        k0 = (k0 + 0x9E3779B9) & _M32
        k1 = (k1 + 0xBB67AE85) & _M32
    v = torch.where(c0 >= 2**31, c0 - 2**32, c0)          # as int32
    v = torch.where(v < 0, -v - 1, v)
    return v.to(torch.float32) * torch.tensor(4.6566127342e-10, dtype=torch.float32)


def _drop_oracle(a):
    x = a["x"]
    R, C = x.shape
    offs = torch.arange(R)[:, None] * C + torch.arange(C)[None, :]
    keep = philox_uniform(a["rng"], offs) > torch.tensor(a["p"], dtype=torch.float32)
    return {"y": torch.where(keep.to(x.device), x / (1 - a["p"]), torch.zeros_like(x))}


pair("dropout_offset_ignores_row", _drop_launch(True), _drop_launch(False),
     "dropout RNG offset is the column only: every row gets the same mask",
     dtypes=("fp32",), inputs=_drop_inputs,
     make=lambda s, dev: {"x": _row_x(s, dev), "p": s["p"], "rng": s["rng"]}, outputs=_out_like("y"),
     oracle=_drop_oracle, tolerance=lambda a, refs, d: {"y": T.elementwise(d, "fp32", ops=2)})


# =================================================================================================
# 20. MoE top-2 routing: ties broken toward the higher expert index (spec: lowest index first).
# =================================================================================================
@triton.jit
def top2_kernel(x_ptr, ids_ptr, w_ptr, sx, E, BLOCK_E: tl.constexpr, BUG: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_E)
    s = tl.load(x_ptr + t * sx + offs, mask=offs < E, other=-float("inf")).to(tl.float32)
    m0 = tl.max(s, axis=0)
    if BUG:
        i0 = tl.max(tl.where(s == m0, offs, -1), axis=0)
    else:
        i0 = tl.min(tl.where(s == m0, offs, BLOCK_E), axis=0)
    s = tl.where(offs == i0, -float("inf"), s)
    m1 = tl.max(s, axis=0)
    if BUG:
        i1 = tl.max(tl.where(s == m1, offs, -1), axis=0)
    else:
        i1 = tl.min(tl.where(s == m1, offs, BLOCK_E), axis=0)
    e1 = tl.exp(m1 - m0)
    tl.store(ids_ptr + t * 2, i0.to(tl.int32))
    tl.store(ids_ptr + t * 2 + 1, i1.to(tl.int32))
    tl.store(w_ptr + t * 2, 1.0 / (1.0 + e1))
    tl.store(w_ptr + t * 2 + 1, e1 / (1.0 + e1))


def _top2_inputs(dtype, max_elements):
    return st.tuples(st.integers(1, 16), st.sampled_from([2, 6, 8, 16, 60, 64]), S.seeds(),
                     S.regimes(("normal", "equal", "zeros", "large"))).map(
        lambda t: {"dtype": dtype, "rows": t[0], "cols": t[1], "seed": t[2], "regime": t[3], "layout": "contiguous"})


def _top2_launch(bug):
    def launch(args, outs):
        x = args["x"]
        top2_kernel[(x.shape[0],)](x, outs["ids"], outs["w"], x.stride(0), x.shape[1],
                                   BLOCK_E=triton.next_power_of_2(x.shape[1]), BUG=bug)
    return launch


def _top2_oracle(a):
    x = a["x"]
    order = torch.sort(-x, dim=-1, stable=True).indices[:, :2]     # equal logits: lowest index first
    top = torch.gather(x, 1, order)
    return {"ids": order.to(torch.int32), "w": torch.softmax(top, -1)}


def _top2_tol(a, refs, d):
    x = a["x"]
    top = torch.sort(x, dim=-1, descending=True).values[:, :2]
    gap = (top[:, :1] - top[:, 1:]).abs().expand(-1, 2)
    return {"ids": T.exact("expert ids"),
            "w": T.Tolerance((2 * EXP_ULP + 2 * DIV_ULP + 4 + gap) * U32, 4 * SUB32,
                             "rtol = (2 EXP_ULP + 2 DIV_ULP + 4 + |m0 - m1|) u(fp32); atol = 4 sub(fp32)")}


pair("moe_top2_tie_break", _top2_launch(True), _top2_launch(False),
     "top-k routing breaks ties toward the higher expert index",
     dtypes=("bf16",), inputs=_top2_inputs, make=lambda s, dev: {"x": _row_x(s, dev)},
     outputs=lambda a: {"ids": ((a["x"].shape[0], 2), torch.int32), "w": ((a["x"].shape[0], 2), torch.float32)},
     oracle=_top2_oracle, tolerance=_top2_tol, math=("exp",))


# =================================================================================================
# 21. matmul whose accumulator is the output's format (fp16 partial sums per K step).
# =================================================================================================
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, BUG: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    if BUG:
        acc = tl.zeros((BM, BN), dtype=c_ptr.dtype.element_ty)
    else:
        acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * sam + kk[None, :] * sak, mask=(rm < M)[:, None] & (kk < K)[None, :], other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + rn[None, :] * sbn, mask=(kk < K)[:, None] & (rn < N)[None, :], other=0.0)
        acc += tl.dot(a, b).to(acc.dtype)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm < M)[:, None] & (rn < N)[None, :])


def _mm_make(spec, device):
    a, b = S.matmul_tensors(spec, device)
    return {"a": a, "b": b}


def _mm_launch(bug):
    def launch(args, outs):
        a, b, c = args["a"], args["b"], outs["c"]
        M, K = a.shape
        N = b.shape[1]
        matmul_kernel[(triton.cdiv(M, 16), triton.cdiv(N, 16))](
            a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            BM=16, BN=16, BK=16, BUG=bug)
    return launch


pair("matmul_acc_in_out_dtype", _mm_launch(True), _mm_launch(False),
     "matmul accumulates partial sums in the output dtype (fp16)",
     dtypes=("fp16",), inputs=lambda d, me: S.matmul_inputs(d, _budget(me), tile=16), make=_mm_make,
     outputs=lambda a: {"c": ((a["a"].shape[0], a["b"].shape[1]), a["a"].dtype)},
     oracle=lambda a: {"c": a["a"] @ a["b"]},
     tolerance=lambda a, refs, d: {"c": T.dot(a["a"], a["b"], d, "fp32")}, reduction="K")


# =================================================================================================
# 22. linear layer y = x @ W^T (W is nn.Linear's [N, K]): the W tile's K-tail mask is missing
#     (x's tail is masked to 0, so the extra products are 0 * whatever W's next row holds).
# =================================================================================================
@triton.jit
def linear_kernel(x_ptr, w_ptr, y_ptr, M, N, K, sxm, swn, sym,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, BUG: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        x = tl.load(x_ptr + rm[:, None] * sxm + kk[None, :], mask=(rm < M)[:, None] & (kk < K)[None, :], other=0.0)
        if BUG:
            wmask = (rn < N)[None, :]
        else:
            wmask = (kk < K)[:, None] & (rn < N)[None, :]
        w = tl.load(w_ptr + rn[None, :] * swn + kk[:, None], mask=wmask, other=0.0)   # W^T tile [BK, BN]
        acc += tl.dot(x, w)
    tl.store(y_ptr + rm[:, None] * sym + rn[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=(rm < M)[:, None] & (rn < N)[None, :])


def _lin_make(spec, device):
    a, b = S.matmul_tensors(spec, device)
    return {"x": a, "weight": b.t().contiguous()}


def _lin_launch(bug):
    def launch(args, outs):
        x, w, y = args["x"], args["weight"], outs["y"]
        if x.stride(-1) != 1 or w.stride(-1) != 1:
            raise ValueError("linear needs contiguous rows")
        M, K = x.shape
        N = w.shape[0]
        linear_kernel[(triton.cdiv(M, 16), triton.cdiv(N, 16))](x, w, y, M, N, K, x.stride(0), w.stride(0), y.stride(0),
                                                                BM=16, BN=16, BK=16, BUG=bug)
    return launch


pair("linear_weight_k_tail_unmasked", _lin_launch(True), _lin_launch(False),
     "matmul K tail: weight tile loaded without the K mask (values multiplied by 0)",
     dtypes=("fp16",), inputs=lambda d, me: S.matmul_inputs(d, _budget(me), tile=16), make=_lin_make,
     outputs=lambda a: {"y": ((a["x"].shape[0], a["weight"].shape[0]), a["x"].dtype)},
     oracle=lambda a: {"y": a["x"] @ a["weight"].t()},
     tolerance=lambda a, refs, d: {"y": T.dot(a["x"], a["weight"].t(), d, "fp32")}, reduction="K")


# =================================================================================================
# 23. SiLU through a launcher that allocates its output: the store mask is `<=`, one element past
#     the end of the launcher's own allocation (the loads are masked right).
# =================================================================================================
@triton.jit
def silu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, BUG: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    y = x / (1.0 + tl.exp(-x))
    if BUG:
        sm = offs <= n
    else:
        sm = offs < n
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=sm)


def silu_bug(x):
    y = torch.empty_like(x)
    silu_kernel[(triton.cdiv(x.numel(), 512),)](x, y, x.numel(), BLOCK=512, BUG=True)
    return y


def silu_ok(x):
    y = torch.empty_like(x)
    silu_kernel[(triton.cdiv(x.numel(), 512),)](x, y, x.numel(), BLOCK=512, BUG=False)
    return y


pair("silu_alloc_store_past_end", portcheck.allocating_launcher(silu_bug, "y"),
     portcheck.allocating_launcher(silu_ok, "y"),
     "store one element past the end of a launcher-allocated output",
     dtypes=("fp32",), inputs=_ew_inputs(("normal",)), make=_ew_make, outputs=_out_like("y"),
     oracle=lambda a: {"y": a["x"] * torch.sigmoid(a["x"])},
     tolerance=lambda a, refs, d: {"y": T.elementwise(d, "fp32", ops=2 * EXP_ULP + 2 * DIV_ULP + 2)}, math=("exp",))


# =================================================================================================
# 24. looped online softmax (chunks of 64): the running sum is not rescaled when the max grows.
# =================================================================================================
@triton.jit
def online_softmax_kernel(x_ptr, y_ptr, sx, sy, cols, BLOCK: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    m_i = -float("inf")
    l_i = 0.0
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * sx + offs, mask=offs < cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m_i, tl.max(x, axis=0))
        if BUG:
            l_i = l_i + tl.sum(tl.exp(x - m_new), axis=0)
        else:
            l_i = l_i * tl.exp(m_i - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m_i = m_new
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < cols
        x = tl.load(x_ptr + row * sx + offs, mask=m, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + row * sy + offs, (tl.exp(x - m_i) / l_i).to(y_ptr.dtype.element_ty), mask=m)


def _online_launch(bug):
    def launch(args, outs):
        x = args["x"]
        online_softmax_kernel[(x.shape[0],)](x, outs["y"], x.stride(0), outs["y"].stride(0), x.shape[1],
                                             BLOCK=64, BUG=bug)
    return launch


pair("online_softmax_no_rescale", _online_launch(True), _online_launch(False),
     "online softmax: running sum not rescaled when a later chunk raises the max",
     dtypes=("fp32",), inputs=lambda d, me: rows_spec(d, me, tile=64),
     make=lambda s, dev: {"x": _row_x(s, dev)}, outputs=_out_like("y"),
     oracle=lambda a: {"y": torch.softmax(a["x"], -1)},
     tolerance=lambda a, refs, d: {"y": T.softmax(a["x"], refs["y"], d)}, math=("exp",))


# =================================================================================================
# 25. row sum with a split path for long rows (cols > 32768, as long-context kernels switch): the
#     combine step drops the last split's partial. Unreachable within the interpreter's budget.
# =================================================================================================
SPLIT_ABOVE = 32768


@triton.jit
def rowsum_loop_kernel(x_ptr, y_ptr, sx, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * sx + offs, mask=offs < cols, other=0.0).to(tl.float32)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))


@triton.jit
def rowsum_split_kernel(x_ptr, part_ptr, sx, cols, per_split, nsplit, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    sp = tl.program_id(1)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(sp * per_split, tl.minimum((sp + 1) * per_split, cols), BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * sx + offs, mask=(offs < cols) & (offs < (sp + 1) * per_split), other=0.0).to(tl.float32)
    tl.store(part_ptr + row * nsplit + sp, tl.sum(acc, axis=0))


@triton.jit
def rowsum_combine_kernel(part_ptr, y_ptr, nsplit, NS: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, NS)
    if BUG:
        lim = nsplit - 1
    else:
        lim = nsplit
    p = tl.load(part_ptr + row * nsplit + offs, mask=offs < lim, other=0.0)
    tl.store(y_ptr + row, tl.sum(p, axis=0))


def _split_launch(bug):
    def launch(args, outs):
        x, y = args["x"], outs["y"]
        R, C = x.shape
        if C <= SPLIT_ABOVE:
            rowsum_loop_kernel[(R,)](x, y, x.stride(0), C, BLOCK=1024)
            return
        per = 16384
        ns = triton.cdiv(C, per)
        part = torch.empty((R, ns), dtype=torch.float32, device=x.device)
        rowsum_split_kernel[(R, ns)](x, part, x.stride(0), C, per, ns, BLOCK=1024)
        rowsum_combine_kernel[(R,)](part, y, ns, NS=triton.next_power_of_2(ns), BUG=bug)
    return launch


pair("rowsum_long_row_split_path", _split_launch(True), _split_launch(False),
     "size-gated split path (cols > 32768) drops its last partial",
     dtypes=("fp32",), inputs=lambda d, me: S.row_inputs(d, me, tile=1024, max_rows=4, allowed=("normal",)),
     make=lambda s, dev: {"x": _row_x(s, dev)}, outputs=lambda a: {"y": ((a["x"].shape[0],), torch.float32)},
     oracle=lambda a: {"y": a["x"].sum(-1)},
     tolerance=lambda a, refs, d: {"y": T.row_reduction(a["x"], "fp32", "fp32")})


# =================================================================================================
# 26. autotuned single-block kernel (needs BLOCK >= cols; the pruning keeps only those), whose
#     autotune key is the row count instead of cols: Triton's cache hands a later input with the
#     same row count the config picked for a shorter row.
# =================================================================================================
def _prune_blocks(configs, named_args, **kwargs):
    cols = named_args["cols"]
    kept = [c for c in configs if c.kwargs["BLOCK"] >= cols]
    return kept or configs[-1:]


_AT_CONFIGS = [triton.Config({"BLOCK": b}) for b in (32, 128, 512, 4096)]


@triton.jit
def _rowmaxsub_body(x_ptr, y_ptr, sx, sy, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    x = tl.load(x_ptr + row * sx + offs, mask=m, other=-float("inf")).to(tl.float32)
    tl.store(y_ptr + row * sy + offs, (x - tl.max(x, axis=0)).to(y_ptr.dtype.element_ty), mask=m)


@triton.autotune(configs=_AT_CONFIGS, key=["rows"], prune_configs_by={"early_config_prune": _prune_blocks})
@triton.jit
def rowmaxsub_bug_kernel(x_ptr, y_ptr, sx, sy, rows, cols, BLOCK: tl.constexpr):
    _rowmaxsub_body(x_ptr, y_ptr, sx, sy, cols, BLOCK)


@triton.autotune(configs=_AT_CONFIGS, key=["cols"], prune_configs_by={"early_config_prune": _prune_blocks})
@triton.jit
def rowmaxsub_ok_kernel(x_ptr, y_ptr, sx, sy, rows, cols, BLOCK: tl.constexpr):
    _rowmaxsub_body(x_ptr, y_ptr, sx, sy, cols, BLOCK)


def _at_launch(kernel):
    def launch(args, outs):
        x = args["x"]
        kernel[(x.shape[0],)](x, outs["y"], x.stride(0), outs["y"].stride(0), x.shape[0], x.shape[1])
    return launch


pair("autotune_key_misses_cols", _at_launch(rowmaxsub_bug_kernel), _at_launch(rowmaxsub_ok_kernel),
     "autotune key omits the argument the pruning (and correctness) depends on",
     dtypes=("fp32",), inputs=lambda d, me: rows_spec(d, me, tile=128, allowed=("normal",)),
     make=lambda s, dev: {"x": _row_x(s, dev)}, outputs=_out_like("y"),
     oracle=lambda a: {"y": a["x"] - a["x"].amax(-1, keepdim=True)},
     tolerance=lambda a, refs, d: {"y": T.elementwise(d, "fp32", ops=1,
                                                      terms=a["x"].abs() + a["x"].amax(-1, keepdim=True).abs())})
