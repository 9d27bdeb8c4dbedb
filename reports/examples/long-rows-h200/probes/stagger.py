"""Long rows (bf16 4096 x 131072): programs started out of phase. The persistent programs all start
row 0 together and take about the same time a row, so the GPU may run every SM's pass 1 (HBM
reads) at once and then every pass 2 (L2 re-reads and HBM writes) at once, where a copy keeps
reads and writes going side by side. Here program p first spins on %globaltimer for
(p % PHASES) * STEP ns, so that the passes of different SMs overlap. Only programs with one row
fewer than the others (p >= n_rows % programs) wait, so the delay up to a row's time costs
nothing at the end (a row takes about 19 us at 0.82 of copy).

Copies of main's kernels (patched.py's `patched`) timed in the same rounds as main's.

    python3 stagger.py OUT.json           (after pip install -e . at the repository root)
"""
import json
import os
import sys

import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py, patched.py
from patched import patched  # noqa: E402
from rows_common import bench_rows, launchers, row_timer  # noqa: E402

HEADER = """from portcheck.kernels._prefetch import evict_last_policy, lead_thread, prefetch_l2
from portcheck.kernels._rows import all_or_none


@triton.jit
def globaltimer(dep):
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [dep], dtype=tl.int64,
                                     is_pure=False, pack=1)


@triton.jit
def wait_phase(n_rows, PHASES: tl.constexpr, STEP: tl.constexpr):
    pid = tl.program_id(0)
    if pid >= n_rows % tl.num_programs(0):
        wait = (pid % PHASES) * STEP
        t0 = globaltimer(pid)
        t = t0
        while t - t0 < wait:
            t = globaltimer(pid)
"""

START = ("    cols = tl.arange(0, BLOCK)\n", "    cols = tl.arange(0, BLOCK)\n    if PHASES > 1:\n        wait_phase(n_rows, PHASES, STEP)\n")
SM_SIG = ("PREFETCH: tl.constexpr = False):", "PREFETCH: tl.constexpr = False, PHASES: tl.constexpr = 1, STEP: tl.constexpr = 0):")
LN_SIG = ("EVEN: tl.constexpr):", "EVEN: tl.constexpr, PHASES: tl.constexpr = 1, STEP: tl.constexpr = 0):")
SETTINGS = [(2, 5000), (2, 9500), (4, 4750), (8, 2400)]


def main(path: str) -> None:
    import torch
    from portcheck.kernels import layernorm, softmax
    r = bench_rows()
    x, w, b, y = r.x, r.w, r.b, r.y
    launch = launchers(r)
    sm, ln = launch.softmax, launch.layernorm
    sm_k = patched(softmax, "softmax_online_kernel", [SM_SIG, START], HEADER)
    ln_k = patched(layernorm, "layernorm_looped_kernel", [LN_SIG, START], HEADER)
    sm_ref = softmax.softmax(x, long_rows=True).float()
    ln_ref = layernorm.layer_norm(x, w, b, 1e-5)[0].float()
    rows = []
    t = row_timer(x, y, r.copy, rows)
    for _ in range(2):
        t("softmax main", sm(softmax.softmax_online_kernel), sm_ref)
        for phases, step in SETTINGS:
            t(f"softmax PHASES={phases} STEP={step}", sm(sm_k, PHASES=phases, STEP=step), sm_ref)
        t("layernorm main", ln(layernorm.layernorm_looped_kernel), ln_ref)
        for phases, step in SETTINGS:
            t(f"layernorm PHASES={phases} STEP={step}", ln(ln_k, PHASES=phases, STEP=step), ln_ref)
    json.dump({"copy_gbs": r.copy, "rows": rows, "torch": torch.__version__, "triton": triton.__version__},
              open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
