"""Not a test (pytest does not collect it): a GPU measurement of the MoE grouped GEMM's tile configs
at the bench shape, against torch.matmul on a dense GEMM of the same FLOPs.

    python3 tools/sweep_moe.py [--tokens 4096 --experts 64 --top-k 8 --n 14336 --k 4096]
                               [--dtype bf16] [--routing uniform|balanced] [--json PATH]

For each candidate config (the arch's own rows from configs/moe_gemm.toml first, then the
alternatives below) it checks 16 output rows against a float32 torch product, then times one
launch (alignment + GEMM) with triton.testing.do_bench (median, L2 flushed). Useful FLOP/s count
the real assignments only (2 T k N K), so the padding each BLOCK_M wastes shows as a lower rate;
`padded` is the fraction of GEMM rows that are padding. 'balanced' routing gives every expert
exactly T k / E tokens (no padding for power-of-two BLOCK_M dividing it); 'uniform' is the case's
bench routing (k distinct experts per token, uniformly at random).
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import torch
import triton
import triton.testing

from portcheck.kernels import moe_gemm as G
from portcheck.kernels.moe_align import moe_align_block_size

# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, warps, stages): Hopper-sized alternatives to the table's rows
ALTERNATIVES = [(128, 256, 64, 8, 8, 3), (128, 256, 64, 16, 8, 4), (128, 128, 64, 8, 4, 4),
                (128, 128, 64, 8, 8, 4), (64, 256, 64, 8, 4, 4), (64, 256, 64, 8, 8, 3),
                (64, 128, 64, 8, 4, 4), (256, 128, 64, 8, 8, 3)]


def candidates(family: str, dtype: torch.dtype) -> list[dict]:
    rows = [cfg for _, cfg in G.config_table()[family]["fp32" if dtype == torch.float32 else "16bit"]]
    seen = {(c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"], c["GROUP_M"], c["num_warps"], c["num_stages"]) for c in rows}
    if family.startswith("sm_"):
        for bm, bn, bk, gm, w, s in ALTERNATIVES:
            if (bm, bn, bk, gm, w, s) not in seen:
                rows.append({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": gm, "num_warps": w,
                             "num_stages": s, "options": {}})
    return rows


def _wall_ms(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--experts", type=int, default=64)
    p.add_argument("--top-k", type=int, default=8)
    p.add_argument("--n", type=int, default=14336)
    p.add_argument("--k", type=int, default=4096)
    p.add_argument("--dtype", default="bf16", choices=sorted(G.DTYPES))
    p.add_argument("--routing", default="uniform", choices=("uniform", "balanced"))
    p.add_argument("--json", help="write the figures here")
    a = p.parse_args(argv)
    # TRITON_INTERPRET=1 runs the same steps on the CPU (tiny shapes, wall-clock times): a smoke test
    dev = "cpu" if G.interpreted() else "cuda"
    if dev == "cuda" and not torch.cuda.is_available():
        print("sweep_moe: needs a GPU (or TRITON_INTERPRET=1 for a CPU smoke run)", file=sys.stderr)
        return 2
    bench = _wall_ms if dev == "cpu" else (lambda fn: triton.testing.do_bench(fn, return_mode="median"))
    spec = {"dtype": a.dtype, "tokens": a.tokens, "experts": a.experts, "top_k": a.top_k, "n": a.n,
            "k": a.k, "routing": "uniform", "regime": "normal", "mul_routed_weight": True,
            "layout": "contiguous", "seed": 0}
    args = G._make(spec, dev)
    x, w, rw = args["a"], args["w"], args["topk_weights"]
    ids = args["topk_ids"]
    if a.routing == "balanced":
        t = torch.arange(a.tokens, device=dev)[:, None] * a.top_k + torch.arange(a.top_k, device=dev)
        ids = (t % a.experts).to(torch.int32)
    flops = 2 * a.tokens * a.top_k * a.n * a.k
    out = torch.empty(a.tokens * a.top_k, a.n, dtype=x.dtype, device=dev)
    rows = torch.linspace(0, a.tokens * a.top_k - 1, 16, device=dev).long()
    flat = ids.flatten().long()
    check = torch.stack([torch.mv(w[flat[r]].float(), x[r // a.top_k].float()) * rw.flatten()[r]
                         for r in rows.tolist()])

    dense_a = x.repeat_interleave(a.top_k, dim=0)
    dense_w = w[0].T
    dense_ms = bench(lambda: torch.matmul(dense_a, dense_w))
    dense_tflops = flops / dense_ms / 1e9
    family = G.active_family()
    device_name = torch.cuda.get_device_name(0) if dev == "cuda" else "CPU (Triton interpreter)"
    print(f"{device_name}, triton {triton.__version__}, torch {torch.__version__}; "
          f"family {family}; T={a.tokens} E={a.experts} k={a.top_k} N={a.n} K={a.k} {a.dtype} "
          f"routing={a.routing}")
    print(f"torch.matmul dense [{a.tokens * a.top_k}, {a.k}] x [{a.k}, {a.n}]: {dense_ms:.3f} ms, "
          f"{dense_tflops:.1f} TFLOP/s")
    counts = torch.bincount(flat, minlength=a.experts)
    figures = {"device": device_name, "triton": triton.__version__, "family": family,
               "spec": {**spec, "routing": a.routing}, "dense_ms": dense_ms, "dense_tflops": dense_tflops,
               "configs": []}
    print(f"{'config':<32} {'ms':>8} {'TFLOP/s':>8} {'vs dense':>8} {'padded':>7}  max|err|/max|ref|")
    for cfg in candidates(family, x.dtype):
        label = (f"{cfg['BLOCK_M']}x{cfg['BLOCK_N']}x{cfg['BLOCK_K']} g{cfg['GROUP_M']} "
                 f"w{cfg['num_warps']} s{cfg['num_stages']}")
        bm = cfg["BLOCK_M"]
        padded = 1 - a.tokens * a.top_k / int(((counts + bm - 1) // bm * bm).sum())
        try:
            out.fill_(float("nan"))
            G.moe_gemm(x, w, ids, rw, out=out, cfg=cfg)
            if dev == "cuda":
                torch.cuda.synchronize()
            err = float((out[rows].float() - check).abs().max() / check.abs().max())
            ms = bench(lambda: G.moe_gemm(x, w, ids, rw, out=out, cfg=cfg))
        except Exception as exc:   # a config that does not fit this device is a row, not the end
            print(f"{label:<32} failed: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
            figures["configs"].append({"config": label, "error": str(exc)[:500]})
            continue
        tflops = flops / ms / 1e9
        print(f"{label:<32} {ms:8.3f} {tflops:8.1f} {tflops / dense_tflops:8.3f} {padded:7.3f}  {err:.2e}")
        figures["configs"].append({"config": label, "ms": ms, "tflops": tflops,
                                   "ratio": tflops / dense_tflops, "padded": padded, "rel_err": err})
    align_ms = bench(lambda: moe_align_block_size(ids, a.experts, 128))
    print(f"alignment alone (block_m 128): {align_ms * 1e3:.1f} us")
    figures["align_us"] = align_ms * 1e3
    if a.json:
        with open(a.json, "w") as f:
            json.dump(figures, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
