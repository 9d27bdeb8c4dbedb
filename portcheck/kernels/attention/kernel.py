"""The attention kernels: one pass over the keys with an online softmax, through pointers (every
arch) or through tensor descriptors (TMA, NVIDIA sm_90+); see the package docstring."""
import triton
import triton.language as tl


@triton.jit
def _grid_position(heads_q, group, BLOCK_M: tl.constexpr, CAUSAL: tl.constexpr):
    """(batch, query head, key/value head, first row) of this program."""
    if CAUSAL:
        # the longest rows first, so the short ones fill the tail of the grid
        tile_m = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        tile_m = tl.program_id(0)
    bh = tl.program_id(1)
    h = bh % heads_q
    return bh // heads_q, h, h // group, tile_m * BLOCK_M


@triton.jit
def _key_ranges(start_m, seq_k, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    """[0, full_end): key tiles every row of the program sees whole (no mask); [full_end, end):
    the tiles that need one (the diagonal band, the sequence's last partial tile). Keys right of
    the band are never loaded."""
    if CAUSAL:
        # keys [0, start_m + 1) are visible to every row of the tile; the band ends at its last row
        free_end = tl.minimum(seq_k, start_m + 1)
        end = tl.minimum(seq_k, start_m + BLOCK_M)
    else:
        free_end = seq_k
        end = seq_k
    return (free_end // BLOCK_N) * BLOCK_N, end


@triton.jit
def _online_softmax(qk, m_i, l_i, acc, cols, offs_m, seq_k, qk_scale,
                    MASKED: tl.constexpr, CAUSAL: tl.constexpr):
    """One key tile into the running max m and sum l: returns P (fp32) and the rescaled acc.

    Every row has a visible key in the first tile it sees (key 0), so m is finite after it and
    no exp2(-inf - -inf) arises.
    """
    if MASKED:
        valid = cols[None, :] < seq_k
        if CAUSAL:
            valid = valid & (cols[None, :] <= offs_m[:, None])
        qk = tl.where(valid, qk * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
    else:
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.math.exp2(qk * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    return p, m_new, l_i, acc * alpha[:, None]


@triton.jit
def _attend_key_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d,
                      lo, hi, seq_k, qk_scale,
                      BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr):
    """Fold key tiles [lo, hi) into (acc, l, m) through pointers; lo is a multiple of BLOCK_N.
    Tile pointers are rebuilt from the key offsets each step rather than carried: carried
    [D, N] pointer tensors cost registers the dots need."""
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n
        k_ptrs = k_base + cols[None, :] * stride_kn + offs_d[:, None]     # K^T tile [D, N]
        if MASKED:
            k = tl.load(k_ptrs, mask=cols[None, :] < seq_k, other=0.0)
        else:
            k = tl.load(k_ptrs)
        p, m_i, l_i, acc = _online_softmax(tl.dot(q, k), m_i, l_i, acc, cols, offs_m, seq_k,
                                           qk_scale, MASKED, CAUSAL)
        v_ptrs = v_base + cols[:, None] * stride_vn + offs_d[None, :]     # V tile [N, D]
        if MASKED:   # a V row past the sequence loads as 0: garbage there must not meet p = 0
            v = tl.load(v_ptrs, mask=cols[:, None] < seq_k, other=0.0)
        else:
            v = tl.load(v_ptrs)
        acc = tl.dot(p.to(v.dtype), v, acc)
    return acc, l_i, m_i


@triton.jit
def attention_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, qk_scale,
                         stride_qb, stride_qh, stride_qm,
                         stride_kb, stride_kh, stride_kn,
                         stride_vb, stride_vh, stride_vn,
                         stride_ob, stride_oh, stride_om,
                         heads_q, group, seq_q, seq_k,
                         HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         CAUSAL: tl.constexpr):
    """Loads and stores through pointers: every arch."""
    b, h, kv_h, start_m = _grid_position(heads_q, group, BLOCK_M, CAUSAL)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q_base = q_ptr + b.to(tl.int64) * stride_qb + h.to(tl.int64) * stride_qh
    k_base = k_ptr + b.to(tl.int64) * stride_kb + kv_h.to(tl.int64) * stride_kh
    v_base = v_ptr + b.to(tl.int64) * stride_vb + kv_h.to(tl.int64) * stride_vh
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :],
                mask=offs_m[:, None] < seq_q, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    full_end, end = _key_ranges(start_m, seq_k, BLOCK_M, BLOCK_N, CAUSAL)
    acc, l_i, m_i = _attend_key_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn,
                                      offs_m, offs_d, 0, full_end, seq_k, qk_scale,
                                      BLOCK_N, False, CAUSAL)
    acc, l_i, m_i = _attend_key_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn,
                                      offs_m, offs_d, full_end, end, seq_k, qk_scale,
                                      BLOCK_N, True, CAUSAL)
    out = acc / l_i[:, None]
    o_base = o_ptr + b.to(tl.int64) * stride_ob + h.to(tl.int64) * stride_oh
    tl.store(o_base + offs_m[:, None] * stride_om + offs_d[None, :], out.to(o_ptr.dtype.element_ty),
             mask=offs_m[:, None] < seq_q)


@triton.jit
def _attend_key_tiles_tma(acc, l_i, m_i, q, k_desc, v_desc, b, kv_h, offs_m, lo, hi, seq_k,
                          qk_scale, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
                          MASKED: tl.constexpr, CAUSAL: tl.constexpr, WARP_SPEC: tl.constexpr):
    """Fold key tiles [lo, hi) into (acc, l, m) through tensor descriptors (TMA); rows past the
    sequence arrive as zeros, so only the scores need a mask. WARP_SPEC asks Triton to split the
    loop's loads, MMAs and softmax into warp-specialised partitions."""
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPEC):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = k_desc.load([b, kv_h, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        p, m_i, l_i, acc = _online_softmax(tl.dot(q, k.T), m_i, l_i, acc, start_n + offs_n, offs_m,
                                           seq_k, qk_scale, MASKED, CAUSAL)
        v = v_desc.load([b, kv_h, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        acc = tl.dot(p.to(v.dtype), v, acc)
    return acc, l_i, m_i


@triton.jit
def attention_fwd_tma_kernel(q_desc, k_desc, v_desc, o_desc, qk_scale, heads_q, group, seq_k,
                             HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             CAUSAL: tl.constexpr, WARP_SPEC: tl.constexpr = False):
    """Loads and stores through 4-D tensor descriptors [batch, heads, seq, head_dim] (NVIDIA
    sm_90+: TMA copies straight into shared memory, no address registers); the store clips the
    rows past seq_q."""
    b, h, kv_h, start_m = _grid_position(heads_q, group, BLOCK_M, CAUSAL)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    q = q_desc.load([b, h, start_m, 0]).reshape(BLOCK_M, HEAD_DIM)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    full_end, end = _key_ranges(start_m, seq_k, BLOCK_M, BLOCK_N, CAUSAL)
    acc, l_i, m_i = _attend_key_tiles_tma(acc, l_i, m_i, q, k_desc, v_desc, b, kv_h, offs_m, 0,
                                          full_end, seq_k, qk_scale, HEAD_DIM, BLOCK_N, False, CAUSAL,
                                          WARP_SPEC)
    acc, l_i, m_i = _attend_key_tiles_tma(acc, l_i, m_i, q, k_desc, v_desc, b, kv_h, offs_m,
                                          full_end, end, seq_k, qk_scale, HEAD_DIM, BLOCK_N, True, CAUSAL,
                                          WARP_SPEC)
    out = (acc / l_i[:, None]).to(q.dtype)
    o_desc.store([b, h, start_m, 0], out.reshape(1, 1, BLOCK_M, HEAD_DIM))

