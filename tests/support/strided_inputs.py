"""Row kernels whose search draws contiguous last dimensions only (strategies.row_inputs), for the
harness's strided inputs (tests/harness/test_strided_inputs.py): y = x * w, with w one weight per
column. The launchers differ in how they take a tensor whose last dimension is strided."""
import triton
import triton.language as tl

from portcheck import Case, register
from portcheck import strategies as S
from portcheck.tolerance import elementwise


@triton.jit
def scale_rows_kernel(x_ptr, w_ptr, y_ptr, sx0, sx1, sw, sy0, cols, X_STRIDE: tl.constexpr,
                      W_STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    ok = offs < cols
    x = tl.load(x_ptr + row * sx0 + offs * (sx1 if X_STRIDE else 1), mask=ok).to(tl.float32)
    w = tl.load(w_ptr + offs * (sw if W_STRIDE else 1), mask=ok).to(tl.float32)
    tl.store(y_ptr + row * sy0 + offs, (x * w).to(y_ptr.dtype.element_ty), mask=ok)


def _launcher(x_stride=True, w_stride=True, refuse=(), pass_strides=True):
    """The launcher passes both column strides (unless not `pass_strides`: then 1s, as one that
    assumes contiguous tensors does); the kernel uses them where `x_stride` / `w_stride`."""
    def launch(args, outs):
        x, w, y = args["x"], args["w"], outs["y"]
        for name in refuse:
            if args[name].stride(-1) != 1:
                raise ValueError(f"{name} must have unit stride along its last dimension, got {args[name].stride()}")
        sx1, sw = (x.stride(1), w.stride(0)) if pass_strides else (1, 1)
        scale_rows_kernel[(x.shape[0],)](x, w, y, x.stride(0), sx1, sw, y.stride(0), x.shape[1],
                                         X_STRIDE=x_stride, W_STRIDE=w_stride,
                                         BLOCK=triton.next_power_of_2(x.shape[1]))
    return launch


def _case(name, launch):
    return register(Case(
        name=name, family="strided", dtypes=("fp32",),
        # one value regime: the tests count the examples that run, and every regime the search
        # left out would run once more (runner.check's regimes step)
        inputs=lambda dtype, max_elements: S.row_inputs(dtype, max_elements, tile=32, max_rows=4,
                                                        allowed=("normal",)),
        make=lambda spec, device: {"x": S.row_tensor(spec, device),
                                   "w": S.row_tensor({**spec, "rows": 1, "layout": "contiguous"}, device)[0]},
        outputs=lambda a: {"y": (tuple(a["x"].shape), a["x"].dtype)},
        launch=launch,
        oracle=lambda a: {"y": a["x"] * a["w"]},
        tolerance=lambda a, refs, dtype: {"y": elementwise(dtype, "fp32", ops=1)}))


STRIDES_USED = _case("strided_uses_strides", _launcher())
REFUSES_BOTH = _case("strided_refuses", _launcher(x_stride=False, w_stride=False, refuse=("x", "w")))
# bugs: the stride handed to the kernel and not used
X_STRIDE_DROPPED = _case("strided_drops_x_stride", _launcher(x_stride=False))
W_UNCHECKED = _case("strided_checks_x_only", _launcher(w_stride=False, refuse=("x",)))
# no stride handed over, nothing refused: contiguous tensors assumed (said, not failed)
ASSUMES_CONTIGUOUS = _case("strided_assumes_contiguous", _launcher(x_stride=False, w_stride=False,
                                                                   pass_strides=False))
