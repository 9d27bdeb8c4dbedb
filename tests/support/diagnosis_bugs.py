"""Ten kernels with one planted bug each, and their correct versions (`*_ok`), as portcheck Cases
for tests/harness/test_diagnose.py: each bug must be diagnosed with its cause ranked first.

  diag_tf32_dot        an fp32 matmul whose dot inputs are rounded to tf32
  diag_fp16_acc        an fp16 matmul that accumulates in fp16
  diag_tail_mask       a per-block L1 normalization whose load has no tail mask
  diag_unwritten_tail  a grid of n // BLOCK programs: the last partial tile is never stored
  diag_tile_scale      a blockwise scale read at the first block's index by every program
  diag_philox_swapped  bias + GELU + dropout launched with its Philox seed and offset swapped
  diag_philox_block    a dropout whose Philox offset is one block ahead
  diag_gelu_tanh       the tanh approximation of GELU where the erf form is meant
  diag_exp_overflow    exp through ex2 of x log2(e), as tl.exp lowers on NVIDIA, near overflow
  diag_one_pass_var    a LayerNorm whose variance is E[x^2] - E[x]^2, in one pass

Two bugs are emulated, so that they are the same on every target: the tf32 kernel truncates its
inputs to tf32 itself (Triton documents that tf32 operands may be truncated; portcheck's
interpreter rounds them to nearest instead) and dots them at ieee; the interpreter's tl.exp is
numpy's, so the exp kernel
spells out what tl.exp is on an NVIDIA GPU, ex2(x * log2 e), whose argument rounding is the error.
On a GPU both kernels are the real bug.

Imported in-process by the tests, or by a `portcheck run` worker through
`--cases tests.support.diagnosis_bugs`; never part of the registry otherwise.
"""
import dataclasses

import torch
import triton
import triton.language as tl
from hypothesis import strategies as st
from triton.language.extra import libdevice

from portcheck import Case, cases, register
from portcheck import strategies as S
from portcheck.facts.numerics import DIV_ULP, ERF_ULP, EXP_ULP
from portcheck.oracles import gelu as gelu_oracle
from portcheck.oracles import philox
from portcheck.tolerance import dot, exact, normalization, rounding

BLOCK = 32          # elements per program of the 1-D kernels
TILE = 16           # the matmuls' M and N tile
TF32_MASK = tl.constexpr(-8192)   # 0xFFFFE000: keeps fp32's sign, exponent and 10 of its 23 fraction bits


def _seeded(seed):
    return torch.Generator().manual_seed(seed)


# ---- matmuls: tf32 inputs, fp16 accumulation -------------------------------------------------

@triton.jit
def tf32_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, TRUNCATE: tl.constexpr, TILE: tl.constexpr):
    rm = tl.program_id(0) * TILE + tl.arange(0, TILE)
    rn = tl.program_id(1) * TILE + tl.arange(0, TILE)
    acc = tl.zeros((TILE, TILE), dtype=tl.float32)
    for k0 in range(0, K, TILE):
        rk = k0 + tl.arange(0, TILE)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        if TRUNCATE:   # what a tf32 dot does to its operands
            a = (a.to(tl.int32, bitcast=True) & TF32_MASK).to(tl.float32, bitcast=True)
            b = (b.to(tl.int32, bitcast=True) & TF32_MASK).to(tl.float32, bitcast=True)
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def outer_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, FP16_ACC: tl.constexpr, TILE: tl.constexpr):
    rm = tl.program_id(0) * TILE + tl.arange(0, TILE)
    rn = tl.program_id(1) * TILE + tl.arange(0, TILE)
    acc = tl.zeros((TILE, TILE), dtype=tl.float16 if FP16_ACC else tl.float32)
    for k in range(0, K):   # one rank-1 update per k: each addition rounds in the accumulator's format
        a = tl.load(a_ptr + rm * K + k, mask=rm < M, other=0.0)
        b = tl.load(b_ptr + k * N + rn, mask=rn < N, other=0.0)
        if FP16_ACC:
            acc += a[:, None] * b[None, :]
        else:
            acc += a.to(tl.float32)[:, None] * b.to(tl.float32)[None, :]
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def _matmul_inputs(k_min, k_max):
    def inputs(dtype, max_elements):
        return st.fixed_dictionaries({"dtype": st.just(dtype), "M": st.integers(4, TILE), "N": st.integers(4, TILE),
                                      "K": st.integers(k_min, k_max), "seed": st.integers(0, 99)})
    return inputs


def _matmul_make(spec, device):
    g, dtype = _seeded(spec["seed"]), torch.float16 if spec["dtype"] == "fp16" else torch.float32
    return {"a": torch.randn(spec["M"], spec["K"], generator=g).to(dtype).to(device),
            "b": torch.randn(spec["K"], spec["N"], generator=g).to(dtype).to(device)}


def _matmul_launch(kernel, bug):
    def launch(args, outs):
        a, b = args["a"], args["b"]
        (m, k), n = a.shape, b.shape[1]
        kernel[(triton.cdiv(m, TILE), triton.cdiv(n, TILE))](a, b, outs["c"], m, n, k, bug, TILE=TILE)
    return launch


def _matmul_outputs(args):
    return {"c": ((args["a"].shape[0], args["b"].shape[1]), args["a"].dtype)}


def _matmul_tolerance(args, refs, dtype):
    return {"c": dot(args["a"], args["b"], dtype, "fp32", dtype)}


# ---- 1-D kernels: a tail mask, a grid, exp --------------------------------------------------

@triton.jit
def block_scale_kernel(x_ptr, y_ptr, n, MASKED: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if MASKED:
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    else:
        x = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, x / tl.sum(tl.abs(x), axis=0), mask=offs < n)


@triton.jit
def double_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def exp_kernel(x_ptr, y_ptr, n, EX2_APPROX: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    if EX2_APPROX:   # tl.exp on NVIDIA: ex2.approx.f32 of the fp32 product x * log2(e)
        y = tl.exp2(x * 1.4426950408889634)
    else:
        y = libdevice.exp(x)
    tl.store(y_ptr + offs, y, mask=offs < n)


@triton.jit
def tile_scale_kernel(x_ptr, s_ptr, y_ptr, n, FIRST_SCALE: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    s = tl.load(s_ptr) if FIRST_SCALE else tl.load(s_ptr + pid)   # the bug: every tile takes tile 0's scale
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * s, mask=offs < n)


def _tile_scale_make(spec, device):
    g = _seeded(spec["seed"])
    x = torch.randn(spec["n"], generator=g)
    return {"x": x.to(device), "s": (torch.rand(triton.cdiv(spec["n"], BLOCK), generator=g) + 0.5).to(device)}


def _tile_scale_launch(first_scale):
    def launch(args, outs):
        n = args["x"].numel()
        tile_scale_kernel[(triton.cdiv(n, BLOCK),)](args["x"], args["s"], outs["y"], n, first_scale, BLOCK=BLOCK)
    return launch


def _vector_inputs(dtype, max_elements):
    return st.fixed_dictionaries({"dtype": st.just(dtype), "n": st.integers(BLOCK + 1, 8 * BLOCK),
                                  "seed": st.integers(0, 99)})


def _vector_make(scale):
    def make(spec, device):
        return {"x": (scale * torch.randn(spec["n"], generator=_seeded(spec["seed"]))).to(device)}
    return make


def _uniform_make(spec, device):
    x = torch.rand(spec["n"], generator=_seeded(spec["seed"]), dtype=torch.float64) * 176 - 88
    return {"x": x.to(torch.float32).to(device)}


def _y_like_x(args):
    return {"y": (tuple(args["x"].shape), args["x"].dtype)}


def _block_scale_launch(masked):
    def launch(args, outs):
        n = args["x"].numel()
        block_scale_kernel[(triton.cdiv(n, BLOCK),)](args["x"], outs["y"], n, masked, BLOCK=BLOCK)
    return launch


def _block_scale_oracle(args):
    x = args["x"]
    n = x.numel()
    padded = torch.nn.functional.pad(x, (0, -n % BLOCK)).reshape(-1, BLOCK)
    return {"y": (padded / padded.abs().sum(dim=1, keepdim=True)).flatten()[:n]}


def _double_launch(covering):
    def launch(args, outs):
        n = args["x"].numel()
        programs = triton.cdiv(n, BLOCK) if covering else n // BLOCK
        double_kernel[(programs,)](args["x"], outs["y"], n, BLOCK=BLOCK)
    return launch


def _exp_launch(approx):
    def launch(args, outs):
        n = args["x"].numel()
        exp_kernel[(triton.cdiv(n, BLOCK),)](args["x"], outs["y"], n, approx, BLOCK=BLOCK)
    return launch


# ---- GELU: tanh where erf is meant --------------------------------------------------------------

@triton.jit
def gelu_kernel(x_ptr, y_ptr, n, TANH: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    if TANH:
        z = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        y = 0.5 * x * (2.0 - 2.0 / (tl.exp(2.0 * z) + 1.0))
    else:
        y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(y_ptr + offs, y, mask=offs < n)


def _gelu_launch(tanh):
    def launch(args, outs):
        n = args["x"].numel()
        gelu_kernel[(triton.cdiv(n, BLOCK),)](args["x"], outs["y"], n, tanh, BLOCK=BLOCK)
    return launch


def _gelu_tolerance(args, refs, dtype):
    # erf's ULP bound, the argument's scaling and the three roundings of 0.5 x (1 + erf)
    return {"y": rounding(dtype, ops=ERF_ULP + 4, atol=2 ** -20 * args["x"].abs(),
                          atol_formula="2^-20 |x| (1 + erf cancels for x < 0)")}


# ---- dropout: Philox offset one block ahead; seed and offset swapped ---------------------------

@triton.jit
def dropout_kernel(x_ptr, y_ptr, keep_ptr, n, p, seed, offset, SHIFT: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    # the bug: the stream position of program pid starts at (pid + 1) * BLOCK
    keep = tl.rand(seed, offset + offs + SHIFT * BLOCK) > p
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, tl.where(keep, x / (1.0 - p), 0.0), mask=offs < n)
    tl.store(keep_ptr + offs, keep.to(tl.uint8), mask=offs < n)


def _dropout_inputs(dtype, max_elements):
    return st.fixed_dictionaries({"dtype": st.just(dtype), "n": st.integers(BLOCK + 1, 8 * BLOCK),
                                  "p": st.sampled_from((0.25, 0.5)), "rng_seed": st.integers(0, 2**31),
                                  "offset": st.integers(0, 2**20), "seed": st.integers(0, 99)})


def _dropout_make(spec, device):
    return {"x": torch.randn(spec["n"], generator=_seeded(spec["seed"])).to(device), "p": spec["p"],
            "rng_seed": spec["rng_seed"], "offset": spec["offset"]}


def _dropout_outputs(args):
    return {"y": (tuple(args["x"].shape), torch.float32), "keep": (tuple(args["x"].shape), torch.uint8)}


def _dropout_launch(shift):
    def launch(args, outs):
        n = args["x"].numel()
        dropout_kernel[(triton.cdiv(n, BLOCK),)](args["x"], outs["y"], outs["keep"], n, args["p"],
                                                 args["rng_seed"], args["offset"], shift, BLOCK=BLOCK)
    return launch


def _dropout_oracle(args):
    x = args["x"]
    positions = args["offset"] + torch.arange(x.numel()).numpy()
    keep = torch.from_numpy(philox.rand(args["rng_seed"], positions) > args["p"]).to(x.device)
    return {"y": torch.where(keep, x / (1.0 - args["p"]), torch.zeros_like(x)), "keep": keep.to(torch.uint8)}


def _dropout_tolerance(args, refs, dtype):
    return {"y": rounding(dtype, ops=DIV_ULP + 1), "keep": exact("the Philox keep mask, bit for bit")}


def _swapped_launch(builtin_launch):
    def launch(args, outs):
        builtin_launch({**args, "rng_seed": args["offset"], "offset": args["rng_seed"]}, outs)
    return launch


def _small_swappable(inputs):
    """The built-in strategy, with seeds and offsets both small enough to serve as either."""
    def strategy(dtype, max_elements):
        return inputs(dtype, max_elements).map(
            lambda s: {**s, "p": s["p"] if 0 < s["p"] < 1 else 0.5, "rng_seed": s["rng_seed"] % 2**31,
                       "offset": s["offset"] % 2**31})
    return strategy


# ---- a LayerNorm: its variance in one pass -------------------------------------------------

EPS = 1e-5


@triton.jit
def layernorm_kernel(x_ptr, y_ptr, stride, cols, eps, ONE_PASS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + offs, mask=offs < cols, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / cols
    if ONE_PASS:   # E[x^2] - E[x]^2: the spread cancels against the offset
        var = tl.sum(x * x, axis=0) / cols - mean * mean
    else:
        d = tl.where(offs < cols, x - mean, 0.0)
        var = tl.sum(d * d, axis=0) / cols
    tl.store(y_ptr + row * cols + offs, (x - mean) * tl.rsqrt(var + eps), mask=offs < cols)


def _layernorm_launch(one_pass):
    def launch(args, outs):
        x = args["x"]
        layernorm_kernel[(x.shape[0],)](x, outs["y"], x.stride(0), x.shape[1], EPS, one_pass,
                                        BLOCK=triton.next_power_of_2(x.shape[1]))
    return launch


def _layernorm_oracle(args):
    x = args["x"]
    d = x - x.mean(dim=-1, keepdim=True)
    return {"y": d * (d.square().mean(dim=-1, keepdim=True) + EPS).rsqrt()}


# ---- registration -----------------------------------------------------------------------------

def _case(name, dtype, **fields):
    return register(Case(name=name, family="diagnosis", dtypes=(dtype,), **fields))


for suffix, bug in (("", True), ("_ok", False)):
    _case(f"diag_one_pass_var{suffix}", "fp32", inputs=lambda d, m: S.row_inputs(d, min(m, 1024), max_rows=8),
          make=lambda spec, device: {"x": S.row_tensor(spec, device)}, outputs=_y_like_x,
          launch=_layernorm_launch(one_pass=bug), oracle=_layernorm_oracle,
          tolerance=lambda a, r, d: {"y": normalization(a["x"], d, eps=EPS)})
    _case(f"diag_tf32_dot{suffix}", "fp32", inputs=_matmul_inputs(16, 64), make=_matmul_make,
          outputs=_matmul_outputs, launch=_matmul_launch(tf32_matmul_kernel, bug),
          oracle=lambda a: {"c": a["a"] @ a["b"]}, tolerance=_matmul_tolerance, reduction="K")
    _case(f"diag_fp16_acc{suffix}", "fp16", inputs=_matmul_inputs(32, 64), make=_matmul_make,
          outputs=_matmul_outputs, launch=_matmul_launch(outer_matmul_kernel, bug),
          oracle=lambda a: {"c": a["a"] @ a["b"]}, tolerance=_matmul_tolerance, reduction="K")
    _case(f"diag_tail_mask{suffix}", "fp32", inputs=_vector_inputs, make=_vector_make(1.0), outputs=_y_like_x,
          launch=_block_scale_launch(masked=not bug), oracle=_block_scale_oracle,
          tolerance=lambda a, r, d: {"y": rounding(d, ops=DIV_ULP)})
    _case(f"diag_unwritten_tail{suffix}", "fp32", inputs=_vector_inputs, make=_vector_make(1.0),
          outputs=_y_like_x, launch=_double_launch(covering=not bug), oracle=lambda a: {"y": 2 * a["x"]},
          tolerance=lambda a, r, d: {"y": rounding(d)})
    _case(f"diag_tile_scale{suffix}", "fp32", inputs=_vector_inputs, make=_tile_scale_make, outputs=_y_like_x,
          launch=_tile_scale_launch(first_scale=bug),
          oracle=lambda a: {"y": a["x"] * a["s"].repeat_interleave(BLOCK)[:a["x"].numel()]},
          tolerance=lambda a, r, d: {"y": rounding(d)})
    _case(f"diag_philox_block{suffix}", "fp32", inputs=_dropout_inputs, make=_dropout_make,
          outputs=_dropout_outputs, launch=_dropout_launch(1 if bug else 0), oracle=_dropout_oracle,
          tolerance=_dropout_tolerance)
    _case(f"diag_gelu_tanh{suffix}", "fp32", inputs=_vector_inputs, make=_vector_make(3.0), outputs=_y_like_x,
          launch=_gelu_launch(tanh=bug), oracle=lambda a: {"y": gelu_oracle.gelu(a["x"])},
          tolerance=_gelu_tolerance, math=("erf",))
    _case(f"diag_exp_overflow{suffix}", "fp32", inputs=_vector_inputs, make=_uniform_make, outputs=_y_like_x,
          launch=_exp_launch(approx=bug), oracle=lambda a: {"y": torch.exp(a["x"])},
          tolerance=lambda a, r, d: {"y": rounding(d, ops=2 * EXP_ULP)}, math=("exp",))

_GELU_DROPOUT = cases.get("bias_gelu_dropout")
register(dataclasses.replace(_GELU_DROPOUT, name="diag_philox_swapped", family="diagnosis", dtypes=("fp32",),
                             inputs=_small_swappable(_GELU_DROPOUT.inputs),
                             launch=_swapped_launch(_GELU_DROPOUT.launch), bench=(), variants=None))
register(dataclasses.replace(_GELU_DROPOUT, name="diag_philox_swapped_ok", family="diagnosis", dtypes=("fp32",),
                             inputs=_small_swappable(_GELU_DROPOUT.inputs), bench=(), variants=None))
