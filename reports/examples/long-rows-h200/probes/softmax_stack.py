"""Softmax long rows (bf16 4096 x 131072): the small instruction cuts measured one at a time in
earlier sessions, stacked on main's L2 prefetch, to see how far together they go. Each alone gave
half a point to a point (`../tenth-session/even-rows.json` words, `../twelfth-session/softmax-merge.json`
one-exp merge); main's loops are 180 and 152 instructions a 16384-column chunk (sm_90a).

- WORDS: x read as int32 words of two bf16 in both passes (`w << 16` and `w & 0xffff0000` widen
  each element in one instruction where Triton 3.6 takes a PRMT and an IMAD for the high one),
  y stored as words packed by one `cvt.rn.bf16x2.f32` per two elements; rows of whole chunks
  only (EVEN), no masks.
- FUSED: pass 2's exponent argument as one FFMA, x log2(e) + (24 - row_max log2(e)), where main
  takes an FADD and an FFMA; c = 24 - row_max log2(e) is rounded once a row, which adds
  2 u(fp32) (|row_max| log2(e) + 24) to the argument: far below a bf16 output's rounding for
  |row_max| < 10^4, and wrong where row_max log2(e) overflows (|row_max| > 2.36e38), which a
  kernel on main would have to route to main's form, a row at a time. Speed only here.
  FUSED = 2: pass 1's too, x log2(e) + (-g_max log2(e)) a group (an upper bound: it adds
  u(fp32) |g_max| log2(e) to each argument, and a group whose g_max log2(e) overflows would sum
  to 0, so a kernel on main would need a guard per group).
- MERGE1: pass 1 merges each group into its lane with one exp2 (softmax_merge.py's `one exp`).

Standalone kernel (bf16, rows of whole chunks, 4-byte aligned), timed in the same rounds as main's.

    python3 softmax_stack.py OUT.json           (after pip install -e . at the repository root)
"""
import json
import os
import sys

import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py
from rows_common import bench_rows, row_timer  # noqa: E402

from portcheck.kernels._prefetch import evict_last_policy, lead_thread, prefetch_l2  # noqa: E402
from portcheck.kernels._rows import all_or_none  # noqa: E402


@triton.jit
def _widen(v):
    """the two bf16 of each int32 word as fp32: the low one shifted up, the high one masked"""
    return (v << 16).to(tl.float32, bitcast=True), (v & -65536).to(tl.float32, bitcast=True)


@triton.jit
def _pack(lo, hi):
    """one int32 word of two bf16, each rounded to nearest even from fp32"""
    return tl.inline_asm_elementwise("cvt.rn.bf16x2.f32 $0, $2, $1;", "=r,f,f", [lo, hi],
                                     dtype=tl.int32, is_pure=True, pack=1)


@triton.jit
def _merge(m, s, g_max, g_sum, MERGE1: tl.constexpr):
    LOG2E: tl.constexpr = 1.4426950408889634
    if MERGE1:
        big = m >= g_max
        d = tl.math.exp2(-tl.abs(m - g_max) * LOG2E)
        small = tl.where(big, g_sum, s)
        s = tl.where(big, s, g_sum) + tl.where(small == 0.0, 0.0, small * d)
    else:
        new = tl.maximum(m, g_max)
        s = tl.where(s == 0.0, 0.0, s * tl.math.exp2((m - new) * LOG2E)) + \
            tl.where(g_sum == 0.0, 0.0, g_sum * tl.math.exp2((g_max - new) * LOG2E))
    return tl.maximum(m, g_max), s


@triton.jit
def softmax_stack_kernel(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, BLOCK: tl.constexpr,
                         WORDS: tl.constexpr, FUSED: tl.constexpr, MERGE1: tl.constexpr):
    HALF: tl.constexpr = BLOCK // 2
    PER: tl.constexpr = 4 if WORDS else 8          # a thread's 16-byte load, in words or bf16
    LANES: tl.constexpr = (HALF if WORDS else BLOCK) // PER
    LOG2E: tl.constexpr = 1.4426950408889634
    cols = tl.arange(0, BLOCK)
    pairs = tl.arange(0, HALF)
    lead = lead_thread(tl.program_id(0))
    policy = evict_last_policy(tl.program_id(0))
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        row64 = tl.cast(row, tl.int64)
        x_row = x_ptr + row64 * x_stride
        y_row = y_ptr + row64 * y_stride
        x32 = x_row.to(tl.pointer_type(tl.int32))
        y32 = y_row.to(tl.pointer_type(tl.int32))
        if WORDS:
            nxt = tl.load(x32 + pairs, eviction_policy="evict_last")
            zero = tl.sum(tl.reshape(tl.where(pairs < 0, nxt.to(tl.float32, bitcast=True), 0.0), [LANES, PER]), axis=1)
        else:
            nxt = tl.load(x_row + cols, eviction_policy="evict_last")
            zero = tl.sum(tl.reshape(tl.where(cols < 0, nxt.to(tl.float32), 0.0), [LANES, PER]), axis=1)
        m = zero - float("inf")
        s = zero
        for start in range(0, n_cols, BLOCK):
            if WORDS:
                lo, hi = _widen(nxt)
                lo = tl.reshape(lo, [LANES, PER])
                hi = tl.reshape(hi, [LANES, PER])
                nxt = tl.load(x32 + start // 2 + HALF + pairs, mask=all_or_none(start + BLOCK < n_cols, HALF),
                              eviction_policy="evict_last")
                prefetch_l2(x_row + start + 2 * BLOCK, BLOCK, lead & (start + 3 * BLOCK <= n_cols), policy)
                g_max = tl.maximum(tl.max(lo, axis=1), tl.max(hi, axis=1))
                if FUSED == 2:
                    cg = (-g_max * LOG2E)[:, None]
                    g_sum = tl.where(g_max == -float("inf"), 0.0,
                                     tl.sum(tl.math.exp2(tl.fma(lo, LOG2E, cg)) +
                                            tl.math.exp2(tl.fma(hi, LOG2E, cg)), axis=1))
                else:
                    g_sum = tl.where(g_max == -float("inf"), 0.0,
                                     tl.sum(tl.math.exp2((lo - g_max[:, None]) * LOG2E) +
                                            tl.math.exp2((hi - g_max[:, None]) * LOG2E), axis=1))
            else:
                x = tl.reshape(nxt.to(tl.float32), [LANES, PER])
                nxt = tl.load(x_row + start + BLOCK + cols, mask=all_or_none(start + BLOCK < n_cols, BLOCK),
                              eviction_policy="evict_last")
                prefetch_l2(x_row + start + 2 * BLOCK, BLOCK, lead & (start + 3 * BLOCK <= n_cols), policy)
                g_max = tl.max(x, axis=1)
                if FUSED == 2:
                    g_sum = tl.where(g_max == -float("inf"), 0.0,
                                     tl.sum(tl.math.exp2(tl.fma(x, LOG2E, (-g_max * LOG2E)[:, None])), axis=1))
                else:
                    g_sum = tl.where(g_max == -float("inf"), 0.0,
                                     tl.sum(tl.math.exp2((x - g_max[:, None]) * LOG2E), axis=1))
            m, s = _merge(m, s, g_max, g_sum, MERGE1)
        row_max = tl.max(m, axis=0)
        total = tl.sum(tl.where(s == 0.0, 0.0, s * tl.math.exp2((m - row_max) * LOG2E)), axis=0)
        inv = tl.math.div_rn(1.0, total) * 5.9604644775390625e-08
        c = 24.0 - row_max * LOG2E
        if WORDS:
            nxt = tl.load(x32 + pairs, eviction_policy="evict_first")
        else:
            nxt = tl.load(x_row + cols, eviction_policy="evict_first")
        for start in range(0, n_cols, BLOCK):
            more = lead & (start < 2 * BLOCK) & (row + tl.num_programs(0) < n_rows)
            if WORDS:
                lo, hi = _widen(nxt)
                nxt = tl.load(x32 + start // 2 + HALF + pairs, mask=all_or_none(start + BLOCK < n_cols, HALF),
                              eviction_policy="evict_first")
                prefetch_l2(x_ptr + (row64 + tl.num_programs(0)) * x_stride + start, BLOCK, more, policy)
                if FUSED:
                    ylo = tl.math.exp2(tl.fma(lo, LOG2E, c)) * inv
                    yhi = tl.math.exp2(tl.fma(hi, LOG2E, c)) * inv
                else:
                    ylo = tl.math.exp2(tl.fma(lo - row_max, LOG2E, 24.0)) * inv
                    yhi = tl.math.exp2(tl.fma(hi - row_max, LOG2E, 24.0)) * inv
                tl.store(y32 + start // 2 + pairs, _pack(ylo, yhi), eviction_policy="evict_first")
            else:
                x = nxt.to(tl.float32)
                nxt = tl.load(x_row + start + BLOCK + cols, mask=all_or_none(start + BLOCK < n_cols, BLOCK),
                              eviction_policy="evict_first")
                prefetch_l2(x_ptr + (row64 + tl.num_programs(0)) * x_stride + start, BLOCK, more, policy)
                if FUSED:
                    y = tl.math.exp2(tl.fma(x, LOG2E, c)) * inv
                else:
                    y = tl.math.exp2(tl.fma(x - row_max, LOG2E, 24.0)) * inv
                tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), eviction_policy="evict_first")


VARIANTS = [dict(WORDS=w, FUSED=f, MERGE1=m) for w in (0, 1) for f in (0, 1, 2) for m in (0, 1)]


def main(path: str) -> None:
    import torch
    from portcheck.kernels import softmax
    r = bench_rows()
    x, y, n_rows, n_cols, sms, copy = r.x, r.y, r.n_rows, r.n_cols, r.sms, r.copy
    cfg = softmax.config(n_cols, 32, True, None, 2)
    assert n_cols % cfg["BLOCK"] == 0
    ref = softmax.softmax(x, long_rows=True).float()
    rows = []
    t = row_timer(x, y, copy, rows)
    for _ in range(3):
        t("softmax main", lambda: softmax.softmax_online_kernel[(sms,)](
            x, y, n_rows, n_cols, n_cols, n_cols, BLOCK=cfg["BLOCK"], PREFETCH=True, num_warps=cfg["num_warps"]), ref)
        for v in VARIANTS:
            t("softmax " + " ".join(f"{k}={int(b)}" for k, b in v.items()),
              lambda v=v: softmax_stack_kernel[(sms,)](x, y, n_rows, n_cols, n_cols, n_cols, BLOCK=cfg["BLOCK"],
                                                       num_warps=cfg["num_warps"], **v), ref)
    json.dump({"copy_gbs": copy, "rows": rows, "torch": torch.__version__, "triton": triton.__version__},
              open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
