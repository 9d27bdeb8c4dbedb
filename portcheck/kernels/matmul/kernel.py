"""The matmul kernel: one BLOCK_M x BLOCK_N tile of C = act(scale_a * scale_b * (A @ B) + bias) per
program (see the package docstring for the algorithm and the fp8 accumulation)."""
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
def matmul_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, scale_a_ptr, scale_b_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, WIDE: tl.constexpr,
                  HAS_BIAS: tl.constexpr, HAS_SCALES: tl.constexpr, ACTIVATION: tl.constexpr,
                  PRECISION: tl.constexpr, FP8_ACC: tl.constexpr,
                  VEC: tl.constexpr = 1, HINTS: tl.constexpr = 0):
    # Triton assumes a size or stride aligned only when it is a multiple of 16; bit i of HINTS says
    # the launcher proved the i-th of (M, N, K, strides) a multiple of VEC (16 bytes of elements),
    # and _aligned tells the compiler: 16-byte loads for N = K = 4104
    M, N, K = _aligned(M, HINTS & 1, VEC), _aligned(N, HINTS & 2, VEC), _aligned(K, HINTS & 4, VEC)
    stride_am, stride_ak = _aligned(stride_am, HINTS & 8, VEC), _aligned(stride_ak, HINTS & 16, VEC)
    stride_bk, stride_bn = _aligned(stride_bk, HINTS & 32, VEC), _aligned(stride_bn, HINTS & 64, VEC)
    stride_cm, stride_cn = _aligned(stride_cm, HINTS & 128, VEC), _aligned(stride_cn, HINTS & 256, VEC)
    # grouped ordering: GROUP_M tile rows advance together along N, so their B panels stay in L2
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * num_pid_n
    first_m = (pid // per_group) * GROUP_M
    rows_in_group = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % rows_in_group
    pid_n = (pid % per_group) // rows_in_group

    # rows / columns past M / N wrap: the loads stay in bounds without masks, the store drops them
    rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    rk = tl.arange(0, BLOCK_K)
    if WIDE:
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn

    if a_ptr.dtype.element_ty == tl.int8:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=rk[None, :] < k_left, other=0.0)
            b = tl.load(b_ptrs, mask=rk[:, None] < k_left, other=0.0)
        if a_ptr.dtype.element_ty == tl.int8:
            acc = tl.dot(a, b, acc, out_dtype=tl.int32)
        elif FP8_ACC == "partial":
            acc = tl.dot(a, b, acc, max_num_imprecise_acc=BLOCK_K)
        elif FP8_ACC == "split":
            # a non-zero max_num_imprecise_acc keeps Triton from folding the add into the MMA
            acc += tl.dot(a, b, max_num_imprecise_acc=BLOCK_K)
        else:
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    if HAS_SCALES:
        acc = acc * (tl.load(scale_a_ptr) * tl.load(scale_b_ptr))
    cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + cn, mask=cn < N, other=0).to(acc.dtype)[None, :]
    if ACTIVATION == "relu":
        acc = tl.maximum(acc, 0)
    elif ACTIVATION == "gelu":
        acc = 0.5 * acc * (1 + tl.erf(acc * 0.7071067811865476))
    elif ACTIVATION == "silu":
        acc = acc * tl.sigmoid(acc)
    if WIDE:
        cm = cm.to(tl.int64)
        cn = cn.to(tl.int64)
    c_ptrs = c_ptr + cm[:, None] * stride_cm + cn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(cm[:, None] < M) & (cn[None, :] < N))

