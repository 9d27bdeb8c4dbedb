"""Long rows (bf16 4096 x 131072): LayerNorm's pass 1 with no reduction across the program until
the row ends, as RMSNorm's pass 1 has none.

Nsight Compute on main's layernorm_looped_kernel (`../eighth-session/ncu-layernorm-long.csv`):
pass 1's loop is 351 SASS instructions a 32768-column chunk against RMSNorm's 121, and holds 48%
of the warp samples (11.6% of all at a CTA barrier: its two block reductions a chunk, one
waiting on the other). Here each lane (the 16 bytes one thread loads: 8 16-bit elements) keeps
shifted sums S1 = sum(x - K), S2 = sum((x - K)^2) over the row, K the mean of the lane's first
group; at the row's end each lane's (count, mean K + S1/c, M2 = S2 - S1^2/c) merge across the
program by Chan's formula in one tuple reduction. Pass 2 is main's.

Why K is the first group's mean: a lane holds c = (chunks) x 8 values, of which the first group is
a fraction f = 1 / chunks; (mean - K)^2 <= var (1 - f) / f, so S2 <= M2 / f and the cancellation
in S2 - S1^2/c is bounded by the chunk count (3 at the bench's four chunks), where the row's first
element as K could be off by sqrt(c) standard deviations.

    python3 ln_lanes.py OUT.json           (after pip install -e . at the repository root)
"""
import json
import os
import sys

import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py beside it


@triton.jit
def _chan(n_a, mean_a, m2_a, n_b, mean_b, m2_b):
    n = n_a + n_b
    w_b = tl.where(n > 0, n_b / tl.where(n > 0, n, 1.0), 0.0)
    delta = mean_b - mean_a
    return n, mean_a + delta * w_b, m2_a + m2_b + delta * delta * n_a * w_b


@triton.jit
def ln_lanes_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_rows, n_cols, x_stride, y_stride, eps,
                    HAS_W: tl.constexpr, HAS_B: tl.constexpr, BLOCK: tl.constexpr, OFFSET: tl.constexpr):
    WIDTH: tl.constexpr = 128 // x_ptr.dtype.element_ty.primitive_bitwidth
    GROUP: tl.constexpr = BLOCK if BLOCK < WIDTH else WIDTH
    LANES: tl.constexpr = BLOCK // GROUP
    cols = tl.arange(0, BLOCK)
    # each lane's element count over a row (in the lanes' own layout: that of a group reduction)
    first_col = tl.min(tl.reshape(cols, [LANES, GROUP]), axis=1)
    full = n_cols // BLOCK
    count = (full * GROUP + tl.minimum(tl.maximum(n_cols - full * BLOCK - first_col, 0), GROUP)).to(tl.float32)
    inv_count = tl.where(count > 0, 1.0 / tl.where(count > 0, count, 1.0), 0.0)
    # the first group's valid elements: K is their mean (a partial group's zeros left out)
    first = tl.maximum(tl.minimum(n_cols - first_col, GROUP), 1).to(tl.float32)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        row64 = tl.cast(row, tl.int64)
        x_row = x_ptr + row64 * x_stride
        y_row = y_ptr + row64 * y_stride
        nxt = tl.load(x_row + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_last")
        xg = tl.reshape(nxt.to(tl.float32), [LANES, GROUP])
        nxt = tl.load(x_row + BLOCK + cols, mask=BLOCK + cols < n_cols, other=0.0, eviction_policy="evict_last")
        k = tl.sum(xg, axis=1) / first      # (masked elements load as 0)
        d = tl.where(tl.reshape(cols < n_cols, [LANES, GROUP]), xg - k[:, None], 0.0)
        s1 = tl.sum(d, axis=1)
        s2 = tl.sum(d * d, axis=1)
        for start in range(BLOCK, n_cols, BLOCK):
            xg = tl.reshape(nxt.to(tl.float32), [LANES, GROUP])
            ahead = start + BLOCK + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_last")
            d = tl.where(tl.reshape(start + cols < n_cols, [LANES, GROUP]), xg - k[:, None], 0.0)
            s1 += tl.sum(d, axis=1)
            s2 += tl.sum(d * d, axis=1)
        lane_m2 = tl.maximum(s2 - s1 * s1 * inv_count, 0.0)
        if OFFSET:
            # the lanes' means as offsets from the row's first element, so that Chan's deltas come
            # from numbers of the row's spread, not of its magnitude
            ref = tl.load(x_row).to(tl.float32)
            _, off, m2 = tl.reduce((count, (k - ref) + s1 * inv_count, lane_m2), 0, _chan)
            row_mean = ref + off
        else:
            _, row_mean, m2 = tl.reduce((count, k + s1 * inv_count, lane_m2), 0, _chan)
        # pass 2: main's
        nxt = tl.load(x_row + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_first")
        rstd = tl.math.rsqrt(m2 / n_cols + eps)
        for start in range(0, n_cols, BLOCK):
            ok = start + cols < n_cols
            x = nxt.to(tl.float32)
            ahead = start + BLOCK + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_first")
            y = (x - row_mean) * rstd
            if HAS_W:
                y = y * tl.load(w_ptr + start + cols, mask=ok, other=0.0).to(tl.float32)
            if HAS_B:
                y = y + tl.load(b_ptr + start + cols, mask=ok, other=0.0).to(tl.float32)
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=ok, eviction_policy="evict_first")
        tl.store(mean_ptr + row64, row_mean)
        tl.store(rstd_ptr + row64, rstd)


def main(path: str) -> None:
    import torch
    from rows_common import bench_rows, row_timer
    from portcheck.kernels import layernorm
    r = bench_rows()
    x, w, b, y, mean, rstd = r.x, r.w, r.b, r.y, r.mean, r.rstd
    n_rows, n_cols, sms, copy = r.n_rows, r.n_cols, r.sms, r.copy
    ref_y, ref_mean, ref_rstd = layernorm.layer_norm(x, w, b, 1e-5)
    x64 = x.double()
    mean64 = x64.mean(dim=1)
    rstd64 = torch.rsqrt(x64.var(dim=1, unbiased=False) + 1e-5)
    rows, stats = [], {}
    t = row_timer(x, y, copy, rows)
    for _ in range(3):
        t("layernorm main", lambda: layernorm.layer_norm(x, w, b, 1e-5, out=y, long_rows=True), ref_y.float())
        stats["main"] = {"mean_max_abs_err_vs_fp64": float((mean.double() - mean64).abs().max()),
                         "rstd_max_rel_err_vs_fp64": float(((rstd.double() - rstd64) / rstd64).abs().max())}
        for warps, offset in ((32, 0), (32, 1), (16, 1)):
            name = f"layernorm lanes {warps} warps{' offset' if offset else ''}"
            t(name, lambda warps=warps, offset=offset: ln_lanes_kernel[(sms,)](
                x, w, b, y, mean, rstd, n_rows, n_cols, n_cols, n_cols, 1e-5, HAS_W=True, HAS_B=True, BLOCK=32768,
                OFFSET=offset, num_warps=warps), ref_y.float())
            stats[name] = {"mean_max_abs_err_vs_fp64": float((mean.double() - mean64).abs().max()),
                           "rstd_max_rel_err_vs_fp64": float(((rstd.double() - rstd64) / rstd64).abs().max())}
    print(json.dumps(stats))
    json.dump({"copy_gbs": copy, "rows": rows, "stats": stats, "torch": torch.__version__,
               "triton": triton.__version__}, open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
