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


def test_an_fp32_row_sum_allows_what_gpu_atomics_flush():
    """An H200 summed a row of fp32 subnormals by tl.atomic_add to 0 (atom.add.f32 flushes
    subnormal inputs and results on global memory): row_reduction allows n tiny(fp32) near zero in
    fp32, and nothing more where the sum is in fp16 (atom.add.noftz.f16 keeps subnormals)."""
    import torch

    from portcheck.tolerance import row_reduction
    subnormal = torch.full((2, 3), 2.0**-130, dtype=torch.float64)
    fp32 = row_reduction(subnormal, "fp32")
    assert torch.all(fp32.atol >= 3 * 2.0**-126) and "n tiny(fp32)" in fp32.formula
    assert torch.all(fp32.atol >= subnormal.sum(-1))   # a sum flushed to 0 passes
    fp16 = row_reduction(subnormal, "fp16", acc="fp16")
    assert torch.all(fp16.atol < 2.0**-23) and "tiny" not in fp16.formula   # sub(fp16) = 2^-24 and rounding
