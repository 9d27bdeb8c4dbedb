"""Long rows: the chunk prefetch runs across the pass and row boundaries (pass 1's last step loads
pass 2's first chunk, pass 2's last step loads the next row's first chunk), against the project's
looped kernels in the same run (bf16 4096 x 131072, one program per SM)."""
import json
import sys

import torch
import triton
import triton.language as tl
import triton.testing

from portcheck.kernels import layernorm, rmsnorm, softmax
from portcheck.speed.ceilings import measure_copy


@triton.jit
def rms_pipe(x_ptr, w_ptr, y_ptr, rstd_ptr, n_rows, n_cols, x_stride, y_stride, eps, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    first = tl.program_id(0)
    last = (tl.cdiv(n_cols, BLOCK) - 1) * BLOCK
    nxt = tl.load(x_ptr + tl.cast(first, tl.int64) * x_stride + cols, mask=cols < n_cols, other=0.0,
                  eviction_policy="evict_last")
    for row in range(first, n_rows, tl.num_programs(0)):
        row64 = tl.cast(row, tl.int64)
        x_row = x_ptr + row64 * x_stride
        y_row = y_ptr + row64 * y_stride
        squares = tl.zeros([BLOCK], tl.float32)
        for start in range(0, n_cols, BLOCK):
            x = nxt.to(tl.float32)
            if start == last:
                nxt = tl.load(x_row + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_first")
            else:
                ahead = start + BLOCK + cols
                nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_last")
            squares += x * x
        rstd = tl.math.rsqrt(tl.sum(squares, axis=0) / n_cols + eps)
        tl.store(rstd_ptr + row64, rstd)
        after = row + tl.num_programs(0)
        x_next = x_ptr + tl.cast(after, tl.int64) * x_stride
        for start in range(0, n_cols, BLOCK):
            ok = start + cols < n_cols
            y = nxt.to(tl.float32) * rstd
            if start == last:
                nxt = tl.load(x_next + cols, mask=(cols < n_cols) & (after < n_rows), other=0.0,
                              eviction_policy="evict_last")
            else:
                ahead = start + BLOCK + cols
                nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_first")
            y = y * tl.load(w_ptr + start + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=ok, eviction_policy="evict_first")


@triton.jit
def ln_pipe(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_rows, n_cols, x_stride, y_stride, eps,
            BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    first = tl.program_id(0)
    last = (tl.cdiv(n_cols, BLOCK) - 1) * BLOCK
    nxt = tl.load(x_ptr + tl.cast(first, tl.int64) * x_stride + cols, mask=cols < n_cols, other=0.0,
                  eviction_policy="evict_last")
    for row in range(first, n_rows, tl.num_programs(0)):
        row64 = tl.cast(row, tl.int64)
        x_row = x_ptr + row64 * x_stride
        y_row = y_ptr + row64 * y_stride
        mean = 0.0
        m2 = 0.0
        count = 0.0
        for start in range(0, n_cols, BLOCK):
            ok = start + cols < n_cols
            x = nxt.to(tl.float32)
            if start == last:
                nxt = tl.load(x_row + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_first")
            else:
                ahead = start + BLOCK + cols
                nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_last")
            size = tl.minimum(n_cols - start, BLOCK).to(tl.float32)
            chunk_mean = tl.sum(x, axis=0) / size
            centred = tl.where(ok, x - chunk_mean, 0.0)
            chunk_m2 = tl.sum(centred * centred, axis=0)
            total = count + size
            delta = chunk_mean - mean
            mean += delta * (size / total)
            m2 += chunk_m2 + delta * delta * (count * size / total)
            count = total
        row_mean = mean
        rstd = tl.math.rsqrt(m2 / n_cols + eps)
        tl.store(mean_ptr + row64, row_mean)
        tl.store(rstd_ptr + row64, rstd)
        after = row + tl.num_programs(0)
        x_next = x_ptr + tl.cast(after, tl.int64) * x_stride
        for start in range(0, n_cols, BLOCK):
            ok = start + cols < n_cols
            x = nxt.to(tl.float32)
            if start == last:
                nxt = tl.load(x_next + cols, mask=(cols < n_cols) & (after < n_rows), other=0.0,
                              eviction_policy="evict_last")
            else:
                ahead = start + BLOCK + cols
                nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_first")
            y = (x - row_mean) * rstd
            y = y * tl.load(w_ptr + start + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
            y = y + tl.load(b_ptr + start + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=ok, eviction_policy="evict_first")


@triton.jit
def softmax_pipe(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    first = tl.program_id(0)
    last = (tl.cdiv(n_cols, BLOCK) - 1) * BLOCK
    nxt = tl.load(x_ptr + tl.cast(first, tl.int64) * x_stride + cols, mask=cols < n_cols,
                  other=-float("inf"), eviction_policy="evict_last")
    for row in range(first, n_rows, tl.num_programs(0)):
        row64 = tl.cast(row, tl.int64)
        x_row = x_ptr + row64 * x_stride
        y_row = y_ptr + row64 * y_stride
        m = tl.full([BLOCK], -float("inf"), tl.float32)
        s = tl.zeros([BLOCK], tl.float32)
        for start in range(0, n_cols, BLOCK):
            x = nxt.to(tl.float32)
            if start == last:
                nxt = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"), eviction_policy="evict_first")
            else:
                ahead = start + BLOCK + cols
                nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=-float("inf"), eviction_policy="evict_last")
            d = x - m
            e = tl.where(x == -float("inf"), 0.0, tl.exp(-tl.abs(d)))
            s = tl.where(d > 0, s * e + 1.0, s + e)
            m = tl.maximum(m, x)
        row_max = tl.max(m, axis=0)
        total = tl.sum(tl.where(s == 0.0, 0.0, s * tl.exp(m - row_max)), axis=0)
        inv = tl.math.div_rn(1.0, total)
        after = row + tl.num_programs(0)
        x_next = x_ptr + tl.cast(after, tl.int64) * x_stride
        for start in range(0, n_cols, BLOCK):
            x = nxt.to(tl.float32)
            if start == last:
                nxt = tl.load(x_next + cols, mask=(cols < n_cols) & (after < n_rows), other=-float("inf"),
                              eviction_policy="evict_last")
            else:
                ahead = start + BLOCK + cols
                nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=-float("inf"), eviction_policy="evict_first")
            y = tl.exp(x - row_max) * inv
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=start + cols < n_cols,
                     eviction_policy="evict_first")


def main():
    copy = measure_copy()["gbs"]
    R, C = 4096, 131072
    x = torch.randn(R, C, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(C, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(C, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    r = torch.empty(R, device="cuda")
    mu = torch.empty(R, device="cuda")
    P = torch.cuda.get_device_properties(0).multi_processor_count
    nbytes = 2 * x.numel() * 2
    rows = []

    def t(name, fn, ref=None):
        fn()
        torch.cuda.synchronize()
        err = float((y.float() - ref).abs().max()) if ref is not None else None
        ms = triton.testing.do_bench(fn, warmup=10, rep=100, return_mode="median")
        rows.append({"what": name, "us": ms * 1e3, "of_copy": nbytes / (ms * 1e6) / copy, "err": err})
        print(json.dumps(rows[-1]), flush=True)

    for rnd in range(2):
        t("rmsnorm main", lambda: rmsnorm.rms_norm(x, w, 1e-6, out=y, rstd=r, long_rows=True))
        ref = y.float().clone()
        for blk in (16384, 32768):
            t(f"rmsnorm pipe block={blk}",
              lambda blk=blk: rms_pipe[(P,)](x, w, y, r, R, C, C, C, 1e-6, BLOCK=blk, num_warps=32), ref)
        t("layernorm main", lambda: layernorm.layer_norm(x, w, b, 1e-5, out=y, mean=mu, rstd=r, long_rows=True))
        ref = y.float().clone()
        for blk in (16384, 32768):
            t(f"layernorm pipe block={blk}",
              lambda blk=blk: ln_pipe[(P,)](x, w, b, y, mu, r, R, C, C, C, 1e-5, BLOCK=blk, num_warps=32), ref)
        t("softmax main", lambda: softmax.softmax(x, y, long_rows=True))
        ref = y.float().clone()
        for blk in (8192, 16384):
            t(f"softmax pipe block={blk}",
              lambda blk=blk: softmax_pipe[(P,)](x, y, R, C, C, C, BLOCK=blk, num_warps=32), ref)
    json.dump({"copy_gbs": copy, "rows": rows}, open(sys.argv[1], "w"), indent=1)


if __name__ == "__main__":
    main()
