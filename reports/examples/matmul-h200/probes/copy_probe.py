"""A's copy into whole-line rows (4000 x 4104 bf16 into rows of 4160): the 8-byte view main uses,
a 16-byte view (complex128), and a Triton copy of 16-byte vectors; do_bench medians with L2
flushed, against a contiguous copy of the same bytes."""
import json
import sys

import torch
import triton
import triton.language as tl
import triton.testing

from portcheck.kernels.matmul import launcher


@triton.jit
def copy_rows_kernel(src, dst, n_rows, n_cols, src_stride, dst_stride, ROWS: tl.constexpr, COLS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    src_stride = tl.multiple_of(src_stride, 8)
    dst_stride = tl.multiple_of(dst_stride, 8)
    for c0 in range(0, n_cols, COLS):
        cols = c0 + tl.arange(0, COLS)[None, :]
        cols = tl.max_contiguous(tl.multiple_of(cols, 8), 8)
        ok = (rows < n_rows) & (cols < n_cols)
        v = tl.load(src + rows.to(tl.int64) * src_stride + cols, mask=ok)
        tl.store(dst + rows.to(tl.int64) * dst_stride + cols, v, mask=ok)


def main(path):
    m, k, pad = 4000, 4104, 4160
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    big = torch.empty(m, pad, device="cuda", dtype=torch.bfloat16)
    dst = big[:, :k]
    flat_src = torch.empty(m * k, device="cuda", dtype=torch.bfloat16)
    flat_dst = torch.empty_like(flat_src)
    rows = []

    def t(name, fn):
        dst.zero_()
        fn()
        torch.cuda.synchronize()
        ok = bool(torch.equal(dst, a)) if name != "contiguous copy" else None
        ms = triton.testing.do_bench(fn, warmup=10, rep=100, return_mode="median")
        rows.append({"what": name, "us": ms * 1e3, "gbs": 2 * a.numel() * 2 / (ms * 1e6), "equal": ok})
        print(json.dumps(rows[-1]), flush=True)

    for rnd in range(2):
        t("contiguous copy", lambda: flat_dst.copy_(flat_src))
        t("torch element copy", lambda: dst.copy_(a))
        t("main _copy_rows (8-byte view)", lambda: launcher._copy_rows(dst, a))
        t("16-byte view (complex128)", lambda: dst.view(torch.complex128).copy_(a.view(torch.complex128)))
        t("_repacked (allocates)", lambda: launcher._repacked(a, 64, k_major_b=False))
        for r, c in ((1, 4096), (2, 2048), (4, 1024), (8, 512), (16, 256)):
            for w in (4, 8):
                t(f"triton rows={r} cols={c} w{w}",
                  lambda r=r, c=c, w=w: copy_rows_kernel[(triton.cdiv(m, r),)](a, dst, m, k, k, pad, ROWS=r, COLS=c, num_warps=w))
    json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
