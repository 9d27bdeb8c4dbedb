"""Long rows (bf16 4096 x 131072): pass 1's running statistics kept per thread, with no reduction
across the program until the row ends.

LayerNorm: main's pass 1 reduces each chunk twice across the program (its sum, then its centred
squares), two CTA barriers a chunk (12% of the warp samples, `../eighth-session/ncu-loops.txt`).
Here each thread takes the mean of its own share of the chunk (32 elements at 32768 columns and 32
warps), the M2 about that mean in its registers, and folds both into its own (mean, M2) by Chan's
formula; at the row's end mean = sum(mean_t) / T and M2 = sum(M2_t) + n_t sum((mean_t - mean)^2),
two reductions a row. Unlike `ln_lanes.py` (per 16-byte lane, shifted sums, spills at the row ends)
the state is two registers a thread and nothing is shifted. Rows of whole chunks only (main's EVEN).

Softmax: main folds each 16-byte group into its lane's (max, sum) (two lanes a thread at 16384
columns); here one merge a chunk per thread.

Cross-compiled for sm_90a with Triton 3.6 (instructions a loop iteration; registers; no spills):
- layernorm pass 1: main (EVEN) 269, 0 SHFL, 64 registers; per thread 216, no SHFL, 58 registers.
- softmax pass 1: main 169; per thread 154 (16384 columns, 58 registers); 289 at 32768 (8 B
  spilled at the row's end, none in the loops: main's per-lane state spilled at 32768).

    python3 thread_state.py OUT.json           (after pip install -e . at the repository root)
"""
import json
import os
import sys

import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py beside it

from portcheck.kernels._rows import all_or_none


@triton.jit
def ln_threads_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_rows, n_cols,
                      x_stride, y_stride, eps, BLOCK: tl.constexpr, THREADS: tl.constexpr):
    """main's EVEN layernorm_looped_kernel with pass 1's state per thread"""
    GROUP: tl.constexpr = 128 // x_ptr.dtype.element_ty.primitive_bitwidth
    REPS: tl.constexpr = BLOCK // (THREADS * GROUP)
    PER: tl.constexpr = REPS * GROUP
    cols = tl.arange(0, BLOCK)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        row64 = tl.cast(row, tl.int64)
        x_row = x_ptr + row64 * x_stride
        y_row = y_ptr + row64 * y_stride
        nxt = tl.load(x_row + cols, eviction_policy="evict_last")
        # the state starts in the layout the per-thread reductions give it
        zero = tl.sum(tl.sum(tl.reshape(tl.where(cols < 0, nxt.to(tl.float32), 0.0), [REPS, THREADS, GROUP]),
                             axis=2), axis=0)
        mean_t = zero
        m2_t = zero
        count = 0.0
        for start in range(0, n_cols, BLOCK):
            x = tl.reshape(nxt.to(tl.float32), [REPS, THREADS, GROUP])
            nxt = tl.load(x_row + start + BLOCK + cols, mask=all_or_none(start + BLOCK < n_cols, BLOCK),
                          eviction_policy="evict_last")
            cm = tl.sum(tl.sum(x, axis=2), axis=0) * (1.0 / PER)
            c = x - cm[None, :, None]
            cm2 = tl.sum(tl.sum(c * c, axis=2), axis=0)
            total = count + PER
            delta = cm - mean_t
            mean_t += delta * (PER / total)
            m2_t += cm2 + delta * delta * (count * PER / total)
            count = total
        row_mean = tl.sum(mean_t, axis=0) * (1.0 / THREADS)
        d = mean_t - row_mean
        m2 = tl.sum(m2_t + d * d * count, axis=0)
        nxt = tl.load(x_row + cols, eviction_policy="evict_first")
        rstd = tl.math.rsqrt(m2 / n_cols + eps)
        for start in range(0, n_cols, BLOCK):
            x = nxt.to(tl.float32)
            nxt = tl.load(x_row + start + BLOCK + cols, mask=all_or_none(start + BLOCK < n_cols, BLOCK),
                          eviction_policy="evict_first")
            y = (x - row_mean) * rstd
            y = y * tl.load(w_ptr + start + cols).to(tl.float32)
            y = y + tl.load(b_ptr + start + cols).to(tl.float32)
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), eviction_policy="evict_first")
        tl.store(mean_ptr + row64, row_mean)
        tl.store(rstd_ptr + row64, rstd)


@triton.jit
def softmax_threads_kernel(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, BLOCK: tl.constexpr,
                           THREADS: tl.constexpr):
    """main's softmax_online_kernel with pass 1's running max and sum per thread"""
    GROUP: tl.constexpr = 128 // x_ptr.dtype.element_ty.primitive_bitwidth
    REPS: tl.constexpr = BLOCK // (THREADS * GROUP)
    LOG2E: tl.constexpr = 1.4426950408889634
    cols = tl.arange(0, BLOCK)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        row64 = tl.cast(row, tl.int64)
        x_row = x_ptr + row64 * x_stride
        y_row = y_ptr + row64 * y_stride
        nxt = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"), eviction_policy="evict_last")
        zero = tl.sum(tl.sum(tl.reshape(tl.where(cols < 0, nxt.to(tl.float32), 0.0), [REPS, THREADS, GROUP]),
                             axis=2), axis=0)
        m = zero - float("inf")
        s = zero
        for start in range(0, n_cols, BLOCK):
            x = tl.reshape(nxt.to(tl.float32), [REPS, THREADS, GROUP])
            ahead = start + BLOCK + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=-float("inf"), eviction_policy="evict_last")
            g_max = tl.max(tl.max(x, axis=2), axis=0)
            g_sum = tl.where(g_max == -float("inf"), 0.0,
                             tl.sum(tl.sum(tl.math.exp2((x - g_max[None, :, None]) * LOG2E), axis=2), axis=0))
            new = tl.maximum(m, g_max)
            s = tl.where(s == 0.0, 0.0, s * tl.math.exp2((m - new) * LOG2E)) + \
                tl.where(g_sum == 0.0, 0.0, g_sum * tl.math.exp2((g_max - new) * LOG2E))
            m = new
        row_max = tl.max(m, axis=0)
        total = tl.sum(tl.where(s == 0.0, 0.0, s * tl.math.exp2((m - row_max) * LOG2E)), axis=0)
        inv = tl.math.div_rn(1.0, total) * 5.9604644775390625e-08
        nxt = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"), eviction_policy="evict_first")
        for start in range(0, n_cols, BLOCK):
            x = nxt.to(tl.float32)
            ahead = start + BLOCK + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=-float("inf"), eviction_policy="evict_first")
            y = tl.math.exp2(tl.fma(x - row_max, LOG2E, 24.0)) * inv
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=start + cols < n_cols,
                     eviction_policy="evict_first")


def main(path: str) -> None:
    import torch
    from rows_common import bench_rows, row_timer
    from portcheck.kernels import layernorm, softmax
    r = bench_rows()
    x, w, b, y, mean, rstd = r.x, r.w, r.b, r.y, r.mean, r.rstd
    n_rows, n_cols, sms, copy = r.n_rows, r.n_cols, r.sms, r.copy
    ref_ln = layernorm.layer_norm(x, w, b, 1e-5)[0].float()
    ref_sm = softmax.softmax(x, long_rows=True).float()
    x64 = x.double()
    mean64 = x64.mean(dim=1)
    rstd64 = torch.rsqrt(x64.var(dim=1, unbiased=False) + 1e-5)
    rows, stats = [], {}
    t = row_timer(x, y, copy, rows)

    def ln_threads(block):
        return lambda: ln_threads_kernel[(sms,)](x, w, b, y, mean, rstd, n_rows, n_cols, n_cols, n_cols, 1e-5,
                                                 BLOCK=block, THREADS=1024, num_warps=32)

    def sm_threads(block):
        return lambda: softmax_threads_kernel[(sms,)](x, y, n_rows, n_cols, n_cols, n_cols, BLOCK=block,
                                                      THREADS=1024, num_warps=32)
    for _ in range(3):
        for name, fn in (("layernorm main", lambda: layernorm.layer_norm(x, w, b, 1e-5, out=y, mean=mean, rstd=rstd,
                                                                         long_rows=True)),
                         ("layernorm per-thread state, 32768", ln_threads(32768)),
                         ("layernorm per-thread state, 16384", ln_threads(16384))):
            t(name, fn, ref_ln)
            stats[name] = {"mean_max_abs_err_vs_fp64": float((mean.double() - mean64).abs().max()),
                           "rstd_max_rel_err_vs_fp64": float(((rstd.double() - rstd64) / rstd64).abs().max())}
        for name, fn in (("softmax main", lambda: softmax.softmax(x, y, long_rows=True)),
                         ("softmax per-thread state, 16384", sm_threads(16384)),
                         ("softmax per-thread state, 32768", sm_threads(32768))):
            t(name, fn, ref_sm)
    print(json.dumps(stats))
    json.dump({"copy_gbs": copy, "rows": rows, "stats": stats, "torch": torch.__version__,
               "triton": triton.__version__}, open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
