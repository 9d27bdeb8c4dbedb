"""The norm and GELU oracles against torch's own float64 functions; what their tolerances say about
cancellation; and the launchers refusing bad input before any launch."""
import math

import pytest
import torch
import torch.nn.functional as F

from portcheck import cases
from portcheck.oracles import gelu as gelu_oracle
from portcheck.oracles import norms


def _data(rows=7, cols=33, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, cols, generator=g, dtype=torch.float64) * 3 + 1,
            torch.randn(cols, generator=g, dtype=torch.float64),
            torch.randn(cols, generator=g, dtype=torch.float64))


@pytest.mark.parametrize("affine", ["none", "weight", "both"])
def test_layer_norm_matches_torch(affine):
    x, w, b = _data()
    w = None if affine == "none" else w
    b = b if affine == "both" else None
    y, mean, rstd = norms.layer_norm(x, w, b, 1e-5)
    torch.testing.assert_close(y, F.layer_norm(x, (x.shape[-1],), w, b, 1e-5), rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(mean, x.mean(-1), rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(rstd, 1 / torch.sqrt(x.var(-1, unbiased=False) + 1e-5), rtol=1e-13, atol=0)


def test_layer_norm_of_equal_values_is_the_bias():
    x = torch.full((2, 16), 3.7, dtype=torch.float64)
    _, b, _ = _data(cols=16)
    y, mean, rstd = norms.layer_norm(x, None, b, 1e-6)
    assert torch.equal(y, b.expand(2, 16)) and torch.allclose(rstd, torch.full((2,), 1e3, dtype=torch.float64))


@pytest.mark.parametrize("weighted", [False, True])
def test_rms_norm_matches_torch(weighted):
    x, w, _ = _data()
    w = w if weighted else None
    y, rstd = norms.rms_norm(x, w, 1e-6)
    eager = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * (w if w is not None else 1)
    torch.testing.assert_close(y, eager, rtol=1e-14, atol=1e-14)
    if hasattr(F, "rms_norm"):
        torch.testing.assert_close(y, F.rms_norm(x, (x.shape[-1],), w, 1e-6), rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(rstd, torch.rsqrt(x.pow(2).mean(-1) + 1e-6), rtol=1e-14, atol=0)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_matches_torch_including_inf_and_nan(approximate):
    a = torch.cat([torch.linspace(-12, 12, 2001, dtype=torch.float64),
                   torch.tensor([float("inf"), float("nan"), -float("inf"), 1e300, -1e300], dtype=torch.float64)])
    ours, theirs = gelu_oracle.gelu(a, approximate), F.gelu(a, approximate=approximate)
    assert torch.equal(ours.isnan(), theirs.isnan()) and math.isnan(ours[-3]), "gelu(-inf) = -inf * 0: NaN"
    finite = ours.isfinite()
    assert torch.equal(ours[~finite & ~ours.isnan()], theirs[~finite & ~ours.isnan()])   # gelu(inf) = inf
    # torch computes 1 + erf(w), which cancels for very negative a: absolute error ~|a| 2^-53
    slack = 1e-14 * theirs.abs() + 2e-16 * a.abs()
    assert ((ours - theirs)[finite].abs() <= slack[finite]).all()


def test_gelu_keeps_relative_accuracy_in_the_left_tail():
    # Phi(-10) = 7.619853024160527e-24 (the standard normal CDF), so gelu(-10) = -10 Phi(-10)
    assert math.isclose(float(gelu_oracle.gelu(torch.tensor([-10.0], dtype=torch.float64))),
                        -7.619853024160527e-23, rel_tol=1e-12)


def test_bias_gelu_dropout_reference():
    x, _, b = _data(rows=64, cols=100)
    y0, keep0 = gelu_oracle.bias_gelu_dropout(x, b, 0.0, seed=3, offset=0)
    assert keep0.all() and torch.equal(y0, gelu_oracle.gelu(x + b))
    y1, keep1 = gelu_oracle.bias_gelu_dropout(x, b, 1.0, seed=3, offset=0)
    assert not keep1.any() and not y1.any()
    y, keep = gelu_oracle.bias_gelu_dropout(x, b, 0.25, seed=3, offset=10)
    torch.testing.assert_close(y[keep], gelu_oracle.gelu(x + b)[keep] / 0.75, rtol=1e-15, atol=0)
    assert not y[~keep].any()
    # the mask is a stream over row-major element indices: offset + 1 shifts it by one element
    _, later = gelu_oracle.bias_gelu_dropout(x, b, 0.25, seed=3, offset=11)
    assert torch.equal(keep.flatten()[1:], later.flatten()[:-1])


# ---- tolerances: condition-aware where the algorithm cancels ----------------------------------

def _tolerance(case_name, x, dtype="fp32", **extra):
    case = cases.get(case_name)
    args = {"x": x, "weight": None, "bias": None, "eps": 1e-5, **extra}
    refs = case.oracle(args)
    return case.tolerance(args, refs, dtype)


def test_layernorm_atol_grows_with_the_rows_condition():
    g = torch.Generator().manual_seed(1)
    centred = torch.randn(1, 512, generator=g, dtype=torch.float64)
    shifted = centred + 1e3                        # same sigma, |x| / sigma 1000 times larger
    tight = _tolerance("layernorm", centred)["y"].atol.max()
    loose = _tolerance("layernorm", shifted)["y"].atol.max()
    assert 100 < loose / tight < 10_000
    assert tight < 1e-3                           # n u(fp32) scale for a well-conditioned row


def test_layernorm_tolerance_of_a_zero_variance_row_is_finite_and_states_its_formula():
    tol = _tolerance("layernorm", torch.full((3, 100), 2.5, dtype=torch.float64))
    assert torch.isfinite(tol["y"].atol).all() and "t = (n+2) (u M + sub(fp32)) s" in tol["y"].formula


def test_rmsnorm_tolerance_is_relative_and_grows_with_n():
    short = _tolerance("rmsnorm", torch.ones(1, 64, dtype=torch.float64), "fp16")["y"]
    long = _tolerance("rmsnorm", torch.ones(1, 8192, dtype=torch.float64), "fp16")["y"]
    assert 2.0**-11 < short.rtol < long.rtol < 2.0**-11 + 8192 * 2.0**-24


# ---- launchers refuse bad input before launching ------------------------------------------------

def test_launchers_refuse_bad_input():
    from portcheck.kernels.bias_gelu_dropout import bias_gelu_dropout
    from portcheck.kernels.layernorm import layer_norm
    from portcheck.kernels.rmsnorm import rms_norm
    x = torch.zeros(4, 8, dtype=torch.float16)
    bad = [
        (lambda: layer_norm(x[0]), "must be 2-D"),
        (lambda: layer_norm(x.t()), "unit stride"),
        (lambda: layer_norm(x.to(torch.float64)), "dtype"),
        (lambda: layer_norm(x, torch.ones(7, dtype=torch.float16)), "weight must have shape (8,)"),
        (lambda: layer_norm(x, None, torch.ones(8)), "bias has dtype"),
        (lambda: layer_norm(x, eps=-1.0), "eps"),
        (lambda: layer_norm(x, out=torch.empty(4, 8)), "out must be"),
        (lambda: rms_norm(x, None, rstd=torch.empty(3)), "rstd must be"),
        (lambda: bias_gelu_dropout(x, p=1.5), "p must be"),
        (lambda: bias_gelu_dropout(x, p=0.5, seed=-1), "seed"),
        (lambda: bias_gelu_dropout(x, p=0.5, offset=2**63), "offset"),
        (lambda: bias_gelu_dropout(x, approximate="sigmoid"), "approximate"),
        (lambda: bias_gelu_dropout(x, keep=torch.empty(4, 8, dtype=torch.bool)), "keep must be"),
    ]
    for call, words in bad:
        with pytest.raises(ValueError) as info:
            call()
        assert words in str(info.value), (words, str(info.value))
