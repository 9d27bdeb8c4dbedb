"""What the row families (softmax, layernorm, rmsnorm) share: each has a short-row kernel that packs
several rows into a program, a split-row kernel whose programs share a long row held in registers
(`share_partials`, `split_launch`), and a persistent kernel that loops over rows too long for
that; the same input and bench shapes, and compile variants declared the same way from the
family's own config()."""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

from .. import strategies as S
from ..cases import Variant, launch_divisibility
from ..dtypes import fmt
from ..facts.device import compute_units, interpreted
from ._launch import arrival_counters, check_programs

SHORT_BENCH = (32768, 4096)          # (rows, cols) of the short-row benches
LONG_BENCH = (4096, 131072)          # and of the long-row ones; their variants declare both
BENCH_LENGTHS = (SHORT_BENCH[1], LONG_BENCH[1])


# ---- split rows: a long row read once -----------------------------------------------------------
# A row too long for one program's registers is split over SPLIT programs, each holding BLOCK
# columns, that run at the same time (a cooperative launch: the driver refuses a grid that cannot
# be resident at once instead of letting it hang). They meet once per row to combine their partial
# statistics, then each normalises its own columns from registers: x is read from HBM once, the
# fewest a looped kernel (two reads) cannot reach. Grid: groups x SPLIT programs; group g takes
# rows g, g + groups, ...
SPLIT_PER_THREAD = 16      # columns per thread of a split-row program (fp32 registers for x)
SPLIT_BLOCK = 16384        # columns per split-row program: 131072 bf16 columns -> 8 programs a row
SPLIT_MOST_WARPS = 16


@triton.jit
def share_partials(ws_ptr, cnt_ptr, row, part, a, b, SPLIT: tl.constexpr, PARTS: tl.constexpr):
    """Program `part` of a row's SPLIT publishes its partials (a, b) and waits for the others';
    returns every program's (a, b) as [PARTS] tensors in part order (PARTS = SPLIT rounded up to
    a power of two; the lanes past SPLIT are `ok` False) and the mask `ok`. The row's counter
    counts the arrivals, then the departures; the last to leave sets it back to zero for the
    next launch."""
    slot = ws_ptr + row * (2 * SPLIT)
    tl.store(slot + part, a)
    tl.store(slot + SPLIT + part, b)
    tl.debug_barrier()   # every thread's stores precede the release below
    arrived = tl.atomic_add(cnt_ptr + row, 1, sem="release") + 1
    while arrived < SPLIT:
        arrived = tl.atomic_add(cnt_ptr + row, 0, sem="acquire")
    parts = tl.arange(0, PARTS)
    ok = parts < SPLIT
    # .cg: from L2, where the other programs' stores are, not from a stale L1 line
    pa = tl.load(slot + parts, mask=ok, other=0.0, cache_modifier=".cg")
    pb = tl.load(slot + SPLIT + parts, mask=ok, other=0.0, cache_modifier=".cg")
    if tl.atomic_add(cnt_ptr + row, 1, sem="relaxed") == 2 * SPLIT - 1:
        tl.atomic_xchg(cnt_ptr + row, 0, sem="relaxed")
    return pa, pb, ok


def split_block(n_cols: int, warp: int, chunk: int | None = None) -> dict:
    """BLOCK, SPLIT, PARTS and num_warps of a split-row launch (chunk: BLOCK, for checks)."""
    block = chunk or min(triton.next_power_of_2(n_cols), SPLIT_BLOCK)
    split = triton.cdiv(n_cols, block)
    return {"BLOCK": block, "SPLIT": split, "PARTS": triton.next_power_of_2(split),
            "num_warps": _warps(block, warp)}


def _warps(block: int, warp: int) -> int:
    most = min(SPLIT_MOST_WARPS, 1024 // warp)
    return min(most, max(1, triton.next_power_of_2(block // (warp * SPLIT_PER_THREAD))))


def split_fits(n_cols: int, device, chunk: int | None = None) -> bool:
    """Whether a row of n_cols can be split over programs resident at once on `device`: one
    program per SM / CU at most (one always fits: it compiled), and on the interpreter, which
    runs programs one after another, a row must be one program's."""
    if interpreted() or device.type != "cuda":
        return True     # split_launch holds the whole row in one program there
    return triton.cdiv(n_cols, chunk or SPLIT_BLOCK) <= compute_units(device)


def split_launch(n_rows: int, n_cols: int, device, warp: int, chunk: int | None = None,
                 programs: int | None = None) -> tuple[tuple, dict, dict]:
    """(grid, constexprs and num_warps, the workspace and counters) of a split-row launch.
    `programs` bounds the grid (a check passes a few, so that each group loops over rows)."""
    check_programs(programs)
    if interpreted() or device.type != "cuda":
        cfg = split_block(n_cols, warp, triton.next_power_of_2(n_cols))
        units = programs or 2
    else:
        cfg = split_block(n_cols, warp, chunk)
        units = min(compute_units(device), programs or compute_units(device))
    groups = max(1, min(n_rows, units // cfg["SPLIT"]))
    buffers = {"ws_ptr": torch.empty(n_rows * 2 * cfg["SPLIT"], dtype=torch.float32, device=device),
               "cnt_ptr": arrival_counters(device, n_rows)}
    return (groups * cfg["SPLIT"],), cfg, buffers


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
    configuration config(n, warp, long_rows) picks. signature(pointer type) gives the kernel's
    arguments; flags are its optional-parameter constexprs (HAS_W, ...) all on, and at the bench
    lengths the launch with them all off is declared too, labelled with `bare`."""
    out = []
    for dtype in dtypes:
        ptr = "*" + fmt(dtype).triton_name
        for n in lengths:
            # long rows: the split-row kernel, and the looped one for rows too long to split
            for split in (True, False) if long_rows else (False,):
                cfg = config(n, arch.warp_size, long_rows, split=split)
                tiles = {"BLOCK": cfg["BLOCK"]}
                # every kernel takes n_rows: the short-row grid to mask, the persistent grids to stride
                sizes = {"n_cols": n, "x_stride": n, "y_stride": n}
                extra = {}
                if cfg["kernel"] is rows_kernel:
                    tiles["ROWS"] = cfg["ROWS"]
                else:   # the persistent kernels as the bench launches them, its rows too
                    sizes["n_rows"] = LONG_BENCH[0]
                if split:
                    tiles.update(SPLIT=cfg["SPLIT"], PARTS=cfg["PARTS"])
                    extra = {"ws_ptr": "*fp32", "cnt_ptr": "*i32"}
                flavours = [(flags or {}, "")]
                if flags and n in BENCH_LENGTHS:
                    flavours.append(({name: False for name in flags}, bare))
                for consts, suffix in flavours:
                    sig = {**signature(ptr), **extra}
                    kind = (" split" if split else " looped") if long_rows else ""
                    out.append(Variant(cfg["kernel"], sig, {**consts, **tiles}, cfg["num_warps"],
                                       label=f"{dtype} n={n}{kind}{suffix}",
                                       divisible_by_16=launch_divisibility(sig, **sizes)))
    return out


CHECK_PROGRAMS = 2   # a grid bound that a check draws: each split group, or looped program, takes several rows


def row_inputs(long_rows: bool, regimes, *, long_rows_most: int = 64, **fields):
    """The spec strategy of a row case: (rows, cols) that stress the tile edges (64-column tiles
    for the long-row kernel, 1024 else; at most long_rows_most rows there), a regime and a
    layout; `fields` are the family's own strategies (weight, eps, ...)."""
    if long_rows:   # either long-row kernel, and a grid of a few programs that loop over rows
        fields = {**fields, "split": st.booleans(), "programs": st.sampled_from([CHECK_PROGRAMS, None])}

    def inputs(dtype: str, max_elements: int):
        sizes = S.rows_and_cols(64 if long_rows else 1024, max_elements,
                                max_rows=long_rows_most if long_rows else 64)
        return sizes.flatmap(lambda rc: st.fixed_dictionaries({
            "dtype": st.just(dtype), "rows": st.just(rc[0]), "cols": st.just(rc[1]),
            "regime": S.regimes(regimes), "layout": S.layouts(), **fields, "seed": S.seeds()}))
    return inputs


def long_row_args(spec: dict, long_rows: bool, max_fused: int) -> dict:
    """The launch arguments a row case's spec sets beyond its tensors: the check's chunk, the
    kernel (split or looped) and the grid bound; a bench spec has neither of the last two (the
    launcher's defaults)."""
    return {"long_rows": long_rows, "chunk": check_chunk(spec["cols"], long_rows, max_fused),
            "split": spec.get("split", True), "programs": spec.get("programs")}
