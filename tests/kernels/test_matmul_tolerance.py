"""matmul's accumulation bound holds for the accumulator it models.

The tolerance of portcheck/kernels/matmul.py rests on a model of the matrix units: each MMA
instruction aligns its addends (the running accumulator and its products) to the largest
exponent and keeps a fixed number of fraction bits, truncating the rest, and so does its result.
Here that accumulator is emulated exactly in float64 and the bound is checked on random and on
adversarial inputs: same-sign terms of equal size, where truncation errors never cancel.
"""
import math

import pytest
import torch

from portcheck.kernels import matmul as mm


def _truncate(x: torch.Tensor, frac_bits: int, exp: torch.Tensor) -> torch.Tensor:
    """x truncated toward zero to a multiple of 2^(exp - frac_bits)."""
    q = torch.ldexp(torch.ones_like(x), exp - frac_bits)
    return torch.trunc(x / q) * q


def _exponent(x: torch.Tensor) -> torch.Tensor:
    _, e = torch.frexp(x)
    return e.to(torch.int64) - 1   # |x| in [2^e, 2^(e+1))


def mma_chain(products: torch.Tensor, group: int, frac_bits: int) -> torch.Tensor:
    """Sum the products (rows: output elements, columns: k) one MMA of `group` products at a
    time into an accumulator that keeps `frac_bits` fraction bits, aligning and truncating."""
    acc = torch.zeros(products.shape[0], dtype=torch.float64)
    for start in range(0, products.shape[1], group):
        terms = torch.cat([acc[:, None], products[:, start:start + group]], dim=1)
        big = terms.abs().amax(dim=1)
        e = torch.where(big > 0, _exponent(big), torch.zeros_like(big, dtype=torch.int64))
        total = _truncate(terms, frac_bits, e[:, None]).sum(dim=1)
        e2 = torch.where(total != 0, _exponent(total), torch.zeros_like(e))
        acc = _truncate(total, frac_bits, e2)
    return acc


def promoted(products: torch.Tensor, block_k: int, group: int, frac_bits: int) -> torch.Tensor:
    """Each BLOCK_K slice summed by the MMA chain, then added to an fp32 accumulator (RN)."""
    acc = torch.zeros(products.shape[0], dtype=torch.float32)
    for start in range(0, products.shape[1], block_k):
        part = mma_chain(products[:, start:start + block_k], group, frac_bits)
        acc = (acc.double() + part).float()
    return acc.double()


def _products(kind: str, rows: int, k: int, gen) -> torch.Tensor:
    if kind == "random":
        a = torch.randn(rows, k, generator=gen, dtype=torch.float64)
        b = torch.randn(rows, k, generator=gen, dtype=torch.float64)
        return (a.to(torch.float8_e4m3fn).double() * b.to(torch.float8_e4m3fn).double())
    if kind == "equal":      # same sign, same size: every truncation loses in the same direction
        return torch.full((rows, k), (1.0 + 7 / 8) / 8 * (1 + 7 / 8), dtype=torch.float64)
    if kind == "ramp":       # growing terms: the accumulator's exponent keeps climbing
        return torch.linspace(1, 448, k, dtype=torch.float64).to(torch.float8_e4m3fn).double().repeat(rows, 1)
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["random", "equal", "ramp"])
@pytest.mark.parametrize("k,block_k", [(32, 128), (200, 64), (1000, 128), (4096, 128)])
def test_fp22_bound_holds_for_the_hopper_fp8_accumulator(kind, k, block_k):
    gen = torch.Generator().manual_seed(k)
    p = _products(kind, 64, k, gen)
    exact = p.sum(dim=1)
    got = promoted(p, block_k, mm.FP8_MMA_K, 13)
    coef, _ = mm.accumulation_bound("fp8e4nv", k, block_k, None, "partial")
    bound = coef * p.abs().sum(dim=1)
    err = (got - exact).abs()
    assert (err <= bound).all(), f"worst err/bound {float((err / bound).max()):.3g}"
    if kind == "equal" and k >= 1000:   # not vacuous: truncation really loses a part of it
        assert float((err / bound).max()) > 0.05


@pytest.mark.parametrize("kind", ["random", "equal", "ramp"])
@pytest.mark.parametrize("k,group", [(16, 16), (333, 16), (4096, 16), (1000, 8)])
def test_fp32_bound_holds_for_a_truncating_tensor_core(kind, k, group):
    """fp16 / bf16 / tf32 MMAs: products exact, addends aligned and truncated at fp32's 23
    fraction bits, one MMA of `group` products at a time (k = 16 for fp16, 8 for tf32)."""
    gen = torch.Generator().manual_seed(k + group)
    p = _products(kind, 64, k, gen)
    got = mma_chain(p, group, 23)
    coef, _ = mm.accumulation_bound("fp16", k, None, None, None)
    bound = coef * p.abs().sum(dim=1)
    assert ((got - p.sum(dim=1)).abs() <= bound).all()


def test_the_model_matters():
    """Without promotion, a 13-bit accumulator over K = 4096 breaks the promoted bound."""
    p = _products("equal", 4, 4096, None)
    got = mma_chain(p, mm.FP8_MMA_K, 13)
    coef, _ = mm.accumulation_bound("fp8e4nv", 4096, 128, None, "partial")
    assert ((got - p.sum(dim=1)).abs() > coef * p.abs().sum(dim=1)).all()
    assert math.isclose(coef, 34 * 4 * 2.0 ** -13 + 33 * 2.0 ** -23)
