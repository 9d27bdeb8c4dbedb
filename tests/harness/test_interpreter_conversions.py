"""Float-to-integer conversions on the interpreter (portcheck.targets.interpreter_conversions): as
NVIDIA's cvt.rzi lowers them, and a case whose output depends on one that no vendor defines (NaN,
inf, out of range) failing through `check`, where its values alone would pass."""
import os

import hypothesis
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from portcheck import Case, tolerance
from portcheck.runner import check
from portcheck.targets.interpreter_conversions import another_lowering, to_int, watching
from portcheck.targets.runtime import INTERPRETER_ARCH

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET", "0") in ("", "0"),
                                reason="the conversions are the interpreter's (--target=interpreter)")

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("dtype, values, nvidia, other", [
    # int8 from cvt.rzi.s16.f32's 16-bit result, its low byte: 300 -> 44, 40000 -> 32767 -> -1
    (np.int8, [1.9, -1.9, 127.0, 300.0, 40000.0, -40000.0, NAN, INF], [1, -1, 127, 44, -1, 0, 0, -1],
     [1, -1, 127, 127, 127, -128, -1, 127]),
    (np.int32, [2.5e9, -2.5e9, NAN, -7.5], [2**31 - 1, -2**31, 0, -7], [2**31 - 1, -2**31, -1, -7]),
    (np.uint8, [-5.0, 255.9, 300.0, NAN], [0, 255, 44, 0], [0, 255, 255, 1]),
    (np.int64, [1e19, -1e19, NAN], [2**63 - 1, -2**63, 0], [2**63 - 1, -2**63, -1]),
])
def test_conversions_as_nvidia_lowers_them_and_another_lowering(dtype, values, nvidia, other):
    x = np.array(values, dtype=np.float32 if dtype != np.int64 else np.float64)
    assert to_int(x, dtype).tolist() == nvidia
    with another_lowering():
        assert to_int(x, dtype).tolist() == other
    with watching() as watch:
        to_int(np.array([1.0, 2.0]), dtype)
    assert watch.lines == []


@triton.jit
def quantize_kernel(x_ptr, s_ptr, q_ptr, cols, BLOCK: tl.constexpr, GUARD: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + offs, mask=offs < cols)   # no other=: masked lanes are undefined
    scale = tl.max(tl.where(offs < cols, tl.abs(x), 0.0), axis=0) / 127.0
    if GUARD:   # a row of zeros: scale 0, and 0 / 0 would be NaN
        scale = tl.where(scale == 0.0, 1.0, scale)
    tl.store(s_ptr + row, scale)
    q = x / scale + 0.5 * tl.where(x >= 0, 1.0, -1.0)   # rounded half away from zero by the cast
    tl.store(q_ptr + row * cols + offs, q.to(tl.int8), mask=offs < cols)


def _quantize_case(guard: bool) -> Case:
    def inputs(dtype, max_elements):
        return hypothesis.strategies.fixed_dictionaries({
            "dtype": hypothesis.strategies.just(dtype), "rows": hypothesis.strategies.integers(1, 4),
            "cols": hypothesis.strategies.integers(1, 16), "zero_row": hypothesis.strategies.integers(0, 3)})

    def make(spec, device):
        x = torch.linspace(-3, 5, spec["rows"] * spec["cols"], device=device).reshape(spec["rows"], spec["cols"])
        if spec["zero_row"] < spec["rows"]:
            x[spec["zero_row"]] = 0.0
        return {"x": x}

    def launch(a, o):
        x = a["x"]
        quantize_kernel[(x.shape[0],)](x, o["scale"], o["q"], x.shape[1], BLOCK=16, GUARD=guard)

    def oracle(a):   # a zero row's codes are 0, what NVIDIA's conversion of NaN gives too
        x = a["x"]
        amax = x.abs().amax(dim=1)
        scale = torch.where(amax == 0, 1.0, amax / 127.0)
        y = x / scale[:, None]
        return {"q": torch.trunc(y + 0.5 * torch.where(x >= 0, 1.0, -1.0)).to(torch.int8),
                "scale": torch.where(amax == 0, 0.0 if not guard else 1.0, amax / 127.0)}

    return Case(name="quantize_guarded" if guard else "quantize_nan", family="probe", dtypes=("fp32",),
                inputs=inputs, make=make, launch=launch, oracle=oracle,
                outputs=lambda a: {"q": (tuple(a["x"].shape), torch.int8), "scale": ((a["x"].shape[0],), torch.float32)},
                tolerance=lambda a, refs, dtype: {"q": tolerance.exact(),
                                                  "scale": tolerance.Tolerance(atol=0.0, rtol=2e-7, formula="test")})


SEARCH = hypothesis.settings(max_examples=12, derandomize=True, deadline=None, database=None,
                             phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
                             suppress_health_check=list(hypothesis.HealthCheck))


def test_a_nan_cast_to_int8_fails_though_nvidias_zero_matches_the_reference():
    """0 / 0 cast to int8 gives 0 on NVIDIA, the value the oracle wants: only the other lowering
    shows that the codes depend on it. The guarded twin passes, though its masked-off lanes (NaN
    here) are cast too: they are never stored, so no output changes."""
    bad = check(_quantize_case(False), "interpreter", INTERPRETER_ARCH, "fp32", settings=SEARCH, max_elements=4096)
    assert bad.verdict == "fail", bad.message
    assert bad.message.startswith("an undefined float-to-integer conversion: q depends on"), bad.message
    assert "test_interpreter_conversions.py:" in bad.message and "is 0 as NVIDIA converts" in bad.message
    assert bad.diagnosis[0]["cause"].startswith("a float-to-integer cast of NaN")
    good = check(_quantize_case(True), "interpreter", INTERPRETER_ARCH, "fp32", settings=SEARCH, max_elements=4096)
    assert good.verdict == "pass", good.message
