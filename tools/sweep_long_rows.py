"""GPU sweep of the long-row kernels (a developer's tool, not a test): the split-row kernel over
its block and per-thread knobs against the looped kernel and a copy, side by side in one run.

    python3 tools/sweep_long_rows.py [--case rmsnorm_long,layernorm_long,softmax_long]
                                     [--block 4096,8192,16384,32768] [--per-thread 8,16,32]
                                     [--json PATH]

Each case runs its bench spec (bf16, 4096 x 131072). Times are triton.testing.do_bench medians;
"of copy" divides the case's fewest bytes moved (Cost.bytes: one read, one write) by the time
and by the copy bandwidth measured at the start. Every split output is compared with the looped
kernel's (max |difference|, in the output dtype) so that a fast wrong kernel shows. The chosen
values go into portcheck/kernels/_rows.py by hand, with the figure that justified them.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys

import torch
import triton
import triton.testing

from portcheck import cases as C
from portcheck.kernels import _rows
from portcheck.provenance import collect
from portcheck.targets.runtime import detect_arch, target
from portcheck.speed.ceilings import measure_copy


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v]


def _run(case, args: dict, split: bool) -> tuple[float, dict]:
    outs = {n: torch.empty(shape, dtype=dt, device="cuda") for n, (shape, dt) in case.outputs(args).items()}
    fn = lambda: case.launch({**args, "split": split}, outs)   # noqa: E731
    fn()
    torch.cuda.synchronize()
    return triton.testing.do_bench(fn, warmup=10, rep=80, return_mode="median"), outs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", default="rmsnorm_long,layernorm_long,softmax_long")
    p.add_argument("--block", default="4096,8192,16384,32768")
    p.add_argument("--per-thread", default="8,16,32")
    p.add_argument("--json")
    a = p.parse_args(argv)
    copy = measure_copy()["gbs"]
    print(f"copy bandwidth {copy:,.0f} GB/s")
    rows = []
    defaults = _rows.SPLIT_BLOCK, _rows.SPLIT_PER_THREAD
    for name in a.case.split(","):
        case = C.get(name)
        spec = case.bench[0]
        args = case.make(spec, "cuda")
        nbytes = case.cost(args).bytes
        ms, looped = _run(case, args, split=False)
        rows.append({"case": name, "kernel": "looped", "ms": ms, "of_copy": nbytes / (ms * 1e6) / copy})
        print(f"{name:16s} looped                {ms * 1e3:8.1f} us  {rows[-1]['of_copy']:.3f}")
        for block, pt in itertools.product(_ints(a.block), _ints(a.per_thread)):
            _rows.SPLIT_BLOCK, _rows.SPLIT_PER_THREAD = block, pt
            try:
                ms, outs = _run(case, args, split=True)
                diff = max((outs[k].double() - looped[k].double()).abs().max().item() for k in outs)
                rows.append({"case": name, "kernel": "split", "block": block, "per_thread": pt, "ms": ms,
                             "of_copy": nbytes / (ms * 1e6) / copy, "max_diff_vs_looped": diff})
                print(f"{name:16s} split {block:6d} pt={pt:<3d}    {ms * 1e3:8.1f} us  "
                      f"{rows[-1]['of_copy']:.3f}  |diff| {diff:.3g}")
            except Exception as exc:   # a launch the driver refuses (too large to co-reside): say so
                print(f"{name:16s} split {block:6d} pt={pt:<3d}    {type(exc).__name__}: "
                      f"{str(exc).splitlines()[0][:120]}")
            finally:
                _rows.SPLIT_BLOCK, _rows.SPLIT_PER_THREAD = defaults
        del args, looped
        torch.cuda.empty_cache()
        if a.json:   # after every case: a time limit keeps what was measured
            with open(a.json, "w") as f:
                json.dump({"copy_gbs": copy, "provenance": collect(target("cuda"), detect_arch("cuda"), command=" ".join(["python3", *sys.argv])), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
