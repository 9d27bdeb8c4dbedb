"""Long rows (bf16 4096 x 131072): chunks staged in L1 ahead of the register loads. With main's L2
prefetch, softmax's Nsight Compute profile (`../twelfth-session/ncu-loops.txt`) still puts 14% of
its warp samples on pass 1's wait for the chunk in flight (now an L2 hit) and 4.5% on each row's
first chunk. A register chunk further ahead spills; `prefetch.global.L1` holds nothing in
registers: each thread asks for one 128-byte line of the chunk after the one in flight, so the
register load that follows hits L1.

- L1P = 1: pass 1, on the chunk at `start`, prefetches start + 2 BLOCK into L1;
  L1P = 2: pass 2 does the same (its chunks are in L2 since pass 1), and during pass 2's last
  chunk the next row's first chunk goes to L1 too.
- FAR: the L2 prefetch one chunk further (start + 3 BLOCK), so that the L1 prefetch of a chunk
  comes after its L2 prefetch has had a chunk's time.
- LayerNorm gets main's L2 prefetch of softmax (the chunk after the one in flight, the next row's
  first two) with the L1 prefetch beside it.
- LayerNorm WB (main's kernel otherwise): pass 2's weight and bias, L2 hits that every chunk
  waits on (the seventh session's `bounds`: 0.87 of copy without them), staged in L1 a chunk
  ahead: WB = 1 during pass 2, WB = 2 also pass 2's first chunk during pass 1's last (72 and 96
  bytes spilled, sm_90a), WB = 3 as 2 with pass 2's prefetch after the chunk's store, where its
  registers are free.

Copies of main's own kernel source (patched.py's `patched`), timed in the same rounds as main's.

    python3 l1_prefetch.py OUT.json           (after pip install -e . at the repository root)
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
def prefetch_l1(ptr, BLOCK: tl.constexpr, ok):
    \"\"\"each thread asks L1 for one 128-byte line of the BLOCK elements at ptr, where ok\"\"\"
    LINE: tl.constexpr = 128 // (ptr.dtype.element_ty.primitive_bitwidth // 8)
    LINES: tl.constexpr = BLOCK // LINE if BLOCK >= LINE else 1
    lines = ptr + tl.arange(0, LINES) * LINE
    tl.inline_asm_elementwise("{ .reg .pred p; setp.ne.u32 p, $2, 0; @p prefetch.global.L1 [$1]; mov.u32 $0, 0; }",
                              "=r,l,r", [lines.to(tl.int64, bitcast=True), ok.to(tl.int32)],
                              dtype=tl.int32, is_pure=False, pack=1)
"""

SM_SIG = ("PREFETCH: tl.constexpr = False):", "PREFETCH: tl.constexpr = False, L1P: tl.constexpr = 0, FAR: tl.constexpr = 0):")
SM_P1 = ("""                prefetch_l2(x_row + start + 2 * BLOCK, BLOCK, lead & (start + 3 * BLOCK <= n_cols), policy)""",
         """                prefetch_l2(x_row + start + (2 + FAR) * BLOCK, BLOCK, lead & (start + (3 + FAR) * BLOCK <= n_cols), policy)
            if L1P >= 1:
                prefetch_l1(x_row + start + 2 * BLOCK, BLOCK, start + 3 * BLOCK <= n_cols)""")
SM_P2 = ("""                            & (row + tl.num_programs(0) < n_rows), policy)""",
         """                            & (row + tl.num_programs(0) < n_rows), policy)
            if L1P >= 2:
                prefetch_l1(x_row + start + 2 * BLOCK, BLOCK, start + 3 * BLOCK <= n_cols)
                prefetch_l1(x_ptr + (row64 + tl.num_programs(0)) * x_stride, BLOCK,
                            (start + BLOCK >= n_cols) & (BLOCK <= n_cols) & (row + tl.num_programs(0) < n_rows))""")

LN_SIG = ("EVEN: tl.constexpr):", "EVEN: tl.constexpr, L1P: tl.constexpr = 0):")
LN_START = ("    cols = tl.arange(0, BLOCK)\n",
            "    cols = tl.arange(0, BLOCK)\n    lead = lead_thread(tl.program_id(0))\n    policy = evict_last_policy(tl.program_id(0))\n")
LN_L1 = ('nxt = tl.load(x_row + start + BLOCK + cols, mask=all_or_none(start + BLOCK < n_cols, BLOCK),\n'
         '                              eviction_policy="evict_last")')
LN_L2 = ('nxt = tl.load(x_row + start + BLOCK + cols, mask=all_or_none(start + BLOCK < n_cols, BLOCK),\n'
         '                              eviction_policy="evict_first")')
LN_P1 = (LN_L1, LN_L1 + """
                prefetch_l2(x_row + start + 2 * BLOCK, BLOCK, lead & (start + 3 * BLOCK <= n_cols), policy)
                if L1P >= 1:
                    prefetch_l1(x_row + start + 2 * BLOCK, BLOCK, start + 3 * BLOCK <= n_cols)""")
LN_P2 = (LN_L2, LN_L2 + """
                prefetch_l2(x_ptr + (row64 + tl.num_programs(0)) * x_stride + start, BLOCK,
                            lead & (start < 2 * BLOCK) & (start + BLOCK <= n_cols)
                            & (row + tl.num_programs(0) < n_rows), policy)
                if L1P >= 2:
                    prefetch_l1(x_row + start + 2 * BLOCK, BLOCK, start + 3 * BLOCK <= n_cols)""")

LN_WB_SIG = ("EVEN: tl.constexpr):", "EVEN: tl.constexpr, WB: tl.constexpr = 0):")
LN_WB_P1 = (LN_L1, LN_L1 + """
                if WB >= 2:
                    prefetch_l1(w_ptr, BLOCK, start + BLOCK >= n_cols)
                    prefetch_l1(b_ptr, BLOCK, start + BLOCK >= n_cols)""")
LN_WB_P2 = (LN_L2, LN_L2 + """
                if WB == 1 or WB == 2:
                    prefetch_l1(w_ptr + start + BLOCK, BLOCK, start + 2 * BLOCK <= n_cols)
                    prefetch_l1(b_ptr + start + BLOCK, BLOCK, start + 2 * BLOCK <= n_cols)""")

LN_STORE = 'tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=ok, eviction_policy="evict_first")'
LN_WB_END = (LN_STORE, LN_STORE + """
            if WB == 3:
                prefetch_l1(w_ptr + start + BLOCK, BLOCK, start + 2 * BLOCK <= n_cols)
                prefetch_l1(b_ptr + start + BLOCK, BLOCK, start + 2 * BLOCK <= n_cols)""")


def main(path: str) -> None:
    import torch
    from portcheck.kernels import layernorm, softmax
    r = bench_rows()
    x, w, b, y = r.x, r.w, r.b, r.y
    launch = launchers(r)
    sm, ln = launch.softmax, launch.layernorm
    sm_k = patched(softmax, "softmax_online_kernel", [SM_SIG, SM_P1, SM_P2], HEADER)
    ln_k = patched(layernorm, "layernorm_looped_kernel", [LN_SIG, LN_START, LN_P1, LN_P2], HEADER)
    wb_k = patched(layernorm, "layernorm_looped_kernel", [LN_WB_SIG, LN_WB_P1, LN_WB_P2, LN_WB_END], HEADER)
    sm_ref = softmax.softmax(x, long_rows=True).float()
    ln_ref = layernorm.layer_norm(x, w, b, 1e-5)[0].float()
    rows = []
    t = row_timer(x, y, r.copy, rows)
    for _ in range(2):
        t("softmax main", sm(softmax.softmax_online_kernel), sm_ref)
        for l1p in (0, 1, 2):
            for far in (0, 1):
                t(f"softmax L1P={l1p} FAR={far}", sm(sm_k, L1P=l1p, FAR=far), sm_ref)
        t("layernorm main", ln(layernorm.layernorm_looped_kernel), ln_ref)
        for l1p in (0, 1, 2):
            t(f"layernorm L2 prefetch L1P={l1p}", ln(ln_k, L1P=l1p), ln_ref)
        for wb in (1, 2, 3):
            t(f"layernorm WB={wb}", ln(wb_k, WB=wb), ln_ref)
    json.dump({"copy_gbs": r.copy, "rows": rows, "torch": torch.__version__, "triton": triton.__version__},
              open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
