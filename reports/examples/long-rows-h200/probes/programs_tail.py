"""Long rows (bf16 4096 x 131072): does the persistent grid's last, partial wave cost? With one
program an SM (132 on the H200), 4096 rows are 31 rows a program and 4 programs with a 32nd, whose
last row runs nearly alone; 128 programs take 32 rows each and leave 4 SMs idle throughout. The
public launchers with `programs=` (main's kernels as they are: LayerNorm's and RMSNorm's programs
with one row fewer start out of phase, so at 128 they stagger none), three rounds, against the copy
bandwidth of this process; each output compared with the default grid's.

    python3 programs_tail.py OUT.json           (after pip install -e . at the repository root)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py beside it
from rows_common import bench_rows, row_timer  # noqa: E402

from portcheck.kernels.layernorm import layer_norm
from portcheck.kernels.rmsnorm import rms_norm
from portcheck.kernels.softmax import softmax

r = bench_rows()
rows = []
t = row_timer(r.x, r.y, r.copy, rows)
launch = {
    "softmax": lambda p: softmax(r.x, r.y, long_rows=True, programs=p),
    "layernorm": lambda p: layer_norm(r.x, r.w, r.b, 1e-5, out=r.y, long_rows=True, programs=p),
    "rmsnorm": lambda p: rms_norm(r.x, r.w, 1e-6, out=r.y, long_rows=True, programs=p),
}
for round_ in range(3):
    for name, fn in launch.items():
        fn(None)
        ref = r.y.float().clone()
        for p in (None, 128, 2 * 128, 4096):
            t(f"round {round_} {name} programs={p or r.sms}", lambda fn=fn, p=p: fn(p), ref)
json.dump({"copy_gbs": r.copy, "sms": r.sms, "rows": rows}, open(sys.argv[1], "w"), indent=1)
