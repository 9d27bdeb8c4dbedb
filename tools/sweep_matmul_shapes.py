"""GPU sweep of matmul on the shapes where it lagged torch (a developer's tool, not a test).

    python3 tools/sweep_matmul_shapes.py [--dtype bf16] [--json PATH] [--host] [--shapes 0,1]
                                         [--extra-narrow]

Per shape (skinny M = 1 and 16, N = K = 4104, M = 4000 with N = K = 4104 and 4097, squares):
torch.matmul, the autotuned launcher and each configuration of the shape's class (narrow tiles
for M <= NARROW_M, wide ones above) with one fixed config, side by side in one process; skinny
shapes also with split-K's fill (programs per SM) varied; wide shapes also through the pointer
kernel (tma=False) beside the tensor-descriptor one the launcher picks on sm_90a / sm_100a.
Timing as `portcheck bench` times (portcheck.speed.timing): the operands rotated over copies
that overflow L2 (a skinny launch reads B from HBM, as in a model, not from the last launch's
L2), CUDA-graph replay below 2e10 flops (no host in the loop), do_bench with L2 flushes above;
medians. Each result is also checked against torch (max |diff| / max |torch|). `--host` adds
the host time of one launch (a small shape, launches back to back with no sync, so the host is
the bottleneck) and a cProfile of it.
Speed claims in reports come from `portcheck bench`.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import time

import torch
import triton

from portcheck.kernels import matmul as mm
from portcheck.kernels.matmul import launcher
from portcheck.speed.timing import rotation_sets, time_callables

SHAPES = [(1, 4104, 4104), (16, 4104, 4104), (4000, 4104, 4104), (4000, 4097, 4097),
          (4096, 4096, 4096), (8192, 8192, 8192),
          # which of M, N, K makes 4000 x 4104 x 4104 slower than 4096^3
          (4096, 4096, 4104), (4096, 4104, 4096), (4000, 4096, 4096), (4096, 4104, 4104)]
FILLS = (1, 2, 4)
# --extra-narrow: candidate narrow configurations beyond the table's, for skinny M
EXTRA_NARROW = [launcher.Config(bm, bn, bk, 1, w, st) for bm, bn, bk, w, st in
                ((16, 128, 128, 4, 4), (16, 128, 128, 8, 4), (16, 256, 128, 8, 3), (16, 128, 64, 4, 6),
                 (32, 128, 128, 4, 4))]


def _time(fns, graph: bool) -> float:
    """Median ms of one launch, cycling through `fns` (the same launch on each operand copy):
    graph replay for short launches (a Python launcher's host time would be timed otherwise),
    do_bench for long ones."""
    return time_callables(fns, method="cuda_graph" if graph else "do_bench").stats.median_ms


def _err(c, ref) -> float:
    return float((c.float() - ref.float()).abs().max() / ref.float().abs().max())


def shape_rows(dtype: str, m: int, n: int, k: int, limit: int | None = None,
               extra: list | None = None) -> list[dict]:
    t = mm.FLOAT_DTYPES[dtype]
    sets = rotation_sets((m * k + k * n) * t.itemsize, torch.cuda.get_device_properties(0).L2_cache_size)
    copies = [(torch.randn(m, k, device="cuda", dtype=t), torch.randn(k, n, device="cuda", dtype=t))
              for _ in range(sets)]
    a, b = copies[0]
    ref = torch.matmul(a, b)
    flops = 2.0 * m * n * k
    rows = []

    def add(name, launch):
        """launch(a, b): one matmul of the shape on the operands given."""
        try:
            err = _err(launch(a, b), ref)
            ms = _time([lambda x=x, y=y: launch(x, y) for x, y in copies], graph=flops < 2e10)
            rows.append({"shape": [m, n, k], "dtype": dtype, "what": name, "us": ms * 1e3,
                         "tflops": flops / ms / 1e9, "rel_err": err})
        except Exception as exc:  # noqa: BLE001 - a config that does not run is a row too
            rows.append({"shape": [m, n, k], "dtype": dtype, "what": name, "error": f"{type(exc).__name__}: {exc}"[:200]})
        print(json.dumps(rows[-1]), flush=True)

    add("torch", torch.matmul)
    add("autotuned", mm.matmul)
    narrow = m <= mm.NARROW_M
    if not narrow:   # the pointer kernel beside the TMA one where a launch can take TMA
        add("autotuned, pointers", lambda x, y: mm.matmul(x, y, tma=False))
    fill0 = launcher.SPLIT_FILL
    for c in [c for c in mm.configs(dtype) if (c.block_m <= mm.NARROW_M) == narrow][:limit] + \
            (extra or [] if narrow else []):
        fills = FILLS if narrow else (launcher.SPLIT_FILL,)
        for fill in fills:
            launcher.SPLIT_FILL = fill
            launcher._workspace.cache_clear()
            launcher._PLANS.clear()     # a plan keeps the split of the launch that made it
            s = launcher.split_k(m, n, k, c.block_m, c.block_n, c.block_k, launcher._units(a.device))
            add(f"{c.label} split {s} (fill {fill})", lambda x, y, c=c: mm.matmul(x, y, config=c))
            if not narrow:
                add(f"{c.label} split {s} (fill {fill}), pointers", lambda x, y, c=c: mm.matmul(x, y, config=c, tma=False))
        launcher.SPLIT_FILL = fill0
        launcher._workspace.cache_clear()
        launcher._PLANS.clear()
    for r in rows:
        if "us" in r and r["what"] != "torch":
            r["vs_torch"] = rows[0]["us"] / r["us"] if "us" in rows[0] else None
    return rows


def host_rows(dtype: str) -> tuple[list[dict], str]:
    """Host microseconds per launch, small shape, no sync between launches."""
    t = mm.FLOAT_DTYPES[dtype]
    a = torch.randn(256, 256, device="cuda", dtype=t)
    b = torch.randn(256, 256, device="cuda", dtype=t)
    cfg = next(c for c in mm.configs(dtype) if c.block_m > mm.NARROW_M)
    rows = []

    def unplanned():      # every launch through the checks and Triton's dispatch, as before plans
        launcher._PLANS.clear()
        return mm.matmul(a, b)
    for name, fn in (("autotuned", lambda: mm.matmul(a, b)), ("config", lambda: mm.matmul(a, b, config=cfg)),
                     ("autotuned, no plan", unplanned), ("torch", lambda: torch.matmul(a, b))):
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        n = 2000
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        host = (time.perf_counter() - t0) / n
        torch.cuda.synchronize()
        rows.append({"what": f"host {name}", "us": host * 1e6})
        print(json.dumps(rows[-1]), flush=True)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(2000):
        mm.matmul(a, b)
    prof.disable()
    torch.cuda.synchronize()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(30)
    return rows, out.getvalue()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--json")
    p.add_argument("--host", action="store_true")
    p.add_argument("--shapes", default="all", help="comma-separated indices into SHAPES, or all")
    p.add_argument("--extra-narrow", action="store_true", help="also time EXTRA_NARROW on skinny shapes")
    args = p.parse_args(argv)
    if args.shapes == "all":
        picked = SHAPES
    else:
        parts = args.shapes.split(",")
        if not all(i.isdigit() and int(i) < len(SHAPES) for i in parts):
            p.error(f"--shapes takes comma-separated indices from 0 to {len(SHAPES) - 1}, or all; "
                    f"got {args.shapes!r}")
        picked = [SHAPES[int(i)] for i in parts]
    rows, profile = [], ""
    if args.host:
        host, profile = host_rows(args.dtype)
        rows += host
    for shape in picked:
        rows += shape_rows(args.dtype, *shape, limit=1 if SHAPES.index(shape) >= 6 else None,
                           extra=EXTRA_NARROW if args.extra_narrow else None)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "triton": triton.__version__, "rows": rows, "profile": profile}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
