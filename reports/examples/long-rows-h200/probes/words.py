"""Softmax long rows (bf16 4096 x 131072): the public launcher as it is (bf16 rows read as int32
words, WORDS) against the same launcher with words_ok() answering False (element loads), ten
rounds alternating in one process, against the copy bandwidth of this process; each output
compared with the words' (max_abs_diff_vs_main: 0.0 when the bits agree).

    python3 words.py OUT.json           (after pip install -e . at the repository root)

Run in the twenty-second session on e4101d9's launcher, whose words_ok(x) took no chunk (since
then words_ok(x, block) also refuses chunks of one element; the bench's chunk is 16384).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py beside it
from rows_common import bench_rows, row_timer  # noqa: E402

from portcheck.kernels import softmax as SM  # noqa: E402

r = bench_rows()
rows = []
t = row_timer(r.x, r.y, r.copy, rows)
words_ok = SM.words_ok
SM.softmax(r.x, r.y, long_rows=True)
ref = r.y.float().clone()
for round_ in range(10):
    for label, ok in (("words", words_ok), ("elements", lambda x, block: False))[::1 if round_ % 2 == 0 else -1]:
        SM.words_ok = ok
        t(f"round {round_} {label}", lambda: SM.softmax(r.x, r.y, long_rows=True), ref)
SM.words_ok = words_ok
json.dump({"copy_gbs": r.copy, "sms": r.sms, "rows": rows}, open(sys.argv[1], "w"), indent=1)
