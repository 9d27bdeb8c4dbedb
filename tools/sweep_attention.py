"""GPU sweep of the attention launch configurations (a developer's tool, not a test).

    python3 tools/sweep_attention.py [--case attention,attention_causal] [--index 0]
                                     [--candidates all|1,3] [--json PATH]

For each bench spec chosen, it times the kernel with the active table's configuration, each SDPA
backend torch offers, and the other configurations worth trying on this arch (tile sizes, warps,
stages, with and without TMA descriptors, and the TMA kernel's key loop warp-specialised), each as the median of 30 repeats with L2 rotated
(portcheck.speed.timing). The table in portcheck/kernels/attention.py is set by hand from its output,
citing the figures. Speed claims themselves come from `portcheck bench`, not from here.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
from dataclasses import replace

import torch

from portcheck import cases
from portcheck.facts.device import current_arch
from portcheck.speed.timing import time_callables

CANDIDATES = ((128, 128, 8, 2), (128, 128, 8, 3), (128, 64, 8, 3), (128, 64, 4, 3), (64, 128, 4, 3),
              (128, 64, 4, 4))


def _ms(fn) -> float:
    return time_callables([fn], repeats=30).stats.median_ms


def sweep(name: str, index: int, candidates=CANDIDATES) -> dict:
    from portcheck.kernels import attention as A
    case = cases.get(name)
    spec = case.bench[index]
    args = case.make(spec, "cuda")
    out = torch.empty_like(args["q"])
    flops = case.cost(args).flops

    def run(config=None, tma=None):
        return lambda: A.attention(args["q"], args["k"], args["v"], causal=args["causal"],
                                   scale=args["scale"], out=out, config=config, tma=tma)

    tflops = lambda ms: round(flops / ms / 1e9, 1)   # noqa: E731
    found = {"case": name, "seq": spec["seq"], "table": tflops(_ms(run())), "sdpa": {}, "configs": {}}
    for bname, fn in case.baselines(args).items():
        if bname.startswith("sdpa"):
            try:
                found["sdpa"][bname] = tflops(_ms(fn))
            except Exception as exc:   # a backend that does not take these inputs
                found["sdpa"][bname] = type(exc).__name__
    table = A.arch_configs(current_arch())[spec["head_dim"]]
    for (bm, bn, warps, stages), (tma, ws) in itertools.product(
            candidates, ((True, False), (True, True), (False, False))):
        cfg = replace(table, block_m=bm, block_n=bn, num_warps=warps, num_stages=stages, tma=tma, ws=ws)
        label = f"{bm}x{bn} w{warps} s{stages} tma={tma} ws={ws}"
        try:
            found["configs"][label] = tflops(_ms(run(cfg, tma)))
        except Exception as exc:   # a configuration that does not build or fit
            found["configs"][label] = type(exc).__name__
    return found


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", default="attention,attention_causal")
    p.add_argument("--index", default="0", help="comma list of bench spec indices")
    p.add_argument("--candidates", default="all", help="comma list of indices into CANDIDATES, or all")
    p.add_argument("--json")
    a = p.parse_args(argv)
    picked = CANDIDATES if a.candidates == "all" else [CANDIDATES[int(i)] for i in a.candidates.split(",")]
    rows = []
    for name in a.case.split(","):
        for index in (int(i) for i in a.index.split(",")):
            r = sweep(name, index, picked)
            rows.append(r)
            print(json.dumps(r))
            if a.json:
                with open(a.json, "w") as f:
                    json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                               "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
