"""LayerNorm of long rows (bf16 4096 x 131072), fourth round of this session: pass 1 without a
reduction across the program per chunk.

Main's pass 1 reduces each chunk twice across the program (its mean, then its centred squares,
each a shared-memory round and barriers) to merge it by Chan's formula; without weight and bias
it ran at 0.86 of copy where RMSNorm's pass 1, which sums per lane and reduces once a row, ran
at 0.92 (`../seventh-session/weight-ahead.json`). Here pass 1 takes the mean K of the row's first chunk (one
reduction), then sums d = x - K and d^2 per 16-byte group within each thread over the whole row,
and reduces twice at the row's end: mean = K + S1 / n, M2 = S2 - S1^2 / n. The shift bounds the
cancellation: with f the first chunk's share of the row, (mean - K)^2 <= var (1 - f) / f.
Pass 2 is main's (weight and bias with no hint, statistics stored after it).

    python3 ln_shift.py OUT.json        # on the GPU
    python3 ln_shift.py --check-spills  # cross-compile each variant for sm_90a here
"""
import json
import os
import sys

import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py beside it
from rows_common import bench_rows, row_timer, sm90a_resources  # noqa: E402

BLOCKS = (32768, 16384)


@triton.jit
def _group_sum(v, GROUP: tl.constexpr):
    return tl.sum(tl.reshape(v, (v.shape[0] // GROUP, GROUP)), axis=1)


@triton.jit
def ln_shift_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_rows, n_cols, eps, B: tl.constexpr):
    GROUP: tl.constexpr = 8
    cols = tl.arange(0, B)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + tl.cast(row, tl.int64) * n_cols
        y_row = y_ptr + tl.cast(row, tl.int64) * n_cols
        nxt = tl.load(x_row + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_last")
        shift = tl.sum(nxt.to(tl.float32), axis=0) / tl.minimum(n_cols, B).to(tl.float32)
        s1 = _group_sum(tl.zeros([B], tl.float32), GROUP)
        s2 = s1
        for start in range(0, n_cols, B):
            ok = start + cols < n_cols
            d = tl.where(ok, nxt.to(tl.float32) - shift, 0.0)
            ahead = start + B + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_last")
            s1 += _group_sum(d, GROUP)
            s2 += _group_sum(d * d, GROUP)
        nxt = tl.load(x_row + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_first")
        t1 = tl.sum(s1, axis=0)
        mean = shift + t1 / n_cols
        m2 = tl.maximum(tl.sum(s2, axis=0) - t1 * (t1 / n_cols), 0.0)
        rstd = tl.math.rsqrt(m2 / n_cols + eps)
        for start in range(0, n_cols, B):
            ok = start + cols < n_cols
            x = nxt.to(tl.float32)
            ahead = start + B + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_first")
            w = tl.load(w_ptr + start + cols, mask=ok, other=0.0).to(tl.float32)
            b = tl.load(b_ptr + start + cols, mask=ok, other=0.0).to(tl.float32)
            tl.store(y_row + start + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=ok,
                     eviction_policy="evict_first")
        tl.store(mean_ptr + row, mean)
        tl.store(rstd_ptr + row, rstd)


SIG = {"x_ptr": "*bf16", "w_ptr": "*bf16", "b_ptr": "*bf16", "y_ptr": "*bf16", "mean_ptr": "*fp32",
       "rstd_ptr": "*fp32", "n_rows": "i32", "n_cols": "i32", "eps": "fp32", "B": "constexpr"}


def check_spills() -> None:
    for block in BLOCKS:
        print(json.dumps({"triton": triton.__version__, "B": block, **sm90a_resources(ln_shift_kernel, SIG, {"B": block})}))


def main(path: str) -> None:
    from portcheck.kernels import layernorm
    r = bench_rows()
    x, w, b, y, mean, rstd = r.x, r.w, r.b, r.y, r.mean, r.rstd
    n_rows, n_cols, sms, copy = r.n_rows, r.n_cols, r.sms, r.copy
    rows = []
    t = row_timer(x, y, copy, rows)
    for _ in range(2):
        t("layernorm main, weight and bias", lambda: layernorm.layer_norm(x, w, b, 1e-5, out=y, long_rows=True))
        ref = y.float().clone()
        for block in BLOCKS:
            t(f"layernorm shifted sums B={block}", lambda bl=block: ln_shift_kernel[(sms,)](
                x, w, b, y, mean, rstd, n_rows, n_cols, 1e-5, B=bl, num_warps=32), ref)
    json.dump({"copy_gbs": copy, "rows": rows}, open(path, "w"), indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "--check-spills":
        check_spills()
    else:
        main(sys.argv[1])
