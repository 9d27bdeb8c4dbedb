"""LayerNorm forward over the last dimension, writing y and the per-row mean and rstd (fp32).

Rows that fit in registers are normalised in one read, several short rows to a program, with the
variance from the centred values (two passes over registers). Longer rows loop over chunks:
each chunk's mean and M2 (from its centred values) fold into the row's with the parallel-variance
formula, then a second pass writes y: x is read twice, the fewest for a row not kept on chip.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

from .. import strategies as S
from ..cases import Case, Cost, Variant, register
from ..facts.numerics import RSQRT_ULP
from ..oracles.norms import layer_norm as layer_norm_ref
from ..tolerance import Tolerance, fmt, normalization_atol, normalization_terms
from ..facts.device import local_arch, warp_size
from ._launch import check_2d, check_out, check_programs, check_vector, persistent_programs
from ._stagger import idle_before_first_row, stagger_args
from ._rows import all_or_none, bench_spec, check_chunk, family_config, row_inputs, row_variants

MAX_FUSED = 16384          # longest row held in registers (x, and w and b, as fp32) by one program
ELEMS_PER_PROGRAM = 4096   # short rows are packed several to a program to fill it
# elements per thread of the one-read kernel: 8 warps for a 4096-column bf16 row reach
# 0.93 of copy on the H200 against 0.77 at 16 warps (tools/sweep_launch.py, 2026-11-30)
ROW_ELEMS_PER_THREAD = 16
# chunk of the looped kernel: bf16 4096 x 131072 on the H200 at 32 warps, 0.724 of copy; 0.616 at
# 16384, 0.121 at 65536 (spills); with per-lane Welford state 0.657 at 16384 and 0.168 at 32768
# (tools/sweep_launch.py --const LOOP_BLOCK=..., 2026-12-02). 16-bit rows spill 8 to 48 B a
# thread at this size on sm_90a (cross-compiled) and are still the fastest. State per 16-byte
# group, as softmax's looped kernel keeps it: 0.70 against 0.72 at 32768, no spills (not kept;
# reports/examples/long-rows-h200/grouped-state.json, 2026-12-02).
LOOP_BLOCK = 32768     # 16-bit elements (_rows.loop_block: the same bytes for fp32)
LOOP_PER_THREAD = 8        # chunk elements per thread, within 32 warps (NVIDIA), 16 wavefronts (CDNA)
# Long rows: programs per SM/CU of the persistent grid. Each program has one row in flight,
# read twice: 132 SMs x 1 x 256 KB (bf16, 131072 columns) fits the H200's 50 MB L2 for the
# second read. Measured there (reports/examples/sweeps-h200/launch_long_rows.json): 1, 2 and 4
# per SM within 1% of each other; layernorm: 0.590 against 0.569 with one row per program.
PROGRAMS_PER_SM = 1
# programs out of phase (_stagger): 4 phases 0.33 of a model row apart, 0.859-0.860 of copy against
# 0.824-0.825 on the H200 (reports/examples/long-rows-h200/fourteenth-session).
# (PHASES - 1) x STEP <= 1: no program idles as long as a row takes
STAGGER_PHASES = 4
STAGGER_STEP = 0.33
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
EPSILONS = (1e-5, 1e-6, 1e-12)


@triton.jit
def layernorm_rows_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_rows, n_cols,
                          x_stride, y_stride, eps,
                          HAS_W: tl.constexpr, HAS_B: tl.constexpr,
                          ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    row_ok = rows < n_rows
    col_ok = cols < n_cols
    mask = row_ok[:, None] & col_ok[None, :]
    rows64 = rows.to(tl.int64)[:, None]
    x = tl.load(x_ptr + rows64 * x_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=1) / n_cols
    centred = tl.where(mask, x - mean[:, None], 0.0)
    var = tl.sum(centred * centred, axis=1) / n_cols
    rstd = tl.math.rsqrt(var + eps)
    y = centred * rstd[:, None]
    # weight and bias loaded here, not before the reductions: loaded early they held registers
    # through them and the kernel fell from 0.93 to 0.88 of copy on the H200 (2026-11-30)
    if HAS_W:
        y = y * tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    if HAS_B:
        y = y + tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    tl.store(y_ptr + rows64 * y_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(mean_ptr + rows, mean, mask=row_ok)
    tl.store(rstd_ptr + rows, rstd, mask=row_ok)


@triton.jit
def layernorm_looped_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_rows, n_cols,
                            x_stride, y_stride, eps,
                            HAS_W: tl.constexpr, HAS_B: tl.constexpr, BLOCK: tl.constexpr,
                            EVEN: tl.constexpr, STAGGER: tl.constexpr = False,
                            PHASES: tl.constexpr = 1, STEP: tl.constexpr = 0.0, row_ns=0.0):
    """Persistent: program p takes rows p, p + P, p + 2P, ... (P programs), so the rows in flight
    stay in L2 between the passes. Each pass loads the next chunk before working on the current
    one, so two chunks per thread are in flight.

    EVEN (n_cols a multiple of BLOCK): no chunk has a tail, so full chunks are loaded and stored
    with no per-element mask and pass 1 selects nothing; only the load one chunk ahead is guarded,
    by a scalar (past the row's last chunk it would read the next row, or past the tensor). Pass 1
    falls from 351 to 269 instructions a chunk and pass 2 from 350 to 310 (sm_90a, Triton 3.6):
    0.787 -> 0.822 of copy on the H200 in three rounds (bf16 4096 x 131072,
    reports/examples/long-rows-h200/tenth-session/even-rows-main.json). The same change in
    softmax's and RMSNorm's looped kernels measured within the spread (0.81 and 0.925 either way,
    even-rows.json): not made."""
    cols = tl.arange(0, BLOCK)
    # EVEN: no masks, and a load with no mask takes no `other`
    zero = None if EVEN else 0.0
    first = None if EVEN else cols < n_cols
    if STAGGER:   # programs with one row fewer start out of phase
        idle_before_first_row(n_rows, row_ns, PHASES, STEP)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        row64 = tl.cast(row, tl.int64)   # (the interpreter hands the loop a Python int)
        x_row = x_ptr + row64 * x_stride
        y_row = y_ptr + row64 * y_stride
        # pass 1: each chunk's mean and M2 (two passes over its registers), folded into the row's
        # with the parallel-variance formula (Chan, Golub & LeVeque):
        #   M2 = M2_a + M2_b + (mean_b - mean_a)^2 n_a n_b / (n_a + n_b).
        # The row's state is three scalars, not per-lane arrays: registers go to the chunk in
        # flight (32768-column chunks spilled with per-lane Welford state at 32 warps). It reads
        # x from HBM: keep its lines in L2 for pass 2.
        mean = 0.0
        m2 = 0.0
        count = 0.0
        nxt = tl.load(x_row + cols, mask=first, other=zero, eviction_policy="evict_last")
        for start in range(0, n_cols, BLOCK):
            x = nxt.to(tl.float32)
            # EVEN addresses the chunk ahead as x_row + start + BLOCK + cols, scalar sums first
            # (through the tensor `ahead` the loops took 10 and 13 instructions more, sm_90a)
            if EVEN:
                nxt = tl.load(x_row + start + BLOCK + cols, mask=all_or_none(start + BLOCK < n_cols, BLOCK),
                              eviction_policy="evict_last")
                size = BLOCK * 1.0
            else:
                ahead = start + BLOCK + cols
                nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_last")
                size = tl.minimum(n_cols - start, BLOCK).to(tl.float32)
            chunk_mean = tl.sum(x, axis=0) / size
            centred = x - chunk_mean if EVEN else tl.where(start + cols < n_cols, x - chunk_mean, 0.0)
            chunk_m2 = tl.sum(centred * centred, axis=0)
            total = count + size
            delta = chunk_mean - mean
            mean += delta * (size / total)
            m2 += chunk_m2 + delta * delta * (count * size / total)
            count = total
        row_mean = mean
        # pass 2: normalise; x is read for the last time and y is not read again here. Weight
        # and bias are read by every row, with no cache hint: with evict_last (an L1 and an L2
        # hint in Triton 3.6's PTX) it ran at 0.724 of copy against 0.759 (bf16 4096 x 131072
        # on the H200, reports/examples/long-rows-h200/seventh-session/shared-weight.json).
        # The statistics are stored after the pass, so no store (which may alias x) stands
        # before its first load.
        nxt = tl.load(x_row + cols, mask=first, other=zero, eviction_policy="evict_first")
        rstd = tl.math.rsqrt(m2 / n_cols + eps)
        for start in range(0, n_cols, BLOCK):
            x = nxt.to(tl.float32)
            if EVEN:
                nxt = tl.load(x_row + start + BLOCK + cols, mask=all_or_none(start + BLOCK < n_cols, BLOCK),
                              eviction_policy="evict_first")
            else:
                ahead = start + BLOCK + cols
                nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_first")
            y = (x - row_mean) * rstd
            ok = None if EVEN else start + cols < n_cols
            if HAS_W:
                y = y * tl.load(w_ptr + start + cols, mask=ok, other=zero).to(tl.float32)
            if HAS_B:
                y = y + tl.load(b_ptr + start + cols, mask=ok, other=zero).to(tl.float32)
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=ok, eviction_policy="evict_first")
        tl.store(mean_ptr + row64, row_mean)
        tl.store(rstd_ptr + row64, rstd)


config = family_config(__name__, layernorm_rows_kernel, layernorm_looped_kernel)


def layer_norm(x: torch.Tensor, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None,
               eps: float = 1e-5, *, out: torch.Tensor | None = None, mean: torch.Tensor | None = None,
               rstd: torch.Tensor | None = None, long_rows: bool = False, chunk: int | None = None,
               programs: int | None = None):
    """LayerNorm of each row of a 2-D tensor (fp32 statistics); returns (y, mean, rstd).

    Long rows run a persistent grid of `programs` programs (default PROGRAMS_PER_SM per SM/CU;
    n_rows or more gives one row per program)."""
    check_2d("x", x, tuple(DTYPES.values()))
    check_programs(programs)
    n_rows, n_cols = x.shape
    check_vector("weight", weight, n_cols, x.dtype)
    check_vector("bias", bias, n_cols, x.dtype)
    if not (eps >= 0.0 and eps < float("inf")):
        raise ValueError(f"eps must be finite and >= 0, got {eps}")
    out = torch.empty_like(x) if out is None else out
    mean = torch.empty(n_rows, dtype=torch.float32, device=x.device) if mean is None else mean
    rstd = torch.empty(n_rows, dtype=torch.float32, device=x.device) if rstd is None else rstd
    check_out("out", out, x.shape, x.dtype)
    check_out("mean", mean, (n_rows,), torch.float32)
    check_out("rstd", rstd, (n_rows,), torch.float32)
    if n_rows == 0 or n_cols == 0:
        return out, mean, rstd
    cfg = config(n_cols, warp_size(), long_rows, chunk, x.element_size())
    # absent weight/bias: any pointer will do, the HAS_* constexprs keep it unread
    w = weight if weight is not None else x
    b = bias if bias is not None else x
    flags = {"HAS_W": weight is not None, "HAS_B": bias is not None}
    if cfg["kernel"] is layernorm_rows_kernel:
        grid = (triton.cdiv(n_rows, cfg["ROWS"]),)
        layernorm_rows_kernel[grid](x, w, b, out, mean, rstd, n_rows, n_cols, x.stride(0), out.stride(0),
                                    eps, **flags, ROWS=cfg["ROWS"], BLOCK=cfg["BLOCK"],
                                    num_warps=cfg["num_warps"])
    else:
        grid = (persistent_programs(n_rows, x.device, PROGRAMS_PER_SM, programs),)
        layernorm_looped_kernel[grid](x, w, b, out, mean, rstd, n_rows, n_cols, x.stride(0), out.stride(0),
                                      eps, **flags, BLOCK=cfg["BLOCK"], EVEN=n_cols % cfg["BLOCK"] == 0,
                                      **stagger_args(local_arch(), STAGGER_PHASES, STAGGER_STEP, grid[0],
                                                     n_cols * (x.element_size() + out.element_size())),
                                      num_warps=cfg["num_warps"])
    return out, mean, rstd


# ---- the cases -------------------------------------------------------------------------------

REGIMES = ("normal", "large", "tiny", "equal", "offset", "zeros")   # inf/NaN make a whole row NaN: nothing to check


def _make(long_rows: bool):
    def make(spec: dict, device: str) -> dict:
        gen = S.generator(spec["seed"])
        rows, cols, dtype = spec["rows"], spec["cols"], spec["dtype"]
        x = S.values((rows, cols), dtype, spec["regime"], gen)
        w = S.values((cols,), dtype, "normal", gen).to(device) if spec["weight"] else None
        b = S.values((cols,), dtype, "normal", gen).to(device) if spec["bias"] else None
        return {"x": S.laid_out(x, spec["layout"], device), "weight": w, "bias": b,
                "eps": spec["eps"], "long_rows": long_rows, "chunk": check_chunk(cols, long_rows, MAX_FUSED)}
    return make


def _outputs(args):
    rows = args["x"].shape[0]
    return {"y": (tuple(args["x"].shape), args["x"].dtype), "mean": ((rows,), torch.float32),
            "rstd": ((rows,), torch.float32)}


def _launch(args, outs):
    layer_norm(args["x"], args["weight"], args["bias"], args["eps"], out=outs["y"], mean=outs["mean"],
               rstd=outs["rstd"], long_rows=args["long_rows"], chunk=args["chunk"])


def _oracle(args):
    y, mean, rstd = layer_norm_ref(args["x"], args["weight"], args["bias"], args["eps"])
    return {"y": y, "mean": mean, "rstd": rstd}




def _tolerance(args, refs, dtype):
    """Condition-aware per-row bounds (u = u(fp32), n = row length, M = max_j |x_j|, s = rstd):

    mean:  |dm| <= (n+2) (u M + sub)                 (sum of n terms, the division by n; each
                                                     rounding errs by u of its value, or by a
                                                     subnormal step sub = sub(fp32) where it lands
                                                     among the subnormals: a mean of tiny inputs)
    t    = (n+2) (u M + sub) s                       (the mean error, in units of the row's sigma)
    rstd:  rel <= ((n+4) u + 2t + t^2)/2 + RSQRT_ULP u
           var = sum((x-m)^2)/n: n+4 roundings; a mean error d adds d^2/sigma^2 in two passes
           (the short-row kernel, and each chunk of the looped one), and the looped kernel's
           merges of chunk means (Chan et al.) about n u M/sigma, both bounded through t
    y:     |dy_i| <= |w_i x^_i| (e_rstd + 4u) + |w_i| t (1 + e_rstd) + |b_i| u, plus u(out)|y_i|
           x - m cancels: an error d in the mean moves every x^_i by d * s, hence the |w_i| t term.
    The terms are tolerance.normalization's (normalization_terms, normalization_atol), per row.
    """
    x = args["x"]
    n = x.shape[-1]
    u32, uo = fmt("fp32").unit_roundoff, fmt(dtype).unit_roundoff
    sub32 = fmt("fp32").subnormal_step
    mean, s = refs["mean"][:, None], refs["rstd"][:, None]
    mean_error, t, e_rstd = normalization_terms(x, s)
    atol_y = normalization_atol(x, mean, s, t, e_rstd, dtype, weight=args["weight"], bias=args["bias"])
    where = f"n = {n}, u = u(fp32), M = max|x| and s = rstd per row"
    return {
        "y": Tolerance(uo, atol_y, f"rtol = u({dtype}); atol_i = |w_i x^_i| (e + 4u) + |w_i| t (1 + e) "
                                   f"+ |b_i| u + sub({dtype}), t = (n+2) (u M + sub(fp32)) s, "
                                   f"e = ((n+4) u + 2t + t^2)/2 + {RSQRT_ULP} u; {where}"),
        "mean": Tolerance(u32, mean_error[:, 0],
                          f"rtol = u; atol = (n+2) (u M + sub(fp32)); {where}"),
        "rstd": Tolerance(e_rstd[:, 0] + u32, sub32,
                          f"rtol = ((n+4) u + 2t + t^2)/2 + ({RSQRT_ULP}+1) u, t = (n+2) (u M + sub(fp32)) s; "
                          f"{where}"),
    }


def _cost(args):
    x = args["x"]
    params = sum(t.numel() * t.element_size() for t in (args["weight"], args["bias"]) if t is not None)
    return Cost(bytes=2 * x.numel() * x.element_size() + params + 8 * x.shape[0], flops=8 * x.numel())


def _baselines(args):
    import torch.nn.functional as F

    from ..speed import peers
    x, w, b, eps = args["x"], args["weight"], args["bias"], args["eps"]
    n = x.shape[-1]
    found = {"torch": lambda: F.layer_norm(x, (n,), w, b, eps)}
    # the peers always take weight and bias: give them the identity ones when the case has none
    w1 = w if w is not None else torch.ones(n, dtype=x.dtype, device=x.device)
    b1 = b if b is not None else torch.zeros(n, dtype=x.dtype, device=x.device)
    liger = peers.load("liger_kernel.ops.layer_norm")       # LigerLayerNormFunction(X, W, B, eps)
    if liger is not None:
        found[peers.LIGER] = lambda: liger.LigerLayerNormFunction.apply(x, w1, b1, eps)
    gems = peers.load("flag_gems.ops")                       # layer_norm(x, shape, w, b, eps) -> (y, mean, rstd)
    if gems is not None and hasattr(gems, "layer_norm"):
        found[peers.FLAGGEMS] = lambda: gems.layer_norm(x, [n], w1, b1, eps)
    return found


def _variants(long_rows: bool):
    def variants(arch) -> list[Variant]:
        return row_variants(arch, config=config, rows_kernel=layernorm_rows_kernel, long_rows=long_rows,
                            dtypes=DTYPES, lengths=(131072,) if long_rows else (128, 1000, 4096, 16384),
                            signature=lambda t: {"x_ptr": t, "w_ptr": t, "b_ptr": t, "y_ptr": t,
                                                 "mean_ptr": "*fp32", "rstd_ptr": "*fp32", "n_rows": "i32",
                                                 "n_cols": "i32", "x_stride": "i32", "y_stride": "i32",
                                                 "eps": "fp32"},
                            flags={"HAS_W": True, "HAS_B": True}, bare=" no affine")
    return variants


for _long in (False, True):
    register(Case(
        name="layernorm_long" if _long else "layernorm", family="layernorm", dtypes=tuple(DTYPES),
        # a few long rows: the interpreter pays per row, and its two persistent programs still loop
        inputs=row_inputs(_long, REGIMES, long_rows_most=4, weight=st.booleans(), bias=st.booleans(),
                          eps=st.sampled_from(EPSILONS)),
        make=_make(_long), outputs=_outputs, launch=_launch,
        oracle=_oracle, tolerance=_tolerance, cost=_cost,
        bench=(bench_spec(_long, weight=True, bias=True, eps=1e-5),),
        variants=_variants(_long), baselines=_baselines, math=("rsqrt",),
        description=("LayerNorm forward, Welford pass then normalise pass, for rows longer than one block"
                     if _long else "LayerNorm forward, one read, several short rows per program")))
