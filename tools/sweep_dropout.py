"""What limits the fused bias+GELU+dropout kernel on a GPU (a developer's tool, not a test).

    python3 tools/sweep_dropout.py [--case bias_gelu_dropout,bias_gelu_tanh_dropout]

At the case's first bench spec it prints, as fractions of the copy bandwidth measured first:
the kernel as launched, the same launch without dropout (p = 0: GELU and memory only), with the
per-element Philox draw (offset 2 defeats the packed path), and other tiles. Speed claims come
from `portcheck bench`.
"""
from __future__ import annotations

import argparse
import sys

import torch

from portcheck import cases
from portcheck.speed.timing import time_callables
from portcheck.speed.ceilings import measure_copy
from portcheck.kernels.bias_gelu_dropout import bias_gelu_dropout

TILES = [(4, 1024, 16), (8, 1024, 16), (4, 1024, 8), (2, 1024, 8), (8, 512, 16), (16, 1024, 16)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", default="bias_gelu_dropout,bias_gelu_tanh_dropout")
    a = p.parse_args(argv)
    copy_gbs = measure_copy()["gbs"]
    for name in a.case.split(","):
        case = cases.get(name)
        spec = case.bench[0]
        args = case.make(spec, "cuda")
        x, b = args["x"], args["bias"]
        moved = case.cost(args).bytes
        out, keep = torch.empty_like(x), torch.empty(x.shape, dtype=torch.uint8, device="cuda")

        def fraction(p=args["p"], offset=args["offset"], tile=None):
            def run():
                bias_gelu_dropout(x, b, p, args["rng_seed"], offset, args["approximate"], out=out,
                                  keep=keep, tile=tile)
            return moved / (time_callables([run], repeats=30).stats.median_ms * 1e6) / copy_gbs

        seen = {"as launched": fraction(), "p=0 (no Philox)": fraction(p=0.0),
                "per-element draw": fraction(offset=2)}
        for bm, bn, w in TILES:
            seen[f"{bm}x{bn} w{w}"] = fraction(tile={"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": w})
        print(f"{name} {spec['dtype']} {spec['rows']}x{spec['cols']} p={spec['p']} (copy {copy_gbs:.0f} GB/s): "
              + ", ".join(f"{k} {v:.3f}" for k, v in seen.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
