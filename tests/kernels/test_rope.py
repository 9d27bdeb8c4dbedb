"""RoPE launcher: bad input refused before launch; in place and out of place agree; the oracle
against an independent complex-number formulation; partial rotary leaves the tail alone."""
import pytest
import torch

from tests.support.launching import DEVICE, forbid_launches, needs_device
from portcheck.kernels import rope as R
from portcheck.oracles import rope as rope_ref


@pytest.fixture
def no_launch(monkeypatch):
    forbid_launches(monkeypatch, R, "rope_kernel")


T, HQ, HK, D = 4, 2, 1, 16
POS = torch.arange(T)
CACHE = R.cos_sin_cache(8, D, 10000.0, torch.float32)


def q(*shape, dtype=torch.float16):
    return torch.randn(*shape).to(dtype)


@pytest.mark.parametrize("call,words", [
    (lambda: R.rotary_embedding(POS, q(T, HQ, D, dtype=torch.float64), None, D, CACHE), ["torch.float64"]),
    (lambda: R.rotary_embedding(POS[None], q(T, HQ, D), None, D, CACHE), ["positions must be a 1-D"]),
    (lambda: R.rotary_embedding(POS.float(), q(T, HQ, D), None, D, CACHE), ["positions must be a 1-D int64 or int32"]),
    (lambda: R.rotary_embedding(POS.repeat_interleave(2)[::2], q(T, HQ, D), None, D, CACHE),
     ["positions must be contiguous, got stride 2"]),
    (lambda: R.rotary_embedding(POS, q(T + 1, HQ, D), None, D, CACHE), ["query has 5 tokens but positions has 4"]),
    (lambda: R.rotary_embedding(POS, q(T, HQ * D + 3), None, D, CACHE), ["35 columns, not a multiple of head_size 16"]),
    (lambda: R.rotary_embedding(POS, q(T, HQ, D + 2), None, D, CACHE), ["head size 18, expected head_size 16"]),
    (lambda: R.rotary_embedding(POS, q(T, HQ, D, 1), None, D, CACHE), ["query must be 2-D", "or 3-D"]),
    (lambda: R.rotary_embedding(POS, q(T, HQ, D), q(T, HK, D, dtype=torch.bfloat16), D, CACHE),
     ["key has dtype torch.bfloat16 but query has torch.float16"]),
    (lambda: R.rotary_embedding(POS, q(T, HQ, D), q(T - 1, HK, D), D, CACHE), ["key has 3 tokens"]),
    (lambda: R.rotary_embedding(POS, q(T, HQ, D), None, D, CACHE[:, :5]), ["rot_dim 5", "even"]),
    (lambda: R.rotary_embedding(POS, q(T, HQ, D), None, D, R.cos_sin_cache(8, 2 * D, 1e4, torch.float32)),
     ["rot_dim 32", "within 2..head_size (16)"]),
    (lambda: R.rotary_embedding(POS, q(T, HQ, D), None, D, CACHE.to(torch.bfloat16)),
     ["cos_sin_cache has dtype torch.bfloat16", "float32 or the query's torch.float16"]),
    (lambda: R.rotary_embedding(POS, q(T, HQ, D), None, D, CACHE[None]), ["cos_sin_cache must be 2-D"]),
    (lambda: R.rotary_embedding(POS, q(T, HQ, D), q(T, HK, D), D, CACHE, True, query_out=q(T, HQ, D)),
     ["give both query_out and key_out"]),
    (lambda: R.rotary_embedding(POS, q(T, HQ, D), None, D, CACHE, True, query_out=q(T, HQ + 1, D)),
     ["query_out is (4, 3, 16)", "expected (4, 2, 16)"]),
    (lambda: R.rotary_embedding(POS, q(T, HQ, D), None, 0, CACHE), ["head_size 0 is outside"]),
    (lambda: R.rotary_embedding(POS.to("meta"), q(T, HQ, D), None, D, CACHE), ["positions is on meta"]),
])
def test_bad_input_is_refused_before_launch(no_launch, call, words):
    with pytest.raises(ValueError) as info:
        call()
    for w in words:
        assert w in str(info.value), str(info.value)


def test_oracle_matches_complex_rotation():
    """GPT-J pairs (2i, 2i+1) are the complex number x_2i + i x_2i+1 turned by e^(i p f)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 3, 32, generator=g, dtype=torch.float64)
    pos = torch.tensor([0, 1, 5, 7, 2, 3])
    cache = R.cos_sin_cache(8, 24, 10000.0, torch.float64)
    got = rope_ref.rope(x, pos, cache, neox=False)
    inv_freq = 10000.0 ** (-torch.arange(0, 24, 2, dtype=torch.float64) / 24)
    turn = torch.polar(torch.ones(6, 12, dtype=torch.float64), pos[:, None].double() * inv_freq)
    z = torch.view_as_complex(x[..., :24].reshape(6, 3, 12, 2).contiguous()) * turn[:, None, :]
    assert torch.allclose(got[..., :24], torch.view_as_real(z).reshape(6, 3, 24), rtol=0, atol=1e-12)
    assert torch.equal(got[..., 24:], x[..., 24:])
    # NeoX is the same rotation on a permuted head: element i pairs with i + rot/2
    perm = torch.cat([torch.arange(0, 24, 2), torch.arange(1, 24, 2), torch.arange(24, 32)])
    neox = rope_ref.rope(x[..., perm], pos, cache, neox=True)
    assert torch.allclose(neox, got[..., perm], rtol=0, atol=1e-12)


@needs_device
@pytest.mark.parametrize("neox", [True, False])
@pytest.mark.parametrize("rot", [16, 6])
def test_in_place_matches_out_of_place_and_keeps_the_tail(neox, rot):
    g = torch.Generator().manual_seed(1)
    qx = torch.randn(9, 3, D, generator=g).to(torch.float16).to(DEVICE)
    kx = torch.randn(9, 2 * D, generator=g).to(torch.float16).to(DEVICE)    # 2-D key, 2 heads
    pos = torch.randint(0, 8, (9,), generator=g).to(DEVICE)
    cache = R.cos_sin_cache(8, rot, 10000.0, torch.float32).to(DEVICE)
    qo, ko = torch.empty_like(qx), torch.empty_like(kx)
    R.rotary_embedding(pos, qx, kx, D, cache, neox, qo, ko)
    qi, ki = qx.clone(), kx.clone()
    R.rotary_embedding(pos, qi, ki, D, cache, neox)
    assert torch.equal(qi, qo) and torch.equal(ki, ko)
    assert torch.equal(qo[..., rot:], qx[..., rot:])
    assert torch.equal(ko.view(9, 2, D)[..., rot:], kx.view(9, 2, D)[..., rot:])
    ref = rope_ref.rope(qx.double().cpu(), pos.cpu(), cache.cpu(), neox)
    assert torch.allclose(qo.double().cpu(), ref, rtol=2e-3, atol=1e-3)


@needs_device
def test_no_key_and_no_tokens():
    cache = CACHE.to(DEVICE)
    qx = torch.randn(3, HQ, D).to(DEVICE)
    qo, ko = R.rotary_embedding(POS[:3].to(DEVICE), qx.clone(), None, D, cache)
    assert ko is None
    ref = rope_ref.rope(qx.double().cpu(), POS[:3], CACHE, True)
    assert torch.allclose(qo.double().cpu(), ref, rtol=1e-6, atol=1e-6)
    empty = torch.empty(0, HQ, D, device=DEVICE)
    assert R.rotary_embedding(torch.empty(0, dtype=torch.int64, device=DEVICE), empty, None, D, cache)[0] is empty
