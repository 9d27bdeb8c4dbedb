"""Long rows (bf16 4096 x 131072): the cache operator of pass 2's loads in RMSNorm and LayerNorm.

Dropping evict_last from the weight's load took main's RMSNorm from 0.860 to 0.898 of copy
(`../seventh-session/bounds.json`). Here pass 2 of main's kernels (as of 9eda6d3) with the weight
(and bias) loaded: as main (no hint: ld.global, L1-cached), through L2 only (.cg, not kept in L1,
which the 256 KB a row of weight cannot stay in anyway), or with evict_first; and x's second read
as main (evict_first) or through L2 only (.cg).

    python3 weight_cache.py OUT.json
"""
import json
import os
import sys

import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py beside it
from rows_common import bench_rows, row_timer  # noqa: E402

BLOCK = 32768
# (weight's load, x's second read): 0 as main, 1 .cg, 2 evict_first (weight only)
VARIANTS = [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1)]
NAMES = {0: "as main", 1: ".cg", 2: "evict_first"}


@triton.jit
def _load(ptr, ok, MODE: tl.constexpr):
    if MODE == 1:
        return tl.load(ptr, mask=ok, other=0.0, cache_modifier=".cg")
    elif MODE == 2:
        return tl.load(ptr, mask=ok, other=0.0, eviction_policy="evict_first")
    else:
        return tl.load(ptr, mask=ok, other=0.0)


@triton.jit
def _x2(ptr, ok, MODE: tl.constexpr):
    if MODE == 1:
        return tl.load(ptr, mask=ok, other=0.0, cache_modifier=".cg")
    else:
        return tl.load(ptr, mask=ok, other=0.0, eviction_policy="evict_first")


@triton.jit
def rms_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, n_rows, n_cols, eps, B: tl.constexpr, W: tl.constexpr,
               X: tl.constexpr):
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
        nxt = _x2(x_row + cols, cols < n_cols, X)
        rstd = tl.math.rsqrt(tl.sum(squares, axis=0) / n_cols + eps)
        for start in range(0, n_cols, B):
            ok = start + cols < n_cols
            x = nxt.to(tl.float32)
            ahead = start + B + cols
            nxt = _x2(x_row + ahead, ahead < n_cols, X)
            y = x * rstd * _load(w_ptr + start + cols, ok, W).to(tl.float32)
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=ok, eviction_policy="evict_first")
        tl.store(rstd_ptr + row, rstd)


@triton.jit
def ln_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_rows, n_cols, eps, B: tl.constexpr,
              W: tl.constexpr, X: tl.constexpr):
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
        nxt = _x2(x_row + cols, cols < n_cols, X)
        rstd = tl.math.rsqrt(m2 / n_cols + eps)
        for start in range(0, n_cols, B):
            ok = start + cols < n_cols
            x = nxt.to(tl.float32)
            ahead = start + B + cols
            nxt = _x2(x_row + ahead, ahead < n_cols, X)
            y = (x - mean) * rstd
            y = y * _load(w_ptr + start + cols, ok, W).to(tl.float32)
            y = y + _load(b_ptr + start + cols, ok, W).to(tl.float32)
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=ok, eviction_policy="evict_first")
        tl.store(mean_ptr + row, mean)
        tl.store(rstd_ptr + row, rstd)


def main(path: str) -> None:
    from portcheck.kernels import layernorm, rmsnorm
    r = bench_rows()
    x, w, b, y, mean, rstd = r.x, r.w, r.b, r.y, r.mean, r.rstd
    rows = []
    t = row_timer(x, y, r.copy, rows)
    for _ in range(2):
        t("rmsnorm main", lambda: rmsnorm.rms_norm(x, w, 1e-6, out=y, long_rows=True))
        ref = y.float().clone()
        for wm, xm in VARIANTS:
            t(f"rmsnorm weight {NAMES[wm]}, x {NAMES[xm]}", lambda wm=wm, xm=xm: rms_kernel[(r.sms,)](
                x, w, y, rstd, r.n_rows, r.n_cols, 1e-6, B=BLOCK, W=wm, X=xm, num_warps=32), ref)
        t("layernorm main", lambda: layernorm.layer_norm(x, w, b, 1e-5, out=y, long_rows=True))
        ref = y.float().clone()
        for wm, xm in VARIANTS:
            t(f"layernorm weight and bias {NAMES[wm]}, x {NAMES[xm]}", lambda wm=wm, xm=xm: ln_kernel[(r.sms,)](
                x, w, b, y, mean, rstd, r.n_rows, r.n_cols, 1e-5, B=BLOCK, W=wm, X=xm, num_warps=32), ref)
    json.dump({"copy_gbs": r.copy, "rows": rows}, open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
