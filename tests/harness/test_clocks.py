"""GPU clocks for provenance (portcheck/speed/clocks.py): NVML and amdsmi through fakes (no GPU
here), the command-line fallbacks when they are absent, and throttle reasons in the bench report."""
import sys
import types

import pytest

from portcheck.speed import clocks


class FakeNVMLError(Exception):
    pass


def fake_pynvml(*, fails_init=False, unsupported=(), reasons=0x4, event_api=True):
    """A pynvml with one GPU at index 0 (UUID GPU-abc); `unsupported` queries raise NVMLError."""
    calls = []

    def query(name, value):
        def fn(device, *args):
            calls.append((name, device, args))
            if name in unsupported:
                raise FakeNVMLError(f"{name}: Not Supported")
            return value(*args) if callable(value) else value
        return fn

    def by_index(i):
        if i != 0:
            raise FakeNVMLError("Invalid Argument")
        return "dev0"

    def init():
        calls.append(("init",))
        if fails_init:
            raise FakeNVMLError("Driver Not Loaded")
    nvml = types.SimpleNamespace(
        NVMLError=FakeNVMLError, NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2, NVML_TEMPERATURE_GPU=0,
        nvmlInit=init, nvmlShutdown=lambda: calls.append(("shutdown",)),
        nvmlDeviceGetHandleByIndex=by_index,
        nvmlDeviceGetHandleByUUID=lambda u: "dev0" if u == "GPU-abc" else by_index(-1),
        nvmlDeviceGetClockInfo=query("clock", lambda kind: {1: 1980, 2: 3201}[kind]),
        nvmlDeviceGetMaxClockInfo=query("max_clock", lambda kind: {1: 1980, 2: 3201}[kind]),
        nvmlDeviceGetTemperature=query("temperature", 41),
        nvmlDeviceGetPowerUsage=query("power", 312500),   # milliwatts
        nvmlDeviceGetCurrentClocksThrottleReasons=query("reasons", reasons))
    if event_api:
        nvml.nvmlDeviceGetCurrentClocksEventReasons = query("reasons", reasons)
    nvml.calls = calls
    return nvml


def test_nvml_reading_has_the_nvidia_smi_keys_and_throttle_reasons():
    nvml = fake_pynvml(reasons=0x4 | 0x40)
    got = clocks.read_nvml("GPU-abc", nvml)
    assert got == {"tool": "nvml", "clocks.sm": 1980, "clocks.mem": 3201, "clocks.max.sm": 1980,
                   "clocks.max.mem": 3201, "temperature.gpu": 41, "power.draw": 312.5,
                   "throttle_reasons": ["sw_power_cap", "hw_thermal_slowdown"]}
    assert nvml.calls[0] == ("init",) and nvml.calls[-1] == ("shutdown",)


def test_nvml_older_api_and_unsupported_fields():
    got = clocks.read_nvml("0", fake_pynvml(event_api=False, unsupported=("power", "max_clock"), reasons=0))
    assert got["power.draw"] is None and got["clocks.max.sm"] is None and got["clocks.sm"] == 1980
    assert got["throttle_reasons"] == []


def test_nvml_that_does_not_answer_gives_none():
    assert clocks.read_nvml("0", fake_pynvml(fails_init=True)) is None
    nvml = fake_pynvml()
    assert clocks.read_nvml("3", nvml) is None          # no such device
    assert nvml.calls[-1] == ("shutdown",)               # NVML is shut down all the same


def test_unknown_throttle_bits_stay_visible():
    assert clocks.throttle_reasons(0x1 | 0x10000) == ["gpu_idle", "0x10000"]


def test_read_prefers_nvml_and_selects_the_device_by_uuid(monkeypatch):
    nvml = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.setattr(clocks, "_run", lambda cmd: pytest.fail(f"ran {cmd} although NVML answered"))
    got = clocks.read("nvidia", "abc")
    assert got["tool"] == "nvml" and got["throttle_reasons"] == ["sw_power_cap"]


def test_read_falls_back_to_nvidia_smi_without_pynvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)    # import pynvml raises ImportError
    asked = []

    def run(cmd):
        asked.append(cmd)
        query = cmd[3].split("=", 1)[1].split(",")
        if clocks.NVIDIA_REASONS in query:
            return None                                  # a driver that does not know the name
        return ", ".join(["1755"] * len(query)) + "\n"
    monkeypatch.setattr(clocks, "_run", run)
    got = clocks.read("nvidia", "abc")
    assert got["tool"] == "nvidia-smi" and got["clocks.sm"] == 1755 and got["power.draw"] == 1755
    assert [c[2] for c in asked] == ["GPU-abc", "GPU-abc"]


def test_nvidia_smi_throttle_mask_is_parsed():
    fields = (*clocks.NVIDIA_MINIMAL, clocks.NVIDIA_REASONS)
    assert clocks.parse_nvidia_smi("1410, 1593, 0x0000000000000024", fields) == {
        "clocks.sm": 1410, "clocks.mem": 1593, "throttle_reasons": ["sw_power_cap", "sw_thermal_slowdown"]}
    assert clocks.parse_nvidia_smi("1410, 1593, [N/A]", fields)["throttle_reasons"] is None


class FakeAmdSmiException(Exception):
    pass


def fake_amdsmi(*, throttle=0x2, gpus=1):
    calls = []
    clk = {"GFX": {"clk": 2100, "min_clk": 500, "max_clk": 2100, "clk_locked": 0, "clk_deep_sleep": 0},
           "MEM": {"clk": 1300, "min_clk": 900, "max_clk": 1300, "clk_locked": 0, "clk_deep_sleep": 0}}
    return types.SimpleNamespace(
        AmdSmiException=FakeAmdSmiException, AmdSmiClkType=types.SimpleNamespace(GFX="GFX", MEM="MEM"),
        amdsmi_init=lambda: calls.append("init"), amdsmi_shut_down=lambda: calls.append("shut_down"),
        amdsmi_get_processor_handles=lambda: [f"gpu{i}" for i in range(gpus)],
        amdsmi_get_clock_info=lambda device, kind: clk[kind],
        amdsmi_get_gpu_metrics_info=lambda device: {"throttle_status": throttle},
        calls=calls)


def test_amdsmi_reading_has_the_rocm_smi_keys():
    amd = fake_amdsmi()
    assert clocks.read_amdsmi("0", amd) == {"tool": "amdsmi", "sclk_mhz": 2100, "sclk_max_mhz": 2100,
                                            "mclk_mhz": 1300, "mclk_max_mhz": 1300, "throttle_status": 2}
    assert amd.calls == ["init", "shut_down"]
    assert clocks.read_amdsmi("0", fake_amdsmi(throttle="N/A"))["throttle_status"] is None
    assert clocks.read_amdsmi("1", fake_amdsmi(gpus=1)) is None


def test_read_falls_back_to_rocm_smi_without_amdsmi(monkeypatch):
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    monkeypatch.setattr(clocks, "_run", lambda cmd: '{"card0": {"sclk clock level": "(2100Mhz)"}}')
    assert clocks.read("amd") == {"tool": "rocm-smi", "sclk_mhz": 2100}


def test_read_says_why_when_nothing_answers(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    monkeypatch.setattr(clocks, "_run", lambda cmd: None)
    assert "nvidia-smi" in clocks.read("nvidia")["error"]
    assert "rocm-smi" in clocks.read("amd")["error"]


def test_bench_report_flags_throttling_but_not_idle():
    from portcheck.speed.report import _flags
    held = {"bench": {"clocks": {"after": {"throttle_reasons": ["gpu_idle", "sw_power_cap"]}}}}
    idle = {"bench": {"clocks": {"after": {"throttle_reasons": ["gpu_idle"]}}}}
    assert _flags(held) == "clocks held back after the run: sw_power_cap"
    assert _flags(idle) == ""
