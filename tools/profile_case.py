"""One launch of a case's kernel on a bench spec, and one of each of its baselines, for Nsight
Compute (a developer's tool, not a test): where the kernel's time goes next to its peers'.

    ncu --profile-from-start off --section SpeedOfLight --section Occupancy \
        --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis --csv \
        python3 tools/profile_case.py --kernel attention [--index 0] [--no-baselines]

Everything runs once outside the profiled range first (compilation, autotuning, cuDNN's plan),
then once each between cudaProfilerStart and cudaProfilerStop, inside an NVTX range named after
it, so ncu sees one launch per implementation (a baseline may launch several kernels).
"""
from __future__ import annotations

import argparse
import sys

import torch

from portcheck import cases


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernel", required=True, help="a case name (portcheck list)")
    p.add_argument("--index", type=int, default=0, help="which of the case's bench specs")
    p.add_argument("--no-baselines", action="store_true")
    a = p.parse_args(argv)
    case = cases.get(a.kernel)
    spec = case.bench[a.index]
    args = case.make(spec, "cuda")
    outs = {n: torch.empty(shape, dtype=dt, device="cuda") for n, (shape, dt) in case.outputs(args).items()}
    runs = {"portcheck": lambda: case.launch(args, outs)}
    if not a.no_baselines and case.baselines is not None:
        runs.update(case.baselines(args))
    usable = {}
    for name, fn in runs.items():
        try:
            fn()
            usable[name] = fn
        except Exception as exc:   # a baseline this build or shape does not offer
            print(f"{name}: not run ({type(exc).__name__}: {str(exc).splitlines()[0][:100]})", file=sys.stderr)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for name, fn in usable.items():
        torch.cuda.nvtx.range_push(name)
        fn()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print(f"profiled {a.kernel} {spec}: " + ", ".join(usable), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
