"""An integer argument equal to 1 is the constant 1 wherever a kernel runs: Triton's JIT compiles
it so for a GPU (unless the kernel lists it in do_not_specialize or annotates its type), and
portcheck's interpreter layer passes it so on the CPU (portcheck.targets.interpreter_numerics). A
kernel that treats such an argument as a tensor then fails at 1 on the CPU too, not only when it
meets a GPU."""
import pytest
import torch
import triton
import triton.language as tl

from tests.support.launching import DEVICE, INTERPRETER, needs_device
from portcheck.targets import interpreter_numerics as N


@triton.jit
def mean_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """treats its length as a tensor: n = 1, the constant, has no .to()"""
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr, tl.sum(x, axis=0) / n.to(tl.float32))


@triton.jit(do_not_specialize=["n"])
def mean_unspecialized_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr, tl.sum(x, axis=0) / n.to(tl.float32))


@triton.jit
def mean_typed_kernel(x_ptr, y_ptr, n: tl.int32, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr, tl.sum(x, axis=0) / n.to(tl.float32))


def _mean(kernel, n) -> float:
    x, y = torch.arange(1.0, 9.0, device=DEVICE), torch.empty(1, device=DEVICE)
    kernel[(1,)](x, y, n, BLOCK=8)
    return y.item()


@needs_device
def test_a_length_of_one_is_the_constant_on_every_target():
    if INTERPRETER and not N.installed():
        pytest.skip("--raw-interpreter: Triton's own interpreter passes every integer as a tensor")
    assert _mean(mean_kernel, 8) == 4.5
    with pytest.raises(Exception) as failed:    # the GPU's CompilationError, the interpreter's error
        _mean(mean_kernel, 1)
    # 'int' object (the GPU's code generator) or 'constexpr' object (the interpreter)
    assert "has no attribute 'to'" in f"{failed.value}\n{failed.value.__cause__!r}"
    assert _mean(mean_unspecialized_kernel, 1) == 1.0   # do_not_specialize keeps it a tensor
    assert _mean(mean_typed_kernel, 1) == 1.0           # and so does a type annotation


@pytest.mark.skipif(not INTERPRETER, reason="Triton's own interpreter, against the layer")
def test_without_the_layer_the_interpreter_passes_a_tensor_where_the_gpu_fails():
    with N.active(False):
        assert _mean(mean_kernel, 1) == 1.0


@pytest.mark.skipif(not INTERPRETER, reason="the interpreter layer's own reading of a launch")
def test_only_an_int_of_one_becomes_the_constant():
    """a bool is an i1 to the JIT, and a float an fp32, whatever their value"""
    args, kwargs = N._ones_as_constants(mean_kernel, ("x", "y", True), {"BLOCK": 1})
    assert args[2] is True and kwargs == {"BLOCK": 1}          # BLOCK: a constexpr anyway
    args, _ = N._ones_as_constants(mean_kernel, ("x", "y", 1.0), {})
    assert args[2] == 1.0 and isinstance(args[2], float)
    args, _ = N._ones_as_constants(mean_kernel, ("x", "y", 1), {})
    assert isinstance(args[2], triton.language.constexpr) and args[2].value == 1
