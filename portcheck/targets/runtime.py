"""Runtime targets: where a kernel actually runs (cuda, rocm, the CPU interpreter).

The interpreter is a process-wide mode: Triton decides at `@triton.jit` time, from
TRITON_INTERPRET, whether a kernel is compiled or interpreted. So a process serves either the
interpreter or a GPU target, and `select_mode` must run before any kernel module is imported.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache

from ..errors import UsageError
from ..facts.archs import arch_from_cuda_capability, arch_from_gcn_name, nearest_row

RUNTIME_TARGETS = ("cuda", "rocm", "interpreter")
INTERPRETER_ARCH = "cpu-interpreter"


@dataclass(frozen=True)
class Availability:
    ok: bool
    reason: str


@dataclass(frozen=True)
class Target:
    name: str          # cuda | rocm | interpreter
    vendor: str        # nvidia | amd | cpu
    device: str        # the torch device kernels run on

    @property
    def is_gpu(self) -> bool:
        return self.name != "interpreter"

    def availability(self) -> Availability:
        return _availability(self.name)

    def arch(self) -> str:
        return detect_arch(self.name)

    def describe(self) -> dict:
        """Device name, driver and runtime versions, for provenance."""
        if self.name == "interpreter":   # and whether the numerics layer was on (--raw-interpreter)
            from . import interpreter_lanes, interpreter_numerics
            return {**_describe(self.name), "numerics": interpreter_numerics.describe(),
                    "undefined_lanes": interpreter_lanes.describe()}
        try:   # a device with no row of its own runs as the nearest row of its generation
            why = nearest_row(self.arch())[1]
        except ValueError as exc:   # none fits: its kernels refuse to launch, and the record says why
            why = str(exc)
        return {**_describe(self.name), "arch_row": why} if why else _describe(self.name)


TARGETS = {
    "cuda": Target("cuda", "nvidia", "cuda"),
    "rocm": Target("rocm", "amd", "cuda"),  # torch's HIP build keeps the 'cuda' device type
    "interpreter": Target("interpreter", "cpu", "cpu"),
}


def target(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise UsageError(f"unknown target {name!r}; known: {', '.join(TARGETS)}, auto") from None


def _torch():
    import torch
    return torch


@lru_cache(maxsize=None)
def _availability(name: str) -> Availability:
    if name == "interpreter":
        try:
            import numpy  # noqa: F401  the interpreter needs it
        except ImportError:
            return Availability(False, "the Triton interpreter needs numpy, which is not installed")
        return Availability(True, "runs on the CPU through TRITON_INTERPRET=1")
    torch = _torch()
    hip = getattr(torch.version, "hip", None)
    if name == "cuda" and hip:
        return Availability(False, f"this torch is a ROCm build (HIP {hip}); use --target=rocm")
    if name == "rocm" and not hip:
        built = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU-only"
        return Availability(False, f"this torch is a {built} build, not a ROCm build")
    if name == "cuda" and not torch.version.cuda:
        return Availability(False, "this torch is a CPU-only build (torch.version.cuda is None)")
    # counted through NVML where torch can, without initialising CUDA/HIP: the runtime reads the
    # visibility variable once, when it starts, and a pytest-xdist worker asks for 'auto' before
    # it pins its GPU (pinning.pin_worker); is_available() and the device's name would start it
    count = torch.cuda.device_count()
    if count == 0:
        return Availability(False, f"torch sees no {'AMD' if hip else 'NVIDIA'} GPU on this machine")
    return Availability(True, f"{count} device(s) visible")


def detect_arch(name: str) -> str:
    if name == "interpreter":
        return INTERPRETER_ARCH
    torch = _torch()
    if name == "rocm":
        return arch_from_gcn_name(torch.cuda.get_device_properties(0).gcnArchName)
    return arch_from_cuda_capability(*torch.cuda.get_device_capability(0))


def _run(cmd: list[str]) -> str | None:
    if not shutil.which(cmd[0]):
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


@lru_cache(maxsize=None)
def _describe(name: str) -> dict:
    torch = _torch()
    if name == "interpreter":
        import platform
        return {"device": f"CPU ({platform.processor() or platform.machine()}), Triton interpreter",
                "driver": None, "runtime": "TRITON_INTERPRET=1"}
    props = torch.cuda.get_device_properties(0)
    if name == "rocm":
        driver = _run(["rocm-smi", "--showdriverversion", "--csv"])
        return {"device": props.name, "driver": driver and driver.splitlines()[-1],
                "runtime": f"HIP {torch.version.hip}", "gcn_arch": props.gcnArchName}
    driver = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    return {"device": props.name, "driver": driver and driver.splitlines()[0],
            "runtime": f"CUDA {torch.version.cuda}", "sm_count": props.multi_processor_count}


def available_gpu_target() -> str | None:
    for name in ("cuda", "rocm"):
        if _availability(name).ok:
            return name
    return None


def resolve(name: str) -> str:
    """'auto' -> the GPU this machine has, else the interpreter; other names are validated."""
    if name == "auto":
        return available_gpu_target() or "interpreter"
    return target(name).name


def target_env(target_name: str) -> dict:
    """This process's environment for a process that runs on the target: the interpreter's mode
    on for the interpreter alone (select_mode sets it in the process itself)."""
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    if target_name == "interpreter":
        env["TRITON_INTERPRET"] = "1"
    return env


def select_mode(target_name: str, raw_interpreter: bool = False) -> None:
    """Fix this process's Triton mode for the target; call before importing any kernel module.
    The interpreter gets portcheck's numerics layer (interpreter_numerics) and poisoned undefined
    lanes (interpreter_lanes) unless raw_interpreter."""
    if target_name == "interpreter":
        os.environ["TRITON_INTERPRET"] = "1"
        # inputs with inf/NaN are deliberate; numpy's warnings about them are noise here
        import warnings
        warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"triton\.runtime\.interpreter")
        from . import interpreter_lanes, interpreter_numerics
        for layer in (interpreter_numerics, interpreter_lanes):
            layer.uninstall() if raw_interpreter else layer.install()
        # Checks on the CPU move small tensors (tens of KB): torch's intra-op threads only contend
        # there, with each other and with pytest-xdist's workers. Re-homing one input into guard
        # bands took 0.3 ms with one thread and 34 ms with two on a loaded 2-core machine.
        import torch
        torch.set_num_threads(1)
    else:
        os.environ.pop("TRITON_INTERPRET", None)
        from ..workers import share_cpus
        share_cpus()   # the float64 oracles and comparisons of several workers share the CPUs
