"""Fused bias + GELU + dropout: y = dropout(gelu(x + bias)), and the keep mask (uint8).

The mask: with g = offset + r * cols + c (the element's row-major index plus the stream offset),
element (r, c) is kept when uniform(Philox4x32-10(seed, counter = g // 4)[g % 4]) > p, where
uniform is Triton's uint_to_uniform_float (what tl.rand applies). One Philox call serves four
consecutive elements: tl.rand per element uses one of its four words, and Philox's integer
multiplies, not memory, then bound the kernel (25% of copy bandwidth on an H200 at bf16
32768 x 4096; packed, 43%, where the erf GELU is the next limit: 70% with no dropout). The
mask depends on neither the tiling nor the input's row stride, and a caller resumes a stream
by advancing `offset` by the element count.
Kept elements are scaled by 1 / (1 - p). p == 0 is no dropout: every element is kept and no
random numbers are drawn. GELU is the exact erf form, or the tanh approximation built from exp.

Two ways to draw, chosen by the launcher (the masks are identical bit for bit):
- packed, when offset and cols are multiples of 4: every aligned group of four columns of a row
  shares one counter, so a [BLOCK_M, BLOCK_N] tile makes one tl.randint4x call per group and
  interleaves the four words back into element order;
- per element, otherwise: each element computes its own counter g >> 2 and keeps word g & 3.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

from .. import strategies as S
from ..cases import Case, Cost, Variant, launch_divisibility, register
from ..facts.numerics import ERF_ULP, EXP_ULP
from ..oracles.gelu import bias_gelu_dropout as bias_gelu_dropout_ref
from ..oracles.gelu import gelu as gelu_ref
from ..tolerance import Tolerance, exact, fmt, near_zero
from ..facts.device import warp_size
from ._launch import check_2d, check_out, check_vector, num_warps_for

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
APPROXIMATIONS = ("none", "tanh")
TILE = 4096            # elements per program: Philox makes this kernel compute-heavy, keep warps busy
MAX_BLOCK_N = 1024
MAX_SEED = 2**63 - 1   # the seed is passed as int64; Triton splits it into the two key words


@triton.jit
def _tanh(z):
    # Triton 3.6-3.9 have no tl.math.tanh. 1 - 2/(e^2z + 1) saturates cleanly: e^2z = inf gives 1,
    # e^2z = 0 gives -1, and its absolute error stays near u, which is what gelu needs.
    return 1.0 - 2.0 / (tl.exp(2.0 * z) + 1.0)


@triton.jit
def _gelu(a, APPROX_TANH: tl.constexpr):
    if APPROX_TANH:
        z = 0.7978845608028654 * (a + 0.044715 * a * a * a)    # sqrt(2/pi) (a + 0.044715 a^3)
        return 0.5 * a * (1.0 + _tanh(z))
    else:
        return 0.5 * a * (1.0 + tl.math.erf(a * 0.7071067811865476))


@triton.jit
def _philox_words(seed, offset, rows64, n_cols, index, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  PACKED: tl.constexpr):
    """Word (g % 4) of tl.randint4x(seed, g // 4) for each element's stream position g = offset + index."""
    if PACKED:
        # offset, n_cols and the tile's first column are multiples of 4: row r's group q (columns
        # 4q..4q+3) has counter (offset + r n_cols) / 4 + q, and its four words are its four elements
        quads = tl.program_id(1) * (BLOCK_N // 4) + tl.arange(0, BLOCK_N // 4)
        counter = ((offset + rows64 * n_cols) >> 2) + quads[None, :]
        w0, w1, w2, w3 = tl.randint4x(seed, counter)
        # join(join(w0, w2), join(w1, w3))[r, q, j, i] is word 2j + i: row-major it lands on 4q + 2j + i
        return tl.reshape(tl.join(tl.join(w0, w2), tl.join(w1, w3)), (BLOCK_M, BLOCK_N))
    else:
        g = offset + index
        w0, w1, w2, w3 = tl.randint4x(seed, g >> 2)
        lane = g & 3
        return tl.where(lane < 2, tl.where(lane == 0, w0, w1), tl.where(lane == 2, w2, w3))


@triton.jit
def bias_gelu_dropout_kernel(x_ptr, b_ptr, y_ptr, keep_ptr, n_rows, n_cols, x_stride, p, scale,
                             seed, offset, HAS_BIAS: tl.constexpr, APPROX_TANH: tl.constexpr,
                             DROPOUT: tl.constexpr, PACKED: tl.constexpr, BLOCK_M: tl.constexpr,
                             BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < n_cols
    mask = (rows < n_rows)[:, None] & col_ok[None, :]
    rows64 = rows.to(tl.int64)[:, None]
    a = tl.load(x_ptr + rows64 * x_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        a += tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    g = _gelu(a, APPROX_TANH)
    index = rows64 * n_cols + cols[None, :]        # row-major element index: outputs are contiguous
    if DROPOUT:
        words = _philox_words(seed, offset, rows64, n_cols, index, BLOCK_M, BLOCK_N, PACKED)
        keep = tl.uint_to_uniform_float(words) > p
        y = tl.where(keep, g * scale, 0.0)
    else:
        keep = mask
        y = g
    tl.store(y_ptr + index, y.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(keep_ptr + index, keep.to(tl.uint8), mask=mask)


def packed(n_cols: int, offset: int, block_n: int) -> bool:
    """Whether groups of four aligned columns share one Philox counter (the packed draw)."""
    return offset % 4 == 0 and n_cols % 4 == 0 and block_n % 4 == 0


def config(n_cols: int, warp: int) -> dict:
    block_n = min(triton.next_power_of_2(n_cols), MAX_BLOCK_N)
    block_m = max(1, TILE // block_n)
    return {"BLOCK_M": block_m, "BLOCK_N": block_n, "num_warps": num_warps_for(block_m * block_n, warp)}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_tile(tile: dict) -> None:
    keys = ("BLOCK_M", "BLOCK_N", "num_warps")
    if not isinstance(tile, dict) or set(tile) != set(keys) or not all(
            _is_int(tile[k]) and tile[k] > 0 and tile[k] & (tile[k] - 1) == 0 for k in keys):
        raise ValueError(f"tile must be a dict of powers of two with keys {keys}, got {tile!r}")


def bias_gelu_dropout(x: torch.Tensor, bias: torch.Tensor | None = None, p: float = 0.0, seed: int = 0,
                      offset: int = 0, approximate: str = "none", *, out: torch.Tensor | None = None,
                      keep: torch.Tensor | None = None, tile: dict | None = None):
    """dropout(gelu(x + bias), p) of a 2-D tensor; returns (y, keep) with keep as uint8 0/1.

    `tile` ({"BLOCK_M", "BLOCK_N", "num_warps"}, powers of two) replaces the default `config()`,
    for sweeps; the mask does not depend on it."""
    check_2d("x", x, tuple(DTYPES.values()))
    n_rows, n_cols = x.shape
    check_vector("bias", bias, n_cols, x.dtype)
    if approximate not in APPROXIMATIONS:
        raise ValueError(f"approximate must be one of {APPROXIMATIONS}, got {approximate!r}")
    if not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be a number in [0, 1], got {p!r}")
    if not _is_int(seed) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be an int in [0, 2^63), got {seed!r}")
    if not _is_int(offset) or offset < 0 or offset + x.numel() > MAX_SEED:
        raise ValueError(f"offset must be an int >= 0 with offset + numel < 2^63, got {offset!r}")
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device) if out is None else out
    keep = torch.empty((n_rows, n_cols), dtype=torch.uint8, device=x.device) if keep is None else keep
    for name, t, dt in (("out", out, x.dtype), ("keep", keep, torch.uint8)):
        check_out(name, t, x.shape, dt)
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous")
    if tile is not None:
        _check_tile(tile)
    if x.numel() == 0:
        return out, keep
    cfg = config(n_cols, warp_size()) if tile is None else tile
    grid = (triton.cdiv(n_rows, cfg["BLOCK_M"]), triton.cdiv(n_cols, cfg["BLOCK_N"]))
    scale = 1.0 / (1.0 - p) if p < 1 else 0.0
    bias_gelu_dropout_kernel[grid](
        x, bias if bias is not None else x, out, keep, n_rows, n_cols, x.stride(0), float(p), scale,
        seed, offset, HAS_BIAS=bias is not None, APPROX_TANH=approximate == "tanh", DROPOUT=p > 0,
        PACKED=p > 0 and packed(n_cols, offset, cfg["BLOCK_N"]), BLOCK_M=cfg["BLOCK_M"],
        BLOCK_N=cfg["BLOCK_N"], num_warps=cfg["num_warps"])
    return out, keep


# ---- the cases -------------------------------------------------------------------------------

# p: no dropout, the usual rates, all dropped, and anything in between
PROBABILITIES = st.one_of(st.sampled_from((0.0, 0.1, 0.5, 0.9, 1.0)), st.floats(0.0, 1.0))
# seeds and offsets that exercise both key words and the carry into the counter's high word
# (the counter is g // 4: its low word wraps at g = 2^34)
RNG_SEEDS = st.one_of(st.sampled_from((0, 1, 2**32 - 1, 2**32, MAX_SEED)), st.integers(0, MAX_SEED))
OFFSETS = st.one_of(st.sampled_from((0, 1, 2**34 - 7)), st.integers(0, 2**40))


def _aligned(draw: tuple) -> tuple[int, int, int]:
    """Half the draws round cols and the offset down to multiples of 4, so that the packed draw is
    checked as often as the per-element one (cols under 4 cannot be aligned)."""
    (rows, cols), align, offset = draw
    if align and cols >= 4:
        return rows, cols - cols % 4, offset - offset % 4
    return rows, cols, offset


def _inputs(dtype: str, max_elements: int):
    shapes = st.tuples(S.rows_and_cols(MAX_BLOCK_N, max_elements), st.sampled_from((True, False)),
                       OFFSETS).map(_aligned)
    return shapes.flatmap(lambda rco: st.fixed_dictionaries({
        "dtype": st.just(dtype), "rows": st.just(rco[0]), "cols": st.just(rco[1]),
        "regime": S.regimes(S.REGIMES), "layout": S.layouts(), "bias": st.booleans(),
        "p": PROBABILITIES, "rng_seed": RNG_SEEDS, "offset": st.just(rco[2]), "seed": S.seeds()}))


def _make(approximate: str):
    def make(spec: dict, device: str) -> dict:
        gen = S.generator(spec["seed"])
        rows, cols, dtype = spec["rows"], spec["cols"], spec["dtype"]
        x = S.values((rows, cols), dtype, spec["regime"], gen)
        # gelu(-inf) is -inf * 0 in the formula every implementation uses (torch gives NaN):
        # undefined, so the special regime keeps +inf and NaN only
        x = torch.where(x == float("-inf"), torch.full_like(x, float("inf")), x)
        bias = S.values((cols,), dtype, "normal", gen).to(device) if spec["bias"] else None
        return {"x": S.laid_out(x, spec["layout"], device), "bias": bias, "p": spec["p"],
                "rng_seed": spec["rng_seed"], "offset": spec["offset"], "approximate": approximate}
    return make


def _outputs(args):
    shape = tuple(args["x"].shape)
    return {"y": (shape, args["x"].dtype), "keep": (shape, torch.uint8)}


def _launch(args, outs):
    bias_gelu_dropout(args["x"], args["bias"], args["p"], args["rng_seed"], args["offset"],
                      args["approximate"], out=outs["y"], keep=outs["keep"])


def _oracle(args):
    y, keep = bias_gelu_dropout_ref(args["x"], args["bias"], args["p"], args["rng_seed"], args["offset"],
                                    args["approximate"])
    return {"y": y, "keep": keep.to(torch.uint8)}


GELU_SLOPE = 1.13    # max |gelu'(a)| = 1.1289 (at a = sqrt 2); the tanh form's is within 1e-3 of it


def _tolerance(args, refs, dtype):
    """Per element, absolute (u = u(fp32), a = x + bias, g = gelu(a), S = 1/(1-p), t = tanh(z)):

    x + bias rounds (when there is a bias):  1.13 |a| u
    erf form:   g(a) error <= |a|/2 (ERF_ULP + 3) u + |g| u
                (a/sqrt2 rounds twice: erf moves by at most 2.26 |w| e^-w^2 u < u; 1 + erf, the products)
    tanh form:  g(a) error <= |a|/2 ((1 - t^2)(8|z| + EXP_ULP/2) + 2(1 - t) + 3) u + |g| u
                (z takes 7 roundings; exp(2z) errs by (2|z| + EXP_ULP) u, which moves t by
                (1 - t^2)/2 times that; 1 - 2/(E + 1) adds (2(1 - t) + 1) u)
    kept:       y = g * S: S rounds to fp32 and the product rounds: 2 S |g| u;  dropped: exactly 0
    then the output rounding: rtol = u(out); atol adds sub(out), its subnormal step.
    near zero:  the relative bounds above fail once g falls below fp32's smallest normal, where each
                rounding errs by up to one subnormal step instead: g's three (a/2, 1 + t, the
                product), magnified by S, and the product g * S: atol adds (3 S + 1) sub(fp32).
    """
    x = args["x"]
    a = x + args["bias"] if args["bias"] is not None else x
    a_abs = torch.nan_to_num(a.abs(), nan=0.0, posinf=0.0)
    g_abs = torch.nan_to_num(gelu_ref(a, args["approximate"]).abs(), nan=0.0, posinf=0.0)
    u32, uo = fmt("fp32").unit_roundoff, fmt(dtype).unit_roundoff
    p = args["p"]
    scale = 1.0 / (1.0 - p) if p < 1 else 0.0
    bias_term = GELU_SLOPE * a_abs * u32 if args["bias"] is not None else torch.zeros_like(a_abs)
    if args["approximate"] == "tanh":
        z = math.sqrt(2 / math.pi) * (a + 0.044715 * a * a * a)
        t = torch.nan_to_num(torch.tanh(z), nan=1.0)
        z_term = torch.nan_to_num((1 - t * t) * z.abs(), nan=0.0)
        inner = (1 - t * t) * EXP_ULP / 2 + 8 * z_term + 2 * (1 - t) + 3
        form = (f"|a|/2 ((1-t^2)(8|z| + {EXP_ULP}/2) + 2(1-t) + 3) u + |g| u, "
                "z = sqrt(2/pi)(a + 0.044715 a^3), t = tanh z")
    else:
        inner = torch.full_like(a_abs, ERF_ULP + 3.0)
        form = f"|a|/2 ({ERF_ULP} + 3) u + |g| u"
    g_err = a_abs / 2 * inner * u32 + g_abs * u32 + bias_term
    keep = refs["keep"].to(torch.bool)
    floor, floor_text = near_zero(dtype, "fp32", 3 * scale + 1)
    atol = torch.where(keep, scale * (g_err + 2 * g_abs * u32), torch.zeros_like(g_err)) + floor
    bias_text = " + 1.13 |a| u (bias add)" if args["bias"] is not None else ""
    return {
        "y": Tolerance(uo, atol, f"rtol = u({dtype}); atol_i = S ({form}{bias_text} + 2 |g| u) where kept, "
                                 f"+ {floor_text}; S = 1/(1-p) = {scale:.6g}, u = u(fp32)"),
        "keep": exact("bitwise: Philox4x32-10 keep mask, g = offset + index: "
                      "uniform(philox(seed, g // 4)[g % 4]) > fp32(p)"),
    }


def _cost(args):
    x, b = args["x"], args["bias"]
    moved = x.numel() * (2 * x.element_size() + 1) + (b.numel() * b.element_size() if b is not None else 0)
    # floating-point work of gelu and the scale; erf's polynomial and Philox's integer rounds aside
    return Cost(bytes=moved, flops=8 * x.numel())


def _baselines(args):
    import torch.nn.functional as F

    from ..speed import peers
    x, b, p, approximate = args["x"], args["bias"], args["p"], args["approximate"]

    def biased():
        return x + b if b is not None else x

    found = {"torch": lambda: F.dropout(F.gelu(biased(), approximate=approximate), p, training=True)}
    gems = peers.load("flag_gems.ops")     # gelu(x, approximate=...), dropout(x, p, train) -> (y, mask)
    if gems is not None and hasattr(gems, "gelu") and hasattr(gems, "dropout"):
        found[peers.FLAGGEMS] = lambda: gems.dropout(gems.gelu(biased(), approximate=approximate), p, True)
    return found


def _variants(approximate: str):
    def variants(arch) -> list[Variant]:
        out = []
        for dtype in DTYPES:
            t = "*" + fmt(dtype).triton_name
            for n in (128, 4096):      # one row tile of 32 short rows; 4 rows of 1024-column tiles
                cfg = config(n, arch.warp_size)
                # the packed draw, the per-element draw (an offset not a multiple of 4), no dropout
                for dropout, pack, tail in ((True, True, ""), (True, False, " per-element"),
                                            (False, False, " p=0")):
                    sig = {"x_ptr": t, "b_ptr": t, "y_ptr": t, "keep_ptr": "*u8", "n_rows": "i32",
                           "n_cols": "i32", "x_stride": "i32", "p": "fp32", "scale": "fp32",
                           "seed": "i64", "offset": "i64"}
                    consts = {"HAS_BIAS": True, "APPROX_TANH": approximate == "tanh", "DROPOUT": dropout,
                              "PACKED": pack, "BLOCK_M": cfg["BLOCK_M"], "BLOCK_N": cfg["BLOCK_N"]}
                    # as launched with aligned rows, a 64-bit Philox seed and an offset that is a
                    # multiple of 16 (the per-element draw's is not one of 4); small seeds and
                    # offsets, like the bench's, are passed as i32 and compile another variant
                    divisible = launch_divisibility(sig, n_cols=n, x_stride=n,
                                                    offset=0 if pack or not dropout else 3)
                    out.append(Variant(bias_gelu_dropout_kernel, sig, consts, cfg["num_warps"],
                                       label=f"{dtype} n={n}{tail}", divisible_by_16=divisible))
        return out
    return variants


for _approx in APPROXIMATIONS:
    register(Case(
        name="bias_gelu_tanh_dropout" if _approx == "tanh" else "bias_gelu_dropout",
        family="bias_gelu_dropout", dtypes=tuple(DTYPES),
        inputs=_inputs, make=_make(_approx), outputs=_outputs, launch=_launch, oracle=_oracle,
        tolerance=_tolerance, cost=_cost,
        bench=({"dtype": "bf16", "rows": 32768, "cols": 4096, "regime": "normal", "layout": "contiguous",
                "bias": True, "p": 0.1, "rng_seed": 1234, "offset": 0, "seed": 0},),
        variants=_variants(_approx), baselines=_baselines,
        math=("exp",) if _approx == "tanh" else ("erf",),
        description=f"bias + GELU ({'tanh approximation' if _approx == 'tanh' else 'erf'}) + Philox dropout, "
                    "with the keep mask"))
