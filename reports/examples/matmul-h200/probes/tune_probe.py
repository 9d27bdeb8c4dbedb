"""What matmul's autotuner sees at skinny M (bf16, N = K = 4104) against what the bench measures:
each narrow configuration timed three ways, with the autotuner's pick.

    python3 tune_probe.py OUT.json

- rotated: operands rotated past L2, graph replay (portcheck.speed.timing, as `portcheck bench`);
- warm: the autotuner's timing (launcher._time_candidate: one call's graph replayed, B stays in L2);
- flushed: a graph of (L2 flush, call) minus a graph of the flush alone, replayed the same way.
"""
import json
import os
import sys

import torch
import triton.testing

from portcheck.facts.device import current_arch
from portcheck.kernels import matmul as mm
from portcheck.kernels.matmul import launcher
from portcheck.speed.timing import time_callables

sys.path.insert(0, os.path.dirname(__file__))
from skinny_probe import rotated_operands  # noqa: E402


def main(path: str) -> None:
    props = torch.cuda.get_device_properties(0)
    flush = torch.empty(2 * props.L2_cache_size // 4, device="cuda", dtype=torch.float32)
    narrow = [c for c in mm.configs("bf16") if c.block_m <= launcher.NARROW_M]
    rows = []
    n = k = 4104
    for m in (1, 16):
        copies = rotated_operands(m, n, k)
        mm.matmul(*copies[0])
        tuned = launcher._autotuned(current_arch(), "16bit")
        picks = {str(key): str(cfg) for key, cfg in tuned.cache.items() if key[0] == m}
        alone = triton.testing.do_bench_cudagraph(lambda: flush.zero_(), rep=50)
        for c in [None] + narrow:
            fn = lambda x, y, c=c: mm.matmul(x, y, config=c)   # noqa: E731
            x0, y0 = copies[0]
            row = {"m": m, "config": "autotuned" if c is None else c.label,
                   "rotated_us": time_callables([lambda x=x, y=y: fn(x, y) for x, y in copies]).stats.median_ms * 1e3,
                   "warm_us": launcher._time_candidate(lambda: fn(x0, y0), None) * 1e3,
                   "flushed_us": (triton.testing.do_bench_cudagraph(lambda: (flush.zero_(), fn(x0, y0)), rep=50)
                                  - alone) * 1e3}
            rows.append(row)
            print(json.dumps(row), flush=True)
        rows.append({"m": m, "autotuner_picks": picks})
        print(json.dumps(rows[-1]), flush=True)
        json.dump(rows, open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
