"""matmul's launcher: the configurations (configs/matmul.toml) each arch may run, the checks
that refuse bad input before launch, and the launch itself (one configuration, or autotuned)."""
from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache

import torch
import triton
import triton.testing
from triton.tools.tensor_descriptor import TensorDescriptor

from ...dtypes import fmt
from ...facts.archs import Arch
from ...facts.device import (compute_units, current_arch, dot_fp32_precision, drawn_config, forced,
                             fp8_accumulation, interpreted)
from ...oracles.matmul import ACTIVATIONS
from .._configs import config_file
from .._pruned import prune_configs_by
from .. import _plans as plans
from .._launch import (arrival_counters, check_vector, current_stream, descriptor_obstacle, split_buffers,
                       descriptors_supported)
from .kernel import matmul_kernel, matmul_tma_kernel

CONFIG_FILE = config_file("matmul")
FLOAT_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
FP8_DTYPES = {"fp8e4nv": torch.float8_e4m3fn, "fp8e5": torch.float8_e5m2,
              "fp8e4b8": torch.float8_e4m3fnuz, "fp8e5b16": torch.float8_e5m2fnuz}
FP8_OUT = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
INT_ACTIVATIONS = ("none", "relu")
INDEX_LIMIT = 2**31        # offsets at or past this need 64-bit index arithmetic
NARROW_M = 32              # up to this M the autotuner keeps the narrow tiles (BLOCK_M <= 32),
                           # which Triton builds with mma.sync even on sm_90a / sm_100a
MBARRIER_BYTES = 64        # room for the pipeline's mbarriers next to the tiles (sm_100: 16 seen)
# split-K: when a launch's C tiles leave SMs / CUs idle (skinny M), each tile's K is shared by up
# to SPLIT_MOST programs, so that about SPLIT_FILL programs per SM / CU run, each summing at least
# SPLIT_MIN_SLICES slices of BLOCK_K. One program per SM: on the H200 (bf16, M = 16, N = K = 4104,
# B rotated past L2 as `portcheck bench` reads it) 4 splits of 33 tiles took 14.1 us against 15.9
# us for 7 splits (231 programs: some SMs ran two and others one); at M = 1, 13.7 against 13.8
# (reports/examples/matmul-h200/skinny-fill.json).
SPLIT_MOST = 16
SPLIT_FILL = 1
SPLIT_MIN_SLICES = 4
INTERPRETER_UNITS = 4      # SMs the interpreter counts as: few, so small inputs split K too
# A compute-bound launch whose operand rows are not 16-byte aligned (K = 4097) loads them an
# element at a time; copying them into aligned rows first costs 2 (MK + KN) bytes against 2 MNK
# flops. It pays once M N / (M + N) passes REPACK_FROM (the H200's flop : byte ratio, 989 TFLOP/s
# over 4.8 TB/s, is about 200; a 10x slower element-wise loop makes a tenth of it enough).
REPACK_FROM = 32
# Tensor descriptors (TMA, NVIDIA sm_90+) for the 16-bit types' wide tiles without split-K. On the
# H200 (bf16, a prototype of matmul_tma_kernel, 2026-12-02) against the pointer kernel's best:
# 4000 x 4104 x 4104 254 us against 317, 4096 x 4104 x 4096 215 against 239, 4096^3 193 against
# 205, 8192^3 1580 against 1614: rows 8208 bytes apart cost the pointer kernel's loads and not
# the copy engine's (reports/examples/matmul-h200/tma-prototype.json).
TMA_DTYPES = ("fp16", "bf16")
# The copy engine fetches a tile row by row, and a row that does not start on a 128-byte line
# costs it an extra request. On the H200 a launch lost where such rows were most of a K step's
# (reports/examples/matmul-h200/, wide-factors.json, strides.json, a-in-lines.json): 128x256
# tiles with B's rows 8208 bytes apart (N = 4104; 256 of the 384 tile rows a step), 256x128
# with A's (K = 4104), and every tile shape with both. So where both operands' rows are off
# their lines, A is copied into 128-byte rows first (256x128 then keeps a third of its rows off):
# 4000 x 4104 x 4104 243 us against 257, torch 205 (a-in-lines-both.json; where one operand is
# on its lines, copying A measured pure cost: a-in-lines.json). The copy (4 M K bytes) costs
# about 350 / N of the product's time (2 M N K flops) at 4 TB/s and 700 TFLOP/s, under a twelfth
# from TMA_REPACK_MIN_N columns on.
TMA_ROW_BYTES = 128
TMA_REPACK_MIN_N = 4096


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


def tma_shared_bytes(cfg: Config, in_bytes: int, arch: Arch) -> int:
    """matmul_tma_kernel's shared memory: shared_bytes' tile buffers, which its flattened tile
    loop keeps live through the epilogue, plus the half C tile (16-bit, the operands' dtype) the
    epilogue stages there; on tcgen05 a tile of fewer than 128 rows also converts the half tile
    it reads out of tensor memory through a scratch of a byte per element (cross-compiled
    sm_100a: 2, 4 and 8 KB at 64 x 64, 128 and 256). tests/kernels/test_matmul_compile.py
    checks this against the compiler."""
    half = cfg.block_m * (cfg.block_n // 2)
    convert = half if arch.matrix_family == "tcgen05" and cfg.block_m < 128 else 0
    return shared_bytes(cfg, in_bytes, arch) + half * in_bytes + convert


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
    """The configurations for dtype on the active device (the interpreter's small ones there);
    under a forced arch (--as-arch) every one that arch declares, whether or not it fits the
    local device (one that does not is a recorded skip at launch, never a silent drop)."""
    limit = current_arch().shared_per_block if forced() else _device_shared_limit()
    found = arch_configs(current_arch(), dtype, limit)
    if not found:
        raise ValueError(f"no matmul configuration for {dtype} fits {current_arch().name} "
                         f"({limit} bytes of shared memory per block)")
    return found


# ---- split-K ---------------------------------------------------------------------------------

def split_k(m: int, n: int, k: int, block_m: int, block_n: int, block_k: int, units: int) -> int:
    """Programs per C tile: 1 while the tiles alone give every SM / CU a program; else enough
    that about SPLIT_FILL programs per unit run, each summing at least SPLIT_MIN_SLICES K slices,
    and none of them empty."""
    tiles = triton.cdiv(m, block_m) * triton.cdiv(n, block_n)
    if tiles >= units:
        return 1
    k_tiles = triton.cdiv(k, block_k)
    want = min(triton.cdiv(SPLIT_FILL * units, tiles), k_tiles // SPLIT_MIN_SLICES, SPLIT_MOST)
    if want <= 1:
        return 1
    return triton.cdiv(k_tiles, triton.cdiv(k_tiles, want))


def _units(device) -> int:
    return INTERPRETER_UNITS if interpreted() or device.type != "cuda" else compute_units(device)


def _split_of(args) -> int:
    """SPLIT_K for a launch (a triton.heuristics value: the configuration's blocks are in args)."""
    return split_k(args["M"], args["N"], args["K"], args["BLOCK_M"], args["BLOCK_N"], args["BLOCK_K"],
                   _units(args["c_ptr"].device))


@lru_cache(maxsize=4096)
def _workspace(arch: Arch, dtype: str, blocks: tuple[int, int, int] | None, m: int, n: int, k: int,
               units: int) -> tuple[int, int]:
    """(partial-tile elements, tiles) of the largest split the launch may make: with a
    configuration's (BLOCK_M, BLOCK_N, BLOCK_K), its own; autotuned (None), that of any
    configuration the pruning keeps for this M. Asked once per shape."""
    if blocks is None:
        cfgs = configs(dtype)
        cfgs = [c for c in cfgs if (c.block_m <= NARROW_M) == (m <= NARROW_M)] or cfgs
        candidates = [(c.block_m, c.block_n, c.block_k) for c in cfgs]
    else:
        candidates = [blocks]
    most = (0, 0)
    for bm, bn, bk in candidates:
        splits = split_k(m, n, k, bm, bn, bk, units)
        if splits > 1:
            tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
            most = max(most[0], tiles * splits * bm * bn), max(most[1], tiles)
    return most


def _repacked(t: torch.Tensor, vec: int, k_major_b: bool) -> torch.Tensor:
    """t with K contiguous and rows 16-byte aligned (a copy; A stays [M, K], B comes back as the
    [K, N] view of an [N, K] buffer): its loads vectorize and the wrapped rows of a tile stay
    along the strided side."""
    rows, cols = (t.shape[1], t.shape[0]) if k_major_b else tuple(t.shape)
    padded = torch.empty((rows, triton.cdiv(cols, vec) * vec), dtype=t.dtype, device=t.device)[:, :cols]
    _copy_rows(padded, t.t() if k_major_b else t)
    return padded.t() if k_major_b else padded


def _copy_rows(dst: torch.Tensor, src: torch.Tensor) -> None:
    """dst.copy_(src), 8 bytes an element where both are row-major with rows, starts and lengths
    8-byte aligned: torch copies a 2-D tensor that is not contiguous an element at a time, which
    for 16-bit elements halved the bandwidth (4000 x 4104 bf16 into rows of 4160 on the H200:
    44.2 us, 22.7 us through the 8-byte view, reports/examples/matmul-h200/skinny-fill.json)."""
    wide = torch.int64.itemsize
    if src.dtype == dst.dtype and src.stride(1) == 1 and dst.stride(1) == 1 and all(
            (t.shape[1] * t.element_size()) % wide == 0 and (t.stride(0) * t.element_size()) % wide == 0
            and t.data_ptr() % wide == 0 for t in (src, dst)):
        dst.view(torch.int64).copy_(src.view(torch.int64))
    else:
        dst.copy_(src)


def _off_lines(row_stride: int, t: torch.Tensor) -> bool:
    """Whether t's rows, row_stride elements apart, fall off TMA_ROW_BYTES lines (by the stride
    alone, which a plan's key holds; a start off a line is not weighed)."""
    return (row_stride * t.element_size()) % TMA_ROW_BYTES != 0


def _misaligned(t: torch.Tensor, vec: int) -> bool:
    """Whether t cannot be loaded 16 bytes at a time along its unit stride: no unit stride, a
    start or a row stride that is not a multiple of 16 bytes."""
    if t.data_ptr() % 16:
        return True
    if t.stride(1) == 1:
        return t.shape[0] > 1 and t.stride(0) % vec != 0
    if t.stride(0) == 1:
        return t.shape[1] > 1 and t.stride(1) % vec != 0
    return True


# ---- tensor descriptors (TMA) ----------------------------------------------------------------

@dataclass(frozen=True)
class TmaLayout:
    """How a launch reads its operands through tensor descriptors: B as [K, N] or K-major (the
    descriptor then spans the [N, K] buffer), C through a descriptor or through pointers."""
    b_kmajor: bool
    c_desc: bool

    def constexprs(self) -> dict:
        return {"B_KMAJOR": self.b_kmajor, "C_DESC": self.c_desc}

    def descriptors(self, a, b, out, bm: int, bn: int, bk: int) -> tuple:
        """(a_desc, b_desc, c) for BLOCK_M x BLOCK_N x BLOCK_K tiles."""
        b_desc = (TensorDescriptor.from_tensor(b.t(), [bn, bk]) if self.b_kmajor
                  else TensorDescriptor.from_tensor(b, [bk, bn]))
        c = TensorDescriptor.from_tensor(out, [bm, bn // 2]) if self.c_desc else out   # half tiles
        return TensorDescriptor.from_tensor(a, [bm, bk]), b_desc, c


def tma_arch(arch: Arch) -> bool:
    """Whether matmul_tma_kernel runs on an arch: tensor descriptors, and a matrix unit that reads
    its operands from shared memory (wgmma, tcgen05), where TMA's tiles land. Not sm_120, whose
    mma.sync reads registers: there the 128x256x64 tile spills 8 bytes a thread (cross-compiled)
    for a gain nobody measured. The interpreter runs it, so that CPU checks cover it."""
    return descriptors_supported(arch) and (arch.is_interpreter or arch.matrix_family in SMEM_MMA)


def tma_layout(arch: Arch, dtype: str, a, b, out, m: int, config: Config | None) -> TmaLayout | None:
    """The TmaLayout of a launch that can take matmul_tma_kernel, else None: a 16-bit dtype, wide
    tiles (M or the given configuration's BLOCK_M over NARROW_M; a given configuration within the
    device's shared memory by tma_shared_bytes), a tma_arch, A with unit stride along K, B along
    N or K, each 16-byte aligned at its start and between rows. Never under --as-arch or while a
    launch recorder replaces Triton's dispatch (portcheck compile's capture describes pointer
    arguments only; case.tma_variants declares these)."""
    if dtype not in TMA_DTYPES or not _wide_tiles(m, config) or not tma_arch(arch) \
            or forced() or plans.dispatch_replaced() or a.shape[1] == 0:   # (no empty box to encode)
        return None
    limit = _device_shared_limit()
    if config is not None and limit is not None and tma_shared_bytes(config, a.element_size(), arch) > limit:
        return None   # a given configuration the pointer kernel fits and this one does not
    if a.stride(1) != 1 or descriptor_obstacle(a):
        return None
    if b.stride(1) == 1 and not descriptor_obstacle(b):
        b_kmajor = False
    elif b.stride(0) == 1 and not descriptor_obstacle(b.t()):
        b_kmajor = True
    else:
        return None
    return TmaLayout(b_kmajor, out.stride(1) == 1 and descriptor_obstacle(out) is None)


def _tma_blocks(nargs) -> None:
    """The autotuner's pre-hook for matmul_tma_kernel: each configuration's tile shapes on the
    launch's descriptors (built before the configuration is known)."""
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bn, bk] if nargs["B_KMAJOR"] else [bk, bn]
    if nargs["C_DESC"]:
        nargs["c"].block_shape = [bm, bn // 2]


# ---- the kernel as launched: EVEN_K from the sizes, and the autotuner over the data file ----

# matmul_kernel's constexprs that follow from its sizes and tiles: computed at each launch by
# triton.heuristics, and again by _record_plan for the launch a plan keeps
_HEURISTICS = {"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0,
               "SPLIT_K": _split_of,
               "M_FITS": lambda args: args["M"] >= args["BLOCK_M"],
               "N_FITS": lambda args: args["N"] >= args["BLOCK_N"]}
_kernel = triton.heuristics(_HEURISTICS)(matmul_kernel)


def _operand_a(named_args) -> torch.Tensor:
    """A, from either kernel's arguments (a pointer or a descriptor over it)."""
    return named_args["a_ptr"] if "a_ptr" in named_args else named_args["a_desc"].base


def _prune(configs_in, named_args, **kwargs):
    """Keep the configurations whose buffers fit the device; for small M, the narrow ones."""
    limit = _device_shared_limit()
    dtype = fmt(_operand_a(named_args).dtype).name
    arch = current_arch()
    in_bytes = _operand_a(named_args).element_size()
    need = tma_shared_bytes if "a_desc" in named_args else shared_bytes
    fits = [c for c in configs_in if limit is None or need(
        Config(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"], 1, c.num_warps,
               c.num_stages), in_bytes, arch) <= limit]
    narrow = named_args["M"] <= NARROW_M
    by_size = [c for c in fits if (c.kwargs["BLOCK_M"] <= NARROW_M) == narrow]
    kept = by_size or fits
    if not kept:
        raise ValueError(f"no matmul configuration for {dtype} fits {arch.name} ({limit} bytes of shared memory)")
    return kept


def _dtype_of(named_args) -> str:
    """The launch's dtype name: the pruned lists differ per dtype."""
    return fmt(_operand_a(named_args).dtype).name


@lru_cache(maxsize=None)
def _autotuned(arch: Arch, cls: str, pruned: bool = True, tma: bool = False):
    """The autotuned kernel for an arch and dtype class, matmul_tma_kernel's when `tma`.
    `pruned`: time only the configurations that compiled clean on the arch
    (configs/pruned/matmul.json, `portcheck prune`); False only to measure what the pruning
    changes (tools/bench_pruned.py)."""
    table = config_table()[vendor(arch)][cls]
    chosen = [c for c in table if c.for_arch(arch)]
    if arch.is_interpreter:
        chosen = chosen[:1]          # timing on the interpreter means nothing: one small config
    tuned = [triton.Config({**c.constexprs(), **c.options}, num_warps=c.num_warps,
                           num_stages=c.num_stages, pre_hook=_tma_blocks if tma else None) for c in chosen]
    prune = (prune_configs_by("matmul", dtype_of=_dtype_of, then=_prune) if pruned
             else {"early_config_prune": _prune})
    if tma:
        return triton.autotune(configs=tuned, key=["M", "N", "K", "B_KMAJOR", "C_DESC"],
                               prune_configs_by=prune, do_bench=_time_candidate)(matmul_tma_kernel)
    return triton.autotune(configs=tuned, key=["M", "N", "K", "stride_ak", "stride_bn"],
                           prune_configs_by=prune, do_bench=_time_candidate)(_kernel)


def _time_candidate(kernel_call, quantiles):
    """The autotuner's timing of one configuration. Triton's default puts events around launches
    made back to back from Python: a launch shorter than its host time (skinny M: 11 us on the
    H200) is then timed as host time, and the pick is noise (17.2 us chosen where 12.0 us was on
    offer, tools/sweep_matmul_shapes.py 2026-12-02). Replaying the launches from a CUDA graph
    takes the host out of the timing."""
    return triton.testing.do_bench_cudagraph(kernel_call, rep=20, quantiles=quantiles)


# ---- launch plans: checked and planned once per shape, then launched straight ---------------
# A launch through the autotuner and Triton's JIT dispatch spends about 110 us on the H200's host
# (tools/sweep_matmul_shapes.py --host) for a kernel that may take 10 us. Everything that decides
# how a launch is made (checks, constexprs, Triton's specialisation of each argument: dtypes,
# sizes, strides, 16-byte alignment) follows from the arguments' metadata, so the first launch
# of a metadata key records the compiled kernel and its argument list, and later launches with
# that key go straight to the compiled kernel's launcher with the new tensors.

_PLANS = plans.Plans()


def _plan_key(a, b, out, bias, activation, scale_a, scale_b, out_dtype, config, tma=None):
    """The metadata key of a launch, or None where a plan would not be safe or worth it (where
    kernels/_plans.key says so: the interpreter, a forced arch, launch hooks, a replaced JIT
    dispatch, inputs not on a GPU)."""
    return plans.key((a, b, out, bias, scale_a, scale_b),
                     (activation, out_dtype, config.label if isinstance(config, Config) else config, tma))


@dataclass
class _Plan:
    """A planned matmul: the compiled kernel (`plans.Plan`, every argument given per launch) and
    what each launch takes anew: the output when none is given, and this stream's split-K
    workspace and arrival counters (_launch.split_buffers)."""
    kernel: plans.Plan
    values: list             # every kernel argument in declaration order (tensors replaced per call)
    out_shape: tuple
    out_dtype: torch.dtype
    # split-K: (workspace position, elements, dtype, counters position, tiles), else None
    split: tuple | None
    tma: tuple | None = None  # (TmaLayout, (BLOCK_M, BLOCK_N, BLOCK_K)): fresh descriptors per call
    line_a: int | None = None  # A copied into rows of a multiple of this many elements first

    def launch(self, a, b, out, bias, scale_a, scale_b):
        if out is None:   # (sizes as arguments: a tuple costs torch a microsecond more to parse)
            out = torch.empty(*self.out_shape, dtype=self.out_dtype, device=a.device)
        if self.line_a is not None:
            a = _repacked(a, self.line_a, k_major_b=False)
        values = self.values.copy()
        # pointers as addresses: Triton's launcher calls data_ptr() and cuPointerGetAttribute for
        # a tensor, neither for an int (the key has every tensor's device: a launch that reaches
        # here passed the checks with tensors on that device). 1 us of 16 at M = 1 on the H200's
        # host (reports/examples/host-overhead-h200/ninth-session/int-args-run*.json)
        operands = (a.data_ptr(), b.data_ptr(), out.data_ptr()) if self.tma is None \
            else self.tma[0].descriptors(a, b, out, *self.tma[1])
        values[:6] = *operands, *[None if t is None else t.data_ptr() for t in (bias, scale_a, scale_b)]
        stream = current_stream(a.device)
        if self.split is not None:
            at_ws, elements, dtype, at_counters, tiles = self.split
            ws, counters = split_buffers(a.device, elements, dtype, tiles, stream)
            values[at_ws], values[at_counters] = ws.data_ptr(), counters.data_ptr()
        self.kernel.launch(stream, *values)
        return out


def _record_plan(key, kernel, args: tuple, consts: dict, chosen: dict, out: torch.Tensor, grid,
                 tiles: int, tma: TmaLayout | None = None, line_a: int | None = None) -> None:
    """Keeps what the first launch of `key` did, once its kernel is compiled: matmul_kernel's, or
    matmul_tma_kernel's with `tma` (and A's copy into rows of `line_a` elements, if it made one).
    grid(meta): the launch's own grid of a configuration's constexprs."""
    if key is None or chosen is None or len(_PLANS) >= _PLANS.limit or not hasattr(kernel, "packed_metadata"):
        return
    defaults = plans.parameters(matmul_kernel if tma is None else matmul_tma_kernel)
    names = list(defaults)
    # (chosen may carry AMD compiler options, which are not parameters: the values keep names only)
    full = {**defaults, **dict(zip(names, args)), **consts, **chosen}
    blocks = full["BLOCK_M"], full["BLOCK_N"], full["BLOCK_K"]
    split = None
    if tma is None:   # what matmul_kernel's heuristics computed at the launch
        full.update({name: rule(full) for name, rule in _HEURISTICS.items()})
        if full["SPLIT_K"] > 1:
            split = (names.index("ws_ptr"), full["ws_ptr"].numel(), full["ws_ptr"].dtype,
                     names.index("lock_ptr"), tiles)
    # kernel.run is a property: it loads the kernel's handles first
    compiled = plans.Plan(kernel.run, kernel.function, kernel.packed_metadata, (*grid(full), 1, 1), ())
    _PLANS.put(key, _Plan(compiled, [full[name] for name in names], tuple(out.shape), out.dtype, split,
                          None if tma is None else (tma, blocks), line_a))


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
           out_dtype: torch.dtype | None = None, config: Config | None = None,
           tma: bool | None = None) -> torch.Tensor:
    """act(scale_a * scale_b * (a @ b) + bias) for a [M, K] and b [K, N] of one dtype.

    fp16 / bf16 / fp32 give their own dtype, int8 gives int32, fp8 gives out_dtype (bf16 unless
    fp16 or fp32 is asked) and needs scale_a and scale_b (one-element float32 tensors). bias is
    [N] in the output dtype. `config` picks one launch configuration (see `configs`); without
    it the autotuner chooses. `tma`: None reads the tiles through tensor descriptors wherever
    the launch can (tma_layout), False never, True requires it (ValueError where it cannot).
    Bad input raises ValueError before anything launches.
    """
    key = _plan_key(a, b, out, bias, activation, scale_a, scale_b, out_dtype, config, tma)
    plan = _PLANS.get(key)
    if plan is not None:
        return plan.launch(a, b, out, bias, scale_a, scale_b)
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
    if config is None and forced():   # --as-arch: the configuration the check drew, not an autotuner's
        config = drawn_config(configs(dtype))
    if config is not None:
        if not isinstance(config, Config):
            raise ValueError(f"config must be a matmul Config (see configs()), got {type(config).__name__}")
        if config.options and not arch.is_amd:
            raise ValueError(f"config {config.label} carries AMD options, which {arch.name} does not take")
    if tma not in (None, True, False):
        raise ValueError(f"tma must be None, True or False, got {tma!r}")
    if m == 0 or n == 0:
        return out
    vec = max(1, 16 // a.element_size())
    given = a, b
    if k_major_only(arch, dtype) and _wide_tiles(m, config):
        # one pass over an operand that is not K-major costs less than filling shared memory
        # with 4-byte copies on every tile that reads it (at M <= NARROW_M the extra pass would
        # double the traffic of a kernel that reads B once, through mma.sync)
        a = a if a.stride(1) == 1 else a.contiguous()
        b = b if b.stride(0) == 1 else b.t().contiguous().t()
    elif vec > 1 and m * n >= REPACK_FROM * (m + n):
        a = _repacked(a, vec, k_major_b=False) if _misaligned(a, vec) else a
        b = _repacked(b, vec, k_major_b=True) if _misaligned(b, vec) else b
    spans = [t.numel() and sum((s - 1) * abs(st_) for s, st_ in zip(t.shape, t.stride())) + 1
             for t in (a, b, out)]
    consts = {"WIDE": max(spans) >= INDEX_LIMIT, "HAS_BIAS": bias is not None,
              "HAS_SCALES": is_fp8, "ACTIVATION": activation,
              "PRECISION": dot_fp32_precision(arch) if dtype == "fp32" else "ieee",
              "FP8_ACC": fp8_accumulation(arch) if is_fp8 else "none"}
    blocks = (config.block_m, config.block_n, config.block_k) if config is not None else None
    units = _units(a.device)
    elements, tiles = _workspace(arch, dtype, blocks, m, n, k, units)
    layout = tma_layout(arch, dtype, a, b, out, m, config) if not elements and tma is not False else None
    if tma and layout is None:
        raise ValueError("tensor descriptors requested (tma=True), but this launch cannot take them: they "
                         "need fp16 or bf16, tiles of more than NARROW_M rows without split-K (a given "
                         "configuration within shared memory: tma_shared_bytes), sm_90a or sm_100a, A "
                         "contiguous along K, B along N or K, and 16-byte aligned rows")
    if layout is not None:
        line_a = None   # A copied into whole lines (TMA_ROW_BYTES): the plan copies it again each launch
        if a is given[0] and b is given[1] and n >= TMA_REPACK_MIN_N and m * n >= REPACK_FROM * (m + n) \
                and _off_lines(a.stride(0), a) and _off_lines(b.stride(1) if layout.b_kmajor else b.stride(0), b):
            line_a = TMA_ROW_BYTES // a.element_size()
            a = _repacked(a, line_a, k_major_b=False)
        # a launch that copied an operand for 16-byte alignment is not planned: it keeps its checks
        return _launch_tma(key if (a is given[0] or line_a) and b is given[1] else None, layout, a, b, out,
                           bias, scale_a, scale_b, m, n, k, consts, config, arch, dtype, line_a)
    args = (a, b, out, bias, scale_a, scale_b, m, n, k, a.stride(0), a.stride(1), b.stride(0),
            b.stride(1), out.stride(0), out.stride(1))
    consts.update(alignment_hints(args[6:], a.element_size()))
    if elements:   # some configuration splits K: partial tiles and arrival counters
        acc_dtype = torch.int32 if dtype == "int8" else torch.float32
        consts["ws_ptr"] = torch.empty(elements, dtype=acc_dtype, device=a.device)
        consts["lock_ptr"] = arrival_counters(a.device, tiles)
    grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"])  # noqa: E731
                         * split_k(m, n, k, meta["BLOCK_M"], meta["BLOCK_N"], meta["BLOCK_K"], units),)
    kernel, chosen = _launched(_kernel, lambda: _autotuned(arch, dtype_class(dtype)), grid, args, consts, config)
    if a is given[0] and b is given[1]:   # a launch that copies an operand first keeps its checks
        _record_plan(key, kernel, args, consts, chosen, out, grid, tiles)
    return out


def _launched(kernel, tuner, grid, args: tuple, consts: dict, config: Config | None) -> tuple:
    """(the compiled kernel, its configuration's constexprs) of one launch: of `kernel` with the
    given configuration, or, where config is None, of the autotuner tuner() gives, which picks one
    (its pick, None before it has one). grid(meta): the grid of a configuration's constexprs."""
    if config is None:
        tuned = tuner()
        return tuned[grid](*args, **consts), getattr(getattr(tuned, "best_config", None), "kwargs", None)
    chosen = config.constexprs()
    return kernel[grid(chosen)](*args, **consts, **chosen, num_warps=config.num_warps,
                                num_stages=config.num_stages, **config.options), chosen


def _launch_tma(key, layout: TmaLayout, a, b, out, bias, scale_a, scale_b, m: int, n: int, k: int,
                consts: dict, config: Config | None, arch: Arch, dtype: str, line_a: int | None = None
                ) -> torch.Tensor:
    """The launch through matmul_tma_kernel: a persistent grid of at most one program per SM / CU,
    which walk the C tiles (no split-K here). `line_a`: A is a copy with rows of a multiple of that
    many elements, as a planned launch makes again."""
    consts = {**consts, **layout.constexprs()}
    # the autotuner's pre-hook sets each configuration's tile shapes on these descriptors
    bm, bn, bk = (config.block_m, config.block_n, config.block_k) if config is not None else (16, 16, 16)
    args = (*layout.descriptors(a, b, out, bm, bn, bk), bias, scale_a, scale_b, m, n, k,
            out.stride(0), out.stride(1))
    units = _units(a.device)
    grid = lambda meta: (min(units, triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"])),)  # noqa: E731
    kernel, chosen = _launched(matmul_tma_kernel, lambda: _autotuned(arch, dtype_class(dtype), tma=True), grid,
                               args, consts, config)
    _record_plan(key, kernel, args, consts, chosen, out, grid, 0, tma=layout, line_a=line_a)
    return out
