"""ULP distance and the comparison verdicts on hand-made pairs."""
import math

import pytest
import torch

from portcheck.compare import compare, ulp_distance, ulp_of
from portcheck.dtypes import fmt
from portcheck.tolerance import Tolerance, exact, rounding


def t(values, dtype):
    return torch.tensor(values, dtype=dtype)


@pytest.mark.parametrize("dtype,a,b,ulps", [
    (torch.float32, 1.0, math.nextafter(1.0, 2.0), 2**29),          # float64 neighbour is far below one fp32 ulp
    (torch.float16, 1.0, 1.0 + 2**-10, 1),
    (torch.float16, 1.0, 1.0 + 2 * 2**-10, 2),
    (torch.bfloat16, 1.0, 1.0 + 2**-7, 1),
    (torch.float16, 0.0, -0.0, 0),                                    # +0 and -0 are one value
    (torch.float16, 2**-24, -(2**-24), 2),                            # the smallest subnormals, either side of 0
    (torch.float16, 65504.0, float("inf"), 1),                        # max finite to inf
    (torch.float32, -1.0, 1.0, 2 * 0x3F800000),
])
def test_ulp_distance_known_pairs(dtype, a, b, ulps):
    if dtype == torch.float32 and ulps == 2**29:
        a32, b32 = t([a], dtype), t([b], dtype)
        assert ulp_distance(a32, b32).item() == 0          # both round to 1.0f
        return
    assert ulp_distance(t([a], dtype), t([b], dtype)).item() == ulps


def test_ulp_distance_nan():
    nan, one = t([float("nan")], torch.float32), t([1.0], torch.float32)
    assert ulp_distance(nan, nan).item() == 0
    assert ulp_distance(nan, one).item() == float("inf")


def test_ulp_of_spacing():
    f16 = fmt("fp16")
    ref = torch.tensor([1.0, 1.5, 2.0, 0.0, 2**-20, 65504.0], dtype=torch.float64)
    expect = [2**-10, 2**-10, 2**-9, 2**-24, 2**-24, 32.0]
    assert ulp_of(ref, f16).tolist() == expect


def test_compare_passes_within_and_fails_beyond_tolerance():
    ref = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    tol = rounding("fp16")                                   # rtol = 2^-11
    ok = compare("y", ref.to(torch.float16), ref, tol)
    assert ok.ok and ok.max_ulp == 0
    out = torch.tensor([1.0, 2.0, 3.0 + 2 ** -8 * 2], dtype=torch.float16)   # four ulps at 3.0
    bad = compare("y", out, ref, tol)
    assert not bad.ok and bad.mismatches == 1 and bad.worst_index == [2]
    assert "1 of 3 elements out of tolerance" in bad.message and "at [2]" in bad.message


def test_nan_and_inf_must_sit_in_the_same_places():
    ref = torch.tensor([float("nan"), float("inf"), 1.0], dtype=torch.float64)
    same = torch.tensor([float("nan"), float("inf"), 1.0], dtype=torch.float32)
    assert compare("y", same, ref, rounding("fp32")).ok
    flipped = torch.tensor([float("nan"), float("-inf"), 1.0], dtype=torch.float32)
    assert not compare("y", flipped, ref, rounding("fp32")).ok
    unwritten = torch.tensor([float("nan"), float("inf"), float("nan")], dtype=torch.float32)
    res = compare("y", unwritten, ref, rounding("fp32"))
    assert not res.ok and "NaN/Inf placement differs" in res.message and res.max_ulp == float("inf")


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_an_infinity_is_the_rounding_of_a_reference_past_the_overflow_threshold(dtype):
    """IEEE round-to-nearest gives inf from max + ulp(max)/2: an infinity of the reference's sign
    is right where the reference, or the reference within its tolerance, reaches that threshold;
    below it, or with the other sign, it is a placement error."""
    f = fmt(dtype)
    top, threshold = torch.finfo(f.torch_dtype).max, f.overflow_threshold
    assert torch.tensor(threshold, dtype=torch.float64).to(torch.float32).to(f.torch_dtype).isinf()
    tol = rounding(dtype)                                            # rtol = u(dtype)
    inf = torch.tensor([float("inf"), float("-inf")], dtype=f.torch_dtype)
    past = torch.tensor([threshold * 1.5, -threshold * 1.5], dtype=torch.float64)
    assert compare("y", inf, past, tol).ok
    within = torch.tensor([threshold, -threshold], dtype=torch.float64) / (1 + f.unit_roundoff / 2)
    assert compare("y", inf, within, tol).ok                         # below it by less than u
    below = torch.tensor([top / 2, -top / 2], dtype=torch.float64)
    res = compare("y", inf, below, tol)
    assert not res.ok and "NaN/Inf placement differs" in res.message and res.mismatches == 2
    assert not compare("y", -inf, past, tol).ok                      # the other sign
    saturated = torch.tensor([top, -top], dtype=f.torch_dtype)        # max where IEEE gives inf
    assert not compare("y", saturated, past, tol).ok


def test_formats_without_infinities_have_no_overflow_threshold():
    assert fmt("fp8e4nv").overflow_threshold is None and fmt("fp8e4b8").overflow_threshold is None
    assert fmt("fp8e5").overflow_threshold == 57344 + 4096 and fmt("int8").overflow_threshold is None


def test_per_element_tolerance_tensors():
    ref = torch.tensor([1.0, 1.0], dtype=torch.float64)
    out = torch.tensor([1.001, 1.001], dtype=torch.float32)
    tol = Tolerance(torch.tensor([1e-2, 1e-4], dtype=torch.float64), 0.0, "per element")
    res = compare("y", out, ref, tol)
    assert res.mismatches == 1 and res.worst_index == [1]


def test_exact_compare_is_bitwise():
    codes = torch.tensor([1, 2, 3], dtype=torch.int8)
    assert compare("q", codes.clone(), codes, exact()).ok
    res = compare("q", torch.tensor([1, 2, 4], dtype=torch.int8), codes, exact())
    assert not res.ok and res.mismatches == 1 and "first at [2]" in res.message
    z = torch.tensor([0.0], dtype=torch.float16)
    assert not compare("q", -z, z, exact()).ok          # -0 and +0 differ bitwise
    assert not compare("q", codes.to(torch.int32), codes, exact()).ok   # dtype mismatch
    nan_pos, nan_neg = torch.tensor([0x7F], dtype=torch.uint8), torch.tensor([0xFF], dtype=torch.uint8)
    e4m3 = torch.float8_e4m3fn
    assert compare("q", nan_pos.view(e4m3), nan_neg.view(e4m3), exact()).ok   # NaN sign: unspecified
    assert not compare("q", nan_pos.view(e4m3), torch.zeros(1, dtype=e4m3), exact()).ok


def test_shape_mismatch_is_a_failure():
    res = compare("y", torch.zeros(3), torch.zeros(4, dtype=torch.float64), rounding("fp32"))
    assert not res.ok and "shape (3,), expected (4,)" in res.message


def test_ulps_are_counted_wherever_the_reference_stands_clear_of_the_absolute_bound():
    # a sum judged by an absolute bound alone (rtol 0): 0.002 off at 6.0 in fp32 is thousands
    # of ULPs, not "0 ULP"; near zero, inside the bound, ULPs of a tiny reference say nothing
    tol = Tolerance(atol=1e-3, rtol=0.0, formula="u * sum |x|")
    ref = torch.tensor([6.0, 1e-6], dtype=torch.float64)
    out = torch.tensor([6.002, 1e-6 + 5e-4], dtype=torch.float32)
    res = compare("y", out, ref, tol)
    assert not res.ok and res.mismatches == 1
    assert res.max_ulp == pytest.approx(0.002 / 2**-21, rel=1e-3)   # fp32 ULP at 6 is 2^-21
