"""The fp8 oracle (portcheck/oracles/fp8.py) against torch's own conversions, and against the
format definitions where torch's behaviour is a choice of the torch version (overflow)."""
import math

import numpy as np
import pytest
import torch

from portcheck.oracles import fp8

FORMATS = list(fp8.FORMATS.values())
IDS = [f.name for f in FORMATS]


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.uint8)


def _finite_values(f) -> torch.Tensor:
    """Every finite value of the format, both signs, ascending (one zero)."""
    v = fp8.decode(torch.arange(256, dtype=torch.uint8), f)
    return torch.unique(v[torch.isfinite(v)])


@pytest.mark.parametrize("f", FORMATS, ids=IDS)
def test_decode_matches_torch_on_every_code(f):
    codes = torch.arange(256, dtype=torch.uint8)
    ours = fp8.decode(codes, f)
    theirs = codes.view(f.torch_dtype).to(torch.float64)
    assert torch.equal(torch.isnan(ours), torch.isnan(theirs))
    ok = ~torch.isnan(ours)
    assert torch.equal(ours[ok], theirs[ok])
    assert torch.equal(torch.signbit(ours[ok]), torch.signbit(theirs[ok]))   # -0 where it exists


@pytest.mark.parametrize("f", FORMATS, ids=IDS)
def test_format_constants(f):
    expected = {"fp8e4nv": (448.0, 2.0**-9), "fp8e5": (57344.0, 2.0**-16),
                "fp8e4b8": (240.0, 2.0**-10), "fp8e5b16": (57344.0, 2.0**-17)}[f.name]
    assert (f.max_finite, f.min_subnormal) == expected
    assert f.max_finite == torch.finfo(f.torch_dtype).max
    assert fp8.decode(torch.tensor([f.max_code], dtype=torch.uint8), f).item() == f.max_finite


@pytest.mark.parametrize("f", FORMATS, ids=IDS)
def test_every_finite_value_round_trips(f):
    codes = torch.arange(256, dtype=torch.uint8)
    values = fp8.decode(codes, f)
    finite = torch.isfinite(values)
    assert torch.equal(fp8.encode(values[finite], f), codes[finite])


@pytest.mark.parametrize("f", FORMATS, ids=IDS)
def test_encode_matches_torch_on_representable_values_and_midpoints(f):
    """All representable values, the midpoints between neighbours (ties to even), one float32
    ulp either side of each midpoint, and the stretch above max that still rounds to max."""
    v = _finite_values(f)
    pos = v[v >= 0]
    mids = (pos[1:] + pos[:-1]) / 2
    top = torch.tensor([f.max_finite + (f.max_finite - pos[-2].item()) / 2], dtype=torch.float64)
    # the first value past max that still rounds to max: below the overflow midpoint
    below_overflow = torch.from_numpy(np.nextafter(np.float32(top.item()), np.float32(0)).reshape(1)).double()
    m32 = mids.to(torch.float32).numpy()
    probes = torch.cat([
        v,
        mids, -mids,
        torch.from_numpy(np.nextafter(m32, np.float32(np.inf))).double(),
        -torch.from_numpy(np.nextafter(m32, np.float32(np.inf))).double(),
        torch.from_numpy(np.nextafter(m32, np.float32(0))).double(),
        -torch.from_numpy(np.nextafter(m32, np.float32(0))).double(),
        below_overflow, -below_overflow,
    ])
    x = probes.to(torch.float32)
    assert torch.equal(x.to(torch.float64), probes)   # every probe is exact in float32
    ours = fp8.encode(x, f, saturate=False)
    theirs = _bits(x.to(f.torch_dtype))
    bad = (ours != theirs).nonzero().flatten()
    assert bad.numel() == 0, [(x[i].item(), hex(ours[i]), hex(theirs[i])) for i in bad[:5].tolist()]


@pytest.mark.parametrize("f", FORMATS, ids=IDS)
def test_encode_matches_torch_on_random_float32(f):
    gen = torch.Generator().manual_seed(7)
    lo = math.log2(f.min_subnormal) - 3        # well below the smallest subnormal: rounds to 0
    hi = math.log2(f.max_finite)
    mag = torch.exp2(torch.rand(100000, generator=gen, dtype=torch.float64) * (hi - lo) + lo)
    sign = torch.where(torch.rand(100000, generator=gen) < 0.5, -1.0, 1.0).double()
    x = (mag * sign).to(torch.float32)
    x = x[x.abs() <= f.max_finite]
    assert torch.equal(fp8.encode(x, f, saturate=False), _bits(x.to(f.torch_dtype)))


@pytest.mark.parametrize("f", FORMATS, ids=IDS)
def test_rounding_ties_to_even_by_construction(f):
    """Midpoints round to the neighbour whose last fraction bit is 0, in both directions."""
    v = _finite_values(f)
    pos = torch.cat([torch.zeros(1, dtype=torch.float64), v[v > 0]])   # +0, not -0
    codes = fp8.encode(pos, f)
    mids = (pos[1:] + pos[:-1]) / 2
    got = fp8.encode(mids, f)
    even = torch.where(codes[:-1] % 2 == 0, codes[:-1], codes[1:])
    assert torch.equal(got, even)


def test_subnormals_and_underflow():
    f = fp8.FORMATS["fp8e4nv"]
    s = f.min_subnormal
    x = torch.tensor([s, s / 2, s / 2 * 1.0000001, 1.5 * s, 2.5 * s, -s / 4, 0.0, -0.0], dtype=torch.float64)
    # s/2 ties to the even 0; just above it rounds up; 1.5 s -> 2 s (even); 2.5 s -> 2 s (even)
    assert fp8.encode(x, f).tolist() == [0x01, 0x00, 0x01, 0x02, 0x02, 0x80, 0x00, 0x80]
    fz = fp8.FORMATS["fp8e4b8"]
    assert fp8.encode(torch.tensor([-fz.min_subnormal / 4, -0.0]), fz).tolist() == [0x00, 0x00]   # no -0 in FNUZ


@pytest.mark.parametrize("name,over,ieee_code", [
    ("fp8e4nv", 464.0, 0x7f),     # 464 ties to the even 448; above it: no inf, so NaN
    ("fp8e5", 61440.0, 0x7c),     # the tie 61440 goes to the even 2^16: inf
    ("fp8e4b8", 248.0, 0x80),     # 248 ties to the even 256 > 240: NaN 0x80
    ("fp8e5b16", 61440.0, 0x80),
])
def test_overflow_both_modes(name, over, ieee_code):
    f = fp8.FORMATS[name]
    just_above = math.nextafter(over, math.inf)
    tie_rounds_down = name == "fp8e4nv"
    first_over = just_above if tie_rounds_down else over
    t = lambda *v: torch.tensor(v, dtype=torch.float64)
    assert fp8.encode(t(math.nextafter(first_over, 0.0)), f, saturate=False).item() == f.max_code
    assert fp8.encode(t(first_over), f, saturate=False).item() == ieee_code
    assert fp8.encode(t(first_over, 1e30, math.inf), f, saturate=True).tolist() == [f.max_code] * 3
    neg = fp8.encode(t(-first_over, -math.inf), f, saturate=True).tolist()
    assert neg == [f.max_code | 0x80] * 2


@pytest.mark.parametrize("f", FORMATS, ids=IDS)
def test_inf_and_nan(f):
    x = torch.tensor([math.inf, -math.inf, math.nan, -math.nan], dtype=torch.float64)
    ieee = fp8.encode(x, f, saturate=False).tolist()
    sat = fp8.encode(x, f, saturate=True).tolist()
    nan = [0x80, 0x80] if f.fnuz else [0x7f, 0xff]
    assert ieee[2:] == nan and sat[2:] == nan
    if f.has_inf:
        assert ieee[:2] == [0x7c, 0xfc]
    else:
        assert ieee[:2] == nan          # no inf: overflow is NaN (0x7f / 0xff, or FNUZ's 0x80)
    assert sat[:2] == [f.max_code, f.max_code | 0x80]
    # torch agrees on NaN and, for e5m2, on inf (the other formats' overflow depends on the torch version)
    theirs = _bits(x.to(torch.float32).to(f.torch_dtype)).tolist()
    assert theirs[2] == nan[0]
    if f.has_inf:
        assert theirs[:2] == [0x7c, 0xfc]
