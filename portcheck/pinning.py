"""One GPU per pytest-xdist worker.

The controller (which runs no tests) lists the GPUs it may use and hands the list to every worker
through xdist's workerinput; worker `gwN` then sets CUDA_VISIBLE_DEVICES (NVIDIA) or
HIP_VISIBLE_DEVICES (AMD) to entry N before anything in it initialises the GPU runtime, which
reads the variable once. Benchmarks demand exclusive GPUs: more workers than GPUs is refused, so
no two benchmarks ever share a device. Checking runs may share (workers go round-robin).

No function here initialises CUDA/HIP: the controller counts devices through torch only when no
visibility variable names them, and a worker never touches the runtime before pinning.
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from .errors import UsageError

VISIBLE_VAR = {"nvidia": "CUDA_VISIBLE_DEVICES", "amd": "HIP_VISIBLE_DEVICES"}
# On AMD, HIP honours HIP_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES (ROCR_VISIBLE_DEVICES filters
# below both and is left alone): the first one set names the devices the controller may hand out.
READ_VARS = {"nvidia": ("CUDA_VISIBLE_DEVICES",), "amd": ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")}
WORKERINPUT_KEY = "portcheck_gpus"


def worker_index(worker_id: str | None) -> int | None:
    """'gw3' -> 3; None or 'master' (not an xdist worker) -> None."""
    if worker_id in (None, "", "master"):
        return None
    m = re.fullmatch(r"gw(\d+)", worker_id)
    if not m:
        raise ValueError(f"not a pytest-xdist worker id: {worker_id!r}")
    return int(m.group(1))


def parse_visible(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def visible_devices(vendor: str, env=None, count=None) -> list[str]:
    """The devices this process may use, as the visibility variable spells them (indices or
    UUIDs); without a variable, indices 0..count-1 where `count()` asks the runtime."""
    env = os.environ if env is None else env
    for var in READ_VARS[vendor]:
        if env.get(var) is not None:
            return parse_visible(env[var])
    if count is None:
        import torch
        count = torch.cuda.device_count
    return [str(i) for i in range(count())]


def driver_gpu_count(vendor: str) -> int | None:
    """How many GPUs the kernel driver lists, read from its files (NVIDIA: /proc/driver/nvidia/gpus,
    AMD: the KFD topology's nodes with a GPU id), without loading torch or the runtime; None where
    they cannot be read. Only a guess ahead of the runtime's own count (portcheck run's standbys)."""
    try:
        if vendor == "nvidia":
            return len(os.listdir("/proc/driver/nvidia/gpus")) or None
        nodes = "/sys/class/kfd/kfd/topology/nodes"
        ids = [Path(nodes, node, "gpu_id").read_text().strip() for node in os.listdir(nodes)]
        return sum(i not in ("", "0") for i in ids) or None
    except (OSError, ValueError):
        return None


def assign(index: int, devices: list[str], exclusive: bool) -> str:
    """The device worker `index` owns; exclusive (benchmarks) refuses to share one."""
    if not devices:
        raise UsageError("no GPU is visible to hand to the pytest-xdist workers")
    if exclusive and index >= len(devices):
        raise UsageError(f"worker gw{index} has no GPU of its own: {len(devices)} GPU(s) "
                         f"({','.join(devices)}) for more workers; benchmarks never share a GPU, "
                         f"so use -n {len(devices)} or fewer")
    return devices[index % len(devices)]


def check_worker_count(workers: int, devices: list[str]) -> None:
    """Controller-side refusal of more benchmark workers than GPUs, before any worker starts."""
    if workers > len(devices):
        raise UsageError(f"--bench with {workers} xdist workers but {len(devices)} GPU(s) visible "
                         f"({','.join(devices) or 'none'}): benchmarks never share a GPU; use "
                         f"-n {max(1, len(devices))} or fewer")


def runtime_initialised() -> bool:
    """Whether this process has already initialised CUDA/HIP (then pinning cannot take effect)."""
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized())


def workerinput_entry(vendor: str, devices: list[str], exclusive: bool) -> dict:
    return {"vendor": vendor, "devices": list(devices), "exclusive": bool(exclusive)}


def pin_worker(workerinput: dict | None, env=None) -> str | None:
    """Called first thing in a worker's pytest_configure: set the visibility variable from the
    controller's list and the worker id. Returns the device pinned, or None when not a worker."""
    env = os.environ if env is None else env
    if not workerinput or WORKERINPUT_KEY not in workerinput:
        return None
    index = worker_index(workerinput.get("workerid"))
    if index is None:
        return None
    entry = workerinput[WORKERINPUT_KEY]
    device = assign(index, entry["devices"], entry["exclusive"])
    var = VISIBLE_VAR[entry["vendor"]]
    if runtime_initialised() and env.get(var) != device:
        raise RuntimeError(f"the GPU runtime was initialised in worker gw{index} before portcheck "
                           f"could set {var}={device}; something imported at plugin load touched "
                           "the GPU")
    env[var] = device
    if entry["vendor"] == "amd":   # HIP reads both; make the other one agree or drop it
        env.pop("CUDA_VISIBLE_DEVICES", None)
    return device
