"""Read a GPU's clocks and throttle reasons for provenance, read-only: through NVML (`pynvml`,
from the nvidia-ml-py package) on NVIDIA and amdsmi on AMD when those are importable, else
through nvidia-smi and rocm-smi. Neither library is a dependency.

portcheck never sets clocks (no application-clock locks, no power limits): a figure states the
clocks it ran at, before and after, so a throttled run is visible instead of silently slow.
"""
from __future__ import annotations

import json
import os
import re

from ..targets.runtime import _run   # a tool's stdout, or None when absent / failing / slow

NVIDIA_FIELDS = ("clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem", "temperature.gpu",
                 "power.draw")
NVIDIA_MINIMAL = ("clocks.sm", "clocks.mem")
NVIDIA_REASONS = "clocks_throttle_reasons.active"   # a hex bit mask, the bits below
# NVML's clocks event (throttle) reason bits, named as nvidia-smi names them
THROTTLE_REASONS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
                    0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
                    0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
                    0x100: "display_clock_setting"}


def _number(text: str):
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        return None   # "[N/A]", "[Not Supported]"
    return int(value) if value.is_integer() else value


def throttle_reasons(mask: int) -> list[str]:
    """The names of the reasons set in an NVML throttle mask (unknown bits as hex)."""
    names = [name for bit, name in THROTTLE_REASONS.items() if mask & bit]
    rest = mask & ~sum(THROTTLE_REASONS)
    return names + ([hex(rest)] if rest else [])


def parse_nvidia_smi(csv_line: str, fields=NVIDIA_FIELDS) -> dict:
    """One `--format=csv,noheader,nounits` line -> {field: number or None}; the throttle-reason
    mask, when queried, becomes "throttle_reasons": [names]."""
    values = [v.strip() for v in csv_line.strip().splitlines()[0].split(",")]
    if len(values) != len(fields):
        raise ValueError(f"nvidia-smi gave {len(values)} values for {len(fields)} fields: {csv_line!r}")
    out = {}
    for f, v in zip(fields, values):
        if f == NVIDIA_REASONS:
            try:
                out["throttle_reasons"] = throttle_reasons(int(v, 16))
            except ValueError:
                out["throttle_reasons"] = None   # "[N/A]"
        else:
            out[f] = _number(v)
    return out


def read_nvml(selector: str, nvml=None) -> dict | None:
    """Clocks, temperature, power and throttle reasons of one GPU through NVML, with the same
    keys as the nvidia-smi query; None when pynvml is absent or NVML does not answer."""
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            return None
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return None
    try:
        device = (nvml.nvmlDeviceGetHandleByIndex(int(selector)) if selector.isdigit()
                  else nvml.nvmlDeviceGetHandleByUUID(selector))

        def ask(query, *args):   # a field this GPU or driver does not report is None
            try:
                return query(device, *args)
            except nvml.NVMLError:
                return None
        sm, mem = nvml.NVML_CLOCK_SM, nvml.NVML_CLOCK_MEM
        power_mw = ask(nvml.nvmlDeviceGetPowerUsage)
        # renamed "clocks event reasons" in newer NVML; the bits are the same
        reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        mask = ask(reasons)
        return {"tool": "nvml", "clocks.sm": ask(nvml.nvmlDeviceGetClockInfo, sm),
                "clocks.mem": ask(nvml.nvmlDeviceGetClockInfo, mem),
                "clocks.max.sm": ask(nvml.nvmlDeviceGetMaxClockInfo, sm),
                "clocks.max.mem": ask(nvml.nvmlDeviceGetMaxClockInfo, mem),
                "temperature.gpu": ask(nvml.nvmlDeviceGetTemperature, nvml.NVML_TEMPERATURE_GPU),
                "power.draw": None if power_mw is None else power_mw / 1000,
                "throttle_reasons": None if mask is None else throttle_reasons(mask)}
    except nvml.NVMLError:
        return None   # no such device
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass


def nvidia_selector(uuid: str | None, env=None) -> str | None:
    """The `nvidia-smi -i` argument for torch's device 0: its UUID when torch knows it, else the
    first entry of CUDA_VISIBLE_DEVICES (nvidia-smi ignores that variable), else index 0."""
    env = os.environ if env is None else env
    if uuid:
        uuid = str(uuid)
        return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
    visible = [v.strip() for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    return visible[0] if visible else "0"


def parse_rocm_smi(text: str) -> dict:
    """`rocm-smi --showclocks --json` -> {"sclk_mhz": ..., "mclk_mhz": ...} for its first card."""
    data = json.loads(text)
    card = next((v for k, v in data.items() if k.lower().startswith("card")), None)
    if not isinstance(card, dict):
        raise ValueError("rocm-smi JSON has no card entry")
    out = {}
    for key, value in card.items():
        m = re.search(r"(\d+(?:\.\d+)?)\s*mhz", str(value), re.IGNORECASE)
        name = key.lower()
        for clock in ("sclk", "mclk", "fclk", "socclk"):
            if name.startswith(clock) and m:
                out[f"{clock}_mhz"] = _number(m.group(1))
    return out


def rocm_selector(env=None) -> str:
    """rocm-smi's device index for torch's device 0 (rocm-smi ignores HIP_VISIBLE_DEVICES)."""
    env = os.environ if env is None else env
    for var in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        visible = [v.strip() for v in env.get(var, "").split(",") if v.strip()]
        if visible and visible[0].isdigit():
            return visible[0]
    return "0"


def read_amdsmi(index: str, amdsmi=None) -> dict | None:
    """Clocks and the throttle status of one GPU through amdsmi, with the same keys as the
    rocm-smi reading; None when amdsmi is absent or does not answer."""
    if amdsmi is None:
        try:
            import amdsmi
        except ImportError:
            return None
    try:
        amdsmi.amdsmi_init()
    except amdsmi.AmdSmiException:
        return None
    try:
        device = amdsmi.amdsmi_get_processor_handles()[int(index)]
        out = {"tool": "amdsmi"}
        for name, kind in (("sclk", amdsmi.AmdSmiClkType.GFX), ("mclk", amdsmi.AmdSmiClkType.MEM)):
            info = amdsmi.amdsmi_get_clock_info(device, kind)   # MHz
            out[f"{name}_mhz"], out[f"{name}_max_mhz"] = info.get("clk"), info.get("max_clk")
        try:
            status = amdsmi.amdsmi_get_gpu_metrics_info(device).get("throttle_status")
        except amdsmi.AmdSmiException:
            status = None
        out["throttle_status"] = status if isinstance(status, int) else None   # "N/A" on some GPUs
        return out
    except (amdsmi.AmdSmiException, IndexError):
        return None
    finally:
        try:
            amdsmi.amdsmi_shut_down()
        except amdsmi.AmdSmiException:
            pass


def read(vendor: str, uuid: str | None = None) -> dict:
    """Current clocks of torch's device 0, from NVML or amdsmi when importable, else from the
    command-line tool; {"error": why} when none answers."""
    if vendor == "nvidia":
        sel = nvidia_selector(uuid)
        found = read_nvml(sel)
        if found is not None:
            return found
        # older drivers lack some fields, and newer ones may drop the throttle-reason name
        for fields in ((*NVIDIA_FIELDS, NVIDIA_REASONS), NVIDIA_FIELDS, NVIDIA_MINIMAL):
            text = _run(["nvidia-smi", "-i", sel, f"--query-gpu={','.join(fields)}",
                         "--format=csv,noheader,nounits"])
            if text:
                try:
                    return {"tool": "nvidia-smi", **parse_nvidia_smi(text, fields)}
                except ValueError:
                    continue
        return {"error": "neither NVML (pynvml) nor nvidia-smi is available or answered"}
    if vendor == "amd":
        found = read_amdsmi(rocm_selector())
        if found is not None:
            return found
        text = _run(["rocm-smi", "-d", rocm_selector(), "--showclocks", "--json"])
        if text:
            try:
                return {"tool": "rocm-smi", **parse_rocm_smi(text)}
            except (ValueError, json.JSONDecodeError):
                pass
        return {"error": "neither amdsmi nor rocm-smi is available or answered"}
    return {"error": f"no clock reader for vendor {vendor!r}"}
