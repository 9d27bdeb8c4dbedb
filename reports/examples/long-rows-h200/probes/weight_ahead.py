"""Long rows (bf16 4096 x 131072): is the second pass's weight (and bias) load what holds RMSNorm
and LayerNorm back, and is softmax's exp?

This session's first lease (`../seventh-session/keep-rows.json`) timed main's looped RMSNorm at 0.92 of copy with no
weight, where the bench (which passes one) measured 0.82. Main's pass 2 loads the weight chunk in
the iteration that uses it, so every chunk waits one L2 round trip. Here the weight (and the bias)
of the next chunk is loaded with the next x chunk (W_AHEAD), and pass 2 may take a smaller chunk
than pass 1 (B2), to leave registers for it. Softmax: exp(x - m) as exp2(x * log2e - m * log2e),
one FMA before the ex2 instead of a subtract and a multiply (EXP2).

    python3 weight_ahead.py OUT.json        # on the GPU
    python3 weight_ahead.py --check-spills  # cross-compile each variant for sm_90a here
"""
import json
import os
import sys

import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py beside it
from rows_common import bench_rows, row_timer, sm90a_resources  # noqa: E402

LOG2E = 1.4426950408889634
# (pass-1 chunk, pass-2 chunk, weight ahead): main is (32768, 32768, False)
NORM_VARIANTS = [(32768, 32768, False), (32768, 32768, True), (32768, 16384, False), (32768, 16384, True), (16384, 16384, True),
                 (32768, 8192, True)]
# softmax (chunk, EXP2 in pass 1, EXP2 in pass 2): main is (16384, False, False)
SOFTMAX_VARIANTS = [(16384, False, False), (16384, False, True), (16384, True, True)]


@triton.jit
def rms_kernel(x_ptr, w_ptr, y_ptr, n_rows, n_cols, eps, B1: tl.constexpr, B2: tl.constexpr,
               W_AHEAD: tl.constexpr):
    c1 = tl.arange(0, B1)
    c2 = tl.arange(0, B2)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + tl.cast(row, tl.int64) * n_cols
        y_row = y_ptr + tl.cast(row, tl.int64) * n_cols
        squares = tl.zeros([B1], tl.float32)
        nxt = tl.load(x_row + c1, mask=c1 < n_cols, other=0.0, eviction_policy="evict_last")
        for start in range(0, n_cols, B1):
            x = nxt.to(tl.float32)
            ahead = start + B1 + c1
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_last")
            squares += x * x
        rstd = tl.math.rsqrt(tl.sum(squares, axis=0) / n_cols + eps)
        nxt = tl.load(x_row + c2, mask=c2 < n_cols, other=0.0, eviction_policy="evict_first")
        if W_AHEAD:
            w_nxt = tl.load(w_ptr + c2, mask=c2 < n_cols, other=0.0, eviction_policy="evict_last")
        for start in range(0, n_cols, B2):
            ok = start + c2 < n_cols
            x = nxt.to(tl.float32)
            if W_AHEAD:
                w = w_nxt.to(tl.float32)
            ahead = start + B2 + c2
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_first")
            if W_AHEAD:
                w_nxt = tl.load(w_ptr + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_last")
            else:
                w = tl.load(w_ptr + start + c2, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
            tl.store(y_row + start + c2, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=ok,
                     eviction_policy="evict_first")


@triton.jit
def ln_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_rows, n_cols, eps, B1: tl.constexpr, B2: tl.constexpr,
              W_AHEAD: tl.constexpr):
    c1 = tl.arange(0, B1)
    c2 = tl.arange(0, B2)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + tl.cast(row, tl.int64) * n_cols
        y_row = y_ptr + tl.cast(row, tl.int64) * n_cols
        mean = 0.0
        m2 = 0.0
        count = 0.0
        nxt = tl.load(x_row + c1, mask=c1 < n_cols, other=0.0, eviction_policy="evict_last")
        for start in range(0, n_cols, B1):
            ok = start + c1 < n_cols
            x = nxt.to(tl.float32)
            ahead = start + B1 + c1
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_last")
            size = tl.minimum(n_cols - start, B1).to(tl.float32)
            chunk_mean = tl.sum(x, axis=0) / size
            centred = tl.where(ok, x - chunk_mean, 0.0)
            chunk_m2 = tl.sum(centred * centred, axis=0)
            total = count + size
            delta = chunk_mean - mean
            mean += delta * (size / total)
            m2 += chunk_m2 + delta * delta * (count * size / total)
            count = total
        rstd = tl.math.rsqrt(m2 / n_cols + eps)
        nxt = tl.load(x_row + c2, mask=c2 < n_cols, other=0.0, eviction_policy="evict_first")
        if W_AHEAD:
            w_nxt = tl.load(w_ptr + c2, mask=c2 < n_cols, other=0.0, eviction_policy="evict_last")
            b_nxt = tl.load(b_ptr + c2, mask=c2 < n_cols, other=0.0, eviction_policy="evict_last")
        for start in range(0, n_cols, B2):
            ok = start + c2 < n_cols
            x = nxt.to(tl.float32)
            if W_AHEAD:
                w = w_nxt.to(tl.float32)
                b = b_nxt.to(tl.float32)
            ahead = start + B2 + c2
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_first")
            if W_AHEAD:
                w_nxt = tl.load(w_ptr + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_last")
                b_nxt = tl.load(b_ptr + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_last")
            else:
                w = tl.load(w_ptr + start + c2, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
                b = tl.load(b_ptr + start + c2, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
            tl.store(y_row + start + c2, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=ok,
                     eviction_policy="evict_first")


@triton.jit
def _exp_shifted(x, m, EXP2: tl.constexpr):
    """exp(x - m); with EXP2 as exp2(x * log2e - m * log2e), one FMA before the ex2."""
    if EXP2:
        return tl.math.exp2(tl.fma(x, 1.4426950408889634, -m * 1.4426950408889634))
    else:
        return tl.exp(x - m)


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr, EXP2_1: tl.constexpr,
                   EXP2_2: tl.constexpr):
    """main's softmax_online_kernel for finite rows (no -inf/NaN handling: a speed probe only)."""
    GROUP: tl.constexpr = 8
    LANES: tl.constexpr = BLOCK // GROUP
    cols = tl.arange(0, BLOCK)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + tl.cast(row, tl.int64) * n_cols
        y_row = y_ptr + tl.cast(row, tl.int64) * n_cols
        nxt = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"), eviction_policy="evict_last")
        zero = tl.sum(tl.reshape(tl.where(cols < 0, nxt.to(tl.float32), 0.0), [LANES, GROUP]), axis=1)
        m = zero - float("inf")
        s = zero
        for start in range(0, n_cols, BLOCK):
            x = tl.reshape(nxt.to(tl.float32), [LANES, GROUP])
            ahead = start + BLOCK + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=-float("inf"), eviction_policy="evict_last")
            g_max = tl.max(x, axis=1)
            g_sum = tl.sum(_exp_shifted(x, g_max[:, None], EXP2_1), axis=1)
            new = tl.maximum(m, g_max)
            s = tl.where(s == 0.0, 0.0, s * tl.exp(m - new)) + g_sum * tl.exp(g_max - new)
            m = new
        row_max = tl.max(m, axis=0)
        total = tl.sum(s * tl.exp(m - row_max), axis=0)
        inv = tl.math.div_rn(1.0, total)
        nxt = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"), eviction_policy="evict_first")
        for start in range(0, n_cols, BLOCK):
            x = nxt.to(tl.float32)
            ahead = start + BLOCK + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=-float("inf"), eviction_policy="evict_first")
            y = _exp_shifted(x, row_max, EXP2_2) * inv
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=start + cols < n_cols,
                     eviction_policy="evict_first")



def check_spills() -> None:
    """Registers and stack (spill) bytes of every variant, cross-compiled for sm_90a."""
    base = {"n_rows": "i32", "n_cols": "i32", "eps": "fp32", "B1": "constexpr", "B2": "constexpr",
            "W_AHEAD": "constexpr"}
    for b1, b2, ahead in NORM_VARIANTS:
        consts = {"B1": b1, "B2": b2, "W_AHEAD": ahead}
        rms = sm90a_resources(rms_kernel, {"x_ptr": "*bf16", "w_ptr": "*bf16", "y_ptr": "*bf16", **base}, consts, 32)
        ln = sm90a_resources(ln_kernel, {"x_ptr": "*bf16", "w_ptr": "*bf16", "b_ptr": "*bf16", "y_ptr": "*bf16", **base},
                      consts, 32)
        print(json.dumps({"triton": triton.__version__, "b1": b1, "b2": b2, "w_ahead": ahead,
                          "rmsnorm": rms, "layernorm": ln}))
    for block, e1, e2 in SOFTMAX_VARIANTS:
        sm = sm90a_resources(softmax_kernel, {"x_ptr": "*bf16", "y_ptr": "*bf16", "n_rows": "i32", "n_cols": "i32",
                                       "BLOCK": "constexpr", "EXP2_1": "constexpr", "EXP2_2": "constexpr"},
                      {"BLOCK": block, "EXP2_1": e1, "EXP2_2": e2}, 32)
        print(json.dumps({"triton": triton.__version__, "block": block, "exp2_pass1": e1, "exp2_pass2": e2,
                          "softmax": sm}))


def main(path: str) -> None:
    from portcheck.kernels import layernorm, rmsnorm, softmax
    r = bench_rows()
    x, w, b, y = r.x, r.w, r.b, r.y
    n_rows, n_cols, sms, copy = r.n_rows, r.n_cols, r.sms, r.copy
    rows = []
    t = row_timer(x, y, copy, rows)
    for _ in range(2):
        t("rmsnorm main, weight", lambda: rmsnorm.rms_norm(x, w, 1e-6, out=y, long_rows=True))
        ref = y.float().clone()
        t("rmsnorm main, no weight", lambda: rmsnorm.rms_norm(x, None, 1e-6, out=y, long_rows=True))
        for b1, b2, ahead in NORM_VARIANTS:
            t(f"rmsnorm B1={b1} B2={b2} w_ahead={ahead}", lambda b1=b1, b2=b2, a=ahead: rms_kernel[(sms,)](
                x, w, y, n_rows, n_cols, 1e-6, B1=b1, B2=b2, W_AHEAD=a, num_warps=32), ref)
        t("layernorm main, weight and bias", lambda: layernorm.layer_norm(x, w, b, 1e-5, out=y, long_rows=True))
        ref = y.float().clone()
        t("layernorm main, neither", lambda: layernorm.layer_norm(x, None, None, 1e-5, out=y, long_rows=True))
        for b1, b2, ahead in NORM_VARIANTS:
            t(f"layernorm B1={b1} B2={b2} w_ahead={ahead}", lambda b1=b1, b2=b2, a=ahead: ln_kernel[(sms,)](
                x, w, b, y, n_rows, n_cols, 1e-5, B1=b1, B2=b2, W_AHEAD=a, num_warps=32), ref)
        t("softmax main", lambda: softmax.softmax(x, out=y, long_rows=True))
        ref = y.float().clone()
        for block, e1, e2 in SOFTMAX_VARIANTS:
            t(f"softmax B={block} exp2 pass1={e1} pass2={e2}", lambda bl=block, e1=e1, e2=e2: softmax_kernel[(sms,)](
                x, y, n_rows, n_cols, BLOCK=bl, EXP2_1=e1, EXP2_2=e2, num_warps=32), ref)
    json.dump({"copy_gbs": copy, "rows": rows}, open(path, "w"), indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "--check-spills":
        check_spills()
    else:
        main(sys.argv[1])
