"""matmul bf16 at 4096^3 and 8192^3: a persistent TMA kernel (one program per SM walking the
tiles in grouped order; options: the loop flattened, warp specialisation, the C tile stored in
two halves) against main's matmul and torch in the same rounds (do_bench, L2 flushed)."""
import json
import sys
import time

import torch
import triton
import triton.language as tl
import triton.testing
from triton.tools.tensor_descriptor import TensorDescriptor

from portcheck.kernels.matmul import matmul


@triton.jit
def mm_persist(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr,
               SUBTILE: tl.constexpr, FLATTEN: tl.constexpr, WS: tl.constexpr):
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    per_group = GROUP_M * num_n
    for tile in tl.range(tl.program_id(0), num_m * num_n, NUM_SMS, flatten=FLATTEN, warp_specialize=WS):
        first_m = (tile // per_group) * GROUP_M
        rows = min(num_m - first_m, GROUP_M)
        pid_m = first_m + (tile % per_group) % rows
        pid_n = (tile % per_group) // rows
        m0 = pid_m * BLOCK_M
        n0 = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([m0, ki * BLOCK_K])
            b = b_desc.load([ki * BLOCK_K, n0])
            acc = tl.dot(a, b, acc)
        if SUBTILE:
            acc = tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2))
            acc = tl.permute(acc, (0, 2, 1))
            c0, c1 = tl.split(acc)
            c_desc.store([m0, n0], c0.to(c_desc.dtype))
            c_desc.store([m0, n0 + BLOCK_N // 2], c1.to(c_desc.dtype))
        else:
            c_desc.store([m0, n0], acc.to(c_desc.dtype))


def main(path):
    SM = torch.cuda.get_device_properties(0).multi_processor_count
    variants = [  # (BM, BN, BK, stages, warps, subtile, flatten, ws)
        (128, 256, 64, 3, 8, True, True, False),
        (128, 256, 64, 3, 8, True, False, False),
        (128, 256, 64, 3, 8, False, False, False),
        (128, 256, 64, 4, 8, True, True, False),
        (128, 256, 64, 4, 8, True, False, False),
        (256, 128, 64, 3, 8, True, True, False),
        (256, 128, 64, 4, 8, True, True, False),
        (128, 128, 64, 4, 8, False, True, True),
        (128, 128, 64, 4, 8, False, True, False),
        (128, 256, 64, 3, 8, True, True, True),
    ]
    shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 4104, 4096)]
    rows = []
    t0 = time.time()
    for (M, N, K) in shapes:
        torch.manual_seed(0)
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        ref = torch.matmul(a, b).float()
        fns = {"torch": lambda: torch.matmul(a, b), "main": lambda: matmul(a, b)}
        matmul(a, b)
        torch.cuda.synchronize()
        for v in variants:
            bm, bn, bk, st, wp, sub, fl, ws = v
            name = f"persist {bm}x{bn}x{bk} s{st} w{wp} sub={int(sub)} flat={int(fl)} ws={int(ws)}"
            ad = TensorDescriptor.from_tensor(a, [bm, bk])
            bd = TensorDescriptor.from_tensor(b, [bk, bn])
            cd = TensorDescriptor.from_tensor(c, [bm, bn // 2 if sub else bn])
            grid = (min(SM, triton.cdiv(M, bm) * triton.cdiv(N, bn)),)
            fn = (lambda ad=ad, bd=bd, cd=cd, bm=bm, bn=bn, bk=bk, st=st, wp=wp, sub=sub, fl=fl, ws=ws, grid=grid:
                  mm_persist[grid](ad, bd, cd, M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                                   NUM_SMS=grid[0], SUBTILE=sub, FLATTEN=fl, WS=ws, num_stages=st, num_warps=wp))
            try:
                c.zero_()
                fn()
                torch.cuda.synchronize()
                err = float((c.float() - ref).abs().max())
                fns[name] = fn
                rows.append({"shape": [M, N, K], "what": name, "max_abs_diff_vs_torch": err})
            except Exception as e:
                rows.append({"shape": [M, N, K], "what": name, "error": str(e)[:300]})
            print(json.dumps(rows[-1]), f"{time.time() - t0:.0f}s", flush=True)
        times = {k: [] for k in fns}
        for _ in range(3):
            for k, fn in fns.items():
                times[k].append(triton.testing.do_bench(fn, warmup=10, rep=80, return_mode="median") * 1e3)
        base = sorted(times["torch"])[1]
        for k, ts in times.items():
            med = sorted(ts)[1]
            rows.append({"shape": [M, N, K], "what": k, "us_rounds": ts, "us": med, "vs_torch": base / med,
                         "tflops": 2 * M * N * K / med / 1e6})
            print(json.dumps(rows[-1]), flush=True)
        json.dump(rows, open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
