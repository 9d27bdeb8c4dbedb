"""Long rows held whole in registers across a thread-block cluster (Triton's num_ctas on sm_90+):
one program a row, the row's 131072 columns split over the cluster's CTAs (Triton's CTA layout),
its reductions crossing the CTAs through distributed shared memory, so x is read from HBM once
and no chunk loop or second pass is left. Against main's looped kernels in the same rounds (bf16
4096 x 131072, do_bench medians, "of copy" over measure_copy of the same run).

    python3 cluster_rows.py OUT.json         # on the GPU (needs a Triton that compiles them)
    python3 cluster_rows.py --check-compile  # cross-compiled for sm_90a with this Triton, no GPU

Triton 3.6.0 (the lent H200's) and 3.7.1 reject these kernels in TritonGPUPlanCTAPass ("parent
layout must have at least rank >= 2" for the row's reductions); 3.8.0 and 3.9.0 compile them
(cluster-rows-compile.jsonl).
"""
import json
import os
import sys

import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py beside it
from rows_common import nvidia_resources, row_timer  # noqa: E402


@triton.jit
def rms_cluster_kernel(x_ptr, y_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(y_ptr + row * stride + cols, (x * rstd).to(y_ptr.dtype.element_ty))


@triton.jit
def ln_cluster_kernel(x_ptr, y_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    d = x - mean
    rstd = tl.rsqrt(tl.sum(d * d, axis=0) / n_cols + eps)
    tl.store(y_ptr + row * stride + cols, (d * rstd).to(y_ptr.dtype.element_ty))


@triton.jit
def softmax_cluster_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty))


def check_compile() -> None:
    """Each kernel for sm_90a at 131072 bf16 columns, clusters of 2 and 4: compiled or the error,
    with registers and stack bytes (portcheck.compile.binary.nvidia_resources)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    for kernel, extra in ((rms_cluster_kernel, {"eps": "fp32"}), (ln_cluster_kernel, {"eps": "fp32"}),
                          (softmax_cluster_kernel, {})):
        for ctas, warps in ((4, 32), (2, 32), (4, 16)):
            sig = {"x_ptr": "*bf16", "y_ptr": "*bf16", "n_cols": "i32", "stride": "i32", **extra, "BLOCK": "constexpr"}
            row = {"triton": triton.__version__, "kernel": kernel.fn.__name__, "num_ctas": ctas, "warps": warps}
            try:
                out = triton.compile(ASTSource(kernel, sig, {"BLOCK": 131072},
                                               {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]],
                                                (3,): [["tt.divisibility", 16]]}),
                                     target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_ctas": ctas})
                row.update(nvidia_resources(out.asm["cubin"]), cluster_loads=out.asm["ptx"].count("ld.shared::cluster"))
            except Exception as e:  # noqa: BLE001
                row["error"] = str(e).strip().splitlines()[-1][:200]
            print(json.dumps(row), flush=True)


def main(path: str) -> None:
    import torch
    from portcheck.kernels import layernorm, rmsnorm, softmax
    from portcheck.speed.ceilings import measure_copy
    copy = measure_copy()["gbs"]
    rows_n, cols_n = 4096, 131072
    x = torch.randn(rows_n, cols_n, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    rows = []
    t = row_timer(x, y, copy, rows)

    cluster = {"rmsnorm": lambda ctas, w: rms_cluster_kernel[(rows_n,)](x, y, cols_n, cols_n, 1e-6, BLOCK=cols_n,
                                                                         num_warps=w, num_ctas=ctas),
               "layernorm": lambda ctas, w: ln_cluster_kernel[(rows_n,)](x, y, cols_n, cols_n, 1e-5, BLOCK=cols_n,
                                                                          num_warps=w, num_ctas=ctas),
               "softmax": lambda ctas, w: softmax_cluster_kernel[(rows_n,)](x, y, cols_n, cols_n, BLOCK=cols_n,
                                                                             num_warps=w, num_ctas=ctas)}
    main_of = {"rmsnorm": lambda: rmsnorm.rms_norm(x, out=y, long_rows=True),
               "layernorm": lambda: layernorm.layer_norm(x, out=y, long_rows=True),
               "softmax": lambda: softmax.softmax(x, y, long_rows=True)}
    for family in ("rmsnorm", "softmax", "layernorm"):
        t(f"{family} main (looped)", main_of[family])
        ref = y.float().clone()
        for ctas, warps in ((4, 32), (2, 32), (4, 16)):
            t(f"{family} cluster of {ctas} CTAs, {warps} warps each", lambda c=ctas, w=warps: cluster[family](c, w), ref)
        json.dump({"copy_gbs": copy, "rows": rows}, open(path, "w"), indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "--check-compile":
        check_compile()
    else:
        main(sys.argv[1])
