"""GPU sweep of the matmul launch configurations (a developer's tool, not a test).

    python3 tools/sweep_matmul.py [--dtype fp8e4nv] [--size 4096,8192] [--json PATH]

For each square size it times the table's configurations for the dtype on this arch, then the
alternatives below, each with one fixed config (no autotuning) by triton.testing.do_bench
(median, L2 flushed), against the vendor baseline the matmul cases use (torch.matmul,
torch._scaled_mm, torch._int_mm). The table in portcheck/kernels/configs/matmul.toml is set by
hand from its output, citing the figures. Speed claims come from `portcheck bench`.
"""
from __future__ import annotations

import argparse
import json
import sys

import torch
import triton
import triton.testing

from portcheck.kernels import matmul as mm

# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, warps, stages): Hopper-sized alternatives per class
ALTERNATIVES = {
    "fp8": [(128, 256, 128, 8, 8, 3), (256, 128, 128, 8, 8, 4), (128, 256, 128, 8, 8, 4),
            (128, 128, 128, 8, 8, 5), (128, 256, 64, 8, 8, 4), (256, 128, 64, 8, 8, 4),
            (128, 128, 256, 8, 8, 3)],
    "16bit": [(128, 256, 64, 16, 8, 3), (256, 128, 64, 16, 8, 3), (128, 128, 64, 8, 8, 5)],
    "int8": [(128, 256, 128, 8, 8, 4), (256, 128, 128, 8, 8, 4)],
}


def _operands(dtype: str, n: int):
    if dtype in mm.FP8_DTYPES:
        t = mm.FP8_DTYPES[dtype]
        a = torch.randn(n, n, device="cuda").to(t)
        b = torch.randn(n, n, device="cuda").to(t).t().contiguous().t()    # column-major B
        one = torch.ones((), device="cuda")
        kw = {"scale_a": one.reshape(1), "scale_b": one.reshape(1), "out_dtype": torch.bfloat16}
        base = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)  # noqa: E731
        return a, b, kw, base
    if dtype == "int8":
        a = torch.randint(-128, 128, (n, n), device="cuda", dtype=torch.int8)
        b = torch.randint(-128, 128, (n, n), device="cuda", dtype=torch.int8).t().contiguous().t()
        return a, b, {}, lambda: torch._int_mm(a, b)
    t = mm.FLOAT_DTYPES[dtype]
    a, b = torch.randn(n, n, device="cuda", dtype=t), torch.randn(n, n, device="cuda", dtype=t)
    return a, b, {}, lambda: torch.matmul(a, b)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtype", default="fp8e4nv")
    p.add_argument("--size", default="4096,8192")
    p.add_argument("--json")
    a = p.parse_args(argv)
    cls = mm.dtype_class(a.dtype)
    table = mm.configs(a.dtype)
    seen = {(c.block_m, c.block_n, c.block_k, c.group_m, c.num_warps, c.num_stages) for c in table}
    cands = list(table) + [mm.Config(*alt) for alt in ALTERNATIVES.get(cls, []) if alt not in seen]
    rows = []
    for n in (int(s) for s in a.size.split(",")):
        x, y, kw, base = _operands(a.dtype, n)
        flops = 2 * n ** 3
        base_ms = triton.testing.do_bench(base, return_mode="median")
        print(f"{a.dtype} {n}^3: baseline {flops / base_ms / 1e9:.0f} TFLOP/s")
        for cfg in cands:
            if cfg.block_m < 64:
                continue    # the narrow configs are for small M
            try:
                ms = triton.testing.do_bench(lambda: mm.matmul(x, y, config=cfg, **kw), return_mode="median")
            except Exception as exc:   # a configuration that does not fit or build
                print(f"  {cfg.label:28s} {type(exc).__name__}: {str(exc).splitlines()[0][:100]}")
                continue
            rows.append({"dtype": a.dtype, "n": n, "config": cfg.label, "in_table": cfg in table,
                         "tflops": flops / ms / 1e9, "vs_baseline": base_ms / ms})
            print(f"  {cfg.label:28s} {'table' if cfg in table else 'alt  '} {flops / ms / 1e9:7.0f} TFLOP/s "
                  f"{base_ms / ms:.3f}x")
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"device": torch.cuda.get_device_name(), "triton": triton.__version__,
                           "torch": torch.__version__, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
