"""User cases with a bug that shows only under one arch's launch configuration, for
tests/harness/test_as_arch.py: each passes a plain run on the interpreter and fails under
`--as-arch` for that arch. Their launchers pick configurations as a user's would, through
portcheck.cases.arch_config and facts.device.warp_size, which `--as-arch` forces.

  arch_tail_mask    a row sum whose first block is unmasked: right while BLOCK <= n; gfx942's
                    BLOCK of 256 is larger than the rows drawn
  arch_split_drop   a split row sum whose combine step stops one split early: right while there
                    is one split; gfx1100 splits rows 4 ways
  arch_warp_lanes   a scale kernel that assumes 32 lanes a warp when it sizes its block: right
                    for 32-wide warps; gfx942's wave64 launcher gives each program 64 a warp

Registered by importing this module (the tests), or by `--cases tests.support.arch_bugs` in a
replay command, with the repository root importable.
"""
import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

from portcheck import Case, register
from portcheck.cases import arch_config
from portcheck.facts.device import warp_size
from portcheck.tolerance import exact, row_reduction


def _rows_inputs(min_cols: int, max_cols: int):
    def inputs(dtype, max_elements):
        return st.fixed_dictionaries({"dtype": st.just(dtype), "rows": st.integers(1, 4),
                                      "cols": st.integers(min_cols, max_cols), "seed": st.integers(0, 999)})
    return inputs


def _make(spec, device):
    g = torch.Generator().manual_seed(spec["seed"])
    return {"x": torch.randn(spec["rows"], spec["cols"], generator=g).to(device)}


def _row_sums(args):
    return {"y": ((args["x"].shape[0],), torch.float32)}


def _row_sum_oracle(args64):
    return {"y": args64["x"].sum(dim=-1)}


def _row_sum_tolerance(args64, refs, dtype):
    return {"y": row_reduction(args64["x"], "fp32")}


# ---- a tail mask that assumes BLOCK <= n --------------------------------------------------------

@triton.jit
def first_block_unmasked_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.load(x_ptr + row * n + offs)       # the bug: no mask, as if BLOCK <= n always held
    for start in range(BLOCK, n, BLOCK):
        acc += tl.load(x_ptr + row * n + start + offs, mask=start + offs < n, other=0.0)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))


def _tail_mask_launch(args, outs):
    x = args["x"]
    block = arch_config({"gfx942": 256}, default=32)
    first_block_unmasked_kernel[(x.shape[0],)](x, outs["y"], x.shape[1], BLOCK=block)


register(Case(
    name="arch_tail_mask", family="arch_bugs", dtypes=("fp32",), inputs=_rows_inputs(32, 200),
    make=_make, outputs=_row_sums, launch=_tail_mask_launch, oracle=_row_sum_oracle,
    tolerance=_row_sum_tolerance, description="row sum; the first block unmasked (BLOCK <= n assumed)"))


# ---- a split reduction that drops its last split ------------------------------------------------

@triton.jit
def partial_sum_kernel(x_ptr, part_ptr, n, chunk, SPLITS: tl.constexpr, BLOCK: tl.constexpr):
    row, split = tl.program_id(0), tl.program_id(1)
    offs = tl.arange(0, BLOCK)
    end = (split + 1) * chunk
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(split * chunk, end, BLOCK):
        idx = start + offs
        acc += tl.load(x_ptr + row * n + idx, mask=(idx < n) & (idx < end), other=0.0)
    tl.store(part_ptr + row * SPLITS + split, tl.sum(acc, axis=0))


@triton.jit
def combine_splits_kernel(part_ptr, y_ptr, SPLITS: tl.constexpr):
    row = tl.program_id(0)
    total = tl.load(part_ptr + row * SPLITS)
    for split in tl.static_range(1, SPLITS - 1):   # the bug: the last split is never added
        total += tl.load(part_ptr + row * SPLITS + split)
    tl.store(y_ptr + row, total)


def _split_launch(args, outs):
    x = args["x"]
    rows, n = x.shape
    splits = arch_config({"gfx1100": 4}, default=1)
    partials = torch.empty(rows, splits, dtype=torch.float32, device=x.device)
    partial_sum_kernel[(rows, splits)](x, partials, n, triton.cdiv(n, splits), SPLITS=splits, BLOCK=32)
    combine_splits_kernel[(rows,)](partials, outs["y"], SPLITS=splits)


register(Case(
    name="arch_split_drop", family="arch_bugs", dtypes=("fp32",), inputs=_rows_inputs(8, 200),
    make=_make, outputs=_row_sums, launch=_split_launch, oracle=_row_sum_oracle,
    tolerance=_row_sum_tolerance, description="split row sum; the combine step drops the last split"))


# ---- a block sized as if every warp had 32 lanes ------------------------------------------------

@triton.jit
def scale_kernel(x_ptr, y_ptr, n, NUM_WARPS: tl.constexpr):
    block: tl.constexpr = NUM_WARPS * 32           # the bug: 32 lanes a warp, whatever the launcher said
    offs = tl.program_id(0) * block + tl.arange(0, block)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def _warp_launch(args, outs):
    x = args["x"]
    warps = 4
    per_program = warps * warp_size()              # one element a lane
    scale_kernel[(triton.cdiv(x.numel(), per_program),)](x, outs["y"], x.numel(), NUM_WARPS=warps,
                                                         num_warps=warps)


register(Case(
    name="arch_warp_lanes", family="arch_bugs", dtypes=("fp32",), inputs=_rows_inputs(1, 200),
    make=_make, outputs=lambda args: {"y": (tuple(args["x"].shape), torch.float32)}, launch=_warp_launch,
    oracle=lambda args64: {"y": (args64["x"] * 2).to(torch.float32)},
    tolerance=lambda args64, refs, dtype: {"y": exact("x * 2 is exact in fp32")},
    description="y = 2 x; programs sized for 32-lane warps"))
