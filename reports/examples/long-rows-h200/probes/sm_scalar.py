import triton
import triton.language as tl


@triton.jit
def softmax_scalar_kernel(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        row64 = tl.cast(row, tl.int64)
        x_row = x_ptr + row64 * x_stride
        y_row = y_ptr + row64 * y_stride
        m = -float("inf")
        s = 0.0
        nxt = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"), eviction_policy="evict_last")
        for start in range(0, n_cols, BLOCK):
            cur = nxt
            ahead = start + BLOCK + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=-float("inf"), eviction_policy="evict_last")
            c = tl.max(cur, axis=0).to(tl.float32)
            x = cur.to(tl.float32)
            e = tl.sum(tl.where(x == -float("inf"), 0.0, tl.exp(x - c)), axis=0)
            new = tl.maximum(m, c)
            s = tl.where(s == 0.0, 0.0, s * tl.exp(m - new)) + tl.where(e == 0.0, 0.0, e * tl.exp(c - new))
            m = new
        inv = tl.math.div_rn(1.0, s)
        nxt = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"), eviction_policy="evict_first")
        for start in range(0, n_cols, BLOCK):
            x = nxt.to(tl.float32)
            ahead = start + BLOCK + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=-float("inf"), eviction_policy="evict_first")
            y = tl.exp(x - m) * inv
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=start + cols < n_cols,
                     eviction_policy="evict_first")


@triton.jit
def _fold(cur, m, s):
    c = tl.max(cur, axis=0).to(tl.float32)
    x = cur.to(tl.float32)
    e = tl.sum(tl.where(x == -float("inf"), 0.0, tl.exp(x - c)), axis=0)
    new = tl.maximum(m, c)
    s = tl.where(s == 0.0, 0.0, s * tl.exp(m - new)) + tl.where(e == 0.0, 0.0, e * tl.exp(c - new))
    return new, s


@triton.jit
def softmax_halves_kernel(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    HALF: tl.constexpr = BLOCK // 2
    cols = tl.arange(0, HALF)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        row64 = tl.cast(row, tl.int64)
        x_row = x_ptr + row64 * x_stride
        y_row = y_ptr + row64 * y_stride
        m = -float("inf")
        s = 0.0
        nxt_a = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"), eviction_policy="evict_last")
        nxt_b = tl.load(x_row + HALF + cols, mask=HALF + cols < n_cols, other=-float("inf"), eviction_policy="evict_last")
        for start in range(0, n_cols, BLOCK):
            cur_a = nxt_a
            cur_b = nxt_b
            ahead = start + BLOCK + cols
            nxt_a = tl.load(x_row + ahead, mask=ahead < n_cols, other=-float("inf"), eviction_policy="evict_last")
            nxt_b = tl.load(x_row + HALF + ahead, mask=HALF + ahead < n_cols, other=-float("inf"), eviction_policy="evict_last")
            m, s = _fold(cur_a, m, s)
            m, s = _fold(cur_b, m, s)
        inv = tl.math.div_rn(1.0, s)
        nxt = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"), eviction_policy="evict_first")
        for start in range(0, n_cols, HALF):
            x = nxt.to(tl.float32)
            ahead = start + HALF + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=-float("inf"), eviction_policy="evict_first")
            y = tl.exp(x - m) * inv
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=start + cols < n_cols,
                     eviction_policy="evict_first")
