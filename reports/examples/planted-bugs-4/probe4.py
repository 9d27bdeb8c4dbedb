"""Planted-bug probe 4 for portcheck (public API only; written by a helper outside the project, kept
here as evidence). Each bug_* case has an ok_* twin that must pass. Run from this folder:
    PYTHONPATH=$PWD portcheck run --target interpreter --cases probe4 --kernel 'bug_*,ok_*' --no-time
Bug classes not in probe2 (memory-watch/probe2.py) nor probe3 (planted-bugs-3/probe3.py).
"""
import torch
import triton
import triton.language as tl
from hypothesis import strategies as st
from triton.language.extra import libdevice

import portcheck
from portcheck import strategies as S
from portcheck import tolerance as T
from portcheck.facts.numerics import EXP_ULP   # in ULP; one ULP <= 2u
from portcheck.tolerance import Tolerance

CAP = 4096
U32 = 2.0 ** -24
SUB32 = 2.0 ** -149
LOG1P_ULP = 2            # CUDA documents log1pf at 1 ULP; 2 taken (HIP's log bound)
FAM = "bugprobe4"


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


def per_row(a):
    return lambda a: {"y": ((a["x"].shape[0],), a["x"].dtype)}


# =================================================================================== 1. row max, padding 0
@triton.jit
def rowmax_kernel(x_ptr, y_ptr, xs, cols, BLOCK: tl.constexpr, NEG_INF: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    if NEG_INF:
        x = tl.load(x_ptr + row * xs + offs, mask=offs < cols, other=-float("inf"))
    else:
        x = tl.load(x_ptr + row * xs + offs, mask=offs < cols, other=0.0)   # BUG: 0 wins on all-negative rows
    tl.store(y_ptr + row, tl.max(x, 0))


def rowmax_launch(neg_inf):
    def launch(args, outs):
        x = args["x"]
        rowmax_kernel[(x.shape[0],)](x, outs["y"], x.stride(0), x.shape[1],
                                     BLOCK=triton.next_power_of_2(x.shape[1]), NEG_INF=neg_inf)
    return launch


_rowmax = dict(dtypes=("fp32", "fp16"), inputs=rows_spec(32), make=x_rows,
               outputs=lambda a: {"y": ((a["x"].shape[0],), a["x"].dtype)},
               oracle=lambda a: {"y": a["x"].amax(-1)},
               tolerance=lambda a, refs, dtype: {"y": T.rounding(dtype, "fp32")})   # a max is exact: only the oracle rounding to the output
case("ok_rowmax", launch=rowmax_launch(True), **_rowmax)
case("bug_rowmax_other_zero", launch=rowmax_launch(False), **_rowmax)


# =================================================================================== 2. softmax, tail padded with 0
@triton.jit
def softmax_kernel(x_ptr, y_ptr, xs, ys, cols, BLOCK: tl.constexpr, NEG_INF: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    if NEG_INF:
        x = tl.load(x_ptr + row * xs + offs, mask=m, other=-float("inf")).to(tl.float32)
    else:
        x = tl.load(x_ptr + row * xs + offs, mask=m, other=0.0).to(tl.float32)   # BUG: exp(0 - max) in the sum
    mx = tl.max(x, 0)
    e = tl.exp(x - mx)
    tl.store(y_ptr + row * ys + offs, (e / tl.sum(e, 0)).to(y_ptr.dtype.element_ty), mask=m)


def softmax_launch(neg_inf):
    def launch(args, outs):
        x, y = args["x"], outs["y"]
        softmax_kernel[(x.shape[0],)](x, y, x.stride(0), y.stride(0), x.shape[1],
                                      BLOCK=triton.next_power_of_2(x.shape[1]), NEG_INF=neg_inf)
    return launch


_softmax = dict(dtypes=("fp32",), inputs=rows_spec(32), make=x_rows, outputs=same_shape(),
                oracle=lambda a: {"y": torch.softmax(a["x"], -1)},
                tolerance=lambda a, refs, dtype: {"y": T.softmax(a["x"], refs["y"], dtype, "fp32")},
                math=("exp",))
case("ok_softmax_tail", launch=softmax_launch(True), **_softmax)
case("bug_softmax_tail_other_zero", launch=softmax_launch(False), **_softmax)


# =================================================================================== 3. roll: C-style % on a negative index
@triton.jit
def roll_kernel(x_ptr, y_ptr, n, shift, BLOCK: tl.constexpr, WRAP: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    if WRAP:
        src = ((offs - shift) % n + n) % n
    else:
        src = (offs - shift) % n          # BUG: Triton's % truncates (C), negative for offs < shift
    tl.store(y_ptr + offs, tl.load(x_ptr + src, mask=m, other=0.0), mask=m)


def roll_launch(wrap):
    def launch(args, outs):
        x = args["x"]
        n = x.numel()
        roll_kernel[(triton.cdiv(n, 64),)](x, outs["y"], n, args["shift"] % n, BLOCK=64, WRAP=wrap)
    return launch


_roll = dict(dtypes=("fp16",),
             inputs=lambda dtype, max_elements: st.fixed_dictionaries(
                 {"dtype": st.just(dtype), "n": S.lengths(64, min(max_elements, CAP)), "seed": S.seeds(),
                  "regime": S.regimes(), "shift": st.integers(0, 10_000)}),
             make=lambda spec, device: {"x": S.values((spec["n"],), spec["dtype"], spec["regime"],
                                                      S.generator(spec["seed"])).to(device), "shift": spec["shift"]},
             outputs=same_shape(), oracle=lambda a: {"y": torch.roll(a["x"], a["shift"] % a["x"].numel())},
             tolerance=lambda a, refs, dtype: {"y": T.rounding(dtype, "fp32")})   # a copy: only the oracle rounding to the output
case("ok_roll", launch=roll_launch(True), **_roll)
case("bug_roll_trunc_mod", launch=roll_launch(False), **_roll)


# =================================================================================== 4. cumsum along the wrong axis
@triton.jit
def cumsum_kernel(x_ptr, y_ptr, rows, cols, xs, ys, BR: tl.constexpr, BC: tl.constexpr, AXIS: tl.constexpr):
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    c = tl.arange(0, BC)
    m = (r < rows)[:, None] & (c < cols)[None, :]
    x = tl.load(x_ptr + r[:, None].to(tl.int64) * xs + c[None, :], mask=m, other=0.0).to(tl.float32)
    y = tl.cumsum(x, axis=AXIS)           # BUG when AXIS == 0: down the columns of the tile
    tl.store(y_ptr + r[:, None].to(tl.int64) * ys + c[None, :], y.to(y_ptr.dtype.element_ty), mask=m)


def cumsum_launch(axis):
    def launch(args, outs):
        x, y = args["x"], outs["y"]
        cumsum_kernel[(triton.cdiv(x.shape[0], 4),)](x, y, x.shape[0], x.shape[1], x.stride(0), y.stride(0),
                                                     BR=4, BC=triton.next_power_of_2(x.shape[1]), AXIS=axis)
    return launch


def cumsum_tol(a, refs, dtype):
    """fp32 prefix sums in any order: |err_k| <= (k - 1) u sum_{j<=k} |x_j| (first order); k u taken."""
    x = a["x"]
    k = torch.arange(1, x.shape[-1] + 1, dtype=torch.float64, device=x.device)
    atol = k * U32 * x.abs().cumsum(-1) + SUB32
    return {"y": Tolerance(U32, atol, "rtol = u; atol_k = k u sum_{j<=k} |x_j| + sub, u = u(fp32)")}


_cumsum = dict(dtypes=("fp32",), inputs=rows_spec(32, max_rows=16), make=x_rows, outputs=same_shape(),
               oracle=lambda a: {"y": a["x"].cumsum(-1)}, tolerance=cumsum_tol)
case("ok_cumsum", launch=cumsum_launch(1), **_cumsum)
case("bug_cumsum_wrong_axis", launch=cumsum_launch(0), **_cumsum)


# =================================================================================== 5. static int8 quantiser, no saturation
@triton.jit
def squant_kernel(x_ptr, q_ptr, xs, qs, cols, scale, BLOCK: tl.constexpr, CLAMP: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    x = tl.load(x_ptr + row * xs + offs, mask=m, other=0.0).to(tl.float32)
    v = libdevice.rint(x / scale)
    if CLAMP:
        v = tl.clamp(v, -128.0, 127.0)
    # else BUG: out-of-range values converted to int8 unclamped (undefined; wraps or saturates)
    tl.store(q_ptr + row * qs + offs, v.to(tl.int8), mask=m)


def squant_make(spec, device):
    x = S.row_tensor(spec, device)
    amax = float(x.abs().amax().float()) if x.numel() else 1.0
    # a calibration scale that half the range exceeds (as a scale from another batch would)
    return {"x": x, "scale": max(amax, 1e-6) / 127.0 * 0.5}


def squant_launch(clamp):
    def launch(args, outs):
        x, q = args["x"], outs["q"]
        squant_kernel[(x.shape[0],)](x, q, x.stride(0), q.stride(0), x.shape[1], args["scale"],
                                     BLOCK=triton.next_power_of_2(x.shape[1]), CLAMP=clamp)
    return launch


def squant_oracle(a):
    s32 = torch.tensor(a["scale"], dtype=torch.float32)
    v = torch.round(a["x"].to(torch.float32) / s32).clamp(-128, 127)
    return {"q": v.to(torch.int8)}


_squant = dict(dtypes=("fp32",), inputs=rows_spec(32), make=squant_make,
               outputs=lambda a: {"q": (tuple(a["x"].shape), torch.int8)}, oracle=squant_oracle,
               tolerance=lambda a, refs, dtype: {"q": T.exact("the codes of the fp32 quantiser, bit for bit")})
case("ok_static_int8_quant", launch=squant_launch(True), **_squant)
case("bug_static_int8_quant_no_clamp", launch=squant_launch(False), **_squant)


# =================================================================================== 6. softplus: naive formula
@triton.jit
def softplus_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, STABLE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0).to(tl.float32)
    if STABLE:
        y = tl.maximum(x, 0.0) + libdevice.log1p(tl.exp(-tl.abs(x)))
    else:
        y = tl.log(1.0 + tl.exp(x))       # BUG: inf for x > 88, cancellation for x < 0
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=m)


def softplus_tol(a, refs, dtype):
    """exp(-|x|): EXP_ULP ULP plus the argument's rounding (|x| u, the multiply by log2 e); log1p: LOG1P_ULP
    ULP, its condition number <= 1; the final add of two non-negative terms: u. One ULP <= 2u."""
    x = a["x"].abs()
    rtol = (2 * EXP_ULP + 2 * LOG1P_ULP + 2 + x) * U32
    return {"y": Tolerance(rtol, 2 * SUB32, "rtol = (2 EXP_ULP + 2 LOG1P_ULP + 2 + |x|) u, atol = 2 sub, u = u(fp32)")}


_softplus = dict(dtypes=("fp32",),
                 inputs=lambda dtype, max_elements: st.fixed_dictionaries(
                     {"dtype": st.just(dtype), "n": S.lengths(64, min(max_elements, CAP)), "seed": S.seeds(),
                      "regime": S.regimes()}),
                 make=lambda spec, device: {"x": S.values((spec["n"],), spec["dtype"], spec["regime"],
                                                          S.generator(spec["seed"])).to(device)},
                 outputs=same_shape(), oracle=lambda a: {"y": torch.nn.functional.softplus(a["x"])},
                 tolerance=softplus_tol, math=("exp", "log"))
case("ok_softplus", launch=lambda a, o: softplus_kernel[(triton.cdiv(a["x"].numel(), 64),)](
    a["x"], o["y"], a["x"].numel(), BLOCK=64, STABLE=True), **_softplus)
case("bug_softplus_naive", launch=lambda a, o: softplus_kernel[(triton.cdiv(a["x"].numel(), 64),)](
    a["x"], o["y"], a["x"].numel(), BLOCK=64, STABLE=False), **_softplus)


# =================================================================================== 7. LayerNorm affine before normalising
@triton.jit
def ln_kernel(x_ptr, w_ptr, b_ptr, y_ptr, xs, ys, cols, eps, BLOCK: tl.constexpr, AFFINE_FIRST: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    x = tl.load(x_ptr + row * xs + offs, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=m, other=0.0).to(tl.float32)
    if AFFINE_FIRST:
        x = tl.where(m, x * w + b, 0.0)                  # BUG: weight and bias before the normalisation
    mean = tl.sum(x, 0) / cols
    d = tl.where(m, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, 0) / cols + eps)
    y = d * rstd
    if not AFFINE_FIRST:
        y = y * w + b
    tl.store(y_ptr + row * ys + offs, y.to(y_ptr.dtype.element_ty), mask=m)


def ln_make(spec, device):
    g = S.generator(spec["seed"] + 1)
    return {"x": S.row_tensor(spec, device), "eps": 1e-5,
            "w": S.values((spec["cols"],), spec["dtype"], "normal", g).to(device),
            "b": S.values((spec["cols"],), spec["dtype"], "normal", g).to(device)}


def ln_launch(first):
    def launch(args, outs):
        x, y = args["x"], outs["y"]
        ln_kernel[(x.shape[0],)](x, args["w"], args["b"], y, x.stride(0), y.stride(0), x.shape[1], args["eps"],
                                 BLOCK=triton.next_power_of_2(x.shape[1]), AFFINE_FIRST=first)
    return launch


_ln = dict(dtypes=("fp32",), inputs=rows_spec(32), make=ln_make, outputs=same_shape(),
           oracle=lambda a: {"y": torch.nn.functional.layer_norm(a["x"], a["x"].shape[-1:], a["w"], a["b"], a["eps"])},
           tolerance=lambda a, refs, dtype: {"y": T.normalization(a["x"], dtype, "fp32", eps=a["eps"],
                                                                  weight=a["w"], bias=a["b"])},
           math=("sqrt",))
case("ok_ln_affine_after", launch=ln_launch(False), **_ln)
case("bug_ln_affine_before_norm", launch=ln_launch(True), **_ln)


# =================================================================================== 8-9. integer rows: int32 sum overflow, truncating //
def int_inputs(lo, hi):
    def inputs(dtype, max_elements):
        return st.tuples(S.rows_and_cols(32, min(max_elements, CAP), max_rows=8), S.seeds()).map(
            lambda t: {"dtype": dtype, "rows": t[0][0], "cols": t[0][1], "seed": t[1], "lo": lo, "hi": hi})
    return inputs


def int_make(spec, device):
    x = S.integers(spec["lo"], spec["hi"], (spec["rows"], spec["cols"]), S.generator(spec["seed"]))
    return {"x": x.to(torch.int32).to(device)}


@triton.jit
def isum_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr, WIDE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=0)
    if WIDE:
        s = tl.sum(x.to(tl.int64), 0)
    else:
        s = tl.sum(x, 0).to(tl.int64)     # BUG: the sum wraps in int32
    tl.store(y_ptr + row, s)


def isum_launch(wide):
    def launch(args, outs):
        x = args["x"].contiguous()
        isum_kernel[(x.shape[0],)](x, outs["y"], x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]), WIDE=wide)
    return launch


_isum = dict(dtypes=("int32",), inputs=int_inputs(-2**30, 2**30), make=int_make,
             outputs=lambda a: {"y": ((a["x"].shape[0],), torch.int64)},
             oracle=lambda a: {"y": a["x"].long().sum(-1)},
             tolerance=lambda a, refs, dtype: {"y": T.exact("an integer sum")})
case("ok_int_rowsum_int64", launch=isum_launch(True), **_isum)
case("bug_int_rowsum_int32_wraps", launch=isum_launch(False), **_isum)


@triton.jit
def ifloormean_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr, FLOOR: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    s = tl.sum(tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=0), 0)
    q = s // cols                         # BUG alone: truncates toward zero (C), the spec floors (Python)
    if FLOOR:
        r = s % cols
        q = q - ((r != 0) & (s < 0)).to(tl.int32)
    tl.store(y_ptr + row, q)


def ifloormean_launch(floor):
    def launch(args, outs):
        x = args["x"].contiguous()
        ifloormean_kernel[(x.shape[0],)](x, outs["y"], x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]),
                                         FLOOR=floor)
    return launch


_ifm = dict(dtypes=("int32",), inputs=int_inputs(-1000, 1000), make=int_make,
            outputs=lambda a: {"y": ((a["x"].shape[0],), torch.int32)},
            oracle=lambda a: {"y": torch.div(a["x"].long().sum(-1), a["x"].shape[1], rounding_mode="floor").to(torch.int32)},
            tolerance=lambda a, refs, dtype: {"y": T.exact("floor(sum / cols), as Python's //")})
case("ok_int_floor_mean", launch=ifloormean_launch(True), **_ifm)
case("bug_int_floor_mean_trunc_div", launch=ifloormean_launch(False), **_ifm)


# =================================================================================== 10. row store masked by the total size
# Centring rows; the store's mask is row * cols + col < rows * cols (the flat size), not col < cols: lanes past
# a row's end write -mean into the next row's first elements. Programs that run in order 0, 1, ... overwrite
# it with the right values; a GPU runs them in any order (a write-write race between programs).
@triton.jit
def centre_kernel(x_ptr, y_ptr, cols, total, BLOCK: tl.constexpr, FLAT: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=0.0).to(tl.float32)
    y = x - tl.sum(x, 0) / cols
    if FLAT:
        sm = row * cols + offs < total    # BUG: spills into the next row
    else:
        sm = offs < cols
    tl.store(y_ptr + row * cols + offs, y.to(y_ptr.dtype.element_ty), mask=sm)


def centre_launch(flat):
    def launch(args, outs):
        x, y = args["x"].contiguous(), outs["y"]
        assert y.is_contiguous()
        centre_kernel[(x.shape[0],)](x, y, x.shape[1], x.numel(), BLOCK=triton.next_power_of_2(x.shape[1]),
                                     FLAT=flat)
    return launch


def centre_tol(a, refs, dtype):
    """mean: (cols - 1) u sum|x| / cols from the sum, u from the division; the subtraction: u |y| (rtol)."""
    x = a["x"]
    cols = x.shape[-1]
    atol = (cols + 1) * U32 * x.abs().sum(-1, keepdim=True) / cols + SUB32
    return {"y": Tolerance(U32, atol, "rtol = u; atol_r = (cols + 1) u sum_j |x_rj| / cols + sub, u = u(fp32)")}


_centre = dict(dtypes=("fp32",), inputs=rows_spec(32, max_rows=16), make=x_rows, outputs=same_shape(),
               oracle=lambda a: {"y": a["x"] - a["x"].mean(-1, keepdim=True)}, tolerance=centre_tol)
case("ok_centre_row_mask", launch=centre_launch(False), **_centre)
case("bug_centre_flat_mask_spill", launch=centre_launch(True), **_centre)


# =================================================================================== 11. global scratch read back by other lanes, no barrier
# Each program writes its block to a workspace and reads it back reversed: lane i reads what lane BLOCK-1-i
# wrote. On a GPU those lanes sit in different warps; without a barrier a lane may read before the other
# wrote (Triton inserts barriers for shared memory only, not for global memory).
@triton.jit
def blockrev_kernel(x_ptr, ws_ptr, y_ptr, n, BLOCK: tl.constexpr, BARRIER: tl.constexpr):
    base = tl.program_id(0) * BLOCK
    ar = tl.arange(0, BLOCK)
    offs = base + ar
    m = offs < n
    tl.store(ws_ptr + offs, tl.load(x_ptr + offs, mask=m, other=0.0))
    if BARRIER:
        tl.debug_barrier()
    # else BUG: an intra-program race through global memory
    v = tl.load(ws_ptr + base + (BLOCK - 1 - ar))
    tl.store(y_ptr + offs, v, mask=m)


def blockrev_launch(barrier):
    def launch(args, outs):
        x = args["x"]
        n = x.numel()
        ws = torch.empty(triton.cdiv(n, 128) * 128, dtype=x.dtype, device=x.device)
        blockrev_kernel[(triton.cdiv(n, 128),)](x, ws, outs["y"], n, BLOCK=128, BARRIER=barrier, num_warps=4)
    return launch


def blockrev_oracle(a):
    x = a["x"]
    n = x.numel()
    p = torch.zeros(-(-n // 128) * 128, dtype=x.dtype, device=x.device)
    p[:n] = x
    return {"y": p.view(-1, 128).flip(-1).reshape(-1)[:n]}


_vec = lambda dtype, max_elements: st.fixed_dictionaries(
    {"dtype": st.just(dtype), "n": S.lengths(128, min(max_elements, CAP)), "seed": S.seeds(), "regime": S.regimes()})
_xvec = lambda spec, device: {"x": S.values((spec["n"],), spec["dtype"], spec["regime"], S.generator(spec["seed"])).to(device)}
_blockrev = dict(dtypes=("fp32",), inputs=_vec, make=_xvec, outputs=same_shape(), oracle=blockrev_oracle,
                 tolerance=lambda a, refs, dtype: {"y": T.rounding(dtype, "fp32")})   # a copy
case("ok_blockrev_barrier", launch=blockrev_launch(True), **_blockrev)
case("bug_blockrev_no_barrier", launch=blockrev_launch(False), **_blockrev)


# =================================================================================== 12. stream compaction ordered by atomic tickets
# Keep the positive values, in order. The bug: each program takes its output offset from an atomic counter,
# so the blocks land in the order the programs arrive (any order on a GPU), not in input order.
@triton.jit
def compact_kernel(x_ptr, y_ptr, cnt_ptr, n, BLOCK: tl.constexpr, SERIAL: tl.constexpr):
    ar = tl.arange(0, BLOCK)
    if SERIAL:                            # one program, blocks in order, a running offset
        carry = 0
        for b0 in range(0, n, BLOCK):
            offs = b0 + ar
            m = offs < n
            x = tl.load(x_ptr + offs, mask=m, other=0.0)
            k = ((x > 0) & m).to(tl.int32)
            tl.store(y_ptr + carry + tl.cumsum(k, 0) - k, x, mask=k != 0)
            carry += tl.sum(k, 0)
        tl.store(cnt_ptr, carry)
    else:
        offs = tl.program_id(0) * BLOCK + ar
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m, other=0.0)
        k = ((x > 0) & m).to(tl.int32)
        base = tl.atomic_add(cnt_ptr, tl.sum(k, 0))     # BUG: arrival order, not block order
        tl.store(y_ptr + base + tl.cumsum(k, 0) - k, x, mask=k != 0)


def compact_launch(serial):
    def launch(args, outs):
        x, y, c = args["x"], outs["y"], outs["count"]
        y.zero_()
        c.zero_()
        n = x.numel()
        grid = (1,) if serial else (triton.cdiv(n, 64),)
        compact_kernel[grid](x, y, c, n, BLOCK=64, SERIAL=serial)
    return launch


def compact_oracle(a):
    x = a["x"]
    kept = x[x > 0]
    y = torch.zeros_like(x)
    y[: kept.numel()] = kept
    return {"y": y, "count": torch.tensor([kept.numel()], dtype=torch.int32, device=x.device)}


_compact = dict(dtypes=("fp32",), inputs=_vec, make=_xvec,
                outputs=lambda a: {"y": (tuple(a["x"].shape), a["x"].dtype), "count": ((1,), torch.int32)},
                oracle=compact_oracle,
                tolerance=lambda a, refs, dtype: {"y": T.rounding(dtype, "fp32"), "count": T.exact("a count")})
case("ok_compact_serial", launch=compact_launch(True), **_compact)
case("bug_compact_atomic_ticket_order", launch=compact_launch(False), **_compact)
