"""Gated activations: bad input refused before launch, the kernel's constants and rewritten tanh
form against their definitions, overflow of the reference, and a direct run."""
import inspect
import math

import pytest
import torch

from tests.support.launching import DEVICE, forbid_launches, needs_device
from portcheck.kernels import activations as A
from portcheck.oracles import activations as act_ref
from portcheck.cases import float64_args


@pytest.fixture
def no_launch(monkeypatch):
    forbid_launches(monkeypatch, A, "gated_kernel")


@pytest.mark.parametrize("call,words", [
    (lambda: A.silu_and_mul(torch.randn(4, 7)), ["7 columns", "even number"]),
    (lambda: A.silu_and_mul(torch.randn(2, 4, 8)), ["x must be 2-D"]),
    (lambda: A.silu_and_mul(torch.randn(4, 8, dtype=torch.float64)), ["torch.float64", "this kernel takes"]),
    (lambda: A.silu_and_mul(torch.randn(8, 4).t()), ["unit stride"]),
    (lambda: A.silu_and_mul(torch.randn(4, 8), out=torch.empty(4, 8)), ["out is (4, 8)", "expected (4, 4)"]),
    (lambda: A.silu_and_mul(torch.randn(4, 8), out=torch.empty(4, 4, dtype=torch.float16)),
     ["torch.float16", "expected (4, 4) torch.float32"]),
    (lambda: A.gelu_and_mul(torch.randn(4, 8), approximate="erf"), ["approximate must be 'none' or 'tanh'"]),
    (lambda: A.gated(torch.randn(4, 8), "relu"), ["unknown activation 'relu'"]),
])
def test_bad_input_is_refused_before_launch(no_launch, call, words):
    with pytest.raises(ValueError) as info:
        call()
    for w in words:
        assert w in str(info.value), str(info.value)


def test_kernel_literals_are_the_documented_constants():
    src = inspect.getsource(A.gated_kernel.fn)
    for value in (A.SQRT1_2, A.TANH_K, A.TANH_KC):
        assert repr(value) in src
    assert A.SQRT1_2 == math.sqrt(0.5) and A.TANH_K == 2 * math.sqrt(2 / math.pi)


def _textbook(a, approximate):
    k = math.sqrt(2 / math.pi)
    if approximate == "none":
        return 0.5 * a * (1 + torch.erf(a / math.sqrt(2)))
    return 0.5 * a * (1 + torch.tanh(k * (a + 0.044715 * a ** 3)))


def test_reference_gelus_match_the_textbook_forms():
    """Where the textbook forms are accurate in float64 (a > -4) the reference agrees with them;
    in the left tail they cancel to 0 and the reference does not; the kernel's rewrite of the
    tanh form, a sigmoid(a (K + KC a^2)), is the same function."""
    a = torch.linspace(-4, 12, 1601, dtype=torch.float64)
    for approx in ("none", "tanh"):
        assert torch.allclose(act_ref.gelu(a, approx), _textbook(a, approx), rtol=1e-10, atol=0)
    rewritten = a * torch.sigmoid(a * (A.TANH_K + A.TANH_KC * a * a))
    assert torch.allclose(rewritten, act_ref.gelu(a, "tanh"), rtol=1e-14, atol=0)
    far = torch.tensor([-10.0], dtype=torch.float64)    # 1 + tanh(-43.6) and 1 + erf(-7.07) are 0
    for approx in ("none", "tanh"):
        assert _textbook(far, approx).item() == 0.0 != act_ref.gelu(far, approx).item()


def test_overflow_to_inf_threshold():
    ref = torch.tensor([65519.99, 65520.0, -65520.0, 1e5, 3.0], dtype=torch.float64)
    got = act_ref.overflow_to_inf(ref, "fp16")
    assert got.tolist()[:4] == [65519.99, math.inf, -math.inf, math.inf]
    assert torch.tensor([65519.99, 65520.0]).half().isinf().tolist() == [False, True]   # torch agrees
    top = torch.finfo(torch.float32).max
    edge = torch.tensor([top, top + 2.0 ** 103], dtype=torch.float64)    # max, and max + ulp/2 (ties up)
    assert act_ref.overflow_to_inf(edge, "fp32").isinf().tolist() == [False, True]
    assert edge.float().isinf().tolist() == [False, True]


@needs_device
@pytest.mark.parametrize("activation", list(A.ACTS))
def test_runs_on_a_padded_view(activation):
    g = torch.Generator().manual_seed(4)
    buf = torch.randn(37, 2 * 300 + 5, generator=g).to(DEVICE)
    x = buf[:, :600]                         # row stride 605: not the row length
    out = A.gated(x, activation)
    args = float64_args({"x": x, "activation": activation, "dtype": "fp32"}, "cpu")
    case = {"silu": "silu_mul"}.get(activation, "gelu_mul")
    from portcheck import cases
    from portcheck.compare import compare
    c = cases.get(case)
    refs = c.oracle(args)
    tol = c.tolerance(args, refs, "fp32")["out"]
    cmp = compare("out", out.cpu(), refs["out"], tol)
    assert cmp.ok, cmp.message
