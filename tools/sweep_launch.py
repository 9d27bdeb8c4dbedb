"""GPU sweep of the launch parameters of the memory-bound kernels (a developer's tool, not a test).

    python3 tools/sweep_launch.py [--case softmax,rmsnorm] [--per-thread 4,8,16,32]
                                  [--elems 2048,4096,8192,16384] [--most 16,32]
                                  [--const PROGRAMS_PER_SM=1,2,4 [--const ...]] [--json PATH]

For each case and each of its bench specs, it overrides the two knobs every row/tile launcher
reads from its module (the tile size, `ELEMS_PER_PROGRAM` or the module's own name for it, and
the elements per thread that `num_warps_for` turns into num_warps), and any other module
constant named with --const (repeatable: every combination; skipped for modules without it),
times one launch with triton.testing.do_bench (median, L2 flushed), and prints the fraction of
copy bandwidth measured at the start of the run. The fastest row per spec is marked; the chosen
values go into the kernel modules by hand, with the figure that justified them.
"""
from __future__ import annotations

import argparse
import importlib
import itertools
import json
import sys

import torch
import triton
import triton.testing

from portcheck import cases as C
from portcheck.speed.ceilings import measure_copy
from portcheck.kernels import _launch

# the module constant that sets each family's tile size
TILE_NAMES = ("ELEMS_PER_PROGRAM", "TILE")


def _const(text: str) -> tuple[str, list[int]]:
    """--const NAME=v1,v2 as (NAME, [v1, v2]); argparse turns the ValueError into a usage error."""
    name, eq, values = text.partition("=")
    if not name or not eq or not values:
        raise ValueError(text)
    return name, _ints(values)


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v]


def _module(case) -> object:
    """The module whose launch knobs the sweep overrides: a kernel package's launcher (its Cases
    live in case.py beside it), else the family's one module."""
    name = case.launch.__module__
    if name.endswith(".case"):
        name = name.removesuffix(".case") + ".launcher"
    return importlib.import_module(name)


def _time(case, args: dict) -> tuple[float, int]:
    outs = {n: torch.empty(shape, dtype=dt, device="cuda") for n, (shape, dt) in case.outputs(args).items()}
    fn = lambda: case.launch(args, outs)   # noqa: E731
    fn()
    torch.cuda.synchronize()
    ms = triton.testing.do_bench(fn, warmup=10, rep=60, return_mode="median")
    return ms, case.cost(args).bytes


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", default="softmax,layernorm,rmsnorm,silu_mul,gelu_mul,rope,"
                   "quant_int8_per_token,quant_fp8_per_token,bias_gelu_dropout")
    p.add_argument("--per-thread", default="4,8,16,32")
    p.add_argument("--elems", default="2048,4096,8192,16384")
    p.add_argument("--most", default="16,32")
    p.add_argument("--const", action="append", default=[], type=_const,
                   help="NAME=v1,v2: also sweep this module constant (repeat for more)")
    p.add_argument("--json")
    a = p.parse_args(argv)
    copy = measure_copy()["gbs"]
    print(f"copy bandwidth {copy:,.0f} GB/s")
    rows = []
    original = _launch.num_warps_for
    for name in a.case.split(","):
        case = C.get(name)
        mod = _module(case)
        tile_name = next((t for t in TILE_NAMES if hasattr(mod, t)), None)
        default_tile = getattr(mod, tile_name) if tile_name else None
        for spec in case.bench:
            label = " ".join(f"{k}={v}" for k, v in spec.items() if k != "seed")
            args = case.make(spec, "cuda")    # once per spec: launch parameters do not change it
            found = []
            consts = [(n, v) for n, v in a.const if hasattr(mod, n)]
            defaults = {n: getattr(mod, n) for n, _ in consts}
            for pt, tile, most, *values in itertools.product(
                    _ints(a.per_thread), _ints(a.elems) if tile_name else [None], _ints(a.most),
                    *(v for _, v in consts)):
                chosen = dict(zip((n for n, _ in consts), values))
                mod.num_warps_for = (lambda e, w, pt=pt, m=most, **_: original(e, w, per_thread=pt, most=m))
                if tile_name:
                    setattr(mod, tile_name, tile)
                for n, v in chosen.items():
                    setattr(mod, n, v)
                try:
                    ms, nbytes = _time(case, args)
                    frac = nbytes / (ms * 1e6) / copy
                    found.append({"case": name, "spec": label, "per_thread": pt, "tile": tile, "most": most,
                                  "const": " ".join(f"{n}={v}" for n, v in chosen.items()), "ms": ms,
                                  "of_copy": frac})
                except Exception as exc:   # a config that does not build or run: say so, go on
                    print(f"  {name} pt={pt} tile={tile} most={most} {chosen}: {type(exc).__name__}: "
                          f"{str(exc).splitlines()[0][:120]}")
                finally:
                    mod.num_warps_for = original
                    if tile_name:
                        setattr(mod, tile_name, default_tile)
                    for n, v in defaults.items():
                        setattr(mod, n, v)
            best = max(found, key=lambda r: r["of_copy"], default=None)
            for r in found:
                r["best"] = r is best
                print(f"{name:22s} {label[:70]:70s} pt={r['per_thread']:<3d} tile={r['tile']!s:6s} "
                      f"most={r['most']:<3d} {r['const']} {r['ms'] * 1e3:8.1f} us  {r['of_copy']:.3f}{'  <- best' if r['best'] else ''}")
            rows += found
            del args
            torch.cuda.empty_cache()
            if a.json:   # after every spec: a time limit keeps what was measured
                with open(a.json, "w") as f:
                    json.dump({"copy_gbs": copy, "device": torch.cuda.get_device_name(),
                               "torch": torch.__version__, "triton": triton.__version__, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
