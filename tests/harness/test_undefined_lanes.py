"""Undefined lanes on the interpreter (portcheck.targets.interpreter_lanes): the masked-off lanes
of a tl.load without other= hold each format's poison, Triton's 0 inside zero_filled() with the
loads' lines noted; a kernel that sums them fails with its line named, in the check's message and
its diagnosis, and the same kernel with other= passes."""
import inspect
import os

import hypothesis
import pytest
import torch
import triton
import triton.language as tl

from portcheck import cases
from portcheck.runner import check
from portcheck.targets import interpreter_lanes

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET", "0") in ("", "0"),
                                reason="undefined lanes are poisoned on the interpreter (--target=interpreter); "
                                       "a GPU's compiler fills them")


@pytest.fixture(autouse=True)
def _poisoned():
    if not interpreter_lanes.installed():
        pytest.skip("--raw-interpreter: Triton's own interpreter puts 0 in those lanes")


SEARCH = hypothesis.settings(max_examples=12, derandomize=True, deadline=None, database=None,
                             phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
                             suppress_health_check=list(hypothesis.HealthCheck))


@triton.jit
def masked_copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n))   # every lane stored


_source, _first = inspect.getsourcelines(masked_copy_kernel.fn)
LOAD_LINE = _first + next(i for i, line in enumerate(_source) if "tl.load" in line)


@pytest.mark.parametrize("dtype, poison", [
    (torch.float32, "nan"), (torch.float16, "nan"), (torch.bfloat16, "nan"),
    (torch.float8_e4m3fn, "nan"), (torch.float8_e5m2, "nan"),
    (torch.int8, -1), (torch.int32, -1), (torch.int64, -1), (torch.uint8, 1), (torch.bool, True)])
def test_masked_off_lanes_hold_the_formats_poison_and_zero_inside_zero_filled(dtype, poison):
    x = torch.ones(8).to(dtype)
    y = torch.zeros(8).to(dtype)
    masked_copy_kernel[(1,)](x, y, 5, BLOCK=8)
    assert y[:5].tolist() == x[:5].tolist()   # the lanes the mask keeps are the loads'
    tail = y[5:].to(torch.float32) if dtype.is_floating_point else y[5:]
    if poison == "nan":
        assert bool(torch.isnan(tail).all()), tail
    else:
        assert tail.tolist() == [poison] * 3
    with interpreter_lanes.zero_filled() as lines:
        masked_copy_kernel[(1,)](x, y, 5, BLOCK=8)
    assert y[5:].to(torch.float32).tolist() == [0.0] * 3
    assert lines == [f"test_undefined_lanes.py:{LOAD_LINE}"]


def test_a_load_whose_mask_keeps_every_lane_notes_nothing():
    x, y = torch.ones(8), torch.zeros(8)
    with interpreter_lanes.zero_filled() as lines:
        masked_copy_kernel[(1,)](x, y, 8, BLOCK=8)
    assert lines == [] and y.tolist() == [1.0] * 8


def _planted(name):
    import tests.support.planted_bugs  # noqa: F401  (registers the planted cases)
    return cases.get(name)


def test_a_sum_of_undefined_lanes_fails_with_its_line_and_the_twin_with_other_passes(portcheck_session):
    result = check(_planted("planted_undefined_lanes"), portcheck_session.target.name, portcheck_session.arch,
                   "fp32", settings=SEARCH, max_elements=portcheck_session.max_elements, seed=0)
    assert result.verdict == "fail", result.message
    assert "undefined lanes read" in result.message and "planted_bugs.py:" in result.message, result.message
    first = result.diagnosis[0]
    assert first["kind"] == "undefined lanes" and "the output passes" in first["evidence"], result.diagnosis
    good = check(_planted("planted_undefined_lanes_ok"), portcheck_session.target.name, portcheck_session.arch,
                 "fp32", settings=SEARCH, max_elements=portcheck_session.max_elements, seed=0)
    assert good.verdict == "pass", good.message


# Triton 3.9 keeps tl.make_block_ptr only to refuse it ("Block pointers have been removed in favor
# of the tensor descriptor API"); 3.6, the H200 machine's, has them
@pytest.mark.skipif(tuple(int(p) for p in triton.__version__.split(".")[:2]) >= (3, 9),
                    reason=f"Triton {triton.__version__} has no block pointers")
def test_a_block_pointers_padding_is_poisoned_unless_padding_option_names_it():
    @triton.jit
    def block_kernel(x_ptr, y_ptr, n, PAD: tl.constexpr, BLOCK: tl.constexpr):
        p = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
        if PAD:
            x = tl.load(p, boundary_check=(0,), padding_option="zero")
        else:
            x = tl.load(p, boundary_check=(0,))
        tl.store(y_ptr + tl.arange(0, BLOCK), x)

    x, y = torch.ones(8), torch.zeros(8)
    block_kernel[(1,)](x, y, 5, PAD=False, BLOCK=8)
    assert y[:5].tolist() == [1.0] * 5 and bool(torch.isnan(y[5:]).all())
    block_kernel[(1,)](x, y, 5, PAD=True, BLOCK=8)
    assert y.tolist() == [1.0] * 5 + [0.0] * 3


@triton.jit
def gather_kernel(idx_ptr, table_ptr, out_ptr, n, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    idx = tl.load(idx_ptr + o, mask=o < n)
    tl.store(out_ptr + o, tl.load(table_ptr + idx), mask=o < n)   # every lane gathers


def test_an_undefined_index_reads_the_guard_band_before_its_table_not_an_unmapped_address():
    """An integer extreme there sent the interpreter to an unmapped address: the process died."""
    from portcheck.targets.interpreter_memory import Region, watching
    from portcheck import guards
    table = guards.guarded_output("table", (4,), torch.float32, "cpu")
    table.tensor.copy_(torch.arange(4.0))
    idx, out = torch.tensor([2, 0, 1, 3, 0, 0, 0, 0], dtype=torch.int32), torch.zeros(8)
    with watching([Region(*s) for s in table.spans()]) as watch:
        gather_kernel[(1,)](idx, table.tensor, out, 4, BLOCK=8)
    assert out[:4].tolist() == [2.0, 0.0, 1.0, 3.0]
    assert any("bytes before output table" in f for f in watch.findings), watch.findings
