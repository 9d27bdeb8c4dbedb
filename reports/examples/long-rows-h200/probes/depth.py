"""Long rows (bf16 4096 x 131072), last round of the seventh session: bytes in flight.

`bounds.json` put softmax at 0.85 of copy even with no exp, where RMSNorm's structure reaches
0.94: softmax's chunk is 16384 columns (32 KB a program in flight, one chunk ahead) where
RMSNorm's is 32768 (64 KB), because softmax's pass 1 state spilled at 32768. Here, for main's
softmax_online_kernel (as of e7bcda4): pass 2, which holds no state, with its own chunk B2; pass 1
two chunks ahead (DEPTH 2) instead of one. For LayerNorm (main's kernel), pass 2's chunk B2 on
its own (16384 was 0.745 against 0.725 at 32768 in `../seventh-session/weight-ahead.json`,
before main dropped the weight's hint).

    python3 depth.py OUT.json        # on the GPU
    python3 depth.py --check-spills  # cross-compile each variant for sm_90a here
"""
import json
import os
import sys

import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py beside it
from rows_common import bench_rows, row_timer, sm90a_resources  # noqa: E402

# softmax (B1, B2, DEPTH); main is (16384, 16384, 1)
SOFTMAX_VARIANTS = [(16384, 16384, 1), (16384, 32768, 1), (16384, 16384, 2), (16384, 32768, 2), (8192, 32768, 2)]
# layernorm (B1, B2); main is (32768, 32768)
LN_VARIANTS = [(32768, 32768), (32768, 16384), (32768, 8192)]


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_rows, n_cols, B1: tl.constexpr, B2: tl.constexpr, DEPTH: tl.constexpr):
    """main's softmax_online_kernel (semantics included) with pass 2's chunk B2 and pass 1
    loading DEPTH (1 or 2) chunks ahead."""
    GROUP: tl.constexpr = 8
    LANES: tl.constexpr = B1 // GROUP
    LOG2E: tl.constexpr = 1.4426950408889634
    c1 = tl.arange(0, B1)
    c2 = tl.arange(0, B2)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + tl.cast(row, tl.int64) * n_cols
        y_row = y_ptr + tl.cast(row, tl.int64) * n_cols
        nxt = tl.load(x_row + c1, mask=c1 < n_cols, other=-float("inf"), eviction_policy="evict_last")
        if DEPTH == 2:
            nxt2 = tl.load(x_row + B1 + c1, mask=B1 + c1 < n_cols, other=-float("inf"), eviction_policy="evict_last")
        zero = tl.sum(tl.reshape(tl.where(c1 < 0, nxt.to(tl.float32), 0.0), [LANES, GROUP]), axis=1)
        m = zero - float("inf")
        s = zero
        for start in range(0, n_cols, B1):
            x = tl.reshape(nxt.to(tl.float32), [LANES, GROUP])
            if DEPTH == 2:
                nxt = nxt2
                ahead = start + 2 * B1 + c1
                nxt2 = tl.load(x_row + ahead, mask=ahead < n_cols, other=-float("inf"), eviction_policy="evict_last")
            else:
                ahead = start + B1 + c1
                nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=-float("inf"), eviction_policy="evict_last")
            g_max = tl.max(x, axis=1)
            g_sum = tl.where(g_max == -float("inf"), 0.0,
                             tl.sum(tl.math.exp2((x - g_max[:, None]) * LOG2E), axis=1))
            new = tl.maximum(m, g_max)
            s = tl.where(s == 0.0, 0.0, s * tl.math.exp2((m - new) * LOG2E)) + \
                tl.where(g_sum == 0.0, 0.0, g_sum * tl.math.exp2((g_max - new) * LOG2E))
            m = new
        row_max = tl.max(m, axis=0)
        total = tl.sum(tl.where(s == 0.0, 0.0, s * tl.math.exp2((m - row_max) * LOG2E)), axis=0)
        inv = tl.math.div_rn(1.0, total) * 5.9604644775390625e-08
        nxt = tl.load(x_row + c2, mask=c2 < n_cols, other=-float("inf"), eviction_policy="evict_first")
        for start in range(0, n_cols, B2):
            x = nxt.to(tl.float32)
            ahead = start + B2 + c2
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=-float("inf"), eviction_policy="evict_first")
            y = tl.math.exp2(tl.fma(x - row_max, LOG2E, 24.0)) * inv
            tl.store(y_row + start + c2, y.to(y_ptr.dtype.element_ty), mask=start + c2 < n_cols,
                     eviction_policy="evict_first")


@triton.jit
def ln_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_rows, n_cols, eps, B1: tl.constexpr,
              B2: tl.constexpr):
    """main's layernorm_looped_kernel with weight and bias, pass 2's chunk B2."""
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
        nxt2 = tl.load(x_row + c2, mask=c2 < n_cols, other=0.0, eviction_policy="evict_first")
        rstd = tl.math.rsqrt(m2 / n_cols + eps)
        for start in range(0, n_cols, B2):
            ok = start + c2 < n_cols
            x = nxt2.to(tl.float32)
            ahead = start + B2 + c2
            nxt2 = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_first")
            y = (x - mean) * rstd
            y = y * tl.load(w_ptr + start + c2, mask=ok, other=0.0).to(tl.float32)
            y = y + tl.load(b_ptr + start + c2, mask=ok, other=0.0).to(tl.float32)
            tl.store(y_row + start + c2, y.to(y_ptr.dtype.element_ty), mask=ok, eviction_policy="evict_first")
        tl.store(mean_ptr + row, mean)
        tl.store(rstd_ptr + row, rstd)


def check_spills() -> None:
    for b1, b2, depth in SOFTMAX_VARIANTS:
        consts = {"B1": b1, "B2": b2, "DEPTH": depth}
        res = sm90a_resources(softmax_kernel, {"x_ptr": "*bf16", "y_ptr": "*bf16", "n_rows": "i32", "n_cols": "i32",
                                        "B1": "constexpr", "B2": "constexpr", "DEPTH": "constexpr"}, consts)
        print(json.dumps({"triton": triton.__version__, "softmax": consts, **res}))
    for b1, b2 in LN_VARIANTS:
        consts = {"B1": b1, "B2": b2}
        res = sm90a_resources(ln_kernel, {"x_ptr": "*bf16", "w_ptr": "*bf16", "b_ptr": "*bf16", "y_ptr": "*bf16",
                                   "mean_ptr": "*fp32", "rstd_ptr": "*fp32", "n_rows": "i32", "n_cols": "i32",
                                   "eps": "fp32", "B1": "constexpr", "B2": "constexpr"}, consts)
        print(json.dumps({"triton": triton.__version__, "layernorm": consts, **res}))


def main(path: str) -> None:
    from portcheck.kernels import layernorm, softmax
    r = bench_rows()
    x, w, b, y, mean, rstd = r.x, r.w, r.b, r.y, r.mean, r.rstd
    n_rows, n_cols, sms, copy = r.n_rows, r.n_cols, r.sms, r.copy
    rows = []
    t = row_timer(x, y, copy, rows)
    for _ in range(2):
        t("softmax main", lambda: softmax.softmax(x, out=y, long_rows=True))
        ref = y.float().clone()
        for b1, b2, depth in SOFTMAX_VARIANTS:
            t(f"softmax B1={b1} B2={b2} depth={depth}", lambda b1=b1, b2=b2, d=depth: softmax_kernel[(sms,)](
                x, y, n_rows, n_cols, B1=b1, B2=b2, DEPTH=d, num_warps=32), ref)
        t("layernorm main", lambda: layernorm.layer_norm(x, w, b, 1e-5, out=y, long_rows=True))
        ref = y.float().clone()
        for b1, b2 in LN_VARIANTS:
            t(f"layernorm B1={b1} B2={b2}", lambda b1=b1, b2=b2: ln_kernel[(sms,)](
                x, w, b, y, mean, rstd, n_rows, n_cols, 1e-5, B1=b1, B2=b2, num_warps=32), ref)
    json.dump({"copy_gbs": copy, "rows": rows}, open(path, "w"), indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "--check-spills":
        check_spills()
    else:
        main(sys.argv[1])
