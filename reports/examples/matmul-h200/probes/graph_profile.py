"""What one CUDA-graph replay of a skinny matmul runs on the H200 (bf16, N = K = 4104): main's
planned launch against the probe kernel of skinny_probe.py with the same tile, every kernel of the
replay with its duration (torch.profiler, CUPTI), and the replay's time between events.

    python3 graph_profile.py OUT.json
"""
import json
import os
import sys

import torch
import triton
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(__file__))
import skinny_probe as sp  # noqa: E402

from portcheck.kernels import matmul as mm  # noqa: E402

REPLAYS = 50


def replay_profile(fn) -> dict:
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    for _ in range(10):
        graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(REPLAYS):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(REPLAYS):
            graph.replay()
        torch.cuda.synchronize()
    kernels = {e.key: {"calls": e.count, "us_each": e.device_time_total / max(e.count, 1)}
               for e in prof.key_averages() if e.device_time_total > 0}
    return {"replay_us": start.elapsed_time(end) * 1e3 / REPLAYS, "kernels": kernels}


def main(path: str) -> None:
    rows = []
    n = k = 4104
    for m in (1, 16):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        cfg = [c for c in mm.configs("bf16") if c.label.startswith("16x128x64")][0]
        rows.append({"m": m, "what": f"main {cfg.label}", **replay_profile(lambda: mm.matmul(a, b, config=cfg))})
        print(json.dumps(rows[-1]), flush=True)
        tiles = triton.cdiv(n, 128)
        ws = torch.empty(tiles * 4 * 16 * 128, device="cuda", dtype=torch.float32)
        locks = torch.zeros(tiles, device="cuda", dtype=torch.int32)
        out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        rows.append({"m": m, "what": "probe bn128 bk64 split4 s4, A masked, whole slices",
                     **replay_profile(lambda: sp.skinny(a, b, out, ws, locks, 128, 64, 4, 4, 4, True, True, True))})
        print(json.dumps(rows[-1]), flush=True)
    json.dump(rows, open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
