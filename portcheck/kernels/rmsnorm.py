"""RMSNorm forward over the last dimension: y = x * rsqrt(mean(x^2) + eps) * w, and rstd (fp32).

Rows that fit in registers take one read, several short rows to a program; longer rows loop
over chunks twice (sum of squares, then normalise).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

from .. import strategies as S
from ..cases import Case, Cost, Variant, register
from ..facts.numerics import RSQRT_ULP
from ..oracles.norms import rms_norm as rms_norm_ref
from ..tolerance import Tolerance, fmt
from ..facts.device import local_arch, warp_size
from ._launch import check_2d, check_out, check_programs, check_vector, persistent_programs
from ._rows import bench_spec, check_chunk, family_config, row_inputs, row_variants
from ._stagger import idle_before_first_row, stagger_args

MAX_FUSED = 16384          # longest row held in registers by one program
ELEMS_PER_PROGRAM = 4096   # short rows are packed several to a program to fill it
# elements per thread of the one-read kernel: 8 warps for a 4096-column bf16 row reach
# 0.94 of copy on the H200 against 0.86 at 16 warps (tools/sweep_launch.py, 2026-11-30)
ROW_ELEMS_PER_THREAD = 16
# chunk of the looped kernel: bf16 4096 x 131072 on the H200 at 32 warps, 0.740 of copy; 0.702 at
# 8192, 0.701 at 16384 (tools/sweep_launch.py --const LOOP_BLOCK=..., 2026-12-02). Pass 2 walks
# half chunks (see rmsnorm_looped_kernel); with it no dtype spills on sm_90a (cross-compiled).
LOOP_BLOCK = 32768     # 16-bit elements (_rows.loop_block: the same bytes for fp32)
LOOP_PER_THREAD = 8        # chunk elements per thread, within 32 warps (NVIDIA), 16 wavefronts (CDNA)
# Long rows: programs per SM/CU of the persistent grid. Each program has one row in flight,
# read twice: 132 SMs x 1 x 256 KB (bf16, 131072 columns) fits the H200's 50 MB L2 for the
# second read. Measured there (reports/examples/sweeps-h200/launch_long_rows.json): 1, 2 and 4
# per SM within 1% of each other; rmsnorm: 0.694 against 0.663 with one row per program.
PROGRAMS_PER_SM = 1
# programs out of phase (_stagger): 4 phases 0.21 of a model row apart, 0.939 of copy against
# 0.927-0.929 on the H200 (reports/examples/long-rows-h200/fourteenth-session).
# (PHASES - 1) x STEP <= 1: no program idles as long as a row takes
STAGGER_PHASES = 4
STAGGER_STEP = 0.21
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
EPSILONS = (1e-5, 1e-6, 1e-12)
REGIMES = ("normal", "large", "tiny", "equal", "offset", "zeros")   # inf/NaN: not a checked input of a normalisation


@triton.jit
def rmsnorm_rows_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, n_rows, n_cols, x_stride, y_stride, eps,
                        HAS_W: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    row_ok = rows < n_rows
    col_ok = cols < n_cols
    mask = row_ok[:, None] & col_ok[None, :]
    rows64 = rows.to(tl.int64)[:, None]
    x = tl.load(x_ptr + rows64 * x_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    if HAS_W:   # issued before the reduction, so its L2 latency overlaps it instead of following it
        w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)
    y = x * rstd[:, None]
    if HAS_W:
        y = y * w
    tl.store(y_ptr + rows64 * y_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(rstd_ptr + rows, rstd, mask=row_ok)


@triton.jit
def rmsnorm_looped_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, n_rows, n_cols, x_stride, y_stride, eps,
                          HAS_W: tl.constexpr, BLOCK: tl.constexpr, STAGGER: tl.constexpr = False,
                          PHASES: tl.constexpr = 1, STEP: tl.constexpr = 0.0, row_ns=0.0):
    """Persistent: program p takes rows p, p + P, p + 2P, ... (P programs), so the rows in flight
    stay in L2 between the passes. Pass 1 loads the next BLOCK-column chunk before working on the
    current one; pass 2 walks half chunks with x two halves ahead and the weight one half ahead,
    so that each half's weight arrives while the previous half is computed.

    Pass 2's first loads are issued before pass 1's reduction and rstd is stored after pass 2: a
    store between the passes (which may alias x) kept the compiler from issuing them until the
    reduction, the rsqrt and the store were done, and each row waited one memory round trip
    there (bf16 4096 x 131072 on the H200: 0.815 -> 0.882 of copy,
    reports/examples/long-rows-h200/seventh-session/row-order.json)."""
    cols = tl.arange(0, BLOCK)
    HALF: tl.constexpr = BLOCK // 2 if BLOCK >= 2 else BLOCK
    half = tl.arange(0, HALF)
    if STAGGER:   # programs with one row fewer start out of phase
        idle_before_first_row(n_rows, row_ns, PHASES, STEP)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        row64 = tl.cast(row, tl.int64)   # (the interpreter hands the loop a Python int)
        x_row = x_ptr + row64 * x_stride
        y_row = y_ptr + row64 * y_stride
        # pass 1 reads x from HBM: keep its lines in L2 for pass 2
        squares = tl.zeros([BLOCK], tl.float32)
        nxt = tl.load(x_row + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_last")
        for start in range(0, n_cols, BLOCK):
            x = nxt.to(tl.float32)
            ahead = start + BLOCK + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_last")
            squares += x * x
        # pass 2: x is read for the last time and y is not read again here. Main's pass 2 until
        # 2026-12-02 loaded each whole chunk's weight in the iteration that used it and waited an
        # L2 round trip every chunk (sm_90a SASS: the FFMAs right behind the weight's loads); a
        # whole chunk of weight ahead spills. Half chunks with the weight one ahead build with no
        # spills (sm_90a, Triton 3.6) and ran at 0.923 of copy against 0.887 (bf16 4096 x 131072
        # on the H200, reports/examples/long-rows-h200/eighth-session/pipelined.json). The weight,
        # read by every row, goes through L2 only (.cg): 0.900 against 0.887 with no hint, main's
        # kernel in the same rounds (patched.json); evict_last (an L1 and an L2 hint) 0.860.
        x1 = tl.load(x_row + half, mask=half < n_cols, other=0.0, eviction_policy="evict_first")
        x2 = tl.load(x_row + HALF + half, mask=HALF + half < n_cols, other=0.0, eviction_policy="evict_first")
        if HAS_W:
            w1 = tl.load(w_ptr + half, mask=half < n_cols, other=0.0, cache_modifier=".cg")
        rstd = tl.math.rsqrt(tl.sum(squares, axis=0) / n_cols + eps)
        for start in range(0, n_cols, HALF):
            ok = start + half < n_cols
            y = x1.to(tl.float32) * rstd
            x1 = x2
            ahead = start + 2 * HALF + half
            x2 = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_first")
            if HAS_W:
                y = y * w1.to(tl.float32)
                w_ahead = start + HALF + half
                w1 = tl.load(w_ptr + w_ahead, mask=w_ahead < n_cols, other=0.0, cache_modifier=".cg")
            tl.store(y_row + start + half, y.to(y_ptr.dtype.element_ty), mask=ok, eviction_policy="evict_first")
        tl.store(rstd_ptr + row64, rstd)


config = family_config(__name__, rmsnorm_rows_kernel, rmsnorm_looped_kernel)


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6, *,
             out: torch.Tensor | None = None, rstd: torch.Tensor | None = None,
             long_rows: bool = False, chunk: int | None = None, programs: int | None = None):
    """RMSNorm of each row of a 2-D tensor (fp32 accumulation); returns (y, rstd).

    Long rows run a persistent grid of `programs` programs (default PROGRAMS_PER_SM per SM/CU;
    n_rows or more gives one row per program)."""
    check_2d("x", x, tuple(DTYPES.values()))
    check_programs(programs)
    n_rows, n_cols = x.shape
    check_vector("weight", weight, n_cols, x.dtype)
    if not (eps >= 0.0 and eps < float("inf")):
        raise ValueError(f"eps must be finite and >= 0, got {eps}")
    out = torch.empty_like(x) if out is None else out
    rstd = torch.empty(n_rows, dtype=torch.float32, device=x.device) if rstd is None else rstd
    check_out("out", out, x.shape, x.dtype)
    check_out("rstd", rstd, (n_rows,), torch.float32)
    if n_rows == 0 or n_cols == 0:
        return out, rstd
    cfg = config(n_cols, warp_size(), long_rows, chunk, x.element_size())
    w = weight if weight is not None else x   # unread when HAS_W is False
    if cfg["kernel"] is rmsnorm_rows_kernel:
        grid = (triton.cdiv(n_rows, cfg["ROWS"]),)
        rmsnorm_rows_kernel[grid](x, w, out, rstd, n_rows, n_cols, x.stride(0), out.stride(0), eps,
                                  HAS_W=weight is not None, ROWS=cfg["ROWS"], BLOCK=cfg["BLOCK"],
                                  num_warps=cfg["num_warps"])
    else:
        grid = (persistent_programs(n_rows, x.device, PROGRAMS_PER_SM, programs),)
        rmsnorm_looped_kernel[grid](x, w, out, rstd, n_rows, n_cols, x.stride(0), out.stride(0), eps,
                                    HAS_W=weight is not None, BLOCK=cfg["BLOCK"],
                                    **stagger_args(local_arch(), STAGGER_PHASES, STAGGER_STEP, grid[0],
                                                   n_cols * (x.element_size() + out.element_size())),
                                    num_warps=cfg["num_warps"])
    return out, rstd


# ---- the cases -------------------------------------------------------------------------------

def _make(long_rows: bool):
    def make(spec: dict, device: str) -> dict:
        gen = S.generator(spec["seed"])
        rows, cols, dtype = spec["rows"], spec["cols"], spec["dtype"]
        x = S.values((rows, cols), dtype, spec["regime"], gen)
        w = S.values((cols,), dtype, "normal", gen).to(device) if spec["weight"] else None
        return {"x": S.laid_out(x, spec["layout"], device), "weight": w, "eps": spec["eps"],
                "long_rows": long_rows, "chunk": check_chunk(cols, long_rows, MAX_FUSED)}
    return make


def _outputs(args):
    return {"y": (tuple(args["x"].shape), args["x"].dtype), "rstd": ((args["x"].shape[0],), torch.float32)}


def _launch(args, outs):
    rms_norm(args["x"], args["weight"], args["eps"], out=outs["y"], rstd=outs["rstd"],
             long_rows=args["long_rows"], chunk=args["chunk"])


def _oracle(args):
    y, rstd = rms_norm_ref(args["x"], args["weight"], args["eps"])
    return {"y": y, "rstd": rstd}




def _tolerance(args, refs, dtype):
    """Squares are positive, so nothing cancels: relative bounds throughout (u = u(fp32)).

    mean(x^2) + eps: n+3 roundings (square, n-1 additions, /n, +eps) -> rstd: (n+3)/2 u + RSQRT_ULP u;
    y = x * rstd * w adds two products, then the output rounding.
    """
    n = args["x"].shape[-1]
    u32, uo = fmt("fp32").unit_roundoff, fmt(dtype).unit_roundoff
    e_rstd = (n + 3) / 2 * u32 + RSQRT_ULP * u32
    return {
        "y": Tolerance(uo + e_rstd + 2 * u32, fmt(dtype).subnormal_step,
                       f"rtol = u({dtype}) + ((n+3)/2 + {RSQRT_ULP} + 2) u(fp32), n = {n}; "
                       f"atol = sub({dtype})"),
        "rstd": Tolerance(e_rstd + u32, fmt("fp32").subnormal_step,
                          f"rtol = ((n+3)/2 + {RSQRT_ULP} + 1) u(fp32), n = {n}; atol = sub(fp32)"),
    }


def _cost(args):
    x, w = args["x"], args["weight"]
    params = w.numel() * w.element_size() if w is not None else 0
    return Cost(bytes=2 * x.numel() * x.element_size() + params + 4 * x.shape[0], flops=4 * x.numel())


def _baselines(args):
    import torch.nn.functional as F

    from ..speed import peers
    x, w, eps = args["x"], args["weight"], args["eps"]
    n = x.shape[-1]

    def eager():
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
        return (y * w.float() if w is not None else y).to(x.dtype)

    found = {"torch": eager}
    if hasattr(F, "rms_norm"):
        found["torch_rms_norm"] = lambda: F.rms_norm(x, (n,), w, eps)
    w1 = w if w is not None else torch.ones(n, dtype=x.dtype, device=x.device)
    liger = peers.load("liger_kernel.ops.rms_norm")          # LigerRMSNormFunction(X, W, eps, ...)
    if liger is not None:
        found[peers.LIGER] = lambda: liger.LigerRMSNormFunction.apply(x, w1, eps)
    gems = peers.load("flag_gems.ops")                       # rms_norm(x, shape, w, eps)
    if gems is not None and hasattr(gems, "rms_norm"):
        found[peers.FLAGGEMS] = lambda: gems.rms_norm(x, [n], w1, eps)
    return found


def _variants(long_rows: bool):
    def variants(arch) -> list[Variant]:
        return row_variants(arch, config=config, rows_kernel=rmsnorm_rows_kernel, long_rows=long_rows,
                            dtypes=DTYPES, lengths=(131072,) if long_rows else (128, 1000, 4096, 16384),
                            signature=lambda t: {"x_ptr": t, "w_ptr": t, "y_ptr": t, "rstd_ptr": "*fp32",
                                                 "n_rows": "i32", "n_cols": "i32", "x_stride": "i32",
                                                 "y_stride": "i32", "eps": "fp32"},
                            flags={"HAS_W": True}, bare=" no weight")
    return variants


for _long in (False, True):
    register(Case(
        name="rmsnorm_long" if _long else "rmsnorm", family="rmsnorm", dtypes=tuple(DTYPES),
        # a few long rows: the interpreter pays per row, and its two persistent programs still loop
        inputs=row_inputs(_long, REGIMES, long_rows_most=4, weight=st.booleans(),
                          eps=st.sampled_from(EPSILONS)),
        make=_make(_long), outputs=_outputs, launch=_launch,
        oracle=_oracle, tolerance=_tolerance, cost=_cost,
        bench=(bench_spec(_long, weight=True, eps=1e-6),),
        variants=_variants(_long), baselines=_baselines, math=("rsqrt",),
        description=("RMSNorm forward, sum-of-squares pass then normalise pass, for rows longer than one block"
                     if _long else "RMSNorm forward, one read, several short rows per program")))
