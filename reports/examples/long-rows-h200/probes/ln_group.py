import triton
import triton.language as tl


@triton.jit
def _chan(n_a, mean_a, m2_a, n_b, mean_b, m2_b):
    """Chan, Golub & LeVeque's merge of two (count, mean, M2) summaries; empty ones (count 0) are neutral."""
    n = n_a + n_b
    delta = mean_b - mean_a
    frac = tl.where(n > 0, n_b / tl.maximum(n, 1.0), 0.0)
    return n, mean_a + delta * frac, m2_a + m2_b + delta * delta * n_a * frac


@triton.jit
def layernorm_grouped_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_rows, n_cols,
                             x_stride, y_stride, eps,
                             HAS_W: tl.constexpr, HAS_B: tl.constexpr, BLOCK: tl.constexpr, GROUP: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    LANES: tl.constexpr = BLOCK // GROUP
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        row64 = tl.cast(row, tl.int64)
        x_row = x_ptr + row64 * x_stride
        y_row = y_ptr + row64 * y_stride
        nxt = tl.load(x_row + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_last")
        # the lanes' state, zero, in the layout the chunk's group sums will have
        zero = tl.sum(tl.reshape(tl.where(cols < 0, nxt.to(tl.float32), 0.0), [LANES, GROUP]), axis=1)
        count = zero
        mean = zero
        m2 = zero
        for start in range(0, n_cols, BLOCK):
            ok = tl.reshape(start + cols < n_cols, [LANES, GROUP])
            x = tl.reshape(nxt.to(tl.float32), [LANES, GROUP])
            ahead = start + BLOCK + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_last")
            size = tl.sum(ok.to(tl.float32), axis=1)
            g_mean = tl.sum(x, axis=1) / tl.maximum(size, 1.0)
            centred = tl.where(ok, x - g_mean[:, None], 0.0)
            g_m2 = tl.sum(centred * centred, axis=1)
            count, mean, m2 = _chan(count, mean, m2, size, g_mean, g_m2)
        _, row_mean, row_m2 = tl.reduce((count, mean, m2), 0, _chan)
        rstd = tl.math.rsqrt(row_m2 / n_cols + eps)
        tl.store(mean_ptr + row64, row_mean)
        tl.store(rstd_ptr + row64, rstd)
        nxt = tl.load(x_row + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_first")
        for start in range(0, n_cols, BLOCK):
            ok = start + cols < n_cols
            x = nxt.to(tl.float32)
            ahead = start + BLOCK + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_first")
            y = (x - row_mean) * rstd
            if HAS_W:
                y = y * tl.load(w_ptr + start + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
            if HAS_B:
                y = y + tl.load(b_ptr + start + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=ok, eviction_policy="evict_first")


@triton.jit
def softmax_grouped_kernel(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, BLOCK: tl.constexpr, GROUP: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    LANES: tl.constexpr = BLOCK // GROUP
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        row64 = tl.cast(row, tl.int64)
        x_row = x_ptr + row64 * x_stride
        y_row = y_ptr + row64 * y_stride
        nxt = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"), eviction_policy="evict_last")
        zero = tl.sum(tl.reshape(tl.where(cols < 0, nxt.to(tl.float32), 0.0), [LANES, GROUP]), axis=1)
        m = zero - float("inf")
        s = zero
        for start in range(0, n_cols, BLOCK):
            x = tl.reshape(nxt.to(tl.float32), [LANES, GROUP])
            ahead = start + BLOCK + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=-float("inf"), eviction_policy="evict_last")
            g_max = tl.max(x, axis=1)
            g_sum = tl.sum(tl.where(x == -float("inf"), 0.0, tl.exp(x - g_max[:, None])), axis=1)
            new = tl.maximum(m, g_max)
            s = tl.where(s == 0.0, 0.0, s * tl.exp(m - new)) + tl.where(g_sum == 0.0, 0.0, g_sum * tl.exp(g_max - new))
            m = new
        row_max = tl.max(m, axis=0)
        total = tl.sum(tl.where(s == 0.0, 0.0, s * tl.exp(m - row_max)), axis=0)
        inv = tl.math.div_rn(1.0, total)
        nxt = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"), eviction_policy="evict_first")
        for start in range(0, n_cols, BLOCK):
            x = nxt.to(tl.float32)
            ahead = start + BLOCK + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=-float("inf"), eviction_policy="evict_first")
            y = tl.exp(x - row_max) * inv
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=start + cols < n_cols,
                     eviction_policy="evict_first")
