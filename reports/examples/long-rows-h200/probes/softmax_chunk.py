"""Softmax long rows (bf16 4096 x 131072): the public launcher with its chunk (16384 columns,
LOOP_BLOCK) against chunk=32768, which spilled the per-lane state when LOOP_BLOCK was chosen and
builds with none now (sm_90a, Triton 3.6: 64 registers, 936 instructions a row's loops with
WORDS), ten rounds alternating in one process, against this process's copy bandwidth; each
output compared with the default chunk's (the lanes differ, so the sums' order does).

    python3 softmax_chunk.py OUT.json           (after pip install -e . at the repository root)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py beside it
from rows_common import bench_rows, row_timer  # noqa: E402

from portcheck.kernels.softmax import softmax  # noqa: E402

r = bench_rows()
rows = []
t = row_timer(r.x, r.y, r.copy, rows)
softmax(r.x, r.y, long_rows=True)
ref = r.y.float().clone()
for round_ in range(10):
    for chunk in (None, 32768)[::1 if round_ % 2 == 0 else -1]:
        t(f"round {round_} softmax chunk={chunk or 'default'}", lambda c=chunk: softmax(r.x, r.y, long_rows=True, chunk=c), ref)
json.dump({"copy_gbs": r.copy, "sms": r.sms, "rows": rows}, open(sys.argv[1], "w"), indent=1)
