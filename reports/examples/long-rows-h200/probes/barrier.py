"""Long rows (bf16 4096 x 131072): does a CTA barrier a chunk help a loop that has none?

`thread_state.py` (eleventh session) took LayerNorm's pass 1 from two block reductions a chunk (six
BAR.SYNC in the loop, sm_90a) to none, 269 -> 216 instructions a chunk, and ran at 0.70 of copy
against main's 0.82; every earlier pass 1 without the per-chunk reductions (`ln_shift`, `ln_lanes`,
`ln_joint`) was slower too. One reading: the barriers keep the program's 32 warps on one chunk, so
their loads of the next chunk leave together. Here one `tl.debug_barrier()` a chunk is put into
loops that have no barrier (copies of the kernels' source with that one line added, `patched.py`'s
way): the per-thread LayerNorm of `thread_state.py`, and main's softmax (no reduction across the
program in either pass).

    python3 barrier.py OUT.json           (after pip install -e . at the repository root)
"""
import json
import os
import sys

import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py beside it
from patched import patched  # noqa: E402
from rows_common import bench_rows, row_timer  # noqa: E402
import thread_state  # noqa: E402

BAR = "tl.debug_barrier()\n"
ROWS = "from portcheck.kernels._rows import all_or_none\n"
# after the line that loads the chunk ahead (each text once in its kernel)
LN_AFTER_LOAD = [('''                          eviction_policy="evict_last")
            cm = ''', '''                          eviction_policy="evict_last")
            ''' + BAR + '''            cm = ''')]
LN_BEFORE_CONVERT = [("            x = tl.reshape(nxt.to(tl.float32), [REPS, THREADS, GROUP])\n",
                      "            " + BAR + "            x = tl.reshape(nxt.to(tl.float32), [REPS, THREADS, GROUP])\n")]
SM_PASS1 = [("            x = tl.reshape(nxt.to(tl.float32), [LANES, GROUP])\n",
             "            " + BAR + "            x = tl.reshape(nxt.to(tl.float32), [LANES, GROUP])\n")]
SM_PASS2 = [("            x = nxt.to(tl.float32)\n", "            " + BAR + "            x = nxt.to(tl.float32)\n")]


def main(path: str) -> None:
    import torch
    from portcheck.kernels import layernorm, softmax
    r = bench_rows()
    x, w, b, y, mean, rstd = r.x, r.w, r.b, r.y, r.mean, r.rstd
    n_rows, n_cols, sms, copy = r.n_rows, r.n_cols, r.sms, r.copy
    ref_ln = layernorm.layer_norm(x, w, b, 1e-5)[0].float()
    ref_sm = softmax.softmax(x, long_rows=True).float()
    ln_k = {"per-thread": thread_state.ln_threads_kernel,
            "per-thread, barrier after the load ahead": patched(thread_state, "ln_threads_kernel", LN_AFTER_LOAD, ROWS),
            "per-thread, barrier before the chunk's conversion": patched(thread_state, "ln_threads_kernel", LN_BEFORE_CONVERT, ROWS)}
    sm_k = {"barrier in pass 1": patched(softmax, "softmax_online_kernel", SM_PASS1),
            "barrier in pass 2": patched(softmax, "softmax_online_kernel", SM_PASS2),
            "barrier in both": patched(softmax, "softmax_online_kernel", SM_PASS1 + SM_PASS2)}
    rows = []
    t = row_timer(x, y, copy, rows)
    for _ in range(3):
        t("layernorm main", lambda: layernorm.layer_norm(x, w, b, 1e-5, out=y, mean=mean, rstd=rstd, long_rows=True), ref_ln)
        for name, k in ln_k.items():
            t(f"layernorm {name}", lambda k=k: k[(sms,)](x, w, b, y, mean, rstd, n_rows, n_cols, n_cols, n_cols, 1e-5,
                                                       BLOCK=32768, THREADS=1024, num_warps=32), ref_ln)
        t("softmax main", lambda: softmax.softmax(x, y, long_rows=True), ref_sm)
        for name, k in sm_k.items():
            t(f"softmax {name}", lambda k=k: k[(sms,)](x, y, n_rows, n_cols, n_cols, n_cols, BLOCK=16384, num_warps=32),
              ref_sm)
    json.dump({"copy_gbs": copy, "rows": rows, "torch": torch.__version__, "triton": triton.__version__},
              open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
