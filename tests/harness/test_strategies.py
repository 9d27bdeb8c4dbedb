"""Input drawing: the CPU stream checks replay, and the device draw benchmarks use."""
import pytest
import torch

from portcheck import strategies as S
from portcheck.dtypes import fmt


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


@pytest.mark.parametrize("n", [3, 5, 40])
def test_the_special_regime_holds_each_kind_from_three_elements_on(n):
    """+inf, -inf and NaN each, whatever the seed; and each kind alone in its own regime, which a
    check runs beside "special": a kernel that flags |g| == inf only (NaN passes it) shows only on
    NaN without infinities."""
    for seed in range(20):
        f = S.values((1, n), "fp16", "special", S.generator(seed)).float()
        assert torch.isnan(f).any() and torch.isposinf(f).any() and torch.isneginf(f).any()
        nan = S.values((1, n), "fp16", "special-nan", S.generator(seed)).float()
        assert torch.isnan(nan).any() and not torch.isinf(nan).any()
        inf = S.values((1, n), "fp16", "special-inf", S.generator(seed)).float()
        assert torch.isposinf(inf).any() and torch.isneginf(inf).any() and not torch.isnan(inf).any()


@pytest.mark.parametrize("dtype, ratio", [("fp32", 4096), ("fp16", 256), ("bf16", 32), ("fp8e4nv", 2)])
def test_offset_rows_are_the_normal_rows_moved_by_a_signed_multiple_of_their_spread(dtype, ratio):
    """The same seed draws the same spread as the normal regime; each offset row is moved by
    +-ratio times the spread (2**(p-3) for p significant bits, at most 2**12), both signs occur."""
    assert S.offset_ratio(dtype) == ratio
    spread = S.normal((64, 32), S.generator(5), 0.5)   # the normal regime's draw
    moved = S.values((64, 32), dtype, "offset", S.generator(5), scale=0.5).to(torch.float64)
    sign = (moved - spread).mean(dim=1, keepdim=True).sign()
    assert set(sign.flatten().tolist()) == {-1.0, 1.0}
    assert torch.equal(moved, (spread + sign * ratio * 0.5).to(fmt(dtype).torch_dtype).to(torch.float64))
    # the signs alternate from the first row's: any two rows lie on both sides of zero
    assert torch.equal(sign[1:].flatten(), -sign[:-1].flatten())


def test_zero_rows_are_the_first_and_about_half_the_others_the_rest_as_drawn():
    """Padding tokens: a scale or a norm taken from an all-zero row divides by zero."""
    drawn = S.values((64, 8), "fp32", "normal", S.generator(9))
    zeros = S.values((64, 8), "fp32", "zeros", S.generator(9))
    zero_rows = (zeros == 0).all(dim=1)
    assert zero_rows[0] and 16 < int(zero_rows.sum()) < 48
    assert torch.equal(zeros[~zero_rows], drawn[~zero_rows])
    assert bool((S.values((5,), "bf16", "zeros", S.generator(1)) == 0).all())   # one row: zero


def test_the_session_seed_is_fixed_under_a_derandomized_profile_only():
    assert S.session_seed("ci") == S.session_seed("ci") == 0   # a gate: the same examples every run
    seeds = {S.session_seed("dev") for _ in range(8)}
    assert len(seeds) > 1 and all(0 <= s < 2**31 for s in seeds)


# ---- every value regime a case's strategy can draw runs (runner.check's regimes step) ----------

def test_a_regime_the_search_left_out_runs_on_its_largest_passing_input():
    import os

    import hypothesis
    import triton
    import triton.language as tl

    from portcheck import Case, tolerance as T
    from portcheck.runner import check
    from portcheck.targets.runtime import INTERPRETER_ARCH

    if os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        pytest.skip("runs a kernel on the interpreter (--target=interpreter)")

    @triton.jit
    def unit_rows_kernel(x_ptr, y_ptr, xs, ys, cols, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * xs + offs, mask=offs < cols, other=0.0)
        peak = tl.max(tl.abs(x), axis=0)                   # a zero row divides 0 by 0: the bug
        tl.store(y_ptr + row * ys + offs, x / peak, mask=offs < cols)

    def oracle(a):
        x = a["x"]
        peak = x.abs().amax(dim=1, keepdim=True)
        return {"y": torch.where(peak > 0, x / peak.clamp_min(1e-300), torch.zeros_like(x))}

    seen: list = []
    case = Case(name="unit_rows", family="probe", dtypes=("fp32",),
                inputs=lambda dtype, most: S.row_inputs(dtype, min(most, 1024), tile=16, max_rows=4,
                                                        allowed=("normal", "zeros")),
                make=lambda spec, device: seen.append(spec["regime"]) or {"x": S.row_tensor(spec, device)},
                outputs=lambda a: {"y": (tuple(a["x"].shape), a["x"].dtype)},
                launch=lambda a, o: unit_rows_kernel[(a["x"].shape[0],)](
                    a["x"], o["y"], a["x"].stride(0), o["y"].stride(0), a["x"].shape[1],
                    BLOCK=triton.next_power_of_2(a["x"].shape[1])),
                oracle=oracle, tolerance=lambda a, refs, dtype: {"y": T.rounding(dtype, "fp32")})
    one = hypothesis.settings(max_examples=1, derandomize=True, deadline=None, database=None,
                              phases=[hypothesis.Phase.generate], suppress_health_check=list(hypothesis.HealthCheck))
    r = check(case, "interpreter", INTERPRETER_ARCH, "fp32", settings=one, max_elements=1024)
    assert r.verdict == "fail", r.message
    assert seen[0] == "normal" and r.failing_input["regime"] == "zeros"   # the search drew normal only


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_ties_rows_sit_on_midpoints_between_codes_once_scaled_by_their_absmax(dtype):
    """Row r probes TIE_FORMATS[r % 4]: its absmax over the format's largest code is a power of two,
    and the scaled values hold midpoints, where rounding half away from zero differs from even."""
    x = S.values((8, 200), dtype, "ties", S.generator(5)).double()
    assert torch.equal(x, S.tie_values((8, 200), dtype, S.TIE_FORMATS, S.generator(5)))   # exact in the format
    for r, row in enumerate(x):
        out = S.TIE_FORMATS[r % len(S.TIE_FORMATS)]
        grid = S.code_grid(out)
        scale = row.abs().max() / grid[-1]
        assert float(torch.log2(scale)).is_integer()
        y = (row / scale).abs()
        below = grid[(torch.searchsorted(grid, y, right=True) - 1).clamp(max=grid.numel() - 2)]
        above = grid[(torch.searchsorted(grid, y, right=True)).clamp(max=grid.numel() - 1)]
        ties = (y - below == above - y) & (above > below)
        assert float(ties.double().mean()) > 0.3, (out, row[:8])


def test_the_regimes_of_a_strategy_built_in_a_flatmap_are_noted():
    """The row families build their regimes() inside a flatmap, at the first draw: noted at build
    time only, none was, and the search's left-out regimes never ran for them."""
    from hypothesis import strategies as st
    lazy = st.integers(1, 4).flatmap(lambda n: st.fixed_dictionaries({"rows": st.just(n),
                                                                      "regime": S.regimes(("normal", "ties"))}))
    with S.noting_regimes() as built_only:
        lazy_again = st.integers(1, 4).flatmap(lambda n: S.regimes(("zeros",)))
    assert built_only == set() and lazy_again is not None    # why with_regimes draws once
    strategy, noted = S.with_regimes(lambda: lazy)
    assert strategy is lazy and noted == {"normal", "ties"}
    from portcheck import cases
    case = cases.get("softmax")
    assert S.with_regimes(lambda: case.inputs("fp32", 4096))[1] == set(S.REGIMES)
