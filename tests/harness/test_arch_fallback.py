"""A GPU with no row in the arch table runs as the nearest row of its matrix-unit generation, and
says so; one that no row of its vendor fits is refused. The device is faked (no GPU here)."""
import pytest
from triton.backends.compiler import GPUTarget

from portcheck.facts import device
from portcheck.facts.archs import ARCHS, nearest_row
from portcheck.targets import runtime


@pytest.mark.parametrize("name,row", [
    ("sm_86", "sm_80"), ("sm_87", "sm_80"),          # Ampere: RTX 3090 / A6000, Orin
    ("sm_103", "sm_100a"), ("sm_121", "sm_120"),     # newer chips of a generation with a row
    ("sm_130", "sm_120"),                            # newer than every row: not sm_100a's tcgen05
    ("sm_110", "sm_89"),                             # a generation with no row: an older portable one
    ("gfx1101", "gfx1100"), ("gfx1151", "gfx1100"),  # RDNA3 / 3.5: WMMA as gfx1100
    ("gfx1200", "gfx1201"),                          # RDNA4: its one row is above it
    ("gfx941", "gfx942"), ("gfx90c", "gfx90a"), ("gfx908", "gfx90a"),
])
def test_a_device_without_a_row_runs_as_the_nearest_of_its_generation(name, row):
    got, why = nearest_row(name)
    assert got is ARCHS[row]
    assert why.startswith(f"{name} has no row") and f"runs as {row}" in why


def test_a_device_with_a_row_is_its_own():
    for name, arch in ARCHS.items():
        assert nearest_row(name) == (arch, "")


@pytest.mark.parametrize("name", ["sm_75", "gfx1030", "gfx999", "gfx13", "tpu_v5"])
def test_a_device_no_row_of_its_vendor_fits_is_refused(name):
    with pytest.raises(ValueError, match=name):
        nearest_row(name)


@pytest.fixture
def on_device(monkeypatch):
    """Pretend Triton's active device is `target` (a GPUTarget), outside the interpreter."""
    def use(target):
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        monkeypatch.setattr(device, "_triton_target", lambda: target)
        device.current_arch.cache_clear()
    yield use
    device.current_arch.cache_clear()


def test_current_arch_falls_back_and_says_so(on_device):
    on_device(GPUTarget("cuda", 86, 32))
    with pytest.warns(UserWarning, match="sm_86 has no row.*runs as sm_80"):
        assert device.current_arch() is ARCHS["sm_80"]
    assert "runs as sm_80" in device.arch_note()
    on_device(GPUTarget("hip", "gfx1101", 32))
    with pytest.warns(UserWarning, match="runs as gfx1100"):
        assert device.current_arch() is ARCHS["gfx1100"]
    on_device(GPUTarget("cuda", 90, 32))
    assert device.current_arch() is ARCHS["sm_90a"] and device.arch_note() == ""


def test_current_arch_refuses_a_device_no_row_fits(on_device):
    on_device(GPUTarget("cuda", 75, 32))
    with pytest.raises(ValueError, match="sm_75.*add one"):
        device.current_arch()


@pytest.mark.parametrize("arch,says", [("sm_86", "runs as sm_80"), ("sm_75", "add one"), ("sm_90a", None)])
def test_the_target_description_names_the_row_it_runs_as(monkeypatch, arch, says):
    monkeypatch.setattr(runtime, "_describe", lambda name: {"device": "a GPU"})
    monkeypatch.setattr(runtime, "detect_arch", lambda name: arch)
    described = runtime.target("cuda").describe()
    if says is None:
        assert described == {"device": "a GPU"}
    else:
        assert says in described["arch_row"]
