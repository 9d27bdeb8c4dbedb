"""Long rows (bf16 4096 x 131072): LayerNorm's pass 2 with its weight and bias ahead, the ways
pipelined.py did not try. There, the weight one half chunk ahead took RMSNorm from 0.888 to
0.923 of copy, but LayerNorm's weight and bias ahead ran slower than main (0.743 against 0.774).
Variants of pipelined.py's kernel (pass 1 as main), each timed with main in the same rounds:
weight and bias read through L2 only (CG), only the weight ahead and the bias read in its
iteration (W_ONLY), and 16 warps instead of 32 (twice the registers a thread for the same
chunk).

    python3 ln_ahead.py OUT.json           (after pip install -e . at the repository root)
"""
import json
import os
import sys

import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py beside it
from rows_common import bench_rows, row_timer  # noqa: E402

# (H, x two halves ahead, weight and bias through .cg, only the weight ahead, num_warps)
VARIANTS = [(16384, 1, 0, 0, 32), (16384, 1, 1, 0, 32), (16384, 1, 0, 1, 32), (16384, 0, 0, 1, 32),
            (16384, 1, 0, 0, 16), (16384, 1, 1, 1, 16), (8192, 1, 0, 0, 16)]


@triton.jit
def _wb(ptr, offs, n, CG: tl.constexpr):
    if CG:
        return tl.load(ptr + offs, mask=offs < n, other=0.0, cache_modifier=".cg")
    else:
        return tl.load(ptr + offs, mask=offs < n, other=0.0)


@triton.jit
def _x(ptr, offs, n):
    return tl.load(ptr + offs, mask=offs < n, other=0.0, eviction_policy="evict_first")


@triton.jit
def ln_ahead_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_rows, n_cols, x_stride, y_stride, eps,
                    BLOCK: tl.constexpr, H: tl.constexpr, XA2: tl.constexpr, CG: tl.constexpr,
                    W_ONLY: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    hc = tl.arange(0, H)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        row64 = tl.cast(row, tl.int64)
        x_row = x_ptr + row64 * x_stride
        y_row = y_ptr + row64 * y_stride
        mean = 0.0
        m2 = 0.0
        count = 0.0
        nxt = tl.load(x_row + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_last")
        for start in range(0, n_cols, BLOCK):
            ok = start + cols < n_cols
            x = nxt.to(tl.float32)
            ahead = start + BLOCK + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_last")
            size = tl.minimum(n_cols - start, BLOCK).to(tl.float32)
            chunk_mean = tl.sum(x, axis=0) / size
            centred = tl.where(ok, x - chunk_mean, 0.0)
            chunk_m2 = tl.sum(centred * centred, axis=0)
            total = count + size
            delta = chunk_mean - mean
            mean += delta * (size / total)
            m2 += chunk_m2 + delta * delta * (count * size / total)
            count = total
        row_mean = mean
        x1 = _x(x_row, hc, n_cols)
        if XA2:
            x2 = _x(x_row, H + hc, n_cols)
        w1 = _wb(w_ptr, hc, n_cols, CG)
        if not W_ONLY:
            b1 = _wb(b_ptr, hc, n_cols, CG)
        rstd = tl.math.rsqrt(m2 / n_cols + eps)
        for start in range(0, n_cols, H):
            ok = start + hc < n_cols
            x = x1.to(tl.float32)
            if XA2:
                x1 = x2
                x2 = _x(x_row, start + 2 * H + hc, n_cols)
            else:
                x1 = _x(x_row, start + H + hc, n_cols)
            w = w1.to(tl.float32)
            w1 = _wb(w_ptr, start + H + hc, n_cols, CG)
            if W_ONLY:
                b = _wb(b_ptr, start + hc, n_cols, CG).to(tl.float32)
            else:
                b = b1.to(tl.float32)
                b1 = _wb(b_ptr, start + H + hc, n_cols, CG)
            y = (x - row_mean) * rstd * w + b
            tl.store(y_row + start + hc, y.to(y_ptr.dtype.element_ty), mask=ok, eviction_policy="evict_first")
        tl.store(mean_ptr + row64, row_mean)
        tl.store(rstd_ptr + row64, rstd)


def main(path: str) -> None:
    import torch
    from portcheck.kernels import layernorm
    r = bench_rows()
    x, w, b, y, mean, rstd = r.x, r.w, r.b, r.y, r.mean, r.rstd
    n_rows, n_cols, sms, copy = r.n_rows, r.n_cols, r.sms, r.copy
    ref = layernorm.layer_norm(x, w, b, 1e-5)[0].float()
    rows = []
    t = row_timer(x, y, copy, rows)
    for _ in range(2):
        t("layernorm main", lambda: layernorm.layer_norm(x, w, b, 1e-5, out=y, long_rows=True), ref)
        for h, xa2, cg, w_only, warps in VARIANTS:
            t(f"layernorm H={h} x ahead {1 + xa2} {'w' if w_only else 'w,b'} ahead{' .cg' if cg else ''} "
              f"{warps} warps", lambda h=h, xa2=xa2, cg=cg, w_only=w_only, warps=warps: ln_ahead_kernel[(sms,)](
                  x, w, b, y, mean, rstd, n_rows, n_cols, n_cols, n_cols, 1e-5, BLOCK=32768, H=h, XA2=xa2, CG=cg,
                  W_ONLY=w_only, num_warps=warps), ref)
    json.dump({"copy_gbs": copy, "rows": rows, "torch": torch.__version__, "triton": triton.__version__},
              open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
