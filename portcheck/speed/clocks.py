"""Read a GPU's clocks for provenance, read-only: nvidia-smi queries on NVIDIA, rocm-smi on AMD.

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


def _number(text: str):
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        return None   # "[N/A]", "[Not Supported]"
    return int(value) if value.is_integer() else value


def parse_nvidia_smi(csv_line: str, fields=NVIDIA_FIELDS) -> dict:
    """One `--format=csv,noheader,nounits` line -> {field: number or None}."""
    values = [v.strip() for v in csv_line.strip().splitlines()[0].split(",")]
    if len(values) != len(fields):
        raise ValueError(f"nvidia-smi gave {len(values)} values for {len(fields)} fields: {csv_line!r}")
    return {f: _number(v) for f, v in zip(fields, values)}


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


def read(vendor: str, uuid: str | None = None) -> dict:
    """Current clocks of torch's device 0, or {"error": why} when the tool is not there."""
    if vendor == "nvidia":
        sel = nvidia_selector(uuid)
        for fields in (NVIDIA_FIELDS, NVIDIA_MINIMAL):  # older drivers lack some fields
            text = _run(["nvidia-smi", "-i", sel, f"--query-gpu={','.join(fields)}",
                         "--format=csv,noheader,nounits"])
            if text:
                try:
                    return {"tool": "nvidia-smi", **parse_nvidia_smi(text, fields)}
                except ValueError:
                    continue
        return {"error": "nvidia-smi is not available or did not answer"}
    if vendor == "amd":
        text = _run(["rocm-smi", "-d", rocm_selector(), "--showclocks", "--json"])
        if text:
            try:
                return {"tool": "rocm-smi", **parse_rocm_smi(text)}
            except (ValueError, json.JSONDecodeError):
                pass
        return {"error": "rocm-smi is not available or did not answer"}
    return {"error": f"no clock reader for vendor {vendor!r}"}
