"""Long rows (bf16 4096 x 131072): the next row's first chunk loaded during this row's pass 2.

Nsight Compute (`../eighth-session/ncu-*.csv`): outside their loops, where each row starts and
its passes meet, softmax spends 22% of its warp samples (8.2% at one instruction: the row's
first chunk, waited for from HBM with nothing else in flight) and RMSNorm and LayerNorm about
10%. Here copies of main's kernels (main's source with text replaced, patched.py) load the next
row's first chunk (row + P, P programs) right after pass 2's first load and carry it to the next
row, so a row starts with its first chunk in registers. Timed with main in the same rounds.

    python3 cross_row.py OUT.json           (after pip install -e . at the repository root)
"""
import json
import os
import sys

import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py beside it
from patched import patched  # noqa: E402


def _edits(other: str) -> list:
    """The three edits, for a kernel whose row loop starts `for row in range(...)` and whose loads
    take `other`: load the program's first row's chunk before the loop, start each row from the
    carried chunk, and load the next row's after pass 2's first load."""
    first = (f"tl.load(x_ptr + ROW * x_stride + cols, mask=cols < (ROW < n_rows).to(tl.int32) * n_cols, other={other}, "
             "eviction_policy=\"evict_last\")")
    return [
        ("    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):",
         "    carried = " + first.replace("ROW", "tl.program_id(0).to(tl.int64)") + "\n"
         "    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):"),
        (f"nxt = tl.load(x_row + cols, mask=cols < n_cols, other={other}, eviction_policy=\"evict_last\")",
         "nxt = carried"),
    ]


PASS2 = {
    "softmax": ("nxt = tl.load(x_row + cols, mask=cols < n_cols, other=-float(\"inf\"), eviction_policy=\"evict_first\")",
                "-float(\"inf\")"),
    "layernorm": ("nxt = tl.load(x_row + cols, mask=cols < n_cols, other=0.0, eviction_policy=\"evict_first\")", "0.0"),
    "rmsnorm": ("x2 = tl.load(x_row + HALF + half, mask=HALF + half < n_cols, other=0.0, eviction_policy=\"evict_first\")",
                "0.0"),
}


def edits(family: str) -> list:
    anchor, other = PASS2[family]
    nxt_row = (f"tl.load(x_ptr + (row64 + tl.num_programs(0)) * x_stride + cols, "
               f"mask=cols < (row + tl.num_programs(0) < n_rows).to(tl.int32) * n_cols, other={other}, "
               "eviction_policy=\"evict_last\")")
    indent = "        "
    return _edits(other) + [(anchor, anchor + "\n" + indent + "carried = " + nxt_row)]


def main(path: str) -> None:
    import torch
    from rows_common import bench_rows, row_timer
    from portcheck.kernels import layernorm, rmsnorm, softmax
    r = bench_rows()
    x, w, b, y, mean, rstd = r.x, r.w, r.b, r.y, r.mean, r.rstd
    n_rows, n_cols, sms, copy = r.n_rows, r.n_cols, r.sms, r.copy
    sm_k = patched(softmax, "softmax_online_kernel", edits("softmax"))
    ln_k = patched(layernorm, "layernorm_looped_kernel", edits("layernorm"))
    rms_k = patched(rmsnorm, "rmsnorm_looped_kernel", edits("rmsnorm"))
    refs = {"softmax": softmax.softmax(x).float(), "layernorm": layernorm.layer_norm(x, w, b, 1e-5)[0].float(),
            "rmsnorm": rmsnorm.rms_norm(x, w, 1e-6)[0].float()}
    cfg = {f: m.config(n_cols, 32, True, None, 2) for f, m in
           (("softmax", softmax), ("layernorm", layernorm), ("rmsnorm", rmsnorm))}
    rows = []
    t = row_timer(x, y, copy, rows)
    for _ in range(3):
        t("softmax main", lambda: softmax.softmax(x, out=y, long_rows=True), refs["softmax"])
        t("softmax cross-row", lambda: sm_k[(sms,)](x, y, n_rows, n_cols, n_cols, n_cols, BLOCK=cfg["softmax"]["BLOCK"],
                                                     num_warps=cfg["softmax"]["num_warps"]), refs["softmax"])
        t("rmsnorm main", lambda: rmsnorm.rms_norm(x, w, 1e-6, out=y, long_rows=True), refs["rmsnorm"])
        t("rmsnorm cross-row", lambda: rms_k[(sms,)](x, w, y, rstd, n_rows, n_cols, n_cols, n_cols, 1e-6, HAS_W=True,
                                                      BLOCK=cfg["rmsnorm"]["BLOCK"], num_warps=cfg["rmsnorm"]["num_warps"]),
          refs["rmsnorm"])
        t("layernorm main", lambda: layernorm.layer_norm(x, w, b, 1e-5, out=y, long_rows=True), refs["layernorm"])
        t("layernorm cross-row", lambda: ln_k[(sms,)](x, w, b, y, mean, rstd, n_rows, n_cols, n_cols, n_cols, 1e-5,
                                                       HAS_W=True, HAS_B=True, BLOCK=cfg["layernorm"]["BLOCK"],
                                                       num_warps=cfg["layernorm"]["num_warps"]), refs["layernorm"])
    json.dump({"copy_gbs": copy, "rows": rows, "torch": torch.__version__, "triton": triton.__version__},
              open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
