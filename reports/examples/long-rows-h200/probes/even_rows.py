"""Long rows (bf16 4096 x 131072): the looped kernels with their masks dropped where no chunk has a
tail (EVEN, n_cols a multiple of the chunk), and two bf16 variants that read x, w and b as int32
words of two bf16 (one instruction to widen each element, where Triton 3.6 widens the high bf16 of
a register with a PRMT and an IMAD).

Cross-compiled for sm_90a with Triton 3.6 (instructions a loop iteration, passes 1 and 2; no spills):
- layernorm: 351 and 350 masked; 269 and 310 EVEN (pass 1 selects nothing); pass 2 with x, w and b
  as words 273.
- softmax: 169 and 143 masked; 163 and 131 EVEN; words in both passes 152 and 114.
- rmsnorm: 121 and 159 masked; 111 and 142 EVEN.
(The EVEN loads one chunk ahead address it as x_row + start + BLOCK + cols, scalar arithmetic first:
through a tensor ahead = start + BLOCK + cols, layernorm's loops took 279 and 323.)

Main's kernels are launched with EVEN=False (the masked code every row took before) and EVEN=True,
in the same rounds as the variants; every output is compared with main's masked one. Only
LayerNorm kept EVEN on main (f00abe6); softmax's and RMSNorm's EVEN kernels, timed here, are on
branch issue-22-even-rows (fb7d9e8), and on main the probe times those two masked only.

    python3 even_rows.py OUT.json           (after pip install -e . at the repository root)
"""
import json
import os
import sys

import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py beside it
from rows_common import bench_rows, row_timer  # noqa: E402

from portcheck.kernels._rows import all_or_none


@triton.jit
def _pair_f32(v):
    """the two bf16 of each int32 word as fp32: the low one shifted up, the high one masked"""
    return (v << 16).to(tl.float32, bitcast=True), (v & -65536).to(tl.float32, bitcast=True)


@triton.jit
def ln_pairs_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_rows, n_cols,
                    x_stride, y_stride, eps, BLOCK: tl.constexpr, PASS1: tl.constexpr, PASS2: tl.constexpr):
    """LayerNorm of bf16 rows, n_cols a multiple of BLOCK, rows 4-byte aligned: main's EVEN kernel
    with x (pass 1 if PASS1, pass 2 if PASS2), w and b read as int32 words of two bf16."""
    cols = tl.arange(0, BLOCK)
    HALF: tl.constexpr = BLOCK // 2
    pairs = tl.arange(0, HALF)
    w32 = w_ptr.to(tl.pointer_type(tl.int32))
    b32 = b_ptr.to(tl.pointer_type(tl.int32))
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        row64 = tl.cast(row, tl.int64)
        x_row = x_ptr + row64 * x_stride
        x32 = x_row.to(tl.pointer_type(tl.int32))
        y_row = y_ptr + row64 * y_stride
        mean = 0.0
        m2 = 0.0
        count = 0.0
        if PASS1:
            nxt = tl.load(x32 + pairs, eviction_policy="evict_last")
        else:
            nxt = tl.load(x_row + cols, eviction_policy="evict_last")
        for start in range(0, n_cols, BLOCK):
            if PASS1:
                lo, hi = _pair_f32(nxt)
                nxt = tl.load(x32 + start // 2 + HALF + pairs, mask=all_or_none(start + BLOCK < n_cols, HALF), eviction_policy="evict_last")
                size = BLOCK * 1.0
                chunk_mean = tl.sum(lo + hi, axis=0) / size
                clo = lo - chunk_mean
                chi = hi - chunk_mean
                chunk_m2 = tl.sum(clo * clo + chi * chi, axis=0)
            else:
                x = nxt.to(tl.float32)
                nxt = tl.load(x_row + start + BLOCK + cols, mask=all_or_none(start + BLOCK < n_cols, BLOCK), eviction_policy="evict_last")
                size = BLOCK * 1.0
                chunk_mean = tl.sum(x, axis=0) / size
                centred = x - chunk_mean
                chunk_m2 = tl.sum(centred * centred, axis=0)
            total = count + size
            delta = chunk_mean - mean
            mean += delta * (size / total)
            m2 += chunk_m2 + delta * delta * (count * size / total)
            count = total
        row_mean = mean
        if PASS2:
            nxt = tl.load(x32 + pairs, eviction_policy="evict_first")
        else:
            nxt = tl.load(x_row + cols, eviction_policy="evict_first")
        rstd = tl.math.rsqrt(m2 / n_cols + eps)
        for start in range(0, n_cols, BLOCK):
            if PASS2:
                lo, hi = _pair_f32(nxt)
                nxt = tl.load(x32 + start // 2 + HALF + pairs, mask=all_or_none(start + BLOCK < n_cols, HALF), eviction_policy="evict_first")
                wlo, whi = _pair_f32(tl.load(w32 + start // 2 + pairs))
                blo, bhi = _pair_f32(tl.load(b32 + start // 2 + pairs))
                ylo = (lo - row_mean) * rstd * wlo + blo
                yhi = (hi - row_mean) * rstd * whi + bhi
                y = tl.reshape(tl.join(ylo, yhi), [BLOCK])
            else:
                x = nxt.to(tl.float32)
                nxt = tl.load(x_row + start + BLOCK + cols, mask=all_or_none(start + BLOCK < n_cols, BLOCK), eviction_policy="evict_first")
                y = (x - row_mean) * rstd * tl.load(w_ptr + start + cols).to(tl.float32) + \
                    tl.load(b_ptr + start + cols).to(tl.float32)
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), eviction_policy="evict_first")
        tl.store(mean_ptr + row64, row_mean)
        tl.store(rstd_ptr + row64, rstd)


@triton.jit
def softmax_pairs_kernel(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, BLOCK: tl.constexpr,
                         PASS1: tl.constexpr, PASS2: tl.constexpr):
    """main's softmax_online_kernel for bf16 rows, n_cols a multiple of BLOCK (EVEN), rows 4-byte
    aligned, with x read as int32 words of two bf16 in pass 1 (PASS1) and pass 2 (PASS2)."""
    WORDS: tl.constexpr = 4            # a thread's 16-byte load
    HALF: tl.constexpr = BLOCK // 2
    LANES: tl.constexpr = HALF // WORDS
    LOG2E: tl.constexpr = 1.4426950408889634
    cols = tl.arange(0, BLOCK)
    pairs = tl.arange(0, HALF)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        row64 = tl.cast(row, tl.int64)
        x_row = x_ptr + row64 * x_stride
        x32 = x_row.to(tl.pointer_type(tl.int32))
        y_row = y_ptr + row64 * y_stride
        if PASS1:
            nxt = tl.load(x32 + pairs, eviction_policy="evict_last")
            zero = tl.sum(tl.reshape(tl.where(pairs < 0, nxt.to(tl.float32, bitcast=True), 0.0), [LANES, WORDS]), axis=1)
        else:
            nxt = tl.load(x_row + cols, eviction_policy="evict_last")
            zero = tl.sum(tl.reshape(tl.where(cols < 0, nxt.to(tl.float32), 0.0), [LANES, 8]), axis=1)
        m = zero - float("inf")
        s = zero
        for start in range(0, n_cols, BLOCK):
            if PASS1:
                lo, hi = _pair_f32(nxt)
                lo = tl.reshape(lo, [LANES, WORDS])
                hi = tl.reshape(hi, [LANES, WORDS])
                nxt = tl.load(x32 + start // 2 + HALF + pairs, mask=all_or_none(start + BLOCK < n_cols, HALF), eviction_policy="evict_last")
                g_max = tl.maximum(tl.max(lo, axis=1), tl.max(hi, axis=1))
                g_sum = tl.where(g_max == -float("inf"), 0.0,
                                 tl.sum(tl.math.exp2((lo - g_max[:, None]) * LOG2E) +
                                        tl.math.exp2((hi - g_max[:, None]) * LOG2E), axis=1))
            else:
                x = tl.reshape(nxt.to(tl.float32), [LANES, 8])
                nxt = tl.load(x_row + start + BLOCK + cols, mask=all_or_none(start + BLOCK < n_cols, BLOCK), eviction_policy="evict_last")
                g_max = tl.max(x, axis=1)
                g_sum = tl.where(g_max == -float("inf"), 0.0,
                                 tl.sum(tl.math.exp2((x - g_max[:, None]) * LOG2E), axis=1))
            new = tl.maximum(m, g_max)
            s = tl.where(s == 0.0, 0.0, s * tl.math.exp2((m - new) * LOG2E)) + \
                tl.where(g_sum == 0.0, 0.0, g_sum * tl.math.exp2((g_max - new) * LOG2E))
            m = new
        row_max = tl.max(m, axis=0)
        total = tl.sum(tl.where(s == 0.0, 0.0, s * tl.math.exp2((m - row_max) * LOG2E)), axis=0)
        inv = tl.math.div_rn(1.0, total) * 5.9604644775390625e-08
        if PASS2:
            nxt = tl.load(x32 + pairs, eviction_policy="evict_first")
        else:
            nxt = tl.load(x_row + cols, eviction_policy="evict_first")
        for start in range(0, n_cols, BLOCK):
            if PASS2:
                lo, hi = _pair_f32(nxt)
                nxt = tl.load(x32 + start // 2 + HALF + pairs, mask=all_or_none(start + BLOCK < n_cols, HALF), eviction_policy="evict_first")
                ylo = tl.math.exp2(tl.fma(lo - row_max, LOG2E, 24.0)) * inv
                yhi = tl.math.exp2(tl.fma(hi - row_max, LOG2E, 24.0)) * inv
                y = tl.reshape(tl.join(ylo, yhi), [BLOCK])
            else:
                x = nxt.to(tl.float32)
                nxt = tl.load(x_row + start + BLOCK + cols, mask=all_or_none(start + BLOCK < n_cols, BLOCK), eviction_policy="evict_first")
                y = tl.math.exp2(tl.fma(x - row_max, LOG2E, 24.0)) * inv
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), eviction_policy="evict_first")


def main(path: str) -> None:
    import torch
    from portcheck.kernels import layernorm, rmsnorm, softmax
    r = bench_rows()
    x, w, b, y, mean, rstd = r.x, r.w, r.b, r.y, r.mean, r.rstd
    n_rows, n_cols, sms, copy = r.n_rows, r.n_cols, r.sms, r.copy
    cfg = {m.__name__.rsplit(".", 1)[1]: m.config(n_cols, 32, True, None, 2) for m in (layernorm, rmsnorm, softmax)}

    def ln(kernel, **extra):
        c = cfg["layernorm"]
        return lambda: kernel[(sms,)](x, w, b, y, mean, rstd, n_rows, n_cols, n_cols, n_cols, 1e-5,
                                      BLOCK=c["BLOCK"], num_warps=c["num_warps"], **extra)

    def rms(**extra):
        c = cfg["rmsnorm"]
        return lambda: rmsnorm.rmsnorm_looped_kernel[(sms,)](x, w, y, rstd, n_rows, n_cols, n_cols, n_cols, 1e-6,
                                                             HAS_W=True, BLOCK=c["BLOCK"], num_warps=c["num_warps"], **extra)

    def sm(kernel, **extra):
        c = cfg["softmax"]
        return lambda: kernel[(sms,)](x, y, n_rows, n_cols, n_cols, n_cols, BLOCK=c["BLOCK"],
                                      num_warps=c["num_warps"], **extra)

    def ref(fn):
        fn()
        torch.cuda.synchronize()
        return y.float().clone()

    def has_even(kernel):
        return "EVEN" in kernel.arg_names

    def masked(kernel):   # EVEN=False where the kernel has it
        return {"EVEN": False} if has_even(kernel) else {}

    main_ln = ln(layernorm.layernorm_looped_kernel, HAS_W=True, HAS_B=True, EVEN=False)
    main_rms = rms(**masked(rmsnorm.rmsnorm_looped_kernel))
    main_sm = sm(softmax.softmax_online_kernel, **masked(softmax.softmax_online_kernel))
    refs = {"ln": ref(main_ln), "rms": ref(main_rms), "sm": ref(main_sm)}
    rows = []
    t = row_timer(x, y, copy, rows)
    for _ in range(3):
        t("layernorm main, masked (EVEN=False)", main_ln, refs["ln"])
        t("layernorm main, EVEN", ln(layernorm.layernorm_looped_kernel, HAS_W=True, HAS_B=True, EVEN=True), refs["ln"])
        t("layernorm main (wrapper)", lambda: layernorm.layer_norm(x, w, b, 1e-5, out=y, long_rows=True), refs["ln"])
        for p1, p2 in ((False, False), (False, True), (True, True)):
            t(f"layernorm even, words in pass 1 {p1}, pass 2 {p2}", ln(ln_pairs_kernel, PASS1=p1, PASS2=p2), refs["ln"])
        t("softmax main, masked (EVEN=False)", main_sm, refs["sm"])
        if has_even(softmax.softmax_online_kernel):
            t("softmax main, EVEN", sm(softmax.softmax_online_kernel, EVEN=True), refs["sm"])
        t("softmax main (wrapper)", lambda: softmax.softmax(x, y, long_rows=True), refs["sm"])
        for p1, p2 in ((False, True), (True, True)):
            t(f"softmax even, words in pass 1 {p1}, pass 2 {p2}", sm(softmax_pairs_kernel, PASS1=p1, PASS2=p2), refs["sm"])
        t("rmsnorm main, masked (EVEN=False)", main_rms, refs["rms"])
        if has_even(rmsnorm.rmsnorm_looped_kernel):
            t("rmsnorm main, EVEN", rms(EVEN=True), refs["rms"])
        t("rmsnorm main (wrapper)", lambda: rmsnorm.rms_norm(x, w, 1e-6, out=y, long_rows=True), refs["rms"])
    json.dump({"copy_gbs": copy, "rows": rows, "torch": torch.__version__, "triton": triton.__version__},
              open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
