"""Row kernels on S.row_inputs only (row layouts: contiguous, padded): their last dimension is
always contiguous in the search; the harness's strided-columns input is the one that differs."""
import torch
import triton
import triton.language as tl

import portcheck
from portcheck import strategies as S
from portcheck import tolerance as T


@triton.jit
def scale_kernel(x_ptr, y_ptr, sx0, sx1, sy0, cols, USE_SX1: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    step = sx1 if USE_SX1 else 1
    x = tl.load(x_ptr + row * sx0 + offs * step, mask=offs < cols).to(tl.float32)
    tl.store(y_ptr + row * sy0 + offs, (2.0 * x).to(y_ptr.dtype.element_ty), mask=offs < cols)


def launcher(use_stride: bool, refuse: bool = False):
    def launch(args, outs):
        x, y = args["x"], outs["y"]
        if refuse and x.stride(-1) != 1:
            raise ValueError(f"x must have unit stride along its last dimension, got {x.stride()}")
        scale_kernel[(x.shape[0],)](x, y, x.stride(0), x.stride(1), y.stride(0), x.shape[1],
                                    USE_SX1=use_stride, BLOCK=triton.next_power_of_2(x.shape[1]))
    return launch


def case(name, launch):
    portcheck.register(portcheck.Case(
        name=name, family="colprobe", dtypes=("fp32", "fp16"),
        # one program a row, the whole row one block: rows kept short, or a GPU run's rows of up
        # to 4M columns make blocks that take minutes to compile (the H200 run of this session)
        inputs=lambda dtype, max_elements: S.row_inputs(dtype, min(max_elements, 16384), tile=32, max_rows=8),
        make=lambda spec, device: {"x": S.row_tensor(spec, device)},
        outputs=lambda a: {"y": (tuple(a["x"].shape), a["x"].dtype)},
        launch=launch,
        oracle=lambda a: {"y": 2.0 * a["x"]},
        tolerance=lambda a, refs, dtype: {"y": T.elementwise(dtype, "fp32", ops=1)}))


case("col_ignores_stride", launcher(use_stride=False))        # bug: passes sx1, steps by 1
case("col_uses_stride", launcher(use_stride=True))            # correct
case("col_refuses", launcher(use_stride=False, refuse=True))  # correct: refuses before launch


def copying(args, outs):   # correct: a launcher that makes its input contiguous first
    x = args["x"].contiguous()
    launcher(use_stride=False)({"x": x}, outs)


case("col_copies", copying)
