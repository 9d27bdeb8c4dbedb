"""Issue 17: what a GPU worker's start costs when 16 start at once. N processes import torch and
Triton, wait for one common instant, then each times its CUDA context (torch.cuda.init and a
first allocation) and its first Triton launch (a one-line kernel; the Triton cache is shared and
empty, as in a cold run). One JSON line per process, then the spread.
    python3 probe_start.py N CACHE_DIR"""
import json
import os
import subprocess
import sys
import time

CHILD = r'''
import json, os, sys, time
import torch, triton, triton.language as tl
@triton.jit
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) + 1, mask=i < n)
go = float(sys.argv[1])
while time.time() < go:
    time.sleep(0.001)
t0 = time.time(); torch.cuda.init(); x = torch.zeros(1000, device="cuda"); torch.cuda.synchronize(); t1 = time.time()
add_one[(4,)](x, 1000, BLOCK=256); torch.cuda.synchronize(); t2 = time.time()
add_one[(4,)](x, 1000, BLOCK=256); torch.cuda.synchronize(); t3 = time.time()
print(json.dumps({"pid": os.getpid(), "context_s": round(t1 - t0, 3), "first_launch_s": round(t2 - t1, 3),
                  "second_launch_s": round(t3 - t2, 4), "done_after_go_s": round(t3 - go, 3)}))
'''


def main(n: int, cache: str) -> None:
    env = {**os.environ, "TRITON_CACHE_DIR": cache}
    go = time.time() + 12      # every child has imported torch and Triton by then
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(go)], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(n)]
    rows = [json.loads(p.communicate()[0]) for p in procs]
    for r in rows:
        print(json.dumps(r))
    for key in ("context_s", "first_launch_s", "done_after_go_s"):
        v = sorted(r[key] for r in rows)
        print(f"{key}: n={n} min {v[0]} median {v[len(v) // 2]} max {v[-1]}")


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
