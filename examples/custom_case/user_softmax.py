"""A row softmax as a repository already has it (a kernel and a launcher that allocates its
output), checked by portcheck with the Case below: 12 lines beyond the kernel and launcher.

It declares no `variants`: `portcheck compile` captures the launches from the launcher, once
per arch. `allocating_launcher` copies the returned output into portcheck's guarded buffers;
the launcher's `torch.empty` holds portcheck's poison during a check, so elements the kernel
leaves unwritten are caught, but a store past the end of that allocation is not (a launcher that
writes into `outs` has those caught too: see axpy.py).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, x_stride, y_stride, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * x_stride + offs, mask=offs < cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * y_stride + offs, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=offs < cols)


def softmax(x):
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    softmax_kernel[(x.shape[0],)](x, y, x.stride(0), y.stride(0), x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y


# ---- the Case: everything portcheck needs beyond the kernel and its launcher ----
import portcheck  # noqa: E402
from portcheck import strategies as S, tolerance as T  # noqa: E402

CASE = portcheck.register(portcheck.Case(
    name="example_softmax", family="example", dtypes=("fp32", "fp16"),
    inputs=lambda dtype, max_elements: S.row_inputs(dtype, max_elements, tile=128, max_rows=16),
    make=lambda spec, device: {"x": S.row_tensor(spec, device)},
    outputs=lambda args: {"y": (tuple(args["x"].shape), args["x"].dtype)},
    launch=portcheck.allocating_launcher(softmax, "y"),
    oracle=portcheck.oracle_from_torch(lambda x: torch.softmax(x, dim=-1), "y"),
    tolerance=lambda args, refs, dtype: {"y": T.softmax(args["x"], refs["y"], dtype)},
    math=("exp",)))
