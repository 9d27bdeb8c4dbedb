"""Roofline arithmetic (portcheck/speed/roofline.py): floors, bounds, rates and fractions."""
import math

import pytest

from portcheck.speed import roofline
from portcheck.facts.archs import ARCHS


def test_memory_bound_floor_is_bytes_over_bandwidth():
    # softmax bf16 32768 x 4096: 512 MiB moved, 5 flops per element
    nbytes, flops = 2 * 32768 * 4096 * 2, 5 * 32768 * 4096
    f = roofline.floor(nbytes, flops, 4800.0, {"bf16": 989.5}, "bf16")
    assert f.bound == "memory"
    assert math.isclose(f.ms, nbytes / 4.8e12 * 1e3)
    assert math.isclose(f.memory_ms, f.ms) and f.compute_ms < f.memory_ms
    assert f.rate_key == "bf16" and f.tflops == 989.5


def test_compute_bound_floor_is_flops_over_the_dtype_rate():
    m = n = k = 8192
    nbytes, flops = 3 * m * n * 2, 2 * m * n * k
    f = roofline.floor(nbytes, flops, 4800.0, {"bf16": 989.5, "fp8": 1979.0}, "bf16")
    assert f.bound == "compute"
    assert math.isclose(f.ms, flops / 989.5e12 * 1e3)
    f8 = roofline.floor(nbytes, flops, 4800.0, {"bf16": 989.5, "fp8": 1979.0}, "fp8e4nv")
    assert f8.rate_key == "fp8" and math.isclose(f8.ms, f.ms / 2)


def test_fp32_uses_the_faster_matrix_rate_so_the_floor_stays_a_lower_bound():
    assert roofline.best_rate({"tf32": 494.5, "fp32": 67.0}, "fp32") == ("tf32", 494.5)
    assert roofline.best_rate({"fp32": 95.7}, "fp32") == ("fp32", 95.7)
    assert roofline.best_rate({"bf16": 383.0}, "fp32") == (None, None)
    # a ceiling that failed to measure is not a rate
    assert roofline.best_rate({"tf32": None, "fp32": 50.0}, "fp32") == ("fp32", 50.0)
    assert roofline.best_rate({"fp8": -1.0}, "fp8e5") == (None, None)


def test_no_rate_for_the_dtype_leaves_the_bandwidth_term():
    f = roofline.floor(1_000_000, 10_000, 1000.0, {"bf16": 100.0}, "int32")
    assert f.bound == "memory" and f.compute_ms is None and f.rate_key is None
    assert math.isclose(f.ms, 1.0e-3)       # 1 MB at 1 TB/s = 1 us
    pure_copy = roofline.floor(1_000_000, 0, 1000.0, {}, "int32")
    assert pure_copy.compute_ms == 0.0


def test_achieved_rates_and_fractions():
    a = roofline.achieved(4_000_000_000, 2_000_000_000_000, 1.0)
    assert math.isclose(a["gbs"], 4000.0) and math.isclose(a["tflops"], 2000.0)
    assert roofline.fraction(0.95, 1.0) == 0.95
    with pytest.raises(ValueError):
        roofline.achieved(1, 1, 0.0)
    with pytest.raises(ValueError):
        roofline.fraction(1.0, -1.0)
    with pytest.raises(ValueError):
        roofline.floor(-1, 0, 1.0, {}, "fp32")
    with pytest.raises(ValueError):
        roofline.floor(1, 0, 0.0, {}, "fp32")


def test_datasheet_model_per_arch():
    nbytes = 512 * 2**20
    h200 = roofline.model_floor(nbytes, 0, ARCHS["sm_90a"], "bf16")
    mi300 = roofline.model_floor(nbytes, 0, ARCHS["gfx942"], "bf16")
    assert math.isclose(h200.ms, nbytes / 4800e6) and math.isclose(mi300.ms, nbytes / 5300e6)
    assert mi300.ms < h200.ms
    # a fraction of the datasheet floor is the achieved bandwidth over the datasheet bandwidth
    measured_ms = nbytes / 4220e6
    assert math.isclose(roofline.fraction(h200.ms, measured_ms), 4220 / 4800)
