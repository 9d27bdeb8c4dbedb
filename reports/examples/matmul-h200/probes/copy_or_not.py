"""bf16 on the persistent TMA kernel: A copied into whole 128-byte lines first (main's rule) or read
in place, autotuned and per configuration, with torch in the same rounds (portcheck.speed.timing,
operands rotated past L2, do_bench).

    python3 copy_or_not.py OUT.json            # every wide table entry, at 4000 x 4104 x 4104 and
                                               # 4096 x 4104 x 4104 (persistent/copy-or-not.json)
    python3 copy_or_not.py OUT.json --tiles    # TILES, at 4000 x 4104 x 4104 and 4096^3
                                               # (persistent/tiles-and-groups.json)
"""
import argparse
import json

import torch

from portcheck.kernels import matmul as mm
from portcheck.kernels.matmul import launcher
from portcheck.speed.timing import rotation_sets, time_callables

C = launcher.Config
# the table's first three wide entries as they were on 14be303, BLOCK_K = 128 at two stages, and
# 256x128x64 grouped 4, 16 and 2 tile rows deep
TILES = [C(128, 256, 64, 8, 8, 3), C(128, 256, 64, 8, 8, 4), C(256, 128, 64, 8, 8, 3),
         C(256, 128, 128, 8, 8, 2), C(128, 256, 128, 8, 8, 2),
         C(256, 128, 64, 4, 8, 3), C(256, 128, 64, 16, 8, 3), C(256, 128, 64, 2, 8, 3)]


def main(path: str, tiles: bool) -> None:
    rows = []
    min_n = launcher.TMA_REPACK_MIN_N
    shapes = ((4000, 4104, 4104), (4096, 4096, 4096) if tiles else (4096, 4104, 4104))
    for m, n, k in shapes:
        sets = rotation_sets((m * k + k * n) * 2, torch.cuda.get_device_properties(0).L2_cache_size)
        copies = [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16),
                   torch.randn(k, n, device="cuda", dtype=torch.bfloat16)) for _ in range(sets)]
        ref = torch.matmul(*copies[0]).float()
        wide = TILES if tiles else [c for c in mm.configs("bf16") if c.block_m > mm.NARROW_M]
        cands = [("torch", None, None)] + [(f"{'autotuned' if c is None else c.label} {how}", c, how)
                                            for c in [None] + wide for how in ("copy A", "A in place")]
        for name, cfg, how in cands:
            if how is not None:
                launcher.TMA_REPACK_MIN_N = min_n if how == "copy A" else 10 ** 9
                launcher._PLANS.clear()
            fn = torch.matmul if how is None else (lambda x, y, cfg=cfg: mm.matmul(x, y, config=cfg))
            try:
                err = float((fn(*copies[0]).float() - ref).abs().max() / ref.abs().max())
                ms = time_callables([lambda x=x, y=y: fn(x, y) for x, y in copies], method="do_bench").stats.median_ms
                rows.append({"shape": [m, n, k], "what": name, "us": ms * 1e3, "rel_err": err})
            except Exception as e:  # noqa: BLE001
                rows.append({"shape": [m, n, k], "what": name, "error": str(e)[:200]})
            print(json.dumps(rows[-1]), flush=True)
        base = [r for r in rows if r["shape"] == [m, n, k] and r["what"] == "torch"][0]["us"]
        for r in rows:
            if r["shape"] == [m, n, k] and "us" in r:
                r["vs_torch"] = base / r["us"]
        launcher.TMA_REPACK_MIN_N = min_n
        json.dump(rows, open(path, "w"), indent=1)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--tiles", action="store_true", help="the tile shapes and groups of TILES")
    args = p.parse_args()
    main(args.out, args.tiles)
