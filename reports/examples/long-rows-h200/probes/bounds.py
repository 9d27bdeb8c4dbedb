"""Long rows (bf16 4096 x 131072): what bounds this session's kernels, by taking work away.

Each variant is main's looped kernel (as of this session's ccc1344) with one thing removed or
made free, timed with main in the same rounds. Outputs of the altered variants are not
RMSNorm / LayerNorm / softmax (no accuracy column): the probe measures where the time goes.

- RMSNorm and LayerNorm: no weight (and bias); weight (and bias) read at one 16-byte address
  (every thread's load hits L1: the instructions stay, the L2 traffic goes); pass 2 not
  re-reading x (y from the weight alone: the traffic of the second read goes).
- softmax: pass 2 without its exp (y = (x - m) / total); pass 1 without exps (a plain sum); both.

    python3 bounds.py OUT.json
"""
import json
import os
import sys

import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py beside it
from rows_common import bench_rows, row_timer  # noqa: E402

NORM_BLOCK = 32768
SOFTMAX_BLOCK = 16384
# W: 0 none, 1 as main, 2 one 16-byte address; X2: pass 2 reads x
RMS_MODES = {"as main": (1, True), "no weight": (0, True), "weight at one address": (2, True),
             "pass 2 without x": (1, False)}
LN_MODES = {"as main": (1, True), "no weight, no bias": (0, True), "weight and bias at one address": (2, True),
            "pass 2 without x": (1, False)}
# (exp in pass 1, exp in pass 2)
SOFTMAX_MODES = {"as main": (True, True), "pass 2 without exp": (True, False), "pass 1 without exp": (False, True),
                 "neither pass with exp": (False, False)}


@triton.jit
def _w(w_ptr, offs, ok, W: tl.constexpr):
    if W == 2:
        return tl.load(w_ptr + offs % 8).to(tl.float32)
    else:
        return tl.load(w_ptr + offs, mask=ok, other=0.0).to(tl.float32)


@triton.jit
def rms_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, n_rows, n_cols, eps, B: tl.constexpr, W: tl.constexpr,
               X2: tl.constexpr):
    cols = tl.arange(0, B)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + tl.cast(row, tl.int64) * n_cols
        y_row = y_ptr + tl.cast(row, tl.int64) * n_cols
        squares = tl.zeros([B], tl.float32)
        nxt = tl.load(x_row + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_last")
        for start in range(0, n_cols, B):
            x = nxt.to(tl.float32)
            ahead = start + B + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_last")
            squares += x * x
        if X2:
            nxt = tl.load(x_row + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_first")
        rstd = tl.math.rsqrt(tl.sum(squares, axis=0) / n_cols + eps)
        for start in range(0, n_cols, B):
            ok = start + cols < n_cols
            if X2:
                x = nxt.to(tl.float32)
                ahead = start + B + cols
                nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_first")
            else:
                x = tl.full([B], 1.0, tl.float32)
            y = x * rstd
            if W != 0:
                y = y * _w(w_ptr, start + cols, ok, W)
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=ok, eviction_policy="evict_first")
        tl.store(rstd_ptr + row, rstd)


@triton.jit
def ln_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_rows, n_cols, eps, B: tl.constexpr,
              W: tl.constexpr, X2: tl.constexpr):
    cols = tl.arange(0, B)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + tl.cast(row, tl.int64) * n_cols
        y_row = y_ptr + tl.cast(row, tl.int64) * n_cols
        mean = 0.0
        m2 = 0.0
        count = 0.0
        nxt = tl.load(x_row + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_last")
        for start in range(0, n_cols, B):
            ok = start + cols < n_cols
            x = nxt.to(tl.float32)
            ahead = start + B + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_last")
            size = tl.minimum(n_cols - start, B).to(tl.float32)
            chunk_mean = tl.sum(x, axis=0) / size
            centred = tl.where(ok, x - chunk_mean, 0.0)
            chunk_m2 = tl.sum(centred * centred, axis=0)
            total = count + size
            delta = chunk_mean - mean
            mean += delta * (size / total)
            m2 += chunk_m2 + delta * delta * (count * size / total)
            count = total
        if X2:
            nxt = tl.load(x_row + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_first")
        rstd = tl.math.rsqrt(m2 / n_cols + eps)
        for start in range(0, n_cols, B):
            ok = start + cols < n_cols
            if X2:
                x = nxt.to(tl.float32)
                ahead = start + B + cols
                nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_first")
            else:
                x = tl.full([B], 1.0, tl.float32)
            y = (x - mean) * rstd
            if W != 0:
                y = y * _w(w_ptr, start + cols, ok, W) + _w(b_ptr, start + cols, ok, W)
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=ok, eviction_policy="evict_first")
        tl.store(mean_ptr + row, mean)
        tl.store(rstd_ptr + row, rstd)


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr, EXP1: tl.constexpr, EXP2: tl.constexpr):
    GROUP: tl.constexpr = 8
    LANES: tl.constexpr = BLOCK // GROUP
    LOG2E: tl.constexpr = 1.4426950408889634
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
            if EXP1:
                g_sum = tl.where(g_max == -float("inf"), 0.0,
                                 tl.sum(tl.math.exp2((x - g_max[:, None]) * LOG2E), axis=1))
                new = tl.maximum(m, g_max)
                s = tl.where(s == 0.0, 0.0, s * tl.math.exp2((m - new) * LOG2E)) + \
                    tl.where(g_sum == 0.0, 0.0, g_sum * tl.math.exp2((g_max - new) * LOG2E))
                m = new
            else:
                s += tl.sum(tl.where(x == -float("inf"), 0.0, x), axis=1)
                m = tl.maximum(m, g_max)
        row_max = tl.max(m, axis=0)
        if EXP1:
            total = tl.sum(tl.where(s == 0.0, 0.0, s * tl.math.exp2((m - row_max) * LOG2E)), axis=0)
        else:
            total = tl.sum(s, axis=0)
        inv = tl.math.div_rn(1.0, total) * 5.9604644775390625e-08
        nxt = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"), eviction_policy="evict_first")
        for start in range(0, n_cols, BLOCK):
            x = nxt.to(tl.float32)
            ahead = start + BLOCK + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=-float("inf"), eviction_policy="evict_first")
            if EXP2:
                y = tl.math.exp2(tl.fma(x - row_max, LOG2E, 24.0)) * inv
            else:
                y = (x - row_max) * inv
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=start + cols < n_cols,
                     eviction_policy="evict_first")


def main(path: str) -> None:
    from portcheck.kernels import layernorm, rmsnorm, softmax
    r = bench_rows()
    x, w, b, y, mean, rstd = r.x, r.w, r.b, r.y, r.mean, r.rstd
    n_rows, n_cols, sms, copy = r.n_rows, r.n_cols, r.sms, r.copy
    rows = []
    t = row_timer(x, y, copy, rows)
    for _ in range(2):
        t("rmsnorm main", lambda: rmsnorm.rms_norm(x, w, 1e-6, out=y, long_rows=True))
        for name, (wm, x2) in RMS_MODES.items():
            t(f"rmsnorm {name}", lambda wm=wm, x2=x2: rms_kernel[(sms,)](
                x, w, y, rstd, n_rows, n_cols, 1e-6, B=NORM_BLOCK, W=wm, X2=x2, num_warps=32))
        t("layernorm main", lambda: layernorm.layer_norm(x, w, b, 1e-5, out=y, long_rows=True))
        for name, (wm, x2) in LN_MODES.items():
            t(f"layernorm {name}", lambda wm=wm, x2=x2: ln_kernel[(sms,)](
                x, w, b, y, mean, rstd, n_rows, n_cols, 1e-5, B=NORM_BLOCK, W=wm, X2=x2, num_warps=32))
        t("softmax main", lambda: softmax.softmax(x, out=y, long_rows=True))
        for name, (e1, e2) in SOFTMAX_MODES.items():
            t(f"softmax {name}", lambda e1=e1, e2=e2: softmax_kernel[(sms,)](
                x, y, n_rows, n_cols, BLOCK=SOFTMAX_BLOCK, EXP1=e1, EXP2=e2, num_warps=32))
    json.dump({"copy_gbs": copy, "rows": rows}, open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
