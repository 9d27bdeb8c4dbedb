"""Long rows (bf16 4096 x 131072), second round of this session: where the weight's cost comes
from, and cheaper per-element work.

`../seventh-session/weight-ahead.json` showed the weight (and bias) costing RMSNorm 0.92 -> 0.82 of copy and
LayerNorm 0.86 -> 0.72, and loading them a chunk ahead made it worse (registers). Each program
reads the whole weight once per row from L2, as many bytes as the row's second read. Tried here:
- R rows a program (R = 2, 16384 columns each): one weight load serves both rows, halving its
  traffic, with twice the rows in L2 between the passes;
- the weight loaded with no L2 policy instead of evict_last;
- LayerNorm's pass 1 with a state per 8-element group (mean, M2, count, merged by Chan's
  formula within the thread) instead of two reductions across the program per chunk;
- softmax exactly as main (-inf and NaN rows included), its exp as exp2 of (x - m) * log2e
  (ex2.approx.ftz: tl.exp lowers to the non-ftz ex2 whose denormal fix-up costs instructions),
  and the -inf test per group instead of per element.

    python3 shared_weight.py OUT.json        # on the GPU
    python3 shared_weight.py --check-spills  # cross-compile each variant for sm_90a here
"""
import json
import os
import sys

import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py beside it
from rows_common import bench_rows, row_timer, sm90a_resources  # noqa: E402

# (rows a program, chunk, weight's L2 policy, LayerNorm state per group)
NORM_VARIANTS = [(1, 32768, "evict_last", False), (1, 32768, "", False), (2, 16384, "evict_last", False),
                 (2, 16384, "", False), (1, 16384, "evict_last", True), (1, 32768, "evict_last", True),
                 (2, 16384, "", True), (2, 8192, "", True)]
# softmax (chunk, exp2 with ftz, -inf test per group)
SOFTMAX_VARIANTS = [(16384, False, False), (16384, True, False), (16384, False, True), (16384, True, True),
                    (8192, True, True)]


@triton.jit
def rms_kernel(x_ptr, w_ptr, y_ptr, n_rows, n_cols, eps, R: tl.constexpr, B: tl.constexpr,
               W_POLICY: tl.constexpr, GROUPED: tl.constexpr):
    c = tl.arange(0, B)[None, :]
    r = tl.arange(0, R)[:, None]
    for tile in range(tl.program_id(0), tl.cdiv(n_rows, R), tl.num_programs(0)):
        rows = tile * R + r
        rok = rows < n_rows
        x_rows = x_ptr + rows.to(tl.int64) * n_cols
        y_rows = y_ptr + rows.to(tl.int64) * n_cols
        squares = tl.zeros([R, B], tl.float32)
        nxt = tl.load(x_rows + c, mask=rok & (c < n_cols), other=0.0, eviction_policy="evict_last")
        for start in range(0, n_cols, B):
            x = nxt.to(tl.float32)
            ahead = start + B + c
            nxt = tl.load(x_rows + ahead, mask=rok & (ahead < n_cols), other=0.0, eviction_policy="evict_last")
            squares += x * x
        rstd = tl.math.rsqrt(tl.sum(squares, axis=1) / n_cols + eps)[:, None]
        nxt = tl.load(x_rows + c, mask=rok & (c < n_cols), other=0.0, eviction_policy="evict_first")
        for start in range(0, n_cols, B):
            ok = start + c < n_cols
            x = nxt.to(tl.float32)
            ahead = start + B + c
            nxt = tl.load(x_rows + ahead, mask=rok & (ahead < n_cols), other=0.0, eviction_policy="evict_first")
            w = tl.load(w_ptr + start + c, mask=ok, other=0.0, eviction_policy=W_POLICY).to(tl.float32)
            tl.store(y_rows + start + c, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=rok & ok,
                     eviction_policy="evict_first")


@triton.jit
def ln_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_rows, n_cols, eps, R: tl.constexpr, B: tl.constexpr,
              W_POLICY: tl.constexpr, GROUPED: tl.constexpr):
    c = tl.arange(0, B)[None, :]
    r = tl.arange(0, R)[:, None]
    for tile in range(tl.program_id(0), tl.cdiv(n_rows, R), tl.num_programs(0)):
        rows = tile * R + r
        rok = rows < n_rows
        x_rows = x_ptr + rows.to(tl.int64) * n_cols
        y_rows = y_ptr + rows.to(tl.int64) * n_cols
        nxt = tl.load(x_rows + c, mask=rok & (c < n_cols), other=0.0, eviction_policy="evict_last")
        if GROUPED:
            # per 8-element group (one thread's 16-byte load): mean, M2 and count, no reduction
            # across the program until the row ends
            g_zero = tl.sum(tl.reshape(tl.where(c < 0, nxt.to(tl.float32), 0.0), [R, B // 8, 8]), axis=2)
            mean = g_zero
            m2 = g_zero
            count = g_zero
            for start in range(0, n_cols, B):
                ok = tl.reshape(start + c + r * 0 < n_cols, [R, B // 8, 8])
                x = tl.reshape(nxt.to(tl.float32), [R, B // 8, 8])
                ahead = start + B + c
                nxt = tl.load(x_rows + ahead, mask=rok & (ahead < n_cols), other=0.0, eviction_policy="evict_last")
                size = tl.sum(ok.to(tl.float32), axis=2)
                g_mean = tl.sum(x, axis=2) / tl.maximum(size, 1.0)
                centred = tl.where(ok, x - g_mean[:, :, None], 0.0)
                g_m2 = tl.sum(centred * centred, axis=2)
                total = count + size
                delta = g_mean - mean
                frac = size / tl.maximum(total, 1.0)
                mean += delta * frac
                m2 += g_m2 + delta * delta * count * frac
                count = total
            row_mean = tl.sum(mean * count, axis=1) / n_cols
            spread = mean - row_mean[:, None]
            row_m2 = tl.sum(m2 + spread * spread * count, axis=1)
        else:
            row_mean = tl.zeros([R], tl.float32)
            row_m2 = tl.zeros([R], tl.float32)
            count = 0.0
            for start in range(0, n_cols, B):
                ok = start + c < n_cols
                x = nxt.to(tl.float32)
                ahead = start + B + c
                nxt = tl.load(x_rows + ahead, mask=rok & (ahead < n_cols), other=0.0, eviction_policy="evict_last")
                size = tl.minimum(n_cols - start, B).to(tl.float32)
                chunk_mean = tl.sum(x, axis=1) / size
                centred = tl.where(ok, x - chunk_mean[:, None], 0.0)
                chunk_m2 = tl.sum(centred * centred, axis=1)
                total = count + size
                delta = chunk_mean - row_mean
                row_mean += delta * (size / total)
                row_m2 += chunk_m2 + delta * delta * (count * size / total)
                count = total
        rstd = tl.math.rsqrt(row_m2 / n_cols + eps)[:, None]
        row_mean = row_mean[:, None]
        nxt = tl.load(x_rows + c, mask=rok & (c < n_cols), other=0.0, eviction_policy="evict_first")
        for start in range(0, n_cols, B):
            ok = start + c < n_cols
            x = nxt.to(tl.float32)
            ahead = start + B + c
            nxt = tl.load(x_rows + ahead, mask=rok & (ahead < n_cols), other=0.0, eviction_policy="evict_first")
            w = tl.load(w_ptr + start + c, mask=ok, other=0.0, eviction_policy=W_POLICY).to(tl.float32)
            b = tl.load(b_ptr + start + c, mask=ok, other=0.0, eviction_policy=W_POLICY).to(tl.float32)
            tl.store(y_rows + start + c, ((x - row_mean) * rstd * w + b).to(y_ptr.dtype.element_ty),
                     mask=rok & ok, eviction_policy="evict_first")


@triton.jit
def _exp(x, EXP2: tl.constexpr):
    if EXP2:
        return tl.math.exp2(x * 1.4426950408889634)
    else:
        return tl.exp(x)


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr, EXP2: tl.constexpr,
                   GROUP_TEST: tl.constexpr):
    """main's softmax_online_kernel, -inf / NaN / +inf semantics included."""
    GROUP: tl.constexpr = 8
    LANES: tl.constexpr = BLOCK // GROUP
    cols = tl.arange(0, BLOCK)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + tl.cast(row, tl.int64) * n_cols
        y_row = y_ptr + tl.cast(row, tl.int64) * n_cols
        nxt = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"), eviction_policy="evict_last")
        zero = tl.sum(tl.reshape(tl.where(cols < 0, nxt.to(tl.float32), 0.0), [LANES, GROUP]), axis=1)
        m = zero - float("inf")
        s = zero
        for start in range(0, n_cols, BLOCK):
            x = tl.reshape(nxt.to(tl.float32), [LANES, GROUP])
            ahead = start + BLOCK + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=-float("inf"), eviction_policy="evict_last")
            g_max = tl.max(x, axis=1)
            if GROUP_TEST:   # a group of only -inf has g_max = -inf and sums to 0
                g_sum = tl.where(g_max == -float("inf"), 0.0, tl.sum(_exp(x - g_max[:, None], EXP2), axis=1))
            else:
                g_sum = tl.sum(tl.where(x == -float("inf"), 0.0, _exp(x - g_max[:, None], EXP2)), axis=1)
            new = tl.maximum(m, g_max)
            s = tl.where(s == 0.0, 0.0, s * _exp(m - new, EXP2)) + \
                tl.where(g_sum == 0.0, 0.0, g_sum * _exp(g_max - new, EXP2))
            m = new
        row_max = tl.max(m, axis=0)
        total = tl.sum(tl.where(s == 0.0, 0.0, s * _exp(m - row_max, EXP2)), axis=0)
        inv = tl.math.div_rn(1.0, total)
        nxt = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"), eviction_policy="evict_first")
        for start in range(0, n_cols, BLOCK):
            x = nxt.to(tl.float32)
            ahead = start + BLOCK + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=-float("inf"), eviction_policy="evict_first")
            y = _exp(x - row_max, EXP2) * inv
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=start + cols < n_cols,
                     eviction_policy="evict_first")



NORM_SIG = {"n_rows": "i32", "n_cols": "i32", "eps": "fp32", "R": "constexpr", "B": "constexpr",
            "W_POLICY": "constexpr", "GROUPED": "constexpr"}


def check_spills() -> None:
    for rows, block, policy, grouped in NORM_VARIANTS:
        consts = {"R": rows, "B": block, "W_POLICY": policy, "GROUPED": grouped}
        res = {}
        if not grouped:
            res["rmsnorm"] = sm90a_resources(rms_kernel, {"x_ptr": "*bf16", "w_ptr": "*bf16", "y_ptr": "*bf16", **NORM_SIG},
                                      consts, 32)
        res["layernorm"] = sm90a_resources(ln_kernel, {"x_ptr": "*bf16", "w_ptr": "*bf16", "b_ptr": "*bf16",
                                                "y_ptr": "*bf16", **NORM_SIG}, consts, 32)
        print(json.dumps({"triton": triton.__version__, **consts, **res}))
    for block, exp2, group_test in SOFTMAX_VARIANTS:
        consts = {"BLOCK": block, "EXP2": exp2, "GROUP_TEST": group_test}
        sm = sm90a_resources(softmax_kernel, {"x_ptr": "*bf16", "y_ptr": "*bf16", "n_rows": "i32", "n_cols": "i32",
                                       "BLOCK": "constexpr", "EXP2": "constexpr", "GROUP_TEST": "constexpr"},
                      consts, 32)
        print(json.dumps({"triton": triton.__version__, **consts, "softmax": sm}))


def main(path: str) -> None:
    from portcheck.kernels import layernorm, rmsnorm, softmax
    r = bench_rows()
    x, w, b, y = r.x, r.w, r.b, r.y
    n_rows, n_cols, sms, copy = r.n_rows, r.n_cols, r.sms, r.copy
    rows = []
    t = row_timer(x, y, copy, rows)
    for _ in range(2):
        t("rmsnorm main, weight", lambda: rmsnorm.rms_norm(x, w, 1e-6, out=y, long_rows=True))
        ref = y.float().clone()
        for r, bl, pol, grouped in NORM_VARIANTS:
            if not grouped:
                t(f"rmsnorm R={r} B={bl} w_policy={pol or 'none'}", lambda r=r, bl=bl, pol=pol: rms_kernel[(sms,)](
                    x, w, y, n_rows, n_cols, 1e-6, R=r, B=bl, W_POLICY=pol, GROUPED=False, num_warps=32), ref)
        t("layernorm main, weight and bias", lambda: layernorm.layer_norm(x, w, b, 1e-5, out=y, long_rows=True))
        ref = y.float().clone()
        for r, bl, pol, grouped in NORM_VARIANTS:
            t(f"layernorm R={r} B={bl} w_policy={pol or 'none'} grouped={grouped}",
              lambda r=r, bl=bl, pol=pol, gr=grouped: ln_kernel[(sms,)](
                  x, w, b, y, n_rows, n_cols, 1e-5, R=r, B=bl, W_POLICY=pol, GROUPED=gr, num_warps=32), ref)
        t("softmax main", lambda: softmax.softmax(x, out=y, long_rows=True))
        ref = y.float().clone()
        for bl, exp2, gt in SOFTMAX_VARIANTS:
            t(f"softmax B={bl} exp2={exp2} group_test={gt}", lambda bl=bl, e=exp2, gt=gt: softmax_kernel[(sms,)](
                x, y, n_rows, n_cols, BLOCK=bl, EXP2=e, GROUP_TEST=gt, num_warps=32), ref)
    json.dump({"copy_gbs": copy, "rows": rows}, open(path, "w"), indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "--check-spills":
        check_spills()
    else:
        main(sys.argv[1])
