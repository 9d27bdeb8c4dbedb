"""Matrix multiply with fp32 accumulation (int32 for int8), per-tensor fp8 scales and an optional
bias + activation epilogue:   C = act(scale_a * scale_b * (A @ B) + bias).

One program computes a BLOCK_M x BLOCK_N tile of C, stepping through K in BLOCK_K slices with
tl.dot into an fp32 (int32) accumulator. Programs are ordered in groups of GROUP_M tile rows, so
that programs running together share B panels in L2. Row and column indices past M and N wrap
around when loaded (they only feed rows and columns the masked store drops), so only the K tail
needs masks, and none when BLOCK_K divides K.

What it takes (A [M, K], B [K, N], any strides):
  fp16, bf16        -> C in the same dtype;
  fp32              -> fp32, with tf32 matrix inputs where the arch has them (every NVIDIA arch,
                       gfx942) and exact ieee fp32 where it does not (gfx90a, gfx950, RDNA);
  fp8 + fp32 scales -> bf16 (default), fp16 or fp32; only the formats the arch's matrix units
                       take: OCP e4m3fn / e5m2 on NVIDIA sm_89+, gfx950 and gfx12, FNUZ on gfx942;
  int8              -> int32, exact (bias int32; relu is the one activation that keeps it exact).

fp8 accumulation: NVIDIA's fp8 MMA (sm_89, sm_90, sm_120) sums into a 22-bit register (13
fraction bits, products aligned to the largest exponent and truncated: DeepSeek-V3 report
sec. 3.5.2, SageAttention2). The kernel therefore promotes every BLOCK_K slice into the fp32
accumulator: on Hopper through tl.dot's max_num_imprecise_acc (a partial accumulator per slice),
on sm_89 / sm_120 by adding each slice's tl.dot to the accumulator in fp32 itself. Blackwell's
tcgen05 (25 fraction bits) and AMD's MFMA accumulate in place.

Launch configurations are data (portcheck/kernels/configs/matmul.toml), per vendor and input
class; the autotuner times the ones whose shared memory fits the device.
"""
from __future__ import annotations

import fnmatch
import math
import random
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

from .. import strategies as S
from ..cases import Case, Cost, Variant, register
from ..dtypes import fmt
from ..facts.numerics import ERF_ULP, EXP_ULP, U_ADD, U_FP22, U_TF32
from ..oracles.matmul import ACTIVATIONS, abs_product, int_matmul
from ..oracles.matmul import matmul as matmul_ref
from ..tolerance import Tolerance, exact
from ..facts.archs import Arch
from ..facts.device import current_arch, dot_fp32_precision, fp32_matmul, interpreted
from ._launch import check_vector

CONFIG_FILE = Path(__file__).with_name("configs") / "matmul.toml"
FLOAT_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
FP8_DTYPES = {"fp8e4nv": torch.float8_e4m3fn, "fp8e5": torch.float8_e5m2,
              "fp8e4b8": torch.float8_e4m3fnuz, "fp8e5b16": torch.float8_e5m2fnuz}
FP8_OUT = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
INT_ACTIVATIONS = ("none", "relu")
INDEX_LIMIT = 2**31        # offsets at or past this need 64-bit index arithmetic
FP8_MMA_K = 32             # k of one fp8 MMA instruction (wgmma / mma.sync m16n8k32)
NARROW_M = 32              # up to this M the autotuner keeps the narrow tiles (BLOCK_M <= 32),
                           # which Triton builds with mma.sync even on sm_90a / sm_100a
MBARRIER_BYTES = 64        # room for the pipeline's mbarriers next to the tiles (sm_100: 16 seen)


# ---- what each arch does: read from the arch table (portcheck/facts/archs.py) -------------------

SMEM_MMA = ("wgmma", "tcgen05")   # matrix units that read their operands from shared memory


def vendor(arch: Arch) -> str:
    """The section of the configuration file an arch reads: interpreter, nvidia or amd."""
    return "interpreter" if arch.is_interpreter else arch.vendor


def k_major_only(arch: Arch, dtype: str) -> bool:
    """Whether the arch's matrix instruction reads this dtype's operands from shared memory only
    K-major while cp.async cannot transpose: tf32 on sm_90a's wgmma and sm_100a's tcgen05 (16-bit
    types may be either way; 8-bit cases here take B column-major already). Cross-compiled, a
    row-major fp32 B fills shared memory 4 bytes at a time: 96 of the 108 cp.async instructions
    of a 128x256x32 tile on sm_90a, none with B column-major (the narrow-async-copy lint)."""
    return dtype == "fp32" and arch.matrix_family in SMEM_MMA and dot_fp32_precision(arch) == "tf32"


def _wide_tiles(m: int, config: Config | None) -> bool:
    """Whether the launch runs a tile of more than NARROW_M rows: wgmma / tcgen05 on sm_90a /
    sm_100a; the narrow ones are mma.sync, which loads its fragments itself from either layout."""
    return config.block_m > NARROW_M if config is not None else m > NARROW_M


# ---- launch configurations, as data ---------------------------------------------------------

_AMD_OPTIONS = ("waves_per_eu", "matrix_instr_nonkdim", "kpack")
_CONFIG_KEYS = {"block", "group", "warps", "stages", "archs", *_AMD_OPTIONS}
CLASSES = ("16bit", "fp32", "fp8", "int8")


@dataclass(frozen=True)
class Config:
    block_m: int
    block_n: int
    block_k: int
    group_m: int
    num_warps: int
    num_stages: int
    options: dict = field(default_factory=dict)   # AMD compiler options
    archs: tuple[str, ...] = ()                   # fnmatch globs; empty: every arch of the vendor

    def constexprs(self) -> dict:
        return {"BLOCK_M": self.block_m, "BLOCK_N": self.block_n, "BLOCK_K": self.block_k,
                "GROUP_M": self.group_m}

    def for_arch(self, arch: Arch) -> bool:
        return not self.archs or any(fnmatch.fnmatch(arch.name, p) for p in self.archs)

    @property
    def label(self) -> str:
        opts = "".join(f" {k}={v}" for k, v in self.options.items())
        return (f"{self.block_m}x{self.block_n}x{self.block_k} g{self.group_m} "
                f"w{self.num_warps} s{self.num_stages}{opts}")


def _parse_config(entry: dict, where: str) -> Config:
    unknown = set(entry) - _CONFIG_KEYS
    missing = {"block", "group", "warps", "stages"} - set(entry)
    if unknown or missing:
        raise ValueError(f"{CONFIG_FILE}: {where}: " + (f"unknown key(s) {sorted(unknown)}" if unknown
                                                        else f"missing key(s) {sorted(missing)}"))
    bm, bn, bk = entry["block"]
    return Config(bm, bn, bk, entry["group"], entry["warps"], entry["stages"],
                  {k: entry[k] for k in _AMD_OPTIONS if k in entry}, tuple(entry.get("archs", ())))


@lru_cache(maxsize=None)
def config_table() -> dict:
    """{vendor: {class: [Config, ...]}} from the data file, validated."""
    data = tomllib.loads(CONFIG_FILE.read_text(encoding="utf-8"))
    table = {}
    for vend in ("interpreter", "nvidia", "amd"):
        table[vend] = {}
        for cls in CLASSES:
            entries = data.get(vend, {}).get(cls, [])
            if not entries:
                raise ValueError(f"{CONFIG_FILE}: [{vend}] has no {cls!r} configurations")
            table[vend][cls] = [_parse_config(e, f"[{vend}] {cls} #{i}") for i, e in enumerate(entries, 1)]
            if vend == "nvidia" and any(c.options for c in table[vend][cls]):
                raise ValueError(f"{CONFIG_FILE}: [nvidia] {cls}: AMD options would be rejected by the CUDA backend")
    return table


def dtype_class(dtype: str) -> str:
    if dtype in ("fp16", "bf16"):
        return "16bit"
    if dtype in FP8_DTYPES:
        return "fp8"
    if dtype in ("fp32", "int8"):
        return dtype
    raise ValueError(f"matmul has no configurations for dtype {dtype!r}")


def shared_bytes(cfg: Config, in_bytes: int, arch: Arch) -> int:
    """Shared memory / LDS the A and B tile buffers take, as the compiler allocates them:
    wgmma and tcgen05 (sm_90, sm_100, with a warpgroup's 64 rows or more) keep num_stages buffers
    and a few mbarriers; the cp.async pipeline of mma.sync and AMD's stream pipeliner keep
    num_stages - 1 (tests/kernels/test_matmul_compile.py checks this against cross-compiled
    metadata.shared)."""
    tile = (cfg.block_m + cfg.block_n) * cfg.block_k * in_bytes
    if arch.matrix_family in SMEM_MMA and cfg.block_m >= 64 and cfg.num_warps % 4 == 0:
        return cfg.num_stages * tile + MBARRIER_BYTES
    return max(1, cfg.num_stages - 1) * tile


def arch_configs(arch: Arch, dtype: str, shared_limit: int | None) -> list[Config]:
    """The configurations this kernel may use for dtype on arch, within its shared memory."""
    table = config_table()[vendor(arch)][dtype_class(dtype)]
    in_bytes = 1 if dtype_class(dtype) in ("fp8", "int8") else fmt(dtype).torch_dtype.itemsize
    return [c for c in table if c.for_arch(arch)
            and (shared_limit is None or shared_bytes(c, in_bytes, arch) <= shared_limit)]


@lru_cache(maxsize=None)
def _device_shared_limit() -> int | None:
    if interpreted():
        return None
    props = triton.runtime.driver.active.utils.get_device_properties(torch.cuda.current_device())
    return int(props["max_shared_mem"])


def configs(dtype: str) -> list[Config]:
    """The configurations for dtype on the active device (the interpreter's small ones there)."""
    found = arch_configs(current_arch(), dtype, _device_shared_limit())
    if not found:
        raise ValueError(f"no matmul configuration for {dtype} fits {current_arch().name} "
                         f"({_device_shared_limit()} bytes of shared memory per block)")
    return found


# ---- the kernel ----------------------------------------------------------------------------

@triton.jit
def _aligned(x, PROVEN: tl.constexpr, VEC: tl.constexpr):
    """x, which the launcher proved a multiple of VEC when PROVEN: (x // VEC) * VEC says so to the
    compiler's alignment analysis."""
    if PROVEN:
        return x // VEC * VEC
    else:
        return x


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, scale_a_ptr, scale_b_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, WIDE: tl.constexpr,
                  HAS_BIAS: tl.constexpr, HAS_SCALES: tl.constexpr, ACTIVATION: tl.constexpr,
                  PRECISION: tl.constexpr, FP8_ACC: tl.constexpr,
                  VEC: tl.constexpr = 1, HINTS: tl.constexpr = 0):
    # Triton assumes a size or stride aligned only when it is a multiple of 16; bit i of HINTS says
    # the launcher proved the i-th of (M, N, K, strides) a multiple of VEC (16 bytes of elements),
    # and _aligned tells the compiler: 16-byte loads for N = K = 4104
    M, N, K = _aligned(M, HINTS & 1, VEC), _aligned(N, HINTS & 2, VEC), _aligned(K, HINTS & 4, VEC)
    stride_am, stride_ak = _aligned(stride_am, HINTS & 8, VEC), _aligned(stride_ak, HINTS & 16, VEC)
    stride_bk, stride_bn = _aligned(stride_bk, HINTS & 32, VEC), _aligned(stride_bn, HINTS & 64, VEC)
    stride_cm, stride_cn = _aligned(stride_cm, HINTS & 128, VEC), _aligned(stride_cn, HINTS & 256, VEC)
    # grouped ordering: GROUP_M tile rows advance together along N, so their B panels stay in L2
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * num_pid_n
    first_m = (pid // per_group) * GROUP_M
    rows_in_group = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % rows_in_group
    pid_n = (pid % per_group) // rows_in_group

    # rows / columns past M / N wrap: the loads stay in bounds without masks, the store drops them
    rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    rk = tl.arange(0, BLOCK_K)
    if WIDE:
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn

    if a_ptr.dtype.element_ty == tl.int8:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=rk[None, :] < k_left, other=0.0)
            b = tl.load(b_ptrs, mask=rk[:, None] < k_left, other=0.0)
        if a_ptr.dtype.element_ty == tl.int8:
            acc = tl.dot(a, b, acc, out_dtype=tl.int32)
        elif FP8_ACC == "partial":
            acc = tl.dot(a, b, acc, max_num_imprecise_acc=BLOCK_K)
        elif FP8_ACC == "split":
            # a non-zero max_num_imprecise_acc keeps Triton from folding the add into the MMA
            acc += tl.dot(a, b, max_num_imprecise_acc=BLOCK_K)
        else:
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    if HAS_SCALES:
        acc = acc * (tl.load(scale_a_ptr) * tl.load(scale_b_ptr))
    cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + cn, mask=cn < N, other=0).to(acc.dtype)[None, :]
    if ACTIVATION == "relu":
        acc = tl.maximum(acc, 0)
    elif ACTIVATION == "gelu":
        acc = 0.5 * acc * (1 + tl.erf(acc * 0.7071067811865476))
    elif ACTIVATION == "silu":
        acc = acc * tl.sigmoid(acc)
    if WIDE:
        cm = cm.to(tl.int64)
        cn = cn.to(tl.int64)
    c_ptrs = c_ptr + cm[:, None] * stride_cm + cn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(cm[:, None] < M) & (cn[None, :] < N))


_kernel = triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})(matmul_kernel)


def _prune(configs_in, named_args, **kwargs):
    """Keep the configurations whose buffers fit the device; for small M, the narrow ones."""
    limit = _device_shared_limit()
    dtype = fmt(named_args["a_ptr"].dtype).name
    arch = current_arch()
    in_bytes = named_args["a_ptr"].element_size()
    fits = [c for c in configs_in if limit is None or shared_bytes(
        Config(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"], 1, c.num_warps,
               c.num_stages), in_bytes, arch) <= limit]
    narrow = named_args["M"] <= NARROW_M
    by_size = [c for c in fits if (c.kwargs["BLOCK_M"] <= NARROW_M) == narrow]
    kept = by_size or fits
    if not kept:
        raise ValueError(f"no matmul configuration for {dtype} fits {arch.name} ({limit} bytes of shared memory)")
    return kept


@lru_cache(maxsize=None)
def _autotuned(arch: Arch, cls: str):
    table = config_table()[vendor(arch)][cls]
    chosen = [c for c in table if c.for_arch(arch)]
    if arch.is_interpreter:
        chosen = chosen[:1]          # timing on the interpreter means nothing: one small config
    tuned = [triton.Config({**c.constexprs(), **c.options}, num_warps=c.num_warps,
                           num_stages=c.num_stages) for c in chosen]
    return triton.autotune(configs=tuned, key=["M", "N", "K", "stride_ak", "stride_bn"],
                           prune_configs_by={"early_config_prune": _prune})(_kernel)


# ---- the launcher --------------------------------------------------------------------------

_TORCH_NAMES = {**FLOAT_DTYPES, **FP8_DTYPES, "int8": torch.int8}
_BY_TORCH = {v: k for k, v in _TORCH_NAMES.items()}


def _name(t: torch.Tensor, what: str) -> str:
    if t.dtype not in _BY_TORCH:
        raise ValueError(f"{what} has dtype {t.dtype}; matmul takes fp16, bf16, fp32, int8 or fp8 "
                         f"({', '.join(map(str, FP8_DTYPES.values()))})")
    return _BY_TORCH[t.dtype]


def _check_scale(s, what: str, device) -> None:
    if not isinstance(s, torch.Tensor) or s.dtype != torch.float32 or s.numel() != 1:
        raise ValueError(f"{what} must be a one-element float32 tensor (a per-tensor scale), got "
                         f"{type(s).__name__ if not isinstance(s, torch.Tensor) else f'{s.dtype} of shape {tuple(s.shape)}'}")
    if s.device != device:
        raise ValueError(f"{what} is on {s.device}, the operands on {device}")


def alignment_hints(sizes_and_strides, element_size: int) -> dict:
    """VEC and HINTS for matmul_kernel: which of (M, N, K, stride_am, ..., stride_cn) are multiples
    of a 16-byte vector but not of 16 (Triton's own specialization covers those)."""
    vec = max(1, 16 // element_size)
    hints = sum(1 << i for i, v in enumerate(sizes_and_strides) if v % vec == 0 and v % 16)
    return {"VEC": vec, "HINTS": hints} if vec > 1 and hints else {}


def matmul(a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor | None = None,
           bias: torch.Tensor | None = None, activation: str = "none",
           scale_a: torch.Tensor | None = None, scale_b: torch.Tensor | None = None,
           out_dtype: torch.dtype | None = None, config: Config | None = None) -> torch.Tensor:
    """act(scale_a * scale_b * (a @ b) + bias) for a [M, K] and b [K, N] of one dtype.

    fp16 / bf16 / fp32 give their own dtype, int8 gives int32, fp8 gives out_dtype (bf16 unless
    fp16 or fp32 is asked) and needs scale_a and scale_b (one-element float32 tensors). bias is
    [N] in the output dtype. `config` picks one launch configuration (see `configs`); without
    it the autotuner chooses. Bad input raises ValueError before anything launches.
    """
    for t, what in ((a, "a"), (b, "b")):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{what} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 2:
            raise ValueError(f"{what} must be 2-D, got {t.dim()}-D shape {tuple(t.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"K mismatch: a is [M, K] = {list(a.shape)} but b is [K, N] = {list(b.shape)}")
    if a.device != b.device:
        raise ValueError(f"a is on {a.device} but b is on {b.device}")
    dtype = _name(a, "a")
    if b.dtype != a.dtype:
        raise ValueError(f"a is {a.dtype} but b is {b.dtype}; both operands must share a dtype")
    arch = current_arch()
    is_fp8 = dtype in FP8_DTYPES
    if is_fp8:
        if dtype not in arch.fp8_native:
            takes = ", ".join(arch.fp8_native) or "no fp8 format"
            raise ValueError(f"{dtype} ({a.dtype}) does not run on {arch.name}: its matrix units take {takes}")
        if scale_a is None or scale_b is None:
            raise ValueError("fp8 operands need scale_a and scale_b (one-element float32 tensors)")
        _check_scale(scale_a, "scale_a", a.device)
        _check_scale(scale_b, "scale_b", a.device)
        out_dtype = torch.bfloat16 if out_dtype is None else out_dtype
        if out_dtype not in FP8_OUT.values():
            raise ValueError(f"an fp8 matmul writes bf16, fp16 or fp32, not {out_dtype}")
    else:
        if scale_a is not None or scale_b is not None:
            raise ValueError(f"per-tensor scales are for fp8 operands, not {a.dtype}")
        natural = torch.int32 if dtype == "int8" else a.dtype
        if out_dtype is not None and out_dtype != natural:
            raise ValueError(f"a {a.dtype} matmul writes {natural}, not {out_dtype}")
        out_dtype = natural
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; known: {', '.join(ACTIVATIONS)}")
    if dtype == "int8" and activation not in INT_ACTIVATIONS:
        raise ValueError(f"an int8 matmul returns exact int32: activation {activation!r} would not be; "
                         f"use {' or '.join(INT_ACTIVATIONS)}")
    m, k = a.shape
    n = b.shape[1]
    if bias is not None:
        if not isinstance(bias, torch.Tensor):
            raise ValueError(f"bias must be a torch.Tensor, got {type(bias).__name__}")
        check_vector("bias", bias, n, out_dtype)
        if bias.device != a.device:
            raise ValueError(f"bias is on {bias.device}, the operands on {a.device}")
    if out is None:
        out = torch.empty((m, n), dtype=out_dtype, device=a.device)
    elif not isinstance(out, torch.Tensor) or tuple(out.shape) != (m, n) or out.dtype != out_dtype:
        raise ValueError(f"out must be a {out_dtype} tensor of shape ({m}, {n})")
    if config is not None:
        if not isinstance(config, Config):
            raise ValueError(f"config must be a matmul Config (see configs()), got {type(config).__name__}")
        if config.options and not arch.is_amd:
            raise ValueError(f"config {config.label} carries AMD options, which {arch.name} does not take")
    if m == 0 or n == 0:
        return out
    if k_major_only(arch, dtype) and _wide_tiles(m, config):
        # one pass over an operand that is not K-major costs less than filling shared memory
        # with 4-byte copies on every tile that reads it (at M <= NARROW_M the extra pass would
        # double the traffic of a kernel that reads B once, through mma.sync)
        a = a if a.stride(1) == 1 else a.contiguous()
        b = b if b.stride(0) == 1 else b.t().contiguous().t()
    spans = [t.numel() and sum((s - 1) * abs(st_) for s, st_ in zip(t.shape, t.stride())) + 1
             for t in (a, b, out)]
    consts = {"WIDE": max(spans) >= INDEX_LIMIT, "HAS_BIAS": bias is not None,
              "HAS_SCALES": is_fp8, "ACTIVATION": activation,
              "PRECISION": dot_fp32_precision(arch) if dtype == "fp32" else "ieee",
              "FP8_ACC": arch.fp8_accumulation if is_fp8 else "none"}
    args = (a, b, out, bias, scale_a, scale_b, m, n, k, a.stride(0), a.stride(1), b.stride(0),
            b.stride(1), out.stride(0), out.stride(1))
    consts.update(alignment_hints(args[6:], a.element_size()))
    if config is None:
        grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)  # noqa: E731
        _autotuned(arch, dtype_class(dtype))[grid](*args, **consts)
    else:
        grid = (triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n),)
        _kernel[grid](*args, **consts, **config.constexprs(), num_warps=config.num_warps,
                      num_stages=config.num_stages, **config.options)
    return out


# ---- the cases -------------------------------------------------------------------------------

TILE_EDGES = (16, 32, 64, 128, 256)     # every BLOCK_M / BLOCK_N / BLOCK_K the data file uses
LAYOUTS = ("row", "col", "padded")      # row-major, column-major, rows padded with NaN / -1
FLOAT_REGIMES = ("normal", "positive", "large", "small")
FP8_REGIMES = ("bits", "normal", "positive")
INT_REGIMES = ("uniform", "extreme", "small")


def _dims(max_elements: int):
    """Lengths that break tiling: 1, primes, every tile edge +-1, anything up to the limit.
    The limit keeps each operand within a quarter of max_elements (64 under the ci profile)."""
    limit = max(1, min(4096, math.isqrt(max_elements) // 2))
    edges = sorted({n for t in TILE_EDGES for n in (t - 1, t, t + 1) if n <= limit} | {1})
    primes = [p for p in S.PRIMES if p <= limit]
    return st.one_of(st.sampled_from(edges), st.sampled_from(primes), st.integers(1, limit))


def _inputs(regimes, activations, outs=None):
    def inputs(dtype: str, max_elements: int):
        dims = _dims(max_elements)
        fields = {"dtype": st.just(dtype), "m": dims, "n": dims, "k": dims,
                  "a_layout": st.sampled_from(LAYOUTS), "b_layout": st.sampled_from(LAYOUTS),
                  "regime": st.sampled_from(regimes), "bias": st.booleans(),
                  "activation": st.sampled_from(activations),
                  # an index into the device's configuration list (taken modulo its length), so
                  # that every configuration is checked, not only the one the autotuner picks
                  "config": st.integers(0, 255), "seed": S.seeds()}
        if outs:
            fields["out"] = st.sampled_from(outs)
        return st.fixed_dictionaries(fields)
    return inputs


def _place(t: torch.Tensor, layout: str, device: str) -> torch.Tensor:
    if layout == "row":
        return t.to(device).contiguous()
    if layout == "col":
        return t.t().contiguous().to(device).t()
    if layout == "padded":
        rows, cols = t.shape
        # padding a kernel must never read: NaN for floats (every format here has one), -1 for int8
        fill = torch.full((rows, cols + 17), float("nan") if t.dtype.is_floating_point else -1,
                          dtype=torch.float32).to(t.dtype)
        fill[:, :cols] = t
        return fill.to(device)[:, :cols]
    raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")


def _float_operands(spec: dict, gen: torch.Generator):
    """fp16 / bf16 / fp32 operands scaled so that C sits where the regime wants it:
    normal (randn), positive (|randn|: no cancellation, the accumulation bound nearly tight),
    large (the largest |C| an eighth of the output format's max), small (|C| near its smallest
    normal, so subnormal outputs appear)."""
    m, n, k, dtype = spec["m"], spec["n"], spec["k"], spec["dtype"]
    a, b = S.normal((m, k), gen), S.normal((k, n), gen)
    if spec["regime"] == "positive":
        a, b = a.abs(), b.abs()
    f = fmt(dtype)
    alpha = 1.0
    if spec["regime"] == "large":
        top = float(abs_product(a, b).max())
        alpha = math.sqrt(torch.finfo(f.torch_dtype).max / 8 / max(top, 1e-300))
    elif spec["regime"] == "small":
        alpha = math.sqrt(4 * f.tiny / math.sqrt(k))
    a, b = (alpha * a).to(f.torch_dtype), (alpha * b).to(f.torch_dtype)
    bias = None
    if spec["bias"]:
        bias = (torch.randn(n, generator=gen, dtype=torch.float64) * alpha * alpha * math.sqrt(k)).to(f.torch_dtype)
    return a, b, bias


def _fp8_codes(dtype: torch.dtype) -> torch.Tensor:
    """Every finite value of an fp8 format, as its bit pattern."""
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    values = codes.view(dtype).to(torch.float32)
    return codes[torch.isfinite(values)]


def _plant_probe(a: torch.Tensor, b: torch.Tensor, rng: random.Random):
    """One output element made of a single product, the format's smallest subnormal times its
    largest finite value: row i of A is zero but for that subnormal at column k, and B[k, j] is
    the largest value. A matrix unit that flushes fp8 subnormal inputs, or decodes either
    extreme wrongly, gets C[i, j] entirely wrong rather than within a rounding error."""
    codes = _fp8_codes(a.dtype)
    values = codes.view(a.dtype).to(torch.float32)
    top = int(codes[int(values.argmax())])
    m, k = a.shape
    i, kk, j = rng.randrange(m), rng.randrange(k), rng.randrange(b.shape[1])
    a_bits, b_bits = a.view(torch.uint8).clone(), b.view(torch.uint8).clone()
    a_bits[i, :] = 0                # +0 in every fp8 format
    a_bits[i, kk] = 1               # the smallest positive subnormal in every fp8 format
    b_bits[kk, j] = top
    return a_bits.view(a.dtype), b_bits.view(b.dtype)


def _fp8_operands(spec: dict, gen: torch.Generator):
    """fp8 operands made in the format itself: 'bits' draws uniformly among its finite bit
    patterns (subnormals to the largest finite), 'normal' / 'positive' round randn to it; every
    example with two rows or more also carries the subnormal x largest probe (_plant_probe).
    Scales are arbitrary fp32 numbers, shrunk if the output format could overflow."""
    m, n, k, dtype = spec["m"], spec["n"], spec["k"], spec["dtype"]
    tdt = FP8_DTYPES[dtype]
    fmax = float(torch.finfo(tdt).max)
    if spec["regime"] == "bits":
        codes = _fp8_codes(tdt)
        pick = lambda *shape: codes[torch.randint(0, codes.numel(), shape, generator=gen)].view(tdt)  # noqa: E731
        a, b = pick(m, k), pick(k, n)
    else:
        a, b = S.normal((m, k), gen), S.normal((k, n), gen)
        if spec["regime"] == "positive":
            a, b = a.abs(), b.abs()
        a, b = a.clamp(-fmax, fmax).to(tdt), b.clamp(-fmax, fmax).to(tdt)
    rng = random.Random(spec["seed"])
    if m >= 2:
        a, b = _plant_probe(a, b, rng)
    # scales from a Python generator: make() also runs under FakeTensorMode (the bench's cost
    # model), where no tensor value can be read
    sa, sb = (math.ldexp(1.0 + rng.random(), rng.randint(-6, 6)) for _ in range(2))
    if spec["out"] == "fp16":   # only fp16 can overflow: |C| <= 2^12 * 57344^2 * K elsewhere
        out_max = float(torch.finfo(torch.float16).max)
        bound = sa * sb * k * float(a.to(torch.float64).abs().max()) * float(b.to(torch.float64).abs().max())
        if bound > out_max / 4:
            sb *= out_max / 4 / bound
    scale_a = torch.tensor([sa], dtype=torch.float32)
    scale_b = torch.tensor([sb], dtype=torch.float32)
    bias = None
    if spec["bias"]:
        rms = sa * sb * math.sqrt(k)
        bias = (torch.randn(n, generator=gen, dtype=torch.float64) * rms).to(FP8_OUT[spec["out"]])
    return a, b, bias, scale_a, scale_b


def _int_operands(spec: dict, gen: torch.Generator):
    """int8 operands: uniform over [-128, 127], only the extremes -128 / 127 (largest sums), or
    small values; an int32 bias."""
    m, n, k = spec["m"], spec["n"], spec["k"]
    if spec["regime"] == "uniform":
        draw = lambda *shape: torch.randint(-128, 128, shape, generator=gen)  # noqa: E731
    elif spec["regime"] == "extreme":
        draw = lambda *shape: torch.where(torch.rand(*shape, generator=gen) < 0.5, -128, 127)  # noqa: E731
    else:
        draw = lambda *shape: torch.randint(-3, 4, shape, generator=gen)  # noqa: E731
    a, b = draw(m, k).to(torch.int8), draw(k, n).to(torch.int8)
    bias = torch.randint(-2**20, 2**20, (n,), generator=gen, dtype=torch.int32) if spec["bias"] else None
    return a, b, bias


def _make(spec: dict, device: str) -> dict:
    gen = S.generator(spec["seed"])
    dtype = spec["dtype"]
    scale_a = scale_b = None
    if dtype in FP8_DTYPES:
        a, b, bias, scale_a, scale_b = _fp8_operands(spec, gen)
        out_dtype = FP8_OUT[spec["out"]]
        scale_a, scale_b = scale_a.to(device), scale_b.to(device)
    elif dtype == "int8":
        a, b, bias = _int_operands(spec, gen)
        out_dtype = torch.int32
    else:
        a, b, bias = _float_operands(spec, gen)
        out_dtype = FLOAT_DTYPES[dtype]
    arch = _arch_if_known()
    config = None
    if spec.get("config") is not None:
        found = configs(dtype)
        config = found[spec["config"] % len(found)]
    return {"a": _place(a, spec["a_layout"], device), "b": _place(b, spec["b_layout"], device),
            "bias": None if bias is None else bias.to(device), "scale_a": scale_a, "scale_b": scale_b,
            "activation": spec["activation"], "out_dtype": out_dtype, "config": config,
            "arch": arch and arch.name,
            "precision": dot_fp32_precision(arch) if dtype == "fp32" and arch else None,
            "fp8_acc": arch.fp8_accumulation if dtype in FP8_DTYPES and arch else None}


def _arch_if_known() -> Arch | None:
    """The active arch for the tolerance's record, or None where no device answers (the bench's
    cost model builds inputs on a machine that may have none)."""
    try:
        return current_arch()
    except Exception:  # noqa: BLE001 - no driver: nothing launches here anyway
        return None


def _outputs(args):
    return {"c": ((args["a"].shape[0], args["b"].shape[1]), args["out_dtype"])}


def _launch(args, outs):
    matmul(args["a"], args["b"], out=outs["c"], bias=args["bias"], activation=args["activation"],
           scale_a=args["scale_a"], scale_b=args["scale_b"], out_dtype=args["out_dtype"],
           config=args["config"])


def _scale(args) -> float:
    if args["scale_a"] is None:
        return 1.0
    return float(args["scale_a"].double().item()) * float(args["scale_b"].double().item())


def _oracle(args):
    if args["a"].dtype == torch.int8 or args["a"].dtype == torch.int32:
        return {"c": int_matmul(args["a"], args["b"], bias=args["bias"], activation_name=args["activation"])}
    return {"c": matmul_ref(args["a"], args["b"], bias=args["bias"], activation_name=args["activation"],
                            scale=_scale(args))}


# The accumulation model behind the tolerance. E_acc bounds |acc - scale * (A @ B)| per element
# as coef * S + K * tiny(fp32), with S = scale * (|A| @ |B|).
LIPSCHITZ = {"none": 1.0, "relu": 1.0, "gelu": 1.13, "silu": 1.10}   # max |act'|


def accumulation_bound(dtype: str, k: int, block_k: int | None, precision: str | None,
                       fp8_acc: str | None) -> tuple[float, str]:
    """(coef, text): |acc - scale*(A@B)| <= coef * S + K * tiny(fp32), for one output element."""
    if dtype in FP8_DTYPES and fp8_acc in ("partial", "split"):
        # each BLOCK_K slice: ceil(BLOCK_K/32) MMAs of 32 products + the running partial, each
        # addend (and the 22-bit result) losing up to 2^-13 of the slice's magnitude; then one
        # fp32 addition per slice into the accumulator
        bk = block_k or 128
        mmas = -(-bk // FP8_MMA_K)
        slices = -(-k // bk) if k else 0
        coef = (FP8_MMA_K + 2) * mmas * U_FP22 + (slices + 1) * U_ADD
        text = (f"fp8 MMA with a 22-bit accumulator promoted to fp32 every BLOCK_K={bk} ({fp8_acc}): "
                f"coef = 34*{mmas}*2^-13 + ({slices}+1)*2^-23")
        return coef, text
    if dtype in FP8_DTYPES or dtype in ("fp16", "bf16"):
        prod, ptext = 0.0, "products exact"
    elif precision == "tf32":
        prod, ptext = 2 * U_TF32 + U_TF32 ** 2, "tf32 operands (10 fraction bits each): 2*2^-10 + 2^-20"
    else:
        prod, ptext = U_ADD, "ieee fp32 products rounded: 2^-23"
    return 2 * k * U_ADD + prod, f"coef = 2K*2^-23 + {ptext} (K products and K accumulator passes)"


def _tolerance(args, refs, dtype):
    if dtype == "int8":
        return {"c": exact("bitwise: the exact integer product (+ bias, relu), wrapped to int32")}
    a, b = args["a"], args["b"]
    k = a.shape[1]
    act = args["activation"]
    out = fmt(args["out_dtype"])
    u32, uo = fmt("fp32").unit_roundoff, out.unit_roundoff
    s = _scale(args)
    big_s = s * abs_product(a, b)
    cfg = args["config"]
    coef, acc_text = accumulation_bound(dtype, k, cfg.block_k if cfg else None, args["precision"],
                                        args["fp8_acc"])
    e_z = coef * big_s + k * fmt("fp32").tiny * max(s, 1.0)
    if args["scale_a"] is not None:          # scale_a * scale_b, then acc * that: two roundings
        e_z = e_z + 2 * u32 * big_s
    p = matmul_ref(a, b, scale=s)
    z = p if args["bias"] is None else p + args["bias"][None, :]
    if args["bias"] is not None:             # acc + bias: one rounding of |z|
        e_z = e_z + u32 * (z.abs() + e_z)
    zz = z.abs() + e_z
    y = refs["c"]
    yy = y.abs() + LIPSCHITZ[act] * e_z
    if act == "gelu":      # 0.5*z*(1 + erf(z/sqrt2)): erf's ULPs and 2.5 u on (1 + erf), times 0.5|z|
        e_act = ((ERF_ULP + 1.25) * zz + yy) * u32
    elif act == "silu":    # z / (1 + exp(-z)): exp loses (2*EXP_ULP + 2|z|) u, + 1, /, *
        e_act = (2 * zz + 2 * EXP_ULP + 6) * u32 * yy
    else:
        e_act = torch.zeros_like(y)
    e_y = LIPSCHITZ[act] * e_z + e_act
    sub = 2.0 ** (out.min_exp - out.mantissa_bits - 1)   # half the output's subnormal spacing
    atol = e_y * (1 + uo) + sub
    prec = f"; fp32 dot precision {args['precision']} on {args['arch']}" if args["precision"] else ""
    formula = (f"|C - C_ref| <= u({out.name})|C_ref| + (1+u({out.name})) E_y + 2^{out.min_exp - out.mantissa_bits - 1}; "
               f"E_y = L_act E_z + e_act({act}); E_z = E_acc"
               + (" + 2u(fp32) S [scales]" if args["scale_a"] is not None else "")
               + (" + u(fp32)(|z|+E_z) [bias]" if args["bias"] is not None else "")
               + f"; E_acc = coef S + K tiny(fp32), S = scale |A||B|, K = {k}, {acc_text}{prec}")
    return {"c": Tolerance(uo, atol, formula)}


def _cost(args):
    a, b = args["a"], args["b"]
    m, k = a.shape
    n = b.shape[1]
    out_bytes = torch.empty((), dtype=args["out_dtype"]).element_size()
    bias_bytes = 0 if args["bias"] is None else args["bias"].numel() * args["bias"].element_size()
    return Cost(bytes=a.numel() * a.element_size() + b.numel() * b.element_size()
                + m * n * out_bytes + bias_bytes, flops=2 * m * n * k)


def _torch_epilogue(c, args):
    act = args["activation"]
    if act == "relu":
        return torch.relu(c)
    if act == "gelu":
        return torch.nn.functional.gelu(c)
    if act == "silu":
        return torch.nn.functional.silu(c)
    return c


def _baselines(args):
    """torch (cuBLAS / hipBLASLt through torch.matmul, torch._scaled_mm, torch._int_mm), and
    FlagGems' mm when it imports. Layout copies the libraries need are made here, untimed."""
    from ..speed import peers
    a, b, bias = args["a"], args["b"], args["bias"]
    found = {}
    if a.dtype in FLOAT_DTYPES.values():
        if bias is None:
            found["torch"] = lambda: _torch_epilogue(torch.matmul(a, b), args)
        else:
            found["torch"] = lambda: _torch_epilogue(torch.addmm(bias, a, b), args)
        if args["precision"] == "tf32":
            # torch's default fp32 matmul is exact ieee; the library at the kernel's own precision
            # is the like-for-like baseline
            plain = found["torch"]

            def tf32():
                with fp32_matmul(tf32=True):
                    return plain()
            found["torch.matmul tf32"] = tf32
        gems = peers.load("flag_gems.ops")   # a failed import is recorded (peers.unavailable)
        if gems is not None and bias is None and args["activation"] == "none":
            found[peers.FLAGGEMS] = lambda: gems.mm(a, b)
    elif a.dtype in FP8_DTYPES.values():
        a_row, b_col = a.contiguous(), b.t().contiguous().t()
        sa, sb, out_dtype = args["scale_a"], args["scale_b"], args["out_dtype"]
        both_e5 = a.dtype in (torch.float8_e5m2, torch.float8_e5m2fnuz)
        if not both_e5:   # cuBLASLt has no e5m2 x e5m2 kernel
            found["torch._scaled_mm"] = lambda: _torch_epilogue(torch._scaled_mm(
                a_row, b_col, sa, sb, bias=bias, out_dtype=out_dtype), args)
            found["torch._scaled_mm_fast_accum"] = lambda: _torch_epilogue(torch._scaled_mm(
                a_row, b_col, sa, sb, bias=bias, out_dtype=out_dtype, use_fast_accum=True), args)
    else:
        m, k = a.shape
        n = b.shape[1]
        if m > 16 and k % 8 == 0 and n % 8 == 0:   # torch._int_mm's own conditions
            a_row, b_col = a.contiguous(), b.t().contiguous().t()
            if bias is None:
                found["torch._int_mm"] = lambda: _torch_epilogue(torch._int_mm(a_row, b_col), args)
            else:
                found["torch._int_mm"] = lambda: _torch_epilogue(torch._int_mm(a_row, b_col) + bias, args)
    return found


# ---- compile variants: every configuration the arch would run, per dtype it takes -----------

_DIVISIBLE = ("a_ptr", "b_ptr", "c_ptr", "bias_ptr", "M", "N", "K", "stride_am", "stride_bk",
              "stride_bn", "stride_cm")


def _variant(arch, dtype: str, out: str, cfg: Config, *, b_col: bool, bias: bool = False,
             activation: str = "none") -> Variant:
    t, o = "*" + fmt(dtype).triton_name, "*" + fmt(out).triton_name
    fp8 = dtype in FP8_DTYPES
    sig = {"a_ptr": t, "b_ptr": t, "c_ptr": o, "bias_ptr": o if bias else "constexpr",
           "scale_a_ptr": "*fp32" if fp8 else "constexpr", "scale_b_ptr": "*fp32" if fp8 else "constexpr",
           "M": "i32", "N": "i32", "K": "i32", "stride_am": "i32", "stride_ak": "constexpr",
           "stride_bk": "constexpr" if b_col else "i32", "stride_bn": "i32" if b_col else "constexpr",
           "stride_cm": "i32", "stride_cn": "constexpr"}
    consts = {"stride_ak": 1, ("stride_bk" if b_col else "stride_bn"): 1, "stride_cn": 1,
              **cfg.constexprs(), "EVEN_K": True, "WIDE": False, "HAS_BIAS": bias,
              "HAS_SCALES": fp8, "ACTIVATION": activation,
              "PRECISION": dot_fp32_precision(arch) if dtype == "fp32" else "ieee",
              "FP8_ACC": arch.fp8_accumulation if fp8 else "none"}
    if not bias:
        consts["bias_ptr"] = None
    if not fp8:
        consts["scale_a_ptr"] = consts["scale_b_ptr"] = None
    for name in consts:
        sig.setdefault(name, "constexpr")
    epilogue = f" bias+{activation}" if bias else ""
    return Variant(matmul_kernel, sig, consts, cfg.num_warps, cfg.num_stages, dict(cfg.options),
                   label=f"{dtype} {cfg.label} out={out}{' B col-major' if b_col else ''}{epilogue}",
                   divisible_by_16=tuple(n for n in _DIVISIBLE if sig[n] != "constexpr"))


def _b_column_major(arch: Arch, dtype: str, cfg: Config) -> bool:
    """The 8-bit cases take B column-major everywhere, as torch._scaled_mm and _int_mm do."""
    return True


def _b_as_launched(arch: Arch, dtype: str, cfg: Config) -> bool:
    """The float case's B is row-major; the launcher makes it K-major where k_major_only says."""
    return k_major_only(arch, dtype) and cfg.block_m > NARROW_M


def _variants_for(dtypes_of, out_of, b_col):
    """The launches of one case on an arch; b_col(arch, dtype, config): whether B reaches the
    kernel column-major."""
    def variants(arch) -> list[Variant]:
        found = []
        for dtype in dtypes_of(arch):
            cfgs = arch_configs(arch, dtype, arch.shared_per_block)
            found += [_variant(arch, dtype, out_of(dtype), c, b_col=b_col(arch, dtype, c))
                      for c in cfgs]
            if cfgs:   # the epilogue once per dtype, on the first configuration
                act = "relu" if dtype == "int8" else "gelu"
                found.append(_variant(arch, dtype, out_of(dtype), cfgs[0],
                                      b_col=b_col(arch, dtype, cfgs[0]), bias=True,
                                      activation=act))
        return found
    return variants


def _spec(dtype, m, n, k, *, b_layout="row", out=None):
    spec = {"dtype": dtype, "m": m, "n": n, "k": k, "a_layout": "row", "b_layout": b_layout,
            "regime": "uniform" if dtype == "int8" else "normal", "bias": False,
            "activation": "none", "config": None, "seed": 0}
    if out is not None:
        spec["out"] = out
    return spec


SQUARES = (4096, 8192)
ODD = ((1, 4104, 4104), (16, 4104, 4104), (4000, 4104, 4104), (4000, 4097, 4097))

register(Case(
    name="matmul", family="matmul", dtypes=tuple(FLOAT_DTYPES),
    inputs=_inputs(FLOAT_REGIMES, ACTIVATIONS), make=_make, outputs=_outputs, launch=_launch,
    oracle=_oracle, tolerance=_tolerance, cost=_cost,
    bench=tuple(_spec(d, s, s, s) for d in ("fp16", "bf16") for s in SQUARES)
    + tuple(_spec(d, m, n, k) for d in ("fp16", "bf16") for m, n, k in ODD)
    + (_spec("fp32", 4096, 4096, 4096),),
    variants=_variants_for(lambda arch: tuple(FLOAT_DTYPES), lambda d: d, b_col=_b_as_launched),
    baselines=_baselines, math=("erf", "exp"),
    description="C = act(A @ B + bias), fp16 / bf16 / fp32 (tf32 where the arch has it), fp32 accumulation"))

register(Case(
    name="matmul_fp8", family="matmul", dtypes=tuple(FP8_DTYPES),
    inputs=_inputs(FP8_REGIMES, ACTIVATIONS, outs=("bf16",)), make=_make, outputs=_outputs,
    launch=_launch, oracle=_oracle, tolerance=_tolerance, cost=_cost,
    bench=tuple(_spec(d, s, s, s, b_layout="col", out="bf16") for d in ("fp8e4nv", "fp8e4b8")
                for s in SQUARES),
    variants=_variants_for(lambda arch: arch.fp8_native, lambda d: "bf16", b_col=_b_column_major),
    baselines=_baselines, math=("erf", "exp"),
    description="C = act(scale_a scale_b (A @ B) + bias) in bf16, fp8 inputs with per-tensor scales"))

register(Case(
    name="matmul_fp8_out", family="matmul", dtypes=tuple(FP8_DTYPES),
    inputs=_inputs(FP8_REGIMES, ACTIVATIONS, outs=("fp32", "fp16")), make=_make, outputs=_outputs,
    launch=_launch, oracle=_oracle, tolerance=_tolerance, cost=_cost,
    # the same kernel as matmul_fp8 but for the store: one format's configurations suffice
    variants=_variants_for(lambda arch: arch.fp8_native[:1], lambda d: "fp32", b_col=_b_column_major),
    baselines=_baselines, math=("erf", "exp"),
    description="the fp8 matmul writing fp32 or fp16 (no bf16 rounding: checkable on the interpreter)"))

register(Case(
    name="matmul_int8", family="matmul", dtypes=("int8",),
    inputs=_inputs(INT_REGIMES, INT_ACTIVATIONS), make=_make, outputs=_outputs, launch=_launch,
    oracle=_oracle, tolerance=_tolerance, cost=_cost,
    bench=tuple(_spec("int8", s, s, s, b_layout="col") for s in SQUARES),
    variants=_variants_for(lambda arch: ("int8",), lambda d: "int32", b_col=_b_column_major),
    baselines=_baselines,
    description="int8 x int8 -> int32, exact; optional int32 bias and relu"))
