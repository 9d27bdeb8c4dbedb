"""Softmax long rows (bf16 4096 x 131072) with main's L2 prefetch: two cheaper merges, as copies
of main's own kernel source (patched.py's `patched`) timed in the same rounds as main's.

- `one exp`: pass 1 merges each group into its lane with one exp2 instead of two: the smaller of
  the two maxima's sum is scaled by 2^(-|m - g_max| log2 e) and the larger's taken as it is
  (main computes both scales, one of which is 2^0). The same IEEE cases: an empty sum (only
  -inf so far) adds nothing, a NaN sum stays NaN on either side.
- `joint end`: the row's max and total in one reduction of (max, sum) pairs, merged the same
  way, where main reduces the max and then the rescaled sums (two reductions across the program
  a row, each a shared-memory round and a barrier).

    python3 softmax_merge.py OUT.json           (after pip install -e . at the repository root)
"""
import json
import os
import sys

import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py, patched.py
from patched import patched  # noqa: E402
from rows_common import bench_rows, row_timer  # noqa: E402

HEADER = """from portcheck.kernels._prefetch import evict_last_policy, lead_thread, prefetch_l2


@triton.jit
def merge(m1, s1, m2, s2):
    LOG2E: tl.constexpr = 1.4426950408889634
    big = m1 >= m2
    d = tl.math.exp2(-tl.abs(m1 - m2) * LOG2E)
    small = tl.where(big, s2, s1)
    s = tl.where(big, s1, s2) + tl.where(small == 0.0, 0.0, small * d)
    return tl.maximum(m1, m2), s
"""

MAIN_MERGE = """            new = tl.maximum(m, g_max)
            s = tl.where(s == 0.0, 0.0, s * tl.math.exp2((m - new) * LOG2E)) + \\
                tl.where(g_sum == 0.0, 0.0, g_sum * tl.math.exp2((g_max - new) * LOG2E))
            m = new"""
ONE_EXP = [(MAIN_MERGE, "            m, s = merge(m, s, g_max, g_sum)")]
MAIN_END = """        row_max = tl.max(m, axis=0)"""
MAIN_TOTAL = """        total = tl.sum(tl.where(s == 0.0, 0.0, s * tl.math.exp2((m - row_max) * LOG2E)), axis=0)"""
JOINT_END = [(MAIN_END, "        row_max, total = tl.reduce((m, s), 0, merge)"), (MAIN_TOTAL, "")]


def main(path: str) -> None:
    import torch
    from portcheck.kernels import softmax
    r = bench_rows()
    x, y, n_rows, n_cols, sms, copy = r.x, r.y, r.n_rows, r.n_cols, r.sms, r.copy
    cfg = softmax.config(n_cols, 32, True, None, 2)
    kernels = {"main": softmax.softmax_online_kernel,
               "one exp": patched(softmax, "softmax_online_kernel", ONE_EXP, HEADER),
               "joint end": patched(softmax, "softmax_online_kernel", JOINT_END, HEADER),
               "one exp + joint end": patched(softmax, "softmax_online_kernel", ONE_EXP + JOINT_END, HEADER)}
    ref = softmax.softmax(x, long_rows=True).float()
    rows = []
    t = row_timer(x, y, copy, rows)
    for _ in range(3):
        for name, kern in kernels.items():
            t(f"softmax {name}", lambda kern=kern: kern[(sms,)](x, y, n_rows, n_cols, n_cols, n_cols,
                                                               BLOCK=cfg["BLOCK"], PREFETCH=True,
                                                               num_warps=cfg["num_warps"]), ref)
    json.dump({"copy_gbs": copy, "rows": rows, "torch": torch.__version__, "triton": triton.__version__},
              open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
