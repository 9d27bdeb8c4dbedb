"""An example that raises is recorded as an error with the line of the case's own code that
raised it: the kernel's line on the interpreter, whose error is re-raised from Triton's frames
(the kernel's line only in its cause), the launcher's where the launcher raised."""
import os

import hypothesis
import pytest
import torch
import triton
import triton.language as tl

from portcheck import Case, tolerance
from portcheck.frames import kernel_line
from portcheck.runner import check
from portcheck.targets.runtime import INTERPRETER_ARCH

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET", "0") in ("", "0"),
                                reason="runs kernels on the interpreter (--target=interpreter)")


@triton.jit
def odd_block_kernel(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), tl.zeros([BLOCK + 1], tl.float32))   # not a power of two


def _launch(args, outs):
    if args["x"].numel() > 2:
        raise ValueError("no more than two")
    odd_block_kernel[(1,)](outs["y"], BLOCK=2)


CASE = Case(name="raises", family="probe", dtypes=("fp32",),
            inputs=lambda dtype, budget: hypothesis.strategies.fixed_dictionaries(
                {"dtype": hypothesis.strategies.just(dtype), "n": hypothesis.strategies.integers(1, 4)}),
            make=lambda spec, device: {"x": torch.ones(spec["n"], device=device)},
            outputs=lambda a: {"y": ((2,), torch.float32)}, launch=_launch,
            oracle=lambda a: {"y": torch.zeros(2, dtype=torch.float64)},
            tolerance=lambda a, refs, dtype: {"y": tolerance.exact("zeros")})
SEARCH = hypothesis.settings(max_examples=4, derandomize=True, deadline=None, database=None,
                             phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
                             suppress_health_check=list(hypothesis.HealthCheck))


def test_an_error_in_a_kernel_names_the_kernel_line():
    r = check(CASE, "interpreter", INTERPRETER_ARCH, "fp32", settings=SEARCH, max_elements=64)
    assert r.verdict == "error", r.message
    line = odd_block_kernel.fn.__code__.co_firstlineno + 2
    assert r.message.endswith(f"(at test_error_line.py:{line} in odd_block_kernel)"), r.message


def test_an_error_in_a_launcher_names_the_launcher_line():
    with pytest.raises(ValueError) as raised:
        _launch({"x": torch.ones(3)}, {})
    assert kernel_line(raised.value) == f"test_error_line.py:{_launch.__code__.co_firstlineno + 2} in _launch"
