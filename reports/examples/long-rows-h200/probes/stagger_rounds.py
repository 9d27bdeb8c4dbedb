"""Follow-up of stagger.py (LayerNorm 0.814 -> 0.857 in one round, 0.71-0.82 in the next): more
rounds and settings for LayerNorm, and RMSNorm with the same wait, to tell a gain from the spread.

    python3 stagger_rounds.py OUT.json           (after pip install -e . at the repository root)
"""
import json
import os
import sys

import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py, patched.py, stagger.py
from patched import patched  # noqa: E402
from rows_common import bench_rows, launchers, row_timer  # noqa: E402
from stagger import HEADER, LN_SIG, START  # noqa: E402

RMS_SIG = ("HAS_W: tl.constexpr, BLOCK: tl.constexpr):",
           "HAS_W: tl.constexpr, BLOCK: tl.constexpr, PHASES: tl.constexpr = 1, STEP: tl.constexpr = 0):")
SETTINGS = [(2, 9500), (4, 4750), (4, 3000), (8, 2400), (16, 1200), (32, 600)]


def main(path: str) -> None:
    import torch
    from portcheck.kernels import layernorm, rmsnorm
    r = bench_rows()
    x, w, b, y = r.x, r.w, r.b, r.y
    launch = launchers(r)
    ln, rms = launch.layernorm, launch.rmsnorm
    ln_k = patched(layernorm, "layernorm_looped_kernel", [LN_SIG, START], HEADER)
    rms_k = patched(rmsnorm, "rmsnorm_looped_kernel", [RMS_SIG, START], HEADER)
    ln_ref = layernorm.layer_norm(x, w, b, 1e-5)[0].float()
    rms_ref = rmsnorm.rms_norm(x, w, 1e-6)[0].float()
    rows = []
    t = row_timer(x, y, r.copy, rows)
    for _ in range(4):
        t("layernorm main", ln(layernorm.layernorm_looped_kernel), ln_ref)
        for phases, step in SETTINGS:
            t(f"layernorm PHASES={phases} STEP={step}", ln(ln_k, PHASES=phases, STEP=step), ln_ref)
        t("rmsnorm main", rms(rmsnorm.rmsnorm_looped_kernel), rms_ref)
        for phases, step in SETTINGS[:3]:
            t(f"rmsnorm PHASES={phases} STEP={step}", rms(rms_k, PHASES=phases, STEP=step), rms_ref)
    json.dump({"copy_gbs": r.copy, "rows": rows, "torch": torch.__version__, "triton": triton.__version__},
              open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
