"""The matmul kernels: one BLOCK_M x BLOCK_N tile of C = act(scale_a * scale_b * (A @ B) + bias) per
program, or per SPLIT_K programs that each sum a run of K (see the package docstring for the
algorithm, split-K and the fp8 accumulation); matmul_tma_kernel reads its tiles through tensor
descriptors (TMA) on a persistent grid."""
import triton
import triton.language as tl


@triton.jit
def _aligned(x, PROVEN: tl.constexpr, VEC: tl.constexpr):
    """x, which the launcher proved a multiple of VEC when PROVEN: (x // VEC) * VEC says so to the
    compiler's alignment analysis."""
    if PROVEN:
        return x // VEC * VEC
    else:
        return x


@triton.jit
def _mma(a, b, acc, PRECISION: tl.constexpr, FP8_ACC: tl.constexpr):
    """acc + a @ b, accumulated as the dtype needs (see the package docstring for fp8)."""
    if a.dtype == tl.int8:
        return tl.dot(a, b, acc, out_dtype=tl.int32)
    elif FP8_ACC == "partial":
        return tl.dot(a, b, acc, max_num_imprecise_acc=a.shape[1])
    elif FP8_ACC == "split":
        # a non-zero max_num_imprecise_acc keeps Triton from folding the add into the MMA
        return acc + tl.dot(a, b, max_num_imprecise_acc=a.shape[1])
    else:
        return tl.dot(a, b, acc, input_precision=PRECISION)


@triton.jit
def _epilogue(acc, bias_ptr, scale_a_ptr, scale_b_ptr, cn, N, HAS_BIAS: tl.constexpr,
              HAS_SCALES: tl.constexpr, ACTIVATION: tl.constexpr):
    """Scales, bias and activation of a C tile whose columns are cn."""
    if HAS_SCALES:
        acc = acc * (tl.load(scale_a_ptr) * tl.load(scale_b_ptr))
    if HAS_BIAS:
        acc += tl.load(bias_ptr + cn, mask=cn < N, other=0).to(acc.dtype)[None, :]
    if ACTIVATION == "relu":
        acc = tl.maximum(acc, 0)
    elif ACTIVATION == "gelu":
        acc = 0.5 * acc * (1 + tl.erf(acc * 0.7071067811865476))
    elif ACTIVATION == "silu":
        acc = acc * tl.sigmoid(acc)
    return acc


@triton.jit
def _finish(acc, c_ptr, bias_ptr, scale_a_ptr, scale_b_ptr, row0, col0, pid_m, pid_n, M, N, stride_cm,
            stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, WIDE: tl.constexpr,
            HAS_BIAS: tl.constexpr, HAS_SCALES: tl.constexpr, ACTIVATION: tl.constexpr):
    """The epilogue and the masked store of one C tile whose origin is (row0, col0); it stores the
    rows and columns from (pid_m, pid_n)'s own origin on."""
    cm = row0 + tl.arange(0, BLOCK_M)
    cn = col0 + tl.arange(0, BLOCK_N)
    acc = _epilogue(acc, bias_ptr, scale_a_ptr, scale_b_ptr, cn, N, HAS_BIAS, HAS_SCALES, ACTIVATION)
    if WIDE:
        cm = cm.to(tl.int64)
        cn = cn.to(tl.int64)
    c_ptrs = c_ptr + cm[:, None] * stride_cm + cn[None, :] * stride_cn
    own = (cm >= pid_m * BLOCK_M) & (cm < M)
    own_n = (cn >= pid_n * BLOCK_N) & (cn < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=own[:, None] & own_n[None, :])


@triton.jit
def _grouped(tile, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of a tile in grouped order: GROUP_M tile rows advance together along N, so
    their B panels stay in L2."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * num_pid_n
    first_m = (tile // per_group) * GROUP_M
    rows_in_group = min(num_pid_m - first_m, GROUP_M)
    return first_m + (tile % per_group) % rows_in_group, (tile % per_group) // rows_in_group


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, scale_a_ptr, scale_b_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, WIDE: tl.constexpr,
                  HAS_BIAS: tl.constexpr, HAS_SCALES: tl.constexpr, ACTIVATION: tl.constexpr,
                  PRECISION: tl.constexpr, FP8_ACC: tl.constexpr,
                  VEC: tl.constexpr = 1, HINTS: tl.constexpr = 0,
                  SPLIT_K: tl.constexpr = 1, ws_ptr=None, lock_ptr=None,
                  M_FITS: tl.constexpr = False, N_FITS: tl.constexpr = False):
    # Triton assumes a size or stride aligned only when it is a multiple of 16; bit i of HINTS says
    # the launcher proved the i-th of (M, N, K, strides) a multiple of VEC (16 bytes of elements),
    # and _aligned tells the compiler: 16-byte loads for N = K = 4104
    M, N, K = _aligned(M, HINTS & 1, VEC), _aligned(N, HINTS & 2, VEC), _aligned(K, HINTS & 4, VEC)
    stride_am, stride_ak = _aligned(stride_am, HINTS & 8, VEC), _aligned(stride_ak, HINTS & 16, VEC)
    stride_bk, stride_bn = _aligned(stride_bk, HINTS & 32, VEC), _aligned(stride_bn, HINTS & 64, VEC)
    stride_cm, stride_cn = _aligned(stride_cm, HINTS & 128, VEC), _aligned(stride_cn, HINTS & 256, VEC)
    # split-K: SPLIT_K neighbouring programs share a tile, each summing one run of K slices
    tile = tl.program_id(0)
    if SPLIT_K > 1:
        split = tile % SPLIT_K
        tile = tile // SPLIT_K
    pid_m, pid_n = _grouped(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)

    # the K slices this program sums: all of them, or its run of them under split-K
    k_tiles = tl.cdiv(K, BLOCK_K)
    k_first = 0
    k_end = k_tiles
    if SPLIT_K > 1:
        per_split = tl.cdiv(k_tiles, SPLIT_K)
        k_first = split * per_split
        k_end = min(k_first + per_split, k_tiles)
    # The last tile along M or N is moved back to end at M or N when it fits there, so every
    # index stays in bounds and contiguous (a wrap modulo N = 4104 left 16-byte runs along a
    # row-major B and cost 30%, tools/sweep_matmul_shapes.py); it stores only its own rows and
    # columns. Narrower than one tile, N wraps instead (the store drops the copies), and A's rows
    # past M read as zeros: a wrap at M = 1 (which Triton specialises) broadcasts one row over the
    # tile, and that A load cost the H200 0.5 to 4.7 us of a 12 to 19 us launch (bf16, M = 1,
    # N = K = 4104, reports/examples/matmul-h200/skinny/skinny-round2.json).
    row0 = pid_m * BLOCK_M
    col0 = pid_n * BLOCK_N
    if M_FITS:
        row0 = min(row0, M - BLOCK_M)
    rm = row0 + tl.arange(0, BLOCK_M)
    a_rows = (rm < M)[:, None] | M_FITS   # all true (and folded away) when the tile fits
    if N_FITS:
        col0 = min(col0, N - BLOCK_N)
        rn = col0 + tl.arange(0, BLOCK_N)
    else:
        rn = (col0 + tl.arange(0, BLOCK_N)) % N
    rk = tl.arange(0, BLOCK_K)
    if WIDE:
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
    a_ptrs = a_ptr + rm[:, None] * stride_am + (k_first * BLOCK_K + rk)[None, :] * stride_ak
    b_ptrs = b_ptr + (k_first * BLOCK_K + rk)[:, None] * stride_bk + rn[None, :] * stride_bn

    if a_ptr.dtype.element_ty == tl.int8:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # whole slices unmasked, so their loads vectorize and pipeline; the K tail once, masked
    for _ in range(k_first, min(k_end, K // BLOCK_K)):
        if M_FITS:
            a = tl.load(a_ptrs)
        else:
            a = tl.load(a_ptrs, mask=a_rows, other=0.0)
        acc = _mma(a, tl.load(b_ptrs), acc, PRECISION, FP8_ACC)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    if not EVEN_K:
        if (k_end == k_tiles) & (k_first < k_end):   # the run that ends K, unless it is empty
            k_left = K - (k_tiles - 1) * BLOCK_K
            a = tl.load(a_ptrs, mask=a_rows & (rk[None, :] < k_left), other=0.0)
            b = tl.load(b_ptrs, mask=rk[:, None] < k_left, other=0.0)
            acc = _mma(a, b, acc, PRECISION, FP8_ACC)

    if SPLIT_K == 1:
        _finish(acc, c_ptr, bias_ptr, scale_a_ptr, scale_b_ptr, row0, col0, pid_m, pid_n, M, N,
                stride_cm, stride_cn, BLOCK_M, BLOCK_N, WIDE, HAS_BIAS, HAS_SCALES, ACTIVATION)
    else:
        # each split leaves its partial tile in the workspace; the tile's last split to arrive
        # sums all of them in split order (bitwise the same whichever arrives last), runs the
        # epilogue and re-arms the tile's counter for the next launch
        offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
        slots = ws_ptr + tile * (SPLIT_K * BLOCK_M * BLOCK_N)
        # only the rows below M (a_rows): at M = 1 the other 15 of a 16-row tile are zeros, and
        # writing and reading them back was 15/16 of the partials' traffic
        tl.store(slots + split * (BLOCK_M * BLOCK_N) + offs, acc, mask=a_rows)
        tl.debug_barrier()   # every thread's partial is written before the release below
        arrived = tl.atomic_add(lock_ptr + tile, 1, sem="acq_rel")
        if arrived == SPLIT_K - 1:
            total = tl.load(slots + offs, mask=a_rows, other=0, cache_modifier=".cg")
            for s in tl.static_range(1, SPLIT_K):
                total += tl.load(slots + s * (BLOCK_M * BLOCK_N) + offs, mask=a_rows, other=0,
                                 cache_modifier=".cg")
            tl.atomic_xchg(lock_ptr + tile, 0)
            _finish(total, c_ptr, bias_ptr, scale_a_ptr, scale_b_ptr, row0, col0, pid_m, pid_n, M, N,
                    stride_cm, stride_cn, BLOCK_M, BLOCK_N, WIDE, HAS_BIAS, HAS_SCALES, ACTIVATION)


@triton.jit
def _halves(x):
    """The left and right column halves of a 2-D tile."""
    return tl.split(tl.permute(tl.reshape(x, (x.shape[0], 2, x.shape[1] // 2)), (0, 2, 1)))


@triton.jit
def matmul_tma_kernel(a_desc, b_desc, c, bias_ptr, scale_a_ptr, scale_b_ptr, M, N, K, stride_cm, stride_cn,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr, B_KMAJOR: tl.constexpr, C_DESC: tl.constexpr,
                      WIDE: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_SCALES: tl.constexpr,
                      ACTIVATION: tl.constexpr, PRECISION: tl.constexpr, FP8_ACC: tl.constexpr):
    """Persistent: program p takes C tiles p, p + P, p + 2P, ... in grouped order (P programs,
    at most one per SM), its A and B tiles read through tensor descriptors (TMA, NVIDIA sm_90+):
    the copy engine fetches whole tiles whatever the row stride (any multiple of 16 bytes) and
    fills the rows and columns past M, N and K with zeros, so there is no tail, no mask and no
    tile that moves back. B is [K, N] (b_desc over it), or K-major (b_desc over the [N, K]
    buffer, B_KMAJOR). C is stored through a descriptor of BLOCK_M x BLOCK_N / 2 boxes, one half
    tile at a time (C_DESC: clipped at M and N; half the epilogue's shared memory, which sits
    beside the pipeline's buffers here), or, when its rows are not 16-byte aligned, through
    masked pointers a quarter tile at a time. The tile loop is flattened into the K loop, so the
    next tile's first loads are in flight while this one's epilogue runs: 2 to 4% faster than
    one program per tile at 4096^3 and 8192^3 on the H200 (reports/examples/matmul-h200/persistent/)."""
    tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for tile in tl.range(tl.program_id(0), tiles, tl.num_programs(0), flatten=True):
        pid_m, pid_n = _grouped(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        row0 = pid_m * BLOCK_M
        col0 = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            a = a_desc.load([row0, k * BLOCK_K])
            if B_KMAJOR:
                b = b_desc.load([col0, k * BLOCK_K]).T
            else:
                b = b_desc.load([k * BLOCK_K, col0])
            acc = _mma(a, b, acc, PRECISION, FP8_ACC)
        # the epilogue and the store a part of the tile at a time: fewer registers for its
        # temporaries (GELU's) and half the shared memory a descriptor store stages
        HALF: tl.constexpr = BLOCK_N // 2
        left, right = _halves(acc)
        if C_DESC:
            cols = col0 + tl.arange(0, HALF)
            c.store([row0, col0], _epilogue(left, bias_ptr, scale_a_ptr, scale_b_ptr, cols, N, HAS_BIAS,
                                            HAS_SCALES, ACTIVATION).to(c.dtype))
            c.store([row0, col0 + HALF], _epilogue(right, bias_ptr, scale_a_ptr, scale_b_ptr, cols + HALF, N,
                                                   HAS_BIAS, HAS_SCALES, ACTIVATION).to(c.dtype))
        else:
            # quarters: each element's 64-bit address takes two registers, and half tiles spilled
            # 128 to 264 B with bias + GELU (sm_90a, cross-compiled). Quarter i is column tile
            # 4 pid_n + i of width Q.
            Q: tl.constexpr = HALF // 2
            q0, q1 = _halves(left)
            q2, q3 = _halves(right)
            _finish(q0, c, bias_ptr, scale_a_ptr, scale_b_ptr, row0, col0, pid_m, 4 * pid_n, M, N,
                    stride_cm, stride_cn, BLOCK_M, Q, WIDE, HAS_BIAS, HAS_SCALES, ACTIVATION)
            _finish(q1, c, bias_ptr, scale_a_ptr, scale_b_ptr, row0, col0 + Q, pid_m, 4 * pid_n + 1, M, N,
                    stride_cm, stride_cn, BLOCK_M, Q, WIDE, HAS_BIAS, HAS_SCALES, ACTIVATION)
            _finish(q2, c, bias_ptr, scale_a_ptr, scale_b_ptr, row0, col0 + 2 * Q, pid_m, 4 * pid_n + 2, M, N,
                    stride_cm, stride_cn, BLOCK_M, Q, WIDE, HAS_BIAS, HAS_SCALES, ACTIVATION)
            _finish(q3, c, bias_ptr, scale_a_ptr, scale_b_ptr, row0, col0 + 3 * Q, pid_m, 4 * pid_n + 3, M, N,
                    stride_cm, stride_cn, BLOCK_M, Q, WIDE, HAS_BIAS, HAS_SCALES, ACTIVATION)
