"""Long rows: LayerNorm's and softmax's pass 1 with per-lane state over groups of GROUP elements
a thread holds (each chunk's group statistics folded in lane by lane, no block reduction per
chunk), against main's kernels in the same rounds (bf16 4096 x 131072, one program per SM)."""
import json
import os
import sys

import torch
import triton
import triton.testing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # ln_group.py beside it
import ln_group  # noqa: E402
from portcheck.kernels import layernorm, softmax  # noqa: E402
from portcheck.speed.ceilings import measure_copy  # noqa: E402


def main(path):
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
        rows.append({"what": name, "us": ms * 1e3, "of_copy": nbytes / (ms * 1e6) / copy, "max_abs_diff_vs_main": err})
        print(json.dumps(rows[-1]), flush=True)

    for _ in range(2):
        t("layernorm main", lambda: layernorm.layer_norm(x, w, b, 1e-5, out=y, mean=mu, rstd=r, long_rows=True))
        ref = y.float().clone()
        for blk, g in ((16384, 8), (32768, 8), (32768, 16)):
            t(f"layernorm grouped block={blk} group={g}", lambda blk=blk, g=g: ln_group.layernorm_grouped_kernel[(P,)](
                x, w, b, y, mu, r, R, C, C, C, 1e-5, HAS_W=True, HAS_B=True, BLOCK=blk, GROUP=g, num_warps=32), ref)
        t("softmax main", lambda: softmax.softmax(x, y, long_rows=True))
        ref = y.float().clone()
        for blk, g in ((16384, 8), (32768, 8), (32768, 16)):
            t(f"softmax grouped block={blk} group={g}", lambda blk=blk, g=g: ln_group.softmax_grouped_kernel[(P,)](
                x, y, R, C, C, C, BLOCK=blk, GROUP=g, num_warps=32), ref)
    json.dump({"copy_gbs": copy, "rows": rows}, open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
