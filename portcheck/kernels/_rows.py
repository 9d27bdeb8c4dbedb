"""What the row families (softmax, layernorm, rmsnorm) share: each has a short-row kernel that packs
several rows into a program and a persistent kernel that loops over rows longer than a block, the
same input and bench shapes, and compile variants declared the same way from the family's own
config()."""
from __future__ import annotations

import sys

import triton
import triton.language as tl
from hypothesis import strategies as st

from .. import strategies as S
from ..cases import Variant, launch_divisibility
from ..dtypes import fmt
from ._launch import num_warps_for
from ._prefetch import l2_prefetch_ok
from ._stagger import stagger_ok

SHORT_BENCH = (32768, 4096)          # (rows, cols) of the short-row benches
LONG_BENCH = (4096, 131072)          # and of the long-row ones; their variants declare both
BENCH_LENGTHS = (SHORT_BENCH[1], LONG_BENCH[1])


@triton.jit
def all_or_none(flag, BLOCK: tl.constexpr):
    """A scalar condition as a [BLOCK] mask of one value: the GPU predicates the whole load on it
    (one compare a chunk, not one an element); the interpreter takes no Python bool as a mask."""
    return tl.full([BLOCK], 1, tl.int1) & flag


def loop_block(n_cols: int, loop_block: int, itemsize: int) -> int:
    """The chunk of a looped kernel: a family's LOOP_BLOCK counts 16-bit elements, and a wider
    dtype takes the same bytes a chunk (fp32 holds twice the registers per element: at the
    16-bit count the looped kernels spill on every NVIDIA arch, cross-compiled)."""
    return min(triton.next_power_of_2(n_cols), max(1, loop_block * 2 // itemsize))


def family_config(module: str, rows_kernel, looped_kernel):
    """A row family's config(n_cols, warp, long_rows=False, chunk=None, itemsize=2): the launch
    parameters for rows of n_cols elements of `itemsize` bytes on a device of the given warp size.
    The looped kernel for long rows (or past MAX_FUSED), a chunk of LOOP_BLOCK 16-bit elements;
    else the short-row kernel, several rows a program. The constants are the family module's
    (MAX_FUSED, LOOP_BLOCK, LOOP_PER_THREAD, ELEMS_PER_PROGRAM, ROW_ELEMS_PER_THREAD), read at
    each call, so tools/sweep_launch.py's settings of them reach it."""
    def config(n_cols: int, warp: int, long_rows: bool = False, chunk: int | None = None,
               itemsize: int = 2) -> dict:
        """Launch parameters for rows of n_cols elements of `itemsize` bytes (_rows.family_config)."""
        # a chunk is a tl.arange length: refused here, before any launch, not inside Triton
        if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1
                                  or chunk & (chunk - 1)):
            raise ValueError(f"chunk must be a power of two >= 1, got {chunk!r}")
        mod = sys.modules[module]
        if long_rows or n_cols > mod.MAX_FUSED:
            block = chunk if chunk is not None else loop_block(n_cols, mod.LOOP_BLOCK, itemsize)
            return {"kernel": looped_kernel, "ROWS": 1, "BLOCK": block,
                    "num_warps": num_warps_for(block, warp, per_thread=mod.LOOP_PER_THREAD, most=32)}
        block = triton.next_power_of_2(n_cols)
        rows = max(1, mod.ELEMS_PER_PROGRAM // block)
        return {"kernel": rows_kernel, "ROWS": rows, "BLOCK": block,
                "num_warps": num_warps_for(rows * block, warp, per_thread=mod.ROW_ELEMS_PER_THREAD)}
    return config


def bench_spec(long_rows: bool, **fields) -> dict:
    """The bf16 bench spec of a row case; `fields` are the family's own (weight, eps, ...)."""
    rows, cols = LONG_BENCH if long_rows else SHORT_BENCH
    return {"dtype": "bf16", "rows": rows, "cols": cols, "regime": "normal", "layout": "contiguous",
            **fields, "seed": 0}


def check_chunk(cols: int, long_rows: bool, max_fused: int) -> int | None:
    """The chunk a long-row check on a small input takes: a quarter row, so the loops run about
    four times and end on a partial chunk whenever the length is not a power of two."""
    return max(16, triton.next_power_of_2(cols) // 4) if long_rows and cols <= max_fused else None


def row_variants(arch, *, config, rows_kernel, long_rows: bool, dtypes, lengths, signature,
                 flags: dict | None = None, bare: str = "") -> list[Variant]:
    """Every launch of a row family on an arch: per dtype and row length n, the kernel and the
    configuration config(n, warp, long_rows, itemsize=...) picks. signature(pointer type) gives
    the kernel's arguments; flags are its optional-parameter constexprs (HAS_W, ...) all on, and
    at the bench lengths the launch with them all off is declared too, labelled with `bare`.
    A looped kernel that drops its masks on rows of whole chunks (an EVEN parameter) is declared
    at each length that is one, and at that length less 16 columns (a tail), so both of its codes
    are compiled; one with a PREFETCH parameter takes it where the arch has the L2 prefetch, one
    with WORDS takes it in bf16."""
    out = []
    for dtype in dtypes:
        ptr = "*" + fmt(dtype).triton_name
        itemsize = fmt(dtype).torch_dtype.itemsize
        for n in _with_tails(lengths, lambda n: config(n, arch.warp_size, long_rows, itemsize=itemsize)):
            cfg = config(n, arch.warp_size, long_rows, itemsize=itemsize)
            tiles = {"BLOCK": cfg["BLOCK"]}
            # both kernels take n_rows: the short-row grid to mask, the persistent grid to stride
            sizes = {"n_cols": n, "x_stride": n, "y_stride": n}
            if cfg["kernel"] is rows_kernel:
                tiles["ROWS"] = cfg["ROWS"]
            else:   # the persistent kernel as the bench launches it, its rows too
                sizes["n_rows"] = LONG_BENCH[0]
                if "EVEN" in cfg["kernel"].arg_names:
                    tiles["EVEN"] = n % cfg["BLOCK"] == 0
                if "PREFETCH" in cfg["kernel"].arg_names:   # as for the bench's aligned rows
                    tiles["PREFETCH"] = l2_prefetch_ok(arch)
                if "WORDS" in cfg["kernel"].arg_names:      # bf16 read as words, as on the bench's rows
                    tiles["WORDS"] = dtype == "bf16"
                if "STAGGER" in cfg["kernel"].arg_names and stagger_ok(arch):   # as its launcher sets it
                    family = sys.modules[cfg["kernel"].fn.__module__]
                    tiles.update(STAGGER=True, PHASES=family.STAGGER_PHASES, STEP=family.STAGGER_STEP)
            flavours = [(flags or {}, "")]
            if flags and n in BENCH_LENGTHS:
                flavours.append(({name: False for name in flags}, bare))
            for consts, suffix in flavours:
                sig = signature(ptr)
                out.append(Variant(cfg["kernel"], sig, {**consts, **tiles}, cfg["num_warps"],
                                   label=f"{dtype} n={n}{suffix}",
                                   divisible_by_16=launch_divisibility(sig, **sizes)))
    return out


def _with_tails(lengths, config) -> list[int]:
    """lengths, each of whole chunks of a kernel with EVEN followed by itself less 16 columns"""
    out = []
    for n in lengths:
        out.append(n)
        cfg = config(n)
        if "EVEN" in cfg["kernel"].arg_names and n % cfg["BLOCK"] == 0 and n > 16:
            out.append(n - 16)
    return out


def row_inputs(long_rows: bool, regimes, *, long_rows_most: int = 64, **fields):
    """The spec strategy of a row case: (rows, cols) that stress the tile edges (64-column tiles
    for the long-row kernel, 1024 else; at most long_rows_most rows there), a regime and a
    layout; `fields` are the family's own strategies (weight, eps, ...)."""
    def inputs(dtype: str, max_elements: int):
        sizes = S.rows_and_cols(64 if long_rows else 1024, max_elements,
                                max_rows=long_rows_most if long_rows else 64)
        return sizes.flatmap(lambda rc: st.fixed_dictionaries({
            "dtype": st.just(dtype), "rows": st.just(rc[0]), "cols": st.just(rc[1]),
            "regime": S.regimes(regimes), "layout": S.layouts(), **fields, "seed": S.seeds()}))
    return inputs
