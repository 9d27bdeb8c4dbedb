"""Row softmax: one pass when a row fits in registers, an online two-pass loop for longer rows."""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from .. import strategies as S
from ..cases import Case, Cost, Variant, register
from ..facts.numerics import DIV_ULP, EXP2_ULP, EXP_ULP
from ..oracles.softmax import softmax as softmax_ref
from ..tolerance import Tolerance, fmt, near_zero
from ..facts.device import local_arch, warp_size
from ._launch import alignment_obstacle, check_2d, check_programs, persistent_programs
from ._prefetch import evict_last_policy, l2_prefetch_ok, lead_thread, prefetch_l2
from ._rows import bench_spec, check_chunk, family_config, row_inputs, row_variants

MAX_FUSED = 32768          # longest row held in registers by one program
ELEMS_PER_PROGRAM = 4096   # short rows are packed several to a program to fill it
# elements per thread of the one-read kernel: 4 warps for a 4096-column bf16 row reach
# 0.94 of copy on the H200 against 0.76 at 16 warps (tools/sweep_launch.py, 2026-11-30)
ROW_ELEMS_PER_THREAD = 32
# chunk of the looped kernel: bf16 4096 x 131072 on the H200 at 32 warps, 0.687 of copy; 0.660 at
# 8192, 0.241 at 32768 (spills) (tools/sweep_launch.py --const LOOP_BLOCK=..., 2026-12-02). With
# the state per 16-byte group (softmax_online_kernel), 0.766 at 16384 against 0.711 per element,
# 0.684 at 32768 (reports/examples/long-rows-h200/grouped-state.json, 2026-12-02).
LOOP_BLOCK = 16384     # 16-bit elements (_rows.loop_block: the same bytes for fp32)
LOOP_PER_THREAD = 8        # chunk elements per thread, within 32 warps (NVIDIA), 16 wavefronts (CDNA)
# Long rows: programs per SM/CU of the persistent grid. Each program has one row in flight,
# read twice: 132 SMs x 1 x 256 KB (bf16, 131072 columns) fits the H200's 50 MB L2 for the
# second read. Measured there (reports/examples/sweeps-h200/launch_long_rows.json): 1, 2 and 4
# per SM within 1% of each other; softmax: 0.639 against 0.642 with one row per program, so L2
# reuse is not what limits it.
PROGRAMS_PER_SM = 1
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
def _max_keeping_nan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


# a word of two bf16 -inf: what WORDS loads give past a row's end
NEG_INF_WORD = tl.constexpr(-8323200)   # 0xff80ff80 as int32


@triton.jit
def softmax_online_kernel(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, BLOCK: tl.constexpr,
                          PREFETCH: tl.constexpr = False, WORDS: tl.constexpr = False):
    """Persistent: program p takes rows p, p + P, p + 2P, ... (P programs), so the rows in flight
    stay in L2 between the passes. Pass 1 keeps a running max m and sum s of exp(x - m) per lane,
    a lane being a GROUP of elements one thread loads together (16 bytes), so that each chunk
    folds into them within each thread, with no reduction across the program until the row ends;
    pass 2 writes exp(x - row_max) * (1 / total). Each pass loads the next chunk before working
    on the current one, so two chunks per thread are in flight.

    exp is exp2 of the argument times log2(e) as ex2.approx.ftz (tl.math.exp2): tl.exp's ex2
    without ftz costs a compare and two predicated multiplies an element to keep subnormal
    results, 0.766 -> 0.816 of copy on the H200 (bf16 4096 x 131072,
    reports/examples/long-rows-h200/seventh-session/shared-weight.json). Pass 1's flushed terms are below
    2^-126 of a sum >= 1; pass 2 computes 2^(t + 24) * (2^-24 / total), t = (x - row_max)
    log2(e), whose exp2 is normal for every t >= -150 (below that y < 2^-150 rounds to 0 in any
    output dtype), so no output is flushed.

    PREFETCH (NVIDIA sm_90+, _prefetch.l2_prefetch_ok): the copy engine brings into L2 the chunk
    after the one in flight during pass 1, and the next row's first two chunks during pass 2, so
    pass 1's loads wait on L2 rather than HBM: 0.81 -> 0.85 of copy on the H200 (bf16 4096 x
    131072, three rounds, reports/examples/long-rows-h200/twelfth-session/l2-prefetch-run3.json).
    Further ahead was slower (two chunks 0.83, the whole next row 0.71-0.75: the rows in flight
    outgrow L2), and so was prefetching pass 2's re-read (0.71-0.76).

    WORDS (bf16 rows, words_ok): x read as int32 words of two elements, each element widened by
    one shift or mask where Triton 3.6 takes a PRMT and an IMAD for the high one, then
    interleaved back into column order: the same values in the same order, so the same bits out,
    and 664 -> 616 instructions (sm_90a, Triton 3.6; no PRMT left). On the H200, 0.857 -> 0.860
    of copy, faster in each of ten alternating rounds
    (reports/examples/long-rows-h200/twenty-second-session/words.json). Written inline: as
    @triton.jit helpers called every chunk, the loads and the widening cost the interpreter 14%
    (fp16, fp32) to 24% (bf16) of this kernel's time."""
    # a group is one thread's 16-byte load: tl.reshape then keeps it in that thread's registers
    WIDTH: tl.constexpr = 128 // x_ptr.dtype.element_ty.primitive_bitwidth
    GROUP: tl.constexpr = BLOCK if BLOCK < WIDTH else WIDTH
    LANES: tl.constexpr = BLOCK // GROUP
    LOG2E: tl.constexpr = 1.4426950408889634
    cols = tl.arange(0, BLOCK)
    # what a chunk's loads take: SPAN words of two bf16 (WORDS) or BLOCK elements, `end` in a row
    SPAN: tl.constexpr = BLOCK // 2 if WORDS else BLOCK
    at = tl.arange(0, SPAN)
    end = n_cols // 2 if WORDS else n_cols
    FILL: tl.constexpr = NEG_INF_WORD if WORDS else -float("inf")
    if PREFETCH:   # asm takes tensors, not constants: tl.program_id, never n_cols (1 arrives as a constant)
        lead = lead_thread(tl.program_id(0))
        policy = evict_last_policy(tl.program_id(0))
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        row64 = tl.cast(row, tl.int64)   # (the interpreter hands the loop a Python int)
        x_row = x_ptr + row64 * x_stride
        y_row = y_ptr + row64 * y_stride
        src = x_row.to(tl.pointer_type(tl.int32)) if WORDS else x_row
        # pass 1 reads x from HBM: keep its lines in L2 for pass 2
        nxt = tl.load(src + at, mask=at < end, other=FILL, eviction_policy="evict_last")
        # the lanes' state starts in the layout the groups' reductions give it (one of tl.full's
        # own would be converted through shared memory on every chunk)
        first = (tl.interleave((nxt << 16).to(tl.float32, bitcast=True), (nxt & -65536).to(tl.float32, bitcast=True))
                 if WORDS else nxt.to(tl.float32))
        zero = tl.sum(tl.reshape(tl.where(cols < 0, first, 0.0), [LANES, GROUP]), axis=1)
        m = zero - float("inf")
        s = zero
        for start in range(0, n_cols, BLOCK):
            x = (tl.interleave((nxt << 16).to(tl.float32, bitcast=True), (nxt & -65536).to(tl.float32, bitcast=True))
                 if WORDS else nxt.to(tl.float32))
            x = tl.reshape(x, [LANES, GROUP])
            ahead = (start + BLOCK) // 2 + at if WORDS else start + BLOCK + at
            nxt = tl.load(src + ahead, mask=ahead < end, other=FILL, eviction_policy="evict_last")
            if PREFETCH:   # the whole chunk after `nxt`'s
                prefetch_l2(x_row + start + 2 * BLOCK, BLOCK, lead & (start + 3 * BLOCK <= n_cols), policy)
            # each group's max and sum of exp(x - max), merged into its lane's at the larger max.
            # x = -inf adds nothing; a NaN or a +inf ((+inf) - (+inf)) makes the sum NaN for good;
            # a group of only -inf (its exp arguments (-inf) - (-inf), NaN) sums to 0, tested once
            # a group, and an empty sum (only -inf so far) is skipped in the merge.
            # The max element of a group adds exp(0) = 1: a group with a finite value sums >= 1.
            # The group's max is NaN where it holds a NaN (tl.max would skip it, and a group of a
            # NaN and -infs, the tail of a row, would then count as empty and drop the NaN).
            g_max = tl.reduce(x, 1, _max_keeping_nan)
            g_sum = tl.where(g_max == -float("inf"), 0.0,
                             tl.sum(tl.math.exp2((x - g_max[:, None]) * LOG2E), axis=1))
            new = tl.maximum(m, g_max)
            s = tl.where(s == 0.0, 0.0, s * tl.math.exp2((m - new) * LOG2E)) + \
                tl.where(g_sum == 0.0, 0.0, g_sum * tl.math.exp2((g_max - new) * LOG2E))
            m = new
        row_max = tl.max(m, axis=0)
        # s >= 1 on a lane that saw a finite value, NaN on one that saw a NaN or a +inf (so the
        # total is NaN and so is every output, as IEEE arithmetic gives exp(inf - inf)), 0 on one
        # that saw only -inf (whose m - row_max may be NaN)
        total = tl.sum(tl.where(s == 0.0, 0.0, s * tl.math.exp2((m - row_max) * LOG2E)), axis=0)
        # one rounding here (the 2^-24 is exact), one in the product below
        inv = tl.math.div_rn(1.0, total) * 5.9604644775390625e-08
        nxt = tl.load(src + at, mask=at < end, other=FILL, eviction_policy="evict_first")
        for start in range(0, n_cols, BLOCK):
            x = (tl.interleave((nxt << 16).to(tl.float32, bitcast=True), (nxt & -65536).to(tl.float32, bitcast=True))
                 if WORDS else nxt.to(tl.float32))
            ahead = (start + BLOCK) // 2 + at if WORDS else start + BLOCK + at
            nxt = tl.load(src + ahead, mask=ahead < end, other=FILL, eviction_policy="evict_first")
            if PREFETCH:   # the next row's first two whole chunks (its row, when it has one)
                prefetch_l2(x_ptr + (row64 + tl.num_programs(0)) * x_stride + start, BLOCK,
                            lead & (start < 2 * BLOCK) & (start + BLOCK <= n_cols)
                            & (row + tl.num_programs(0) < n_rows), policy)
            y = tl.math.exp2(tl.fma(x - row_max, LOG2E, 24.0)) * inv
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=start + cols < n_cols,
                     eviction_policy="evict_first")


config = family_config(__name__, softmax_rows_kernel, softmax_online_kernel)


def words_ok(x: torch.Tensor, block: int) -> bool:
    """Whether the looped kernel may read x as int32 words of two elements (WORDS), `block`
    columns a chunk: bf16 rows of an even length, each starting 4-byte aligned (the last
    dimension contiguous: check_2d), in chunks of whole words."""
    return (x.dtype == torch.bfloat16 and x.shape[-1] % 2 == 0 and alignment_obstacle(x, 4) is None
            and block >= 2)


def softmax(x: torch.Tensor, out: torch.Tensor | None = None, *, long_rows: bool = False,
            chunk: int | None = None, programs: int | None = None) -> torch.Tensor:
    """softmax(x) along the last dim of a 2-D tensor (fp32 math, output in x's dtype).

    Long rows run a persistent grid of `programs` programs (default PROGRAMS_PER_SM per SM/CU;
    n_rows or more gives one row per program)."""
    check_2d("x", x, tuple(DTYPES.values()))
    check_programs(programs)
    out = torch.empty_like(x) if out is None else out
    check_2d("out", out, (x.dtype,))
    if out.shape != x.shape:
        raise ValueError(f"out has shape {tuple(out.shape)}, expected {tuple(x.shape)}")
    n_rows, n_cols = x.shape
    if n_rows == 0 or n_cols == 0:
        return out
    cfg = config(n_cols, warp_size(), long_rows, chunk, x.element_size())
    if cfg["kernel"] is softmax_rows_kernel:
        grid = (triton.cdiv(n_rows, cfg["ROWS"]),)
        softmax_rows_kernel[grid](x, out, n_rows, n_cols, x.stride(0), out.stride(0),
                                  ROWS=cfg["ROWS"], BLOCK=cfg["BLOCK"], num_warps=cfg["num_warps"])
    else:
        # balanced: no partial last wave of rows (_launch.persistent_programs)
        grid = (persistent_programs(n_rows, x.device, PROGRAMS_PER_SM, programs, balanced=True),)
        # the prefetch is the running device's feature, not a launch configuration: under
        # --as-arch, the local device's (local_arch), whatever arch the configuration is for
        softmax_online_kernel[grid](x, out, n_rows, n_cols, x.stride(0), out.stride(0),
                                    BLOCK=cfg["BLOCK"], PREFETCH=l2_prefetch_ok(local_arch(), x, cfg["BLOCK"]),
                                    WORDS=words_ok(x, cfg["BLOCK"]), num_warps=cfg["num_warps"])
    return out


# ---- the cases -------------------------------------------------------------------------------

def _make(long_rows: bool):
    def make(spec: dict, device: str) -> dict:
        gen = S.generator(spec["seed"])
        x = S.values((spec["rows"], spec["cols"]), spec["dtype"], spec["regime"], gen)
        return {"x": S.laid_out(x, spec["layout"], device), "long_rows": long_rows,
                "chunk": check_chunk(spec["cols"], long_rows, MAX_FUSED)}
    return make


def _outputs(args):
    return {"y": (tuple(args["x"].shape), args["x"].dtype)}


def _launch(args, outs):
    softmax(args["x"], outs["y"], long_rows=args["long_rows"], chunk=args["chunk"])


def _oracle(args):
    return {"y": softmax_ref(args["x"])}


# EXP_ULP counts tl.exp itself; the argument's rounding, which dominates for large |x - m|, is a
# separate term of the formula below.
# the normalisation, in units of u(fp32): the short-row kernel's fp32 `/` lowers to div.full.f32
# (DIV_ULP ULP, i.e. 4u); the long-row kernel rounds 1/total once (div_rn) and each product once (2u)
DIV_U = 2 * DIV_ULP


# the long-row kernel's pass-2 exp2 argument, (x_i - m) log2(e) + 24, is rounded once (an FMA):
# |t| u of the plain product's rounding plus 24 ln(2) u = 16.6 u of the offset, rounded up
OFFSET_U = 17


def _tolerance(args, refs, dtype):
    """Per element: u(out) + (n + 4 E + 1 + DIV_U + S + 2|x_i - m| + 2 sum_j y_j |x_j - m|) u(fp32).

    exp(t) computed as 2^(t*log2 e) errs by E ULP = 2 E u of its result (E = EXP_ULP for the
    short-row kernel's tl.exp, EXP2_ULP for the long-row kernel's tl.math.exp2), plus |t| u
    from rounding its argument, and x_i - m adds another |x_i - m| u; y_i takes these errors
    through its numerator and, as their y-weighted mean, through the row sum, which also adds
    n u from summation; the long-row kernel's offset argument adds S = OFFSET_U u to y_i's
    numerator (S = 0 for the short-row kernel); the normalisation adds DIV_U u(fp32) and the
    final rounding u(out).
    """
    x = args["x"]
    # which kernel softmax() launches for these args (absent keys: softmax()'s defaults)
    looped = config(x.shape[-1], 32, args.get("long_rows", False), args.get("chunk"))["kernel"] is softmax_online_kernel
    e_ulp, offset = (EXP2_ULP, OFFSET_U) if looped else (EXP_ULP, 0)
    m = x.amax(dim=-1, keepdim=True)
    dist = torch.where(torch.isfinite(x - m), (x - m).abs(), torch.zeros_like(x))
    y = torch.nan_to_num(refs["y"], nan=0.0)
    weighted = (y * dist).sum(dim=-1, keepdim=True)
    n = x.shape[-1]
    u32, uo = fmt("fp32").unit_roundoff, fmt(dtype).unit_roundoff
    rtol = uo + (n + 4 * e_ulp + 1 + DIV_U + offset + 2 * dist + 2 * weighted) * u32
    # near zero: exp's result and the division may each land below fp32's smallest normal
    floor, floor_text = near_zero(dtype, "fp32", e_ulp + DIV_U)
    formula = (f"rtol_i = u({dtype}) + (n + 4*{e_ulp} + 1 + {DIV_U} + {offset} + 2|x_i-m| + 2 sum_j y_j|x_j-m|) "
               f"u(fp32), "
               f"n = {n}; atol = {floor_text} (normalisation: div.full.f32 2 ULP, or a div_rn "
               f"reciprocal and a product)")
    return {"y": Tolerance(rtol, floor, formula)}


def _cost(args):
    x = args["x"]
    return Cost(bytes=2 * x.numel() * x.element_size(), flops=5 * x.numel())


def _baselines(args):
    """torch eager, and the peers' row softmax where they import (both take the last dim)."""
    from ..speed import peers
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
        return row_variants(arch, config=config, rows_kernel=softmax_rows_kernel, long_rows=long_rows,
                            dtypes=DTYPES, lengths=(8192, 131072) if long_rows else (128, 1000, 4096, 32768),
                            signature=lambda t: {"x_ptr": t, "y_ptr": t, "n_rows": "i32", "n_cols": "i32",
                                                 "x_stride": "i32", "y_stride": "i32"})
    return variants


for _long in (False, True):
    register(Case(
        name="softmax_long" if _long else "softmax", family="softmax", dtypes=tuple(DTYPES),
        inputs=row_inputs(_long, S.REGIMES), make=_make(_long), outputs=_outputs, launch=_launch,
        oracle=_oracle, tolerance=_tolerance, cost=_cost,
        bench=(bench_spec(_long),),
        variants=_variants(_long), baselines=_baselines, math=("exp2",) if _long else ("exp",),
        description=("online two-pass softmax for rows longer than one block" if _long
                     else "row softmax, one pass, several short rows per program")))
