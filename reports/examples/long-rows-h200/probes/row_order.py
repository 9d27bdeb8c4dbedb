"""Long rows (bf16 4096 x 131072), third round of this session: when pass 2 starts, and the order
the passes walk a row.

- main's RMSNorm stores rstd between the passes, and a store may alias x, so the compiler issues
  pass 2's first loads only after the reduction, the rsqrt and the store (sm_90a SASS of main's
  kernel against `weight_ahead.py`'s, which stores nothing and ran at 0.85 of copy against 0.82).
  Here the statistics are stored after pass 2, and with EARLY pass 2's first chunk is loaded
  before the reduction;
- ALT: pass 1 walks the row forward and pass 2 backward on a program's even rows, the other way
  round on its odd rows, so pass 2 re-reads first what pass 1 read last (the likeliest in L2), and
  consecutive rows read the weight in opposite orders, so its chunks read last are still in L1;
  XCG: x read with ld.global.cg (L2 only; PTX takes no eviction hint with it), leaving L1 to
  the weight (Triton 3.6's eviction_policy is both an L1 and an L2 hint: main's evict_last
  keeps pass 1's x lines in L1 too);
- softmax as this session's `shared_weight.py` found fastest (exp2, -inf tested per group), with
  the same EARLY and ALT.

    python3 row_order.py OUT.json        # on the GPU
    python3 row_order.py --check-spills  # cross-compile each variant for sm_90a here
"""
import json
import os
import sys

import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py beside it
from rows_common import bench_rows, row_timer, sm90a_resources  # noqa: E402

# (EARLY, ALT, XCG) for every family; main-like is (False, False, False) with the stores moved
VARIANTS = [(False, False, False), (True, False, False), (False, True, False), (False, True, True),
            (True, True, True)]
NORM_BLOCK = 32768
SOFTMAX_BLOCK = 16384


@triton.jit
def _chunk(i, n_chunks, back, B: tl.constexpr):
    """Start of the i-th chunk a pass visits: forward, or backward from the last chunk when back
    is 1; out of range (masked by the caller) past the last one."""
    return tl.where(back == 1, (n_chunks - 1 - i) * B, i * B)


@triton.jit
def _x(x_row, offs, n_cols, other, policy: tl.constexpr, XCG: tl.constexpr):
    ok = (offs >= 0) & (offs < n_cols)
    if XCG:
        return tl.load(x_row + offs, mask=ok, other=other, cache_modifier=".cg")   # (no L1 policy with .cg)
    else:
        return tl.load(x_row + offs, mask=ok, other=other, eviction_policy=policy)


@triton.jit
def rms_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, n_rows, n_cols, eps, B: tl.constexpr,
               EARLY: tl.constexpr, ALT: tl.constexpr, XCG: tl.constexpr):
    cols = tl.arange(0, B)
    n_chunks = tl.cdiv(n_cols, B)
    back1 = 0
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + tl.cast(row, tl.int64) * n_cols
        y_row = y_ptr + tl.cast(row, tl.int64) * n_cols
        back2 = 1 - back1 if ALT else 0
        squares = tl.zeros([B], tl.float32)
        nxt = _x(x_row, _chunk(0, n_chunks, back1, B) + cols, n_cols, 0.0, "evict_last", XCG)
        for i in range(0, n_chunks):
            x = nxt.to(tl.float32)
            nxt = _x(x_row, _chunk(i + 1, n_chunks, back1, B) + cols, n_cols, 0.0, "evict_last", XCG)
            squares += x * x
        if EARLY:
            nxt = _x(x_row, _chunk(0, n_chunks, back2, B) + cols, n_cols, 0.0, "evict_first", XCG)
        rstd = tl.math.rsqrt(tl.sum(squares, axis=0) / n_cols + eps)
        if not EARLY:
            nxt = _x(x_row, _chunk(0, n_chunks, back2, B) + cols, n_cols, 0.0, "evict_first", XCG)
        for i in range(0, n_chunks):
            offs = _chunk(i, n_chunks, back2, B) + cols
            ok = offs < n_cols
            x = nxt.to(tl.float32)
            nxt = _x(x_row, _chunk(i + 1, n_chunks, back2, B) + cols, n_cols, 0.0, "evict_first", XCG)
            w = tl.load(w_ptr + offs, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
            tl.store(y_row + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=ok, eviction_policy="evict_first")
        tl.store(rstd_ptr + row, rstd)
        if ALT:
            back1 = 1 - back1


@triton.jit
def ln_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_rows, n_cols, eps, B: tl.constexpr,
              EARLY: tl.constexpr, ALT: tl.constexpr, XCG: tl.constexpr):
    cols = tl.arange(0, B)
    n_chunks = tl.cdiv(n_cols, B)
    back1 = 0
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + tl.cast(row, tl.int64) * n_cols
        y_row = y_ptr + tl.cast(row, tl.int64) * n_cols
        back2 = 1 - back1 if ALT else 0
        mean = 0.0
        m2 = 0.0
        count = 0.0
        nxt = _x(x_row, _chunk(0, n_chunks, back1, B) + cols, n_cols, 0.0, "evict_last", XCG)
        for i in range(0, n_chunks):
            start = _chunk(i, n_chunks, back1, B)
            ok = start + cols < n_cols
            x = nxt.to(tl.float32)
            nxt = _x(x_row, _chunk(i + 1, n_chunks, back1, B) + cols, n_cols, 0.0, "evict_last", XCG)
            size = tl.minimum(n_cols - start, B).to(tl.float32)
            chunk_mean = tl.sum(x, axis=0) / size
            centred = tl.where(ok, x - chunk_mean, 0.0)
            chunk_m2 = tl.sum(centred * centred, axis=0)
            total = count + size
            delta = chunk_mean - mean
            mean += delta * (size / total)
            m2 += chunk_m2 + delta * delta * (count * size / total)
            count = total
        if EARLY:
            nxt = _x(x_row, _chunk(0, n_chunks, back2, B) + cols, n_cols, 0.0, "evict_first", XCG)
        rstd = tl.math.rsqrt(m2 / n_cols + eps)
        if not EARLY:
            nxt = _x(x_row, _chunk(0, n_chunks, back2, B) + cols, n_cols, 0.0, "evict_first", XCG)
        for i in range(0, n_chunks):
            offs = _chunk(i, n_chunks, back2, B) + cols
            ok = offs < n_cols
            x = nxt.to(tl.float32)
            nxt = _x(x_row, _chunk(i + 1, n_chunks, back2, B) + cols, n_cols, 0.0, "evict_first", XCG)
            w = tl.load(w_ptr + offs, mask=ok, other=0.0).to(tl.float32)
            b = tl.load(b_ptr + offs, mask=ok, other=0.0).to(tl.float32)
            tl.store(y_row + offs, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=ok,
                     eviction_policy="evict_first")
        tl.store(mean_ptr + row, mean)
        tl.store(rstd_ptr + row, rstd)
        if ALT:
            back1 = 1 - back1


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr, EARLY: tl.constexpr,
                   ALT: tl.constexpr, XCG: tl.constexpr):
    """main's softmax_online_kernel (-inf / NaN / +inf semantics included) with exp2 (ftz) and the
    -inf test per group."""
    GROUP: tl.constexpr = 8
    LANES: tl.constexpr = BLOCK // GROUP
    LOG2E: tl.constexpr = 1.4426950408889634
    cols = tl.arange(0, BLOCK)
    n_chunks = tl.cdiv(n_cols, BLOCK)
    back1 = 0
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + tl.cast(row, tl.int64) * n_cols
        y_row = y_ptr + tl.cast(row, tl.int64) * n_cols
        back2 = 1 - back1 if ALT else 0
        nxt = _x(x_row, _chunk(0, n_chunks, back1, BLOCK) + cols, n_cols, -float("inf"), "evict_last", XCG)
        zero = tl.sum(tl.reshape(tl.where(cols < 0, nxt.to(tl.float32), 0.0), [LANES, GROUP]), axis=1)
        m = zero - float("inf")
        s = zero
        for i in range(0, n_chunks):
            x = tl.reshape(nxt.to(tl.float32), [LANES, GROUP])
            nxt = _x(x_row, _chunk(i + 1, n_chunks, back1, BLOCK) + cols, n_cols, -float("inf"), "evict_last", XCG)
            g_max = tl.max(x, axis=1)
            g_sum = tl.where(g_max == -float("inf"), 0.0,
                             tl.sum(tl.math.exp2((x - g_max[:, None]) * LOG2E), axis=1))
            new = tl.maximum(m, g_max)
            s = tl.where(s == 0.0, 0.0, s * tl.math.exp2((m - new) * LOG2E)) + \
                tl.where(g_sum == 0.0, 0.0, g_sum * tl.math.exp2((g_max - new) * LOG2E))
            m = new
        if EARLY:
            nxt = _x(x_row, _chunk(0, n_chunks, back2, BLOCK) + cols, n_cols, -float("inf"), "evict_first", XCG)
        row_max = tl.max(m, axis=0)
        total = tl.sum(tl.where(s == 0.0, 0.0, s * tl.math.exp2((m - row_max) * LOG2E)), axis=0)
        inv = tl.math.div_rn(1.0, total)
        if not EARLY:
            nxt = _x(x_row, _chunk(0, n_chunks, back2, BLOCK) + cols, n_cols, -float("inf"), "evict_first", XCG)
        for i in range(0, n_chunks):
            offs = _chunk(i, n_chunks, back2, BLOCK) + cols
            x = nxt.to(tl.float32)
            nxt = _x(x_row, _chunk(i + 1, n_chunks, back2, BLOCK) + cols, n_cols, -float("inf"), "evict_first", XCG)
            y = tl.math.exp2((x - row_max) * LOG2E) * inv
            tl.store(y_row + offs, y.to(y_ptr.dtype.element_ty), mask=offs < n_cols, eviction_policy="evict_first")
        if ALT:
            back1 = 1 - back1



FLAGS = {"EARLY": "constexpr", "ALT": "constexpr", "XCG": "constexpr"}


def check_spills() -> None:
    sizes = {"n_rows": "i32", "n_cols": "i32"}
    for early, alt, xcg in VARIANTS:
        flags = {"EARLY": early, "ALT": alt, "XCG": xcg}
        rms = sm90a_resources(rms_kernel, {"x_ptr": "*bf16", "w_ptr": "*bf16", "y_ptr": "*bf16", "rstd_ptr": "*fp32",
                                    **sizes, "eps": "fp32", "B": "constexpr", **FLAGS},
                       {"B": NORM_BLOCK, **flags}, 32)
        ln = sm90a_resources(ln_kernel, {"x_ptr": "*bf16", "w_ptr": "*bf16", "b_ptr": "*bf16", "y_ptr": "*bf16",
                                  "mean_ptr": "*fp32", "rstd_ptr": "*fp32", **sizes, "eps": "fp32",
                                  "B": "constexpr", **FLAGS}, {"B": NORM_BLOCK, **flags}, 32)
        sm = sm90a_resources(softmax_kernel, {"x_ptr": "*bf16", "y_ptr": "*bf16", **sizes, "BLOCK": "constexpr", **FLAGS},
                      {"BLOCK": SOFTMAX_BLOCK, **flags}, 32)
        print(json.dumps({"triton": triton.__version__, **flags, "rmsnorm": rms, "layernorm": ln, "softmax": sm}))


def main(path: str) -> None:
    from portcheck.kernels import layernorm, rmsnorm, softmax
    r = bench_rows()
    x, w, b, y, mean, rstd = r.x, r.w, r.b, r.y, r.mean, r.rstd
    n_rows, n_cols, sms, copy = r.n_rows, r.n_cols, r.sms, r.copy
    rows = []
    t = row_timer(x, y, copy, rows)
    for _ in range(2):
        t("rmsnorm main, weight", lambda: rmsnorm.rms_norm(x, w, 1e-6, out=y, long_rows=True))
        ref = y.float().clone()
        for early, alt, xcg in VARIANTS:
            t(f"rmsnorm early={early} alt={alt} xcg={xcg}", lambda e=early, a=alt, c=xcg: rms_kernel[(sms,)](
                x, w, y, rstd, n_rows, n_cols, 1e-6, B=NORM_BLOCK, EARLY=e, ALT=a, XCG=c, num_warps=32), ref)
        t("layernorm main, weight and bias", lambda: layernorm.layer_norm(x, w, b, 1e-5, out=y, long_rows=True))
        ref = y.float().clone()
        for early, alt, xcg in VARIANTS:
            t(f"layernorm early={early} alt={alt} xcg={xcg}", lambda e=early, a=alt, c=xcg: ln_kernel[(sms,)](
                x, w, b, y, mean, rstd, n_rows, n_cols, 1e-5, B=NORM_BLOCK, EARLY=e, ALT=a, XCG=c, num_warps=32),
              ref)
        t("softmax main", lambda: softmax.softmax(x, out=y, long_rows=True))
        ref = y.float().clone()
        for early, alt, xcg in VARIANTS:
            t(f"softmax early={early} alt={alt} xcg={xcg}", lambda e=early, a=alt, c=xcg: softmax_kernel[(sms,)](
                x, y, n_rows, n_cols, BLOCK=SOFTMAX_BLOCK, EARLY=e, ALT=a, XCG=c, num_warps=32), ref)
    json.dump({"copy_gbs": copy, "rows": rows}, open(path, "w"), indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "--check-spills":
        check_spills()
    else:
        main(sys.argv[1])
