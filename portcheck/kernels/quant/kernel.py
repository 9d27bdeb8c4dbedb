"""The quantization kernels: per-token (one read, or two passes for long rows), the tensor amax,
per-tensor and dequantization; every step one correctly rounded fp32 operation (package docstring)."""
import triton
import triton.language as tl

RNE_MAGIC = 12582912.0         # 1.5 * 2^23


@triton.jit
def _scale_from_amax(amax, QMAX: tl.constexpr, MIN_SCALE: tl.constexpr):
    return tl.maximum(tl.math.div_rn(amax, QMAX), MIN_SCALE)


@triton.jit
def _finite_abs(x):
    """|x| where x is finite, else 0: inf and NaN do not set the scale."""
    a = tl.abs(x)
    return tl.where(a < float("inf"), a, 0.0)


@triton.jit
def _quantize(x, inv, QMAX: tl.constexpr, INT8: tl.constexpr):
    """fp32 x times the fp32 reciprocal scale, clamped (NaN kept); int8: rounded half to even."""
    y = tl.clamp(x * inv, -QMAX, QMAX, propagate_nan=tl.PropagateNan.ALL)
    if INT8:
        y = (y + 12582912.0) - 12582912.0      # RNE_MAGIC: the add rounds to an integer
        y = tl.where(y == y, y, 0.0)           # int8 has no NaN; fptosi(NaN) is undefined
    return y


@triton.jit
def quant_rows_kernel(x_ptr, q_ptr, s_ptr, n_rows, n_cols, x_stride, q_stride,
                      QMAX: tl.constexpr, MIN_SCALE: tl.constexpr, INT8: tl.constexpr,
                      ROWS: tl.constexpr, BLOCK: tl.constexpr):
    """Per-token dynamic quantization of ROWS rows that fit in one BLOCK each: one read."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)[None, :]
    row_ok = rows < n_rows
    mask = row_ok[:, None] & (cols < n_cols)
    rows64 = rows.to(tl.int64)[:, None]
    x = tl.load(x_ptr + rows64 * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    scale = _scale_from_amax(tl.max(_finite_abs(x), axis=1), QMAX, MIN_SCALE)
    inv = tl.math.div_rn(1.0, scale)
    q = _quantize(x, inv[:, None], QMAX, INT8)
    tl.store(q_ptr + rows64 * q_stride + cols, q.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(s_ptr + rows, scale, mask=row_ok)


@triton.jit
def quant_long_rows_kernel(x_ptr, q_ptr, s_ptr, n_cols, x_stride, q_stride,
                           QMAX: tl.constexpr, MIN_SCALE: tl.constexpr, INT8: tl.constexpr,
                           BLOCK: tl.constexpr):
    """Per-token quantization of one row longer than a block: an amax pass, then a code pass
    (the second read of a row mostly hits L2)."""
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_stride
    q_row = q_ptr + row * q_stride
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=0.0).to(tl.float32)
        acc = tl.maximum(acc, _finite_abs(x))
    scale = _scale_from_amax(tl.max(acc, axis=0), QMAX, MIN_SCALE)
    inv = tl.math.div_rn(1.0, scale)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        q = _quantize(x, inv, QMAX, INT8)
        tl.store(q_row + start + cols, q.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(s_ptr + row, scale)


@triton.jit
def amax_kernel(x_ptr, amax_bits_ptr, n_rows, n_cols, x_stride,
                ROWS: tl.constexpr, BLOCK: tl.constexpr):
    """Tensor amax: a grid sized to the machine strides over the tiles, then one atomic max per
    program on the int32 bits of the (non-negative, finite) fp32 amax, which order like ints."""
    pid = tl.program_id(0)
    n_col_tiles = tl.cdiv(n_cols, BLOCK)
    n_tiles = tl.cdiv(n_rows, ROWS) * n_col_tiles
    r = tl.arange(0, ROWS)[:, None]
    c = tl.arange(0, BLOCK)[None, :]
    acc = tl.zeros([ROWS, BLOCK], tl.float32)
    for tile in range(pid, n_tiles, tl.num_programs(0)):
        rows = (tile // n_col_tiles) * ROWS + r
        cols = (tile % n_col_tiles) * BLOCK + c
        mask = (rows < n_rows) & (cols < n_cols)
        x = tl.load(x_ptr + rows.to(tl.int64) * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        acc = tl.maximum(acc, _finite_abs(x))
    amax = tl.max(tl.max(acc, axis=1), axis=0)
    tl.atomic_max(amax_bits_ptr, amax.to(tl.int32, bitcast=True))


@triton.jit
def quant_tensor_kernel(x_ptr, q_ptr, scale_ptr, amax_bits_ptr, n_rows, n_cols, x_stride, q_stride,
                        QMAX: tl.constexpr, MIN_SCALE: tl.constexpr, INT8: tl.constexpr,
                        STATIC: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    """Per-tensor quantization: STATIC reads the caller's scale; otherwise every program derives
    the scale from the amax (bit-identical in each) and the first one stores it."""
    pid_r = tl.program_id(0)
    pid_c = tl.program_id(1)
    if STATIC:
        scale = tl.load(scale_ptr)
    else:
        amax = tl.load(amax_bits_ptr).to(tl.float32, bitcast=True)
        scale = _scale_from_amax(amax, QMAX, MIN_SCALE)
        if (pid_r == 0) & (pid_c == 0):
            tl.store(scale_ptr, scale)
    inv = tl.math.div_rn(1.0, scale)
    rows = pid_r * ROWS + tl.arange(0, ROWS)[:, None]
    cols = pid_c * BLOCK + tl.arange(0, BLOCK)[None, :]
    mask = (rows < n_rows) & (cols < n_cols)
    rows64 = rows.to(tl.int64)
    x = tl.load(x_ptr + rows64 * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    q = _quantize(x, inv, QMAX, INT8)
    tl.store(q_ptr + rows64 * q_stride + cols, q.to(q_ptr.dtype.element_ty), mask=mask)


@triton.jit
def dequant_kernel(q_ptr, s_ptr, o_ptr, n_rows, n_cols, q_stride, o_stride,
                   PER_TOKEN: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)[None, :]
    mask = (rows < n_rows) & (cols < n_cols)
    rows64 = rows.to(tl.int64)
    q = tl.load(q_ptr + rows64 * q_stride + cols, mask=mask).to(tl.float32)   # masked lanes are never stored
    if PER_TOKEN:
        s = tl.load(s_ptr + rows, mask=rows < n_rows, other=1.0)
    else:
        s = tl.load(s_ptr)
    tl.store(o_ptr + rows64 * o_stride + cols, (q * s).to(o_ptr.dtype.element_ty), mask=mask)

