"""What a check worker's waits for its GPU cost the CPU, with CUDA's default scheduling (spin, for
a process with fewer contexts than the machine has cores) and with CU_CTX_SCHED_BLOCKING_SYNC set
on the primary context before torch makes it (the probe of a change tried in the twenty-fourth
session and not kept: README.md): N processes at once on one GPU (as a run's check workers are),
each launching short kernels and waiting for each, report their wall and CPU seconds, and the
primary context's flags as each process saw them.
    python3 reports/examples/speed-h200/twenty-fourth-session/probe_waits.py
"""
import json
import subprocess
import sys
import time

CHILD = r"""
import ctypes, json, sys, time
blocking = sys.argv[1] == "1"
cuda = ctypes.CDLL("libcuda.so.1")
if blocking:   # CU_CTX_SCHED_BLOCKING_SYNC on device 0's primary context, before torch makes it
    dev = ctypes.c_int()
    assert cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cuda.cuDevicePrimaryCtxSetFlags_v2(dev, 0x04) == 0
import torch
x = torch.ones(1 << 20, device="cuda")
torch.cuda.synchronize()
flags, active, dev = ctypes.c_uint(), ctypes.c_int(), ctypes.c_int()
cuda.cuDeviceGet(ctypes.byref(dev), 0)
cuda.cuDevicePrimaryCtxGetState(dev, ctypes.byref(flags), ctypes.byref(active))
w0, c0 = time.perf_counter(), time.process_time()
for _ in range(int(sys.argv[2])):
    torch.cuda._sleep(200_000)   # about 0.1 ms of GPU time at the H200's clocks
    x.add_(1)
    float(x[0])                  # a read-back: the host waits for the GPU
print(json.dumps({"flags": flags.value, "wall": time.perf_counter() - w0, "cpu": time.process_time() - c0}))
"""


def round_of(processes: int, blocking: bool, waits: int) -> dict:
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, "1" if blocking else "0", str(waits)],
                              stdout=subprocess.PIPE, text=True) for _ in range(processes)]
    outs = [json.loads(p.communicate(timeout=300)[0].strip().splitlines()[-1]) for p in procs]
    return {"processes": processes, "blocking_sync": blocking,
            "flags": sorted({o["flags"] for o in outs}),
            "wall_s_max": round(max(o["wall"] for o in outs), 2),
            "cpu_s_sum": round(sum(o["cpu"] for o in outs), 2),
            "cpu_per_wall": round(sum(o["cpu"] for o in outs) / max(o["wall"] for o in outs), 2)}


if __name__ == "__main__":
    for processes in (1, 16):
        for blocking in (False, True, False, True):
            print(json.dumps(round_of(processes, blocking, 400)), flush=True)
