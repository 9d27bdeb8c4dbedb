"""Long rows (bf16 4096 x 131072): LayerNorm's pass 1 with one block reduction a chunk instead of two.

Main's pass 1 reduces each chunk twice, one after the other (its sum, then its values centred on
that mean, squared): two CTA barriers a chunk, 12% of the warp samples (`../eighth-session/
ncu-loops.txt`). Here chunks after the first are centred on the running mean c of the chunks
before them, known before the chunk arrives, so S1 = sum(x - c) and S2 = sum((x - c)^2) go through
one joint reduction; with delta = S1 / n_k the chunk merges as M2 += S2 - n_k delta^2 +
delta^2 n_a n_k / n and mean = c + delta n_k / n (Chan et al.). The cancellation in S2 - n_k delta^2
is bounded by the merge term itself (n_a >= n_k makes n_a n_k / n >= n_k / 2), so it stays within a
few (n_k + 2) u of the row's M2. The first chunk is reduced as main does. Pass 2 is main's.

    python3 ln_joint.py OUT.json           (after pip install -e . at the repository root)
"""
import json
import os
import sys

import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py beside it


@triton.jit
def _add2(a1, a2, b1, b2):
    return a1 + b1, a2 + b2


@triton.jit
def ln_joint_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_rows, n_cols, x_stride, y_stride, eps,
                    HAS_W: tl.constexpr, HAS_B: tl.constexpr, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        row64 = tl.cast(row, tl.int64)
        x_row = x_ptr + row64 * x_stride
        y_row = y_ptr + row64 * y_stride
        # the first chunk as main: its mean, then its centred squares
        nxt = tl.load(x_row + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_last")
        x = nxt.to(tl.float32)
        nxt = tl.load(x_row + BLOCK + cols, mask=BLOCK + cols < n_cols, other=0.0, eviction_policy="evict_last")
        count = tl.minimum(n_cols, BLOCK).to(tl.float32)
        mean = tl.sum(x, axis=0) / count
        centred = tl.where(cols < n_cols, x - mean, 0.0)
        m2 = tl.sum(centred * centred, axis=0)
        for start in range(BLOCK, n_cols, BLOCK):
            x = nxt.to(tl.float32)
            ahead = start + BLOCK + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_last")
            d = tl.where(start + cols < n_cols, x - mean, 0.0)
            s1, s2 = tl.reduce((d, d * d), 0, _add2)
            size = tl.minimum(n_cols - start, BLOCK).to(tl.float32)
            total = count + size
            delta = s1 / size
            m2 += (s2 - size * delta * delta) + delta * delta * (count * size / total)
            mean += delta * (size / total)
            count = total
        row_mean = mean
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
    ref_y = layernorm.layer_norm(x, w, b, 1e-5)[0].float()
    x64 = x.double()
    mean64 = x64.mean(dim=1)
    rstd64 = torch.rsqrt(x64.var(dim=1, unbiased=False) + 1e-5)
    rows, stats = [], {}
    t = row_timer(x, y, copy, rows)
    for _ in range(3):
        for name, fn in (("layernorm main", lambda: layernorm.layer_norm(x, w, b, 1e-5, out=y, mean=mean, rstd=rstd,
                                                                         long_rows=True)),
                         ("layernorm joint reduction", lambda: ln_joint_kernel[(sms,)](
                             x, w, b, y, mean, rstd, n_rows, n_cols, n_cols, n_cols, 1e-5, HAS_W=True, HAS_B=True,
                             BLOCK=32768, num_warps=32))):
            t(name, fn, ref_y)
            stats[name] = {"mean_max_abs_err_vs_fp64": float((mean.double() - mean64).abs().max()),
                           "rstd_max_rel_err_vs_fp64": float(((rstd.double() - rstd64) / rstd64).abs().max())}
    print(json.dumps(stats))
    json.dump({"copy_gbs": copy, "rows": rows, "stats": stats, "torch": torch.__version__,
               "triton": triton.__version__}, open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
