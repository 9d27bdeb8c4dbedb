"""Where a planned matmul launch (bf16 1 x 4104 x 4104, split-K) spends its host time: each part
timed alone, in interleaved rounds, next to the whole launch and torch's, in one process."""
import json
import statistics
import sys
import time

import torch

from portcheck.kernels import _plans
from portcheck.kernels._launch import arrival_counters, current_stream, scratch
from portcheck.kernels.matmul import launcher as M


def main(path):
    a = torch.randn(1, 4104, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4104, 4104, device="cuda", dtype=torch.bfloat16)
    small = torch.zeros(1024, device="cuda")
    for _ in range(20):
        M.matmul(a, b)
    key = M._plan_key(a, b, None, None, "none", None, None, None, None, None)
    plan = M._PLANS.get(key)
    assert plan is not None
    out = torch.empty(plan.out_shape, dtype=plan.out_dtype, device=a.device)
    values = plan.values.copy()
    values[:6] = a, b, out, None, None, None
    stream = current_stream(a.device)
    if plan.ws is not None:
        values[plan.ws[0]] = scratch(a.device, plan.ws[1], plan.ws[2], stream)
    if plan.locks is not None:
        values[plan.locks[0]] = arrival_counters(a.device, plan.locks[1], stream)
    parts = {
        "torch floor: small.add_(1)": lambda: small.add_(1),
        "torch.matmul(a, b)": lambda: torch.matmul(a, b),
        "portcheck matmul(a, b), planned": lambda: M.matmul(a, b),
        "key: matmul._plan_key": lambda: M._plan_key(a, b, None, None, "none", None, None, None, None, None),
        "key: _plans.metadata_key alone": lambda: _plans.metadata_key((a, b, None, None, None, None), ("none", None, None, None), 0),
        "plans lookup (key + get)": lambda: M._PLANS.get(M._plan_key(a, b, None, None, "none", None, None, None, None, None)),
        "torch.empty(out)": lambda: torch.empty(plan.out_shape, dtype=plan.out_dtype, device=a.device),
        "current_stream": lambda: current_stream(a.device),
        "scratch + arrival_counters": lambda: (scratch(a.device, plan.ws[1], plan.ws[2], stream),
                                               arrival_counters(a.device, plan.locks[1], stream)),
        "torch.cuda.is_current_stream_capturing": torch.cuda.is_current_stream_capturing,
        "Triton launcher call (plan.kernel.launch)": lambda: plan.kernel.launch(stream, *values),
        "_Plan.launch (all but the key)": lambda: plan.launch(a, b, None, None, None, None),
    }
    per = {k: [] for k in parts}
    for _ in range(15):
        for name, fn in parts.items():
            fn()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(200):
                fn()
            per[name].append((time.perf_counter() - t0) / 200 * 1e6)
    torch.cuda.synchronize()
    rows = [{"what": k, "host_us": statistics.median(v)} for k, v in per.items()]
    for r in rows:
        print(json.dumps(r), flush=True)
    json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
