"""softmax_long: the row's state as two scalars (each chunk's max and sum of exponentials folded
in) at larger chunks, against main's per-lane kernel, same run (bf16 4096 x 131072, one program
per SM), outputs compared bitwise-close with main's."""
import json
import os
import sys

import torch
import triton
import triton.testing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # sm_scalar.py beside it
import sm_scalar  # noqa: E402
from portcheck.kernels import softmax  # noqa: E402
from portcheck.speed.ceilings import measure_copy  # noqa: E402


def main(path):
    copy = measure_copy()["gbs"]
    R, C = 4096, 131072
    x = torch.randn(R, C, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    P = torch.cuda.get_device_properties(0).multi_processor_count
    nbytes = 2 * x.numel() * 2
    rows = []

    def t(name, fn, ref=None):
        fn()
        torch.cuda.synchronize()
        err = float((y.float() - ref).abs().max()) if ref is not None else None
        ms = triton.testing.do_bench(fn, warmup=10, rep=100, return_mode="median")
        rows.append({"what": name, "us": ms * 1e3, "of_copy": nbytes / (ms * 1e6) / copy, "max_abs_diff_vs_main": err})
        print(json.dumps(rows[-1]), flush=True)

    for _ in range(2):
        t("softmax main (per-lane state, 16384)", lambda: softmax.softmax(x, y, long_rows=True))
        ref = y.float().clone()
        for blk in (16384, 32768):
            for w in (16, 32):
                t(f"scalar state block={blk} w{w}", lambda blk=blk, w=w: sm_scalar.softmax_scalar_kernel[(P,)](
                    x, y, R, C, C, C, BLOCK=blk, num_warps=w), ref)
        for blk in (32768, 65536):
            t(f"scalar state, two half-chunk loads, block={blk} w32", lambda blk=blk: sm_scalar.softmax_halves_kernel[(P,)](
                x, y, R, C, C, C, BLOCK=blk, num_warps=32), ref)
    json.dump({"copy_gbs": copy, "rows": rows}, open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
