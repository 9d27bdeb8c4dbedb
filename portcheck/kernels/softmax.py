"""Row softmax: one pass when a row fits in registers, an online two-pass loop for longer rows."""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

from .. import strategies as S
from ..cases import Case, Cost, Variant, register
from ..mathacc.functions import documented_bound
from ..oracles.softmax import softmax as softmax_ref
from ..tolerance import Tolerance, fmt
from ._launch import check_2d, num_warps_for, warp_size

MAX_FUSED = 32768          # longest row held in registers by one program
ELEMS_PER_PROGRAM = 4096   # short rows are packed several to a program to fill it
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


@triton.jit
def softmax_rows_kernel(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride,
                        ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    mask = (rows < n_rows) & (cols < n_cols)
    rows64 = rows.to(tl.int64)
    x = tl.load(x_ptr + rows64 * x_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=1)[:, None]
    e = tl.exp(x - m)
    y = e / tl.sum(e, axis=1)[:, None]
    tl.store(y_ptr + rows64 * y_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_online_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    """Pass 1 keeps a running max and a rescaled running sum; pass 2 writes exp(x - m) / s."""
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_stride
    y_row = y_ptr + row * y_stride
    cols = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    has_nan = tl.zeros([BLOCK], tl.int1)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=-float("inf")).to(tl.float32)
        # a running max may drop NaN (max.f32 returns the other operand), so track it apart
        has_nan = has_nan | (x != x)
        m_new = tl.maximum(m, x)
        # lanes still at -inf have nothing to rescale; guard them against (-inf) - (-inf) = NaN
        scale = tl.where(m_new == -float("inf"), 0.0, tl.exp(m - m_new))
        s = s * scale + tl.where(m_new == -float("inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    total = tl.sum(tl.where(m == -float("inf"), 0.0, s * tl.exp(m - row_max)), axis=0)
    total = tl.where(tl.max(has_nan.to(tl.int32), axis=0) > 0, float("nan"), total)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - row_max) / total
        tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def config(n_cols: int, warp: int, long_rows: bool = False, chunk: int | None = None) -> dict:
    """Launch parameters for a row length on a device with the given warp size."""
    if long_rows or n_cols > MAX_FUSED:
        block = chunk or min(triton.next_power_of_2(n_cols), 8192)
        return {"kernel": softmax_online_kernel, "ROWS": 1, "BLOCK": block,
                "num_warps": num_warps_for(block, warp)}
    block = triton.next_power_of_2(n_cols)
    rows = max(1, ELEMS_PER_PROGRAM // block)
    return {"kernel": softmax_rows_kernel, "ROWS": rows, "BLOCK": block,
            "num_warps": num_warps_for(rows * block, warp)}


def softmax(x: torch.Tensor, out: torch.Tensor | None = None, *, long_rows: bool = False,
            chunk: int | None = None) -> torch.Tensor:
    """softmax(x) along the last dim of a 2-D tensor (fp32 math, output in x's dtype)."""
    check_2d("x", x, tuple(DTYPES.values()))
    out = torch.empty_like(x) if out is None else out
    check_2d("out", out, (x.dtype,))
    if out.shape != x.shape:
        raise ValueError(f"out has shape {tuple(out.shape)}, expected {tuple(x.shape)}")
    n_rows, n_cols = x.shape
    if n_rows == 0 or n_cols == 0:
        return out
    cfg = config(n_cols, warp_size(), long_rows, chunk)
    if cfg["kernel"] is softmax_rows_kernel:
        grid = (triton.cdiv(n_rows, cfg["ROWS"]),)
        softmax_rows_kernel[grid](x, out, n_rows, n_cols, x.stride(0), out.stride(0),
                                  ROWS=cfg["ROWS"], BLOCK=cfg["BLOCK"], num_warps=cfg["num_warps"])
    else:
        softmax_online_kernel[(n_rows,)](x, out, n_cols, x.stride(0), out.stride(0),
                                         BLOCK=cfg["BLOCK"], num_warps=cfg["num_warps"])
    return out


# ---- the cases -------------------------------------------------------------------------------

def _inputs(long_rows: bool):
    def inputs(dtype: str, max_elements: int):
        tile = 64 if long_rows else 1024
        return S.rows_and_cols(tile, max_elements).flatmap(lambda rc: st.fixed_dictionaries({
            "dtype": st.just(dtype), "rows": st.just(rc[0]), "cols": st.just(rc[1]),
            "regime": S.regimes(S.REGIMES), "layout": S.layouts(), "seed": S.seeds()}))
    return inputs


def _make(long_rows: bool):
    def make(spec: dict, device: str) -> dict:
        gen = S.generator(spec["seed"])
        x = S.values((spec["rows"], spec["cols"]), spec["dtype"], spec["regime"], gen)
        # long-row checks on small inputs use a chunk of a quarter row, so the loop runs about
        # four times and ends on a partial chunk whenever the length is not a power of two
        chunk = max(16, triton.next_power_of_2(spec["cols"]) // 4) if long_rows and spec["cols"] <= MAX_FUSED else None
        return {"x": S.laid_out(x, spec["layout"], device), "long_rows": long_rows, "chunk": chunk}
    return make


def _outputs(args):
    return {"y": (tuple(args["x"].shape), args["x"].dtype)}


def _launch(args, outs):
    softmax(args["x"], outs["y"], long_rows=args["long_rows"], chunk=args["chunk"])


def _oracle(args):
    return {"y": softmax_ref(args["x"])}


# tl.exp is ex2.approx.f32 (NVIDIA) / v_exp_f32 (AMD) after a multiply by log2(e): the larger of
# the vendors' documented exp bounds (portcheck math measures it); the argument's rounding,
# which dominates for large |x - m|, is a separate term of the formula below.
EXP_ULP = max(documented_bound("exp", vendor) for vendor in ("nvidia", "amd"))


def _tolerance(args, refs, dtype):
    """Per element: u(out) + (n + EXP_ULP + 2 + 2|x_i - m| + 2 sum_j y_j |x_j - m|) u(fp32).

    exp(t) computed as 2^(t*log2 e) has relative error |t| u from rounding its argument, and
    x_i - m adds another |x_i - m| u; the row sum inherits the y-weighted mean of those errors
    and n u from summation; the division and the final rounding add u(fp32) and u(out).
    """
    x = args["x"]
    m = x.amax(dim=-1, keepdim=True)
    dist = torch.where(torch.isfinite(x - m), (x - m).abs(), torch.zeros_like(x))
    y = torch.nan_to_num(refs["y"], nan=0.0)
    weighted = (y * dist).sum(dim=-1, keepdim=True)
    n = x.shape[-1]
    u32, uo = fmt("fp32").unit_roundoff, fmt(dtype).unit_roundoff
    rtol = uo + (n + EXP_ULP + 2 + 2 * dist + 2 * weighted) * u32
    formula = (f"rtol_i = u({dtype}) + (n + {EXP_ULP} + 2 + 2|x_i-m| + 2 sum_j y_j|x_j-m|) u(fp32), "
               f"n = {n}; atol = tiny({dtype})")
    return {"y": Tolerance(rtol, fmt(dtype).tiny, formula)}


def _cost(args):
    x = args["x"]
    return Cost(bytes=2 * x.numel() * x.element_size(), flops=5 * x.numel())


def _baselines(args):
    """torch eager, and the peers' row softmax where they import (both take the last dim)."""
    from .. import peers
    x = args["x"]
    out = {"torch": lambda: torch.softmax(x, dim=-1)}
    liger = peers.load("liger_kernel.ops.softmax")
    if liger is not None:
        out[peers.LIGER] = lambda: liger.LigerSoftmaxFunction.apply(x)
    gems = peers.load("flag_gems")
    if gems is not None:
        out[peers.FLAGGEMS] = lambda: gems.softmax(x, -1)
    return out


def _variants(long_rows: bool):
    def variants(arch) -> list[Variant]:
        out = []
        for dtype in DTYPES:
            for n in ((8192, 131072) if long_rows else (128, 1000, 4096, 32768)):
                cfg = config(n, arch.warp_size, long_rows)
                t = "*" + fmt(dtype).triton_name
                sig = {"x_ptr": t, "y_ptr": t, "n_cols": "i32", "x_stride": "i32", "y_stride": "i32"}
                if cfg["kernel"] is softmax_rows_kernel:
                    sig = {"x_ptr": t, "y_ptr": t, "n_rows": "i32", **{k: v for k, v in sig.items() if k not in ("x_ptr", "y_ptr")}}
                    consts = {"ROWS": cfg["ROWS"], "BLOCK": cfg["BLOCK"]}
                else:
                    consts = {"BLOCK": cfg["BLOCK"]}
                out.append(Variant(cfg["kernel"], sig, consts, cfg["num_warps"], label=f"{dtype} n={n}"))
        return out
    return variants


for _long in (False, True):
    register(Case(
        name="softmax_long" if _long else "softmax", family="softmax", dtypes=tuple(DTYPES),
        inputs=_inputs(_long), make=_make(_long), outputs=_outputs, launch=_launch,
        oracle=_oracle, tolerance=_tolerance, cost=_cost,
        bench=({"dtype": "bf16", "rows": 4096, "cols": 131072, "regime": "normal",
                "layout": "contiguous", "seed": 0},) if _long else
              ({"dtype": "bf16", "rows": 32768, "cols": 4096, "regime": "normal",
                "layout": "contiguous", "seed": 0},),
        variants=_variants(_long), baselines=_baselines, math=("exp",),
        description=("online two-pass softmax for rows longer than one block" if _long
                     else "row softmax, one pass, several short rows per program")))
