"""Where a `portcheck run` process's first seconds go on a GPU machine: each step of a fresh
process timed in turn (imports, the CUDA driver's start, device queries, a context), printed as
JSON. Run it alone, then beside a process that holds a CUDA context, then 16 at once.
  python3 reports/examples/speed-h200/eighteenth-session/startup.py [label]
"""
import json
import sys
import time

t0 = time.perf_counter()
steps = []


def step(name, fn):
    start = time.perf_counter()
    fn()
    steps.append((name, round(time.perf_counter() - start, 3)))


step("import torch", lambda: __import__("torch"))
step("import triton", lambda: __import__("triton"))
step("import portcheck.commands.run", lambda: __import__("portcheck.commands.run"))
import torch  # noqa: E402
step("torch.cuda.is_available", torch.cuda.is_available)
step("torch.cuda.device_count", torch.cuda.device_count)
step("get_device_properties", lambda: torch.cuda.get_device_properties(0))
step("first tensor (context)", lambda: (torch.zeros(1, device="cuda"), torch.cuda.synchronize()))
from portcheck.targets.runtime import target  # noqa: E402
step("cuda availability()", lambda: target("cuda").availability())
step("cuda describe()", lambda: target("cuda").describe())
print(json.dumps({"label": sys.argv[1] if len(sys.argv) > 1 else "",
                  "since python start": round(time.perf_counter() - t0, 3), "steps": steps}))
