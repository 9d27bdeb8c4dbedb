"""Gated activations as serving engines fuse them after the up-projection (vLLM SiluAndMul,
GeluAndMul): x [tokens, 2d] -> act(x[:, :d]) * x[:, d:], in fp32, rounded once to x's dtype.

  silu(a)      = a * sigmoid(a)
  gelu(a)      = a/2 * (1 + erf(a / sqrt 2))                      (approximate="none")
  gelu_tanh(a) = a * sigmoid(2 sqrt(2/pi) (a + 0.044715 a^3))     (= a/2 (1 + tanh(...)))

sigmoid(z) is computed from e = exp(-|z|) <= 1 only: 1/(1 + e) for z >= 0, e/(1 + e) below, so no
exp overflows and silu of a large negative a is a tiny number rather than -0 (the 1/(1 + exp(-z))
form returns 0 once exp(-z) overflows at z < -88.7). Tiles of ROWS x BLOCK output columns.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from hypothesis import strategies as st

from .. import strategies as S
from ..cases import Case, Cost, Variant, launch_divisibility, register
from ..dtypes import fmt
from ..facts.numerics import DIV_ULP, ERF_ULP, EXP_ULP
from ..oracles import activations as act_ref
from ..tolerance import Tolerance
from ..facts.device import warp_size
from ._launch import check_2d, num_warps_for

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
ACTS = {"silu": 0, "gelu": 1, "gelu_tanh": 2}
ELEMS_PER_PROGRAM = 4096      # 8 elements of each input per thread (one 16 B bf16 vector) at 16 warps
TILE_COLS = 1024
SQRT1_2 = 0.7071067811865476
TANH_K = 2 * math.sqrt(2 / math.pi)            # sigmoid(2y) = (1 + tanh(y)) / 2
TANH_KC = TANH_K * 0.044715


@triton.jit
def _sigmoid(z):
    e = tl.exp(-tl.abs(z))
    r = 1.0 / (1.0 + e)
    return tl.where(z >= 0, r, e * r)


@triton.jit
def gated_kernel(x_ptr, o_ptr, n_rows, d, x_stride, o_stride,
                 ACT: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)[None, :]
    mask = (rows < n_rows) & (cols < d)
    rows64 = rows.to(tl.int64)
    x_row = x_ptr + rows64 * x_stride
    a = tl.load(x_row + cols, mask=mask).to(tl.float32)
    b = tl.load(x_row + d + cols, mask=mask).to(tl.float32)
    if ACT == 0:
        g = a * _sigmoid(a)
    elif ACT == 1:
        g = 0.5 * a * (1.0 + tl.math.erf(a * 0.7071067811865476))      # SQRT1_2
    else:
        g = a * _sigmoid(a * (1.5957691216057308 + 0.07135481627260025 * (a * a)))   # TANH_K, TANH_KC
    tl.store(o_ptr + rows64 * o_stride + cols, (g * b).to(o_ptr.dtype.element_ty), mask=mask)


def config(n_rows: int, d: int, warp: int) -> dict:
    block = min(triton.next_power_of_2(d), TILE_COLS)
    rows = min(max(1, ELEMS_PER_PROGRAM // block), triton.next_power_of_2(max(1, n_rows)))
    return {"ROWS": rows, "BLOCK": block, "num_warps": num_warps_for(rows * block, warp)}


def gated(x: torch.Tensor, activation: str = "silu", out: torch.Tensor | None = None) -> torch.Tensor:
    """act(x[:, :d]) * x[:, d:] for a 2-D x [tokens, 2d]."""
    if activation not in ACTS:
        raise ValueError(f"unknown activation {activation!r}; known: {', '.join(ACTS)}")
    check_2d("x", x, tuple(DTYPES.values()))
    n_rows, width = x.shape
    if width % 2:
        raise ValueError(f"x has {width} columns; a gated activation needs an even number (gate | up)")
    d = width // 2
    out = torch.empty((n_rows, d), dtype=x.dtype, device=x.device) if out is None else out
    if tuple(out.shape) != (n_rows, d) or out.dtype != x.dtype:
        raise ValueError(f"out is {tuple(out.shape)} {out.dtype}; expected {(n_rows, d)} {x.dtype}")
    check_2d("out", out, (x.dtype,))
    if out.device != x.device:
        raise ValueError(f"out is on {out.device} but x is on {x.device}")
    if n_rows == 0 or d == 0:
        return out
    cfg = config(n_rows, d, warp_size())
    grid = (triton.cdiv(n_rows, cfg["ROWS"]), triton.cdiv(d, cfg["BLOCK"]))
    gated_kernel[grid](x, out, n_rows, d, x.stride(0), out.stride(0), ACT=ACTS[activation],
                       ROWS=cfg["ROWS"], BLOCK=cfg["BLOCK"], num_warps=cfg["num_warps"])
    return out


def silu_and_mul(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    return gated(x, "silu", out)


def gelu_and_mul(x: torch.Tensor, approximate: str = "none", out: torch.Tensor | None = None) -> torch.Tensor:
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return gated(x, "gelu" if approximate == "none" else "gelu_tanh", out)


# ---- tolerances -----------------------------------------------------------------------------



def _sigmoid_rel_error(z: torch.Tensor, arg_rel: float):
    """First-order relative error bound of a * sigmoid(z) * b in units of u(fp32), with z's own
    relative error arg_rel (in u). e = exp(-|z|) carries (2 EXP_ULP + |z| (2 + arg_rel)) u: the
    ULP bound, and the argument t = -|z| * log2(e) that exp2 takes, off by up to 2|t| u (the
    product's rounding and the fp32 constant's), which makes |z| * 2u relative in e;
    1/(1 + e) passes e/(1 + e) of it, e/(1 + e) all of it plus that; the add, the multiplies by e
    (z < 0), by a and by b add one u each, the division 2 DIV_ULP u."""
    e = torch.exp(-z.abs())
    de = 2 * EXP_ULP + z.abs() * (2 + arg_rel)
    neg = (z < 0).to(z.dtype)
    return (e / (1 + e) + neg) * de + 3 + neg + 2 * DIV_ULP


def _tolerance(activation: str):
    def tolerance(args, refs, dtype):
        u32, uo = fmt("fp32").unit_roundoff, fmt(dtype).unit_roundoff
        a, b = act_ref.halves(args["x"])
        sub = fmt(dtype).subnormal_step
        # where exp(-|z|) is below fp32's smallest normal it may be flushed or lose its bits; the
        # true a * sigmoid(z) * b is then under |a b| tiny(fp32) in magnitude
        floor = (a * b).abs() * fmt("fp32").tiny
        if activation == "gelu":
            z = a * SQRT1_2
            # abs error of 1 + erf(z): the argument's two roundings through erf' = 2/sqrt(pi) e^-z^2,
            # erf's ULP bound, and the add; then a/2 * s * b adds 2u relative
            ds = (4 / math.sqrt(math.pi) * torch.exp(-z * z) * z.abs() + 2 * ERF_ULP
                  + (1 + torch.erf(z)).abs()) * u32
            atol = 0.5 * (a * b).abs() * ds * (1 + 3 * u32) + sub
            return {"out": Tolerance(uo + 3 * u32, atol,
                                     f"rtol = u({dtype}) + 3u(fp32); atol_i = |a b|/2 (4/sqrt(pi) e^-z^2 |z| + "
                                     f"2*{ERF_ULP} + |1 + erf z|) u(fp32) + sub({dtype}), z = a/sqrt 2 "
                                     f"(erf's documented bound {ERF_ULP} ULP; 1 + erf(z) cancels for a << 0)")}
        if activation == "silu":
            z, arg_rel, what = a, 0.0, "z = a"
        else:
            z, arg_rel, what = a * (TANH_K + TANH_KC * a * a), 6.0, "z = a (K + KC a^2), computed with 6u"
        rtol = uo + _sigmoid_rel_error(z, arg_rel) * u32
        formula = (f"rtol_i = u({dtype}) + ((e/(1+e) + [z<0]) (2*{EXP_ULP} + (2+{arg_rel:g})|z|) + 3 + [z<0] "
                   f"+ 2*{DIV_ULP}) u(fp32), e = exp(-|z|), {what}; atol_i = |a b| tiny(fp32) + sub({dtype}) "
                   f"(documented bounds: exp {EXP_ULP} ULP, div.full.f32 {DIV_ULP} ULP)")
        return {"out": Tolerance(rtol, floor + sub, formula)}
    return tolerance


# ---- the cases ------------------------------------------------------------------------------

def _inputs(with_approx: bool):
    def inputs(dtype: str, max_elements: int):
        extra = {"approximate": st.sampled_from(("none", "tanh"))} if with_approx else {}
        # d columns of output, 2d of input: the input stays within the budget
        return S.rows_and_cols(TILE_COLS, max(1, max_elements // 2)).flatmap(lambda rc: st.fixed_dictionaries({
            "dtype": st.just(dtype), "rows": st.just(rc[0]), "d": st.just(rc[1]),
            "regime": S.regimes(), "layout": S.layouts(), "seed": S.seeds(), **extra}))
    return inputs


def _make(spec: dict, device: str) -> dict:
    gen = S.generator(spec["seed"])
    x = S.values((spec["rows"], 2 * spec["d"]), spec["dtype"], spec["regime"], gen)
    activation = "silu" if "approximate" not in spec else ("gelu" if spec["approximate"] == "none" else "gelu_tanh")
    return {"x": S.laid_out(x, spec["layout"], device), "activation": activation, "dtype": spec["dtype"]}


def _outputs(args):
    x = args["x"]
    return {"out": ((x.shape[0], x.shape[1] // 2), x.dtype)}


def _launch(args, outs):
    gated(args["x"], args["activation"], outs["out"])


def _oracle(args):
    """The exact result; where it lies past the output format, rounding it gives +-inf."""
    return {"out": act_ref.overflow_to_inf(act_ref.gated(args["x"], args["activation"]), args["dtype"])}


def _tolerance_any(args, refs, dtype):
    return _tolerance(args["activation"])(args, refs, dtype)


def _cost(args):
    x = args["x"]
    n_out = x.numel() // 2
    flops = {"silu": 8, "gelu": 12, "gelu_tanh": 12}[args["activation"]] * n_out
    return Cost(bytes=x.numel() * x.element_size() + n_out * x.element_size(), flops=flops)


def _baselines(args):
    """torch eager (vLLM's forward_native), and the peers where they import: Liger takes the
    gate and up halves as two contiguous tensors (made outside the timed call), FlagGems views."""
    from ..speed import peers
    x, activation = args["x"], args["activation"]
    d = x.shape[1] // 2
    a, b = x[:, :d], x[:, d:]
    if activation == "silu":
        out = {"torch": lambda: F.silu(a) * b}
    else:
        approx = "none" if activation == "gelu" else "tanh"
        out = {"torch": lambda: F.gelu(a, approximate=approx) * b}
    gems = peers.load("flag_gems")
    if gems is not None:
        out[peers.FLAGGEMS] = ((lambda: gems.silu_and_mul(a, b)) if activation == "silu"
                               else (lambda: gems.gelu_and_mul(a, b, approx)))
    name = {"silu": "liger_kernel.ops.swiglu", "gelu_tanh": "liger_kernel.ops.geglu"}.get(activation)
    liger = peers.load(name) if name else None
    if liger is not None:
        ac, bc = a.contiguous(), b.contiguous()
        fn = liger.LigerSiLUMulFunction if activation == "silu" else liger.LigerGELUMulFunction
        out[peers.LIGER] = lambda: fn.apply(ac, bc)
    return out


def _variants(activations):
    def variants(arch) -> list[Variant]:
        out = []
        for dtype in DTYPES:
            t = "*" + fmt(dtype).triton_name
            for act in activations:
                for d in (128, 14336):
                    cfg = config(8192, d, arch.warp_size)
                    sig = {"x_ptr": t, "o_ptr": t, "n_rows": "i32", "d": "i32", "x_stride": "i32",
                           "o_stride": "i32"}
                    out.append(Variant(gated_kernel, sig,
                                       {"ACT": ACTS[act], "ROWS": cfg["ROWS"], "BLOCK": cfg["BLOCK"]},
                                       cfg["num_warps"], label=f"{dtype} {act} d={d}",
                                       divisible_by_16=launch_divisibility(
                                           sig, d=d, x_stride=2 * d, o_stride=d)))
        # the benchmarked configuration first: a CI compile of one variant per arch builds that one
        return sorted(out, key=lambda v: v.label != f"bf16 {activations[0]} d=14336")
    return variants


def _bench(**over) -> dict:
    spec = {"dtype": "bf16", "rows": 8192, "d": 14336, "regime": "normal", "layout": "contiguous", "seed": 0}
    spec.update(over)
    return spec


register(Case(
    name="silu_mul", family="activations", dtypes=tuple(DTYPES), inputs=_inputs(False), make=_make,
    outputs=_outputs, launch=_launch, oracle=_oracle, tolerance=_tolerance_any, cost=_cost,
    bench=(_bench(),), variants=_variants(("silu",)), baselines=_baselines, math=("exp",),
    description="SiLU-and-mul (SwiGLU): silu(x[:, :d]) * x[:, d:]"))

register(Case(
    name="gelu_mul", family="activations", dtypes=tuple(DTYPES), inputs=_inputs(True), make=_make,
    outputs=_outputs, launch=_launch, oracle=_oracle, tolerance=_tolerance_any, cost=_cost,
    bench=(_bench(approximate="none"), _bench(approximate="tanh")), variants=_variants(("gelu", "gelu_tanh")),
    baselines=_baselines, math=("erf", "exp"),
    description="GELU-and-mul (GeGLU): gelu(x[:, :d]) * x[:, d:], erf form or tanh approximation"))
