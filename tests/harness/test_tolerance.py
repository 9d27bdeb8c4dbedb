"""Tolerance formulas: unit roundoff of the formats and growth with reduction length."""
import pytest

from portcheck.dtypes import fmt
from portcheck.errors import UsageError
from portcheck.tolerance import exact, rounding


@pytest.mark.parametrize("name,u,tiny", [("fp32", 2**-24, 2**-126), ("fp16", 2**-11, 2**-14),
                                         ("bf16", 2**-8, 2**-126), ("fp8e4nv", 2**-4, 2**-6),
                                         ("fp8e5", 2**-3, 2**-14), ("fp8e4b8", 2**-4, 2**-7)])
def test_unit_roundoff(name, u, tiny):
    assert fmt(name).unit_roundoff == u and fmt(name).tiny == tiny


def test_rounding_grows_with_reduction_length():
    short, long_ = rounding("fp16", reduction=16), rounding("fp16", reduction=4096)
    assert short.rtol == 2**-11 + 16 * 2**-24
    assert long_.rtol == 2**-11 + 4096 * 2**-24
    assert "u(fp16) + (4096 + 0)*u(fp32)" in long_.formula and "atol = sub(fp16) + 4096 sub(fp32)" in long_.formula


def test_override_scales_and_says_why():
    tol = rounding("fp32", reduction=10).scaled(4, "denormals flushed on gfx90a")
    assert tol.rtol == 4 * (2**-24 + 10 * 2**-24)
    assert "override: denormals flushed on gfx90a" in tol.formula


def test_exact_and_unknown_dtype():
    assert exact().exact and exact().rtol == 0
    with pytest.raises(UsageError, match="unknown dtype 'fp12'"):
        fmt("fp12")
