"""4000 x 4104 x 4104: A read through pointers (cp.async, 16-byte vectors: TMA strides are
multiples of 16 bytes) and B through a tensor descriptor, so A's rows off 128-byte lines cost
sectors, not lines, and need no copy. Against torch and main's autotuned launch (A copied) in the
same rounds, as wide_probe.py.

    python3 .whl/hybrid_probe.py OUT.json
"""
import json
import sys

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from portcheck.kernels import matmul as mm
from portcheck.kernels.matmul.kernel import _grouped
from portcheck.speed.timing import Timer, interleave


@triton.jit
def hybrid_kernel(a_ptr, b_desc, c_desc, M, N, K, stride_am,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr, VEC: tl.constexpr, STAGES: tl.constexpr):
    pid_m, pid_n = _grouped(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    row0 = pid_m * BLOCK_M
    col0 = pid_n * BLOCK_N
    # rows past M read row M - 1 (in bounds; the store clips them), so only K's tail is masked
    rows = tl.minimum(row0 + tl.arange(0, BLOCK_M), M - 1)
    ks = tl.arange(0, BLOCK_K)
    stride_am = stride_am // VEC * VEC   # (the launcher knows: TMA strides are 16-byte multiples)
    a_rows = a_ptr + rows.to(tl.int64)[:, None] * stride_am + ks[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, K // BLOCK_K, num_stages=STAGES):
        a = tl.load(a_rows + k * BLOCK_K)
        b = b_desc.load([k * BLOCK_K, col0])
        acc = tl.dot(a, b, acc)
    if K % BLOCK_K:
        k = K // BLOCK_K
        a = tl.load(a_rows + k * BLOCK_K, mask=(k * BLOCK_K + ks)[None, :] < K, other=0.0)
        b = b_desc.load([k * BLOCK_K, col0])
        acc = tl.dot(a, b, acc)
    c_desc.store([row0, col0], acc.to(c_desc.dtype))


def hybrid(a, b, out, bm, bn, bk, g, w, s):
    m, k = a.shape
    n = b.shape[1]
    b_desc = TensorDescriptor.from_tensor(b, [bk, bn])
    c_desc = TensorDescriptor.from_tensor(out, [bm, bn])
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    hybrid_kernel[grid](a, b_desc, c_desc, m, n, k, a.stride(0), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                        GROUP_M=g, VEC=8, STAGES=s, num_warps=w, num_stages=s)


SHAPES = [(4000, 4104, 4104), (4096, 4104, 4104), (4096, 4096, 4096)]
CONFIGS = [(128, 256, 64, 8, 8, 3), (256, 128, 64, 8, 8, 3), (128, 256, 64, 1, 8, 3),
           (256, 128, 64, 1, 8, 3), (128, 128, 64, 8, 4, 4), (128, 256, 64, 8, 8, 4), (128, 128, 64, 8, 8, 4)]


def main(path):
    rows = []
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        ref = (a.float() @ b.float())
        timers = {"torch": Timer([lambda: torch.matmul(a, b, out=out)], repeats=30, method="do_bench"),
                  "main autotuned": Timer([lambda: mm.matmul(a, b, out=out)], repeats=30, method="do_bench")}
        errs = {}
        for c in CONFIGS:
            name = "hybrid %dx%dx%d g%d w%d s%d" % c
            try:
                out.zero_()
                hybrid(a, b, out, *c)
                torch.cuda.synchronize()
                errs[name] = float((out.float() - ref).abs().max())
            except Exception as exc:  # noqa: BLE001
                rows.append({"shape": [m, n, k], "name": name, "error": str(exc)[:200]})
                print(json.dumps(rows[-1]), flush=True)
                continue
            timers[name] = Timer([lambda c=c: hybrid(a, b, out, *c)], repeats=30, method="do_bench")
        got = interleave(timers)
        base = got["torch"].stats.median_ms
        for name, t in got.items():
            if isinstance(t, Exception):
                rows.append({"shape": [m, n, k], "name": name, "error": str(t)[:160]})
            else:
                rows.append({"shape": [m, n, k], "name": name, "us": t.stats.median_ms * 1e3,
                             "vs_torch": base / t.stats.median_ms, "drift": t.drift, "max_err": errs.get(name)})
            print(json.dumps(rows[-1]), flush=True)
    json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
