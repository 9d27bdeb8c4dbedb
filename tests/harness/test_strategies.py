"""Input drawing: the CPU stream checks replay, and the device draw benchmarks use."""
import pytest
import torch

from portcheck import strategies as S


def test_the_cpu_stream_is_the_seeded_float64_randn_rounded_to_the_format():
    want = torch.randn(33, 7, generator=torch.Generator().manual_seed(11), dtype=torch.float64)
    got = S.values((33, 7), "bf16", "normal", S.generator(11))
    assert torch.equal(got, want.to(torch.bfloat16))
    scaled = S.values((33, 7), "fp16", "normal", S.generator(11), scale=3.5)
    assert torch.equal(scaled, (want * 3.5).to(torch.float16))


def test_drawn_on_gives_its_own_reproducible_stream_and_ends_with_the_block():
    cpu = S.values((64, 5), "fp32", "normal", S.generator(3))
    with S.drawn_on("cpu"):   # a device name: the CPU stands in for a GPU here
        a = S.values((64, 5), "fp32", "normal", S.generator(3))
        b = S.values((64, 5), "fp32", "normal", S.generator(3))
    assert torch.equal(a, b) and not torch.equal(a, cpu)
    assert torch.equal(S.values((64, 5), "fp32", "normal", S.generator(3)), cpu)
    with pytest.raises(KeyError):
        with S.drawn_on("cpu"):
            raise KeyError("a failing make()")
    assert torch.equal(S.values((64, 5), "fp32", "normal", S.generator(3)), cpu)


@pytest.mark.parametrize("draw_on", [None, "cpu"])
def test_regimes_stay_finite_in_the_format_except_special(draw_on):
    with S.drawn_on(draw_on):   # None: the CPU stream
        large = S.values((256, 64), "fp8e4nv", "large", S.generator(1))
        special = S.values((256, 64), "bf16", "special", S.generator(1))
        equal = S.values((8, 64), "fp16", "equal", S.generator(1))
    assert torch.isfinite(large.float()).all()
    f = special.float()
    assert torch.isnan(f).any() and torch.isposinf(f).any() and torch.isneginf(f).any()
    assert (equal == equal[:, :1]).all()


def test_the_session_seed_is_fixed_under_a_derandomized_profile_only():
    assert S.session_seed("ci") == S.session_seed("ci") == 0   # a gate: the same examples every run
    seeds = {S.session_seed("dev") for _ in range(8)}
    assert len(seeds) > 1 and all(0 <= s < 2**31 for s in seeds)
