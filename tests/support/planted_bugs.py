"""Kernels with one planted bug each, and their correct versions, as portcheck Cases for
tests/harness/test_guards.py, test_determinism.py and test_undefined_lanes.py.

Imported by a `portcheck run` worker through PORTCHECK_CASE_MODULES=tests.support.planted_bugs
(with the repository root on PYTHONPATH), or in-process by the tests; never part of the registry
otherwise. Each bug is one that output comparison alone misses or catches only by luck:
  planted_row_before   a cache write that does not skip slot -1: one row before the output
  planted_past_end     a copy masked with <= n: one element past the end of the output
  planted_k_tail       a matmul without the K-tail mask: reads past the end of its inputs
  planted_race         a read-modify-write of a total by many programs: order-dependent
  planted_atomic       fp32 atomic_add totals, not declared nondeterministic
  planted_scratch      atomic_add totals into a scratch buffer from torch.empty, assumed zero
  planted_atomic_tail  column sums by atomic_add without its mask: the lanes past the end add 0.0
  planted_undefined_lanes  row sums of a masked load without other=: the lanes past the end are
                       undefined (0 on today's GPUs and in Triton's own interpreter)
The `*_ok` cases are the same kernels done right (planted_atomic_ok declares itself
nondeterministic; both planted_scratch cases do, and the right one zeroes its scratch).
"""
import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

from portcheck import Case, Cost, register
from portcheck.tolerance import Tolerance, exact, rounding

BLOCK = 16


# ---- (a) one row before the output --------------------------------------------------------------

@triton.jit
def cache_write_kernel(x_ptr, slot_ptr, cache_ptr, cols, SKIP_EMPTY: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    slot = tl.load(slot_ptr + row)
    offs = tl.arange(0, BLOCK)
    ok = offs < cols
    if SKIP_EMPTY:
        ok = ok & (offs * 0 + slot >= 0)
    tl.store(cache_ptr + slot * cols + offs, tl.load(x_ptr + row * cols + offs, mask=ok), mask=ok)


def _cache_inputs(dtype, max_elements):
    return st.fixed_dictionaries({"dtype": st.just(dtype), "tokens": st.integers(1, 6),
                                  "cols": st.integers(1, BLOCK), "empty": st.integers(0, 2),
                                  "seed": st.integers(0, 99)})


def _cache_make(spec, device):
    g = torch.Generator().manual_seed(spec["seed"])
    n = spec["tokens"]
    slots = torch.randperm(n + 2, generator=g)[:n].to(torch.int32)
    slots[:min(spec["empty"], n)] = -1          # tokens with no slot: skip them
    return {"x": torch.randn(n, spec["cols"], generator=g).to(device), "slots": slots.to(device)}


def _cache_outputs(args):
    return {"cache": ((args["x"].shape[0] + 2, args["x"].shape[1]), torch.float32)}


def _cache_launch(skip_empty):
    def launch(args, outs):
        x = args["x"]
        cache_write_kernel[(x.shape[0],)](x, args["slots"], outs["cache"], x.shape[1],
                                          SKIP_EMPTY=skip_empty, BLOCK=BLOCK)
    return launch


def _cache_oracle(args):
    x, slots = args["x"], args["slots"].long()
    cache = torch.full((x.shape[0] + 2, x.shape[1]), float("nan"), dtype=torch.float32, device=x.device)
    live = slots >= 0
    cache[slots[live]] = x[live].to(torch.float32)
    return {"cache": cache}


# ---- (b) one element past the end of the output ------------------------------------------------

@triton.jit
def copy_kernel(x_ptr, y_ptr, n, INCLUSIVE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs <= n if INCLUSIVE else offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=ok), mask=ok)


def _copy_inputs(dtype, max_elements):
    return st.fixed_dictionaries({"dtype": st.just(dtype), "n": st.integers(1, 40), "seed": st.integers(0, 99)})


def _copy_make(spec, device):
    return {"x": torch.randn(spec["n"], generator=torch.Generator().manual_seed(spec["seed"])).to(device)}


def _copy_launch(inclusive):
    def launch(args, outs):
        n = args["x"].numel()
        copy_kernel[(triton.cdiv(n + 1, BLOCK),)](args["x"], outs["y"], n, INCLUSIVE=inclusive, BLOCK=BLOCK)
    return launch


# ---- (c) a matmul that reads past the end of K -----------------------------------------------

@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, MASK_K: tl.constexpr, BLOCK: tl.constexpr):
    rm = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    rn = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k0 in range(0, K, BLOCK):
        rk = k0 + tl.arange(0, BLOCK)
        k_ok = rk < K if MASK_K else rk >= 0
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & k_ok[None, :], other=0.0)
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=k_ok[:, None] & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")   # fp32, not tf32
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def _matmul_inputs(dtype, max_elements):
    return st.fixed_dictionaries({"dtype": st.just(dtype), "m": st.integers(1, 20), "n": st.integers(1, 20),
                                  "k": st.integers(1, 40), "seed": st.integers(0, 99)})


def _matmul_make(spec, device):
    g = torch.Generator().manual_seed(spec["seed"])
    return {"a": torch.randn(spec["m"], spec["k"], generator=g).to(device),
            "b": torch.randn(spec["k"], spec["n"], generator=g).to(device)}


def _matmul_launch(mask_k):
    def launch(args, outs):
        a, b = args["a"], args["b"]
        (m, k), n = a.shape, b.shape[1]
        matmul_kernel[(triton.cdiv(m, BLOCK), triton.cdiv(n, BLOCK))](a, b, outs["c"], m, n, k,
                                                                      MASK_K=mask_k, BLOCK=BLOCK)
    return launch


def _matmul_tolerance(args, refs, dtype):
    # each output is a K-term fp32 sum: bound the rounding by K u sum |a||b|
    k = args["a"].shape[1]
    scale = args["a"].abs() @ args["b"].abs()
    u = 2.0 ** -24
    return {"c": Tolerance(u, (k + 1) * u * scale, "rtol = u(fp32); atol = (K + 1) u(fp32) |a||b|")}


# ---- (d) and (e): totals from every program ---------------------------------------------------
# Program p adds its block's sum into total p mod `totals`: one total on the interpreter's budget,
# a few on a GPU's, where thousands of programs add into each.

@triton.jit
def total_kernel(x_ptr, total_ptr, n, TOTALS: tl.constexpr, ATOMIC: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    part = tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0)
    total = total_ptr + tl.program_id(0) % TOTALS
    if ATOMIC:
        tl.atomic_add(total, part)
    else:   # the race: read, add, write back, with nothing ordering the programs
        tl.store(total, tl.load(total) + part)


@triton.jit
def partials_kernel(x_ptr, part_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(part_ptr + tl.program_id(0), tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))


@triton.jit
def sum_partials_kernel(part_ptr, total_ptr, parts, TOTALS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) + TOTALS * tl.arange(0, BLOCK)   # the parts of this program's total
    total = tl.sum(tl.load(part_ptr + offs, mask=offs < parts, other=0.0), axis=0)
    tl.store(total_ptr + tl.program_id(0), total)


# On a GPU budget: programs per launch, and the totals they add into. On an H200 the fp32 atomic
# adds of 1k to 16k programs into one total came out bitwise different between two launches in
# 95 to 98% of launch pairs; with 4 totals, two launches that agree on all of them are about a
# one-in-a-million event (none in 400 pairs tried).
GPU_PROGRAMS, GPU_TOTALS = (2048, 4096), 4


def _total_inputs(dtype, max_elements):
    # values over many binades, so a different order of the programs rounds differently. The
    # interpreter runs 8 to 24 programs into one total (it shuffles their order itself); a GPU
    # budget gets thousands, whose order the hardware varies from launch to launch
    if max_elements < GPU_PROGRAMS[1] * BLOCK:
        return st.fixed_dictionaries({"dtype": st.just(dtype), "n": st.integers(8 * BLOCK, 24 * BLOCK),
                                      "seed": st.integers(0, 99)})
    low, high = GPU_PROGRAMS
    return st.fixed_dictionaries({"dtype": st.just(dtype), "n": st.integers(low * BLOCK, high * BLOCK),
                                  "totals": st.just(GPU_TOTALS), "seed": st.integers(0, 99)})


def _total_make(spec, device):
    g = torch.Generator().manual_seed(spec["seed"])
    x = torch.randn(spec["n"], generator=g, dtype=torch.float64)
    x *= torch.exp2(torch.randint(0, 24, (spec["n"],), generator=g).to(torch.float64))
    return {"x": x.to(torch.float32).to(device), "totals": spec.get("totals", 1)}


def _total_launch(kind):
    def launch(args, outs):
        x, total, totals = args["x"], outs["total"], args["totals"]
        grid = (triton.cdiv(x.numel(), BLOCK),)
        if kind == "two_pass":
            parts = torch.empty(grid[0], dtype=torch.float32, device=x.device)
            partials_kernel[grid](x, parts, x.numel(), BLOCK=BLOCK)
            sum_partials_kernel[(totals,)](parts, total, grid[0], TOTALS=totals,
                                           BLOCK=triton.next_power_of_2(triton.cdiv(grid[0], totals)))
            return
        if kind.startswith("scratch"):   # the totals gathered in a buffer of the launcher's own
            scratch = (torch.zeros if kind == "scratch_zeroed" else torch.empty)(totals, dtype=torch.float32,
                                                                                 device=x.device)
            total_kernel[grid](x, scratch, x.numel(), TOTALS=totals, ATOMIC=True, BLOCK=BLOCK)
            total.copy_(scratch)
            return
        total.zero_()
        total_kernel[grid](x, total, x.numel(), TOTALS=totals, ATOMIC=kind == "atomic", BLOCK=BLOCK)
    return launch


def _per_total(values, totals):
    """Each total's sum of `values`, grouped as the kernels group them (program p sums one BLOCK
    into total p mod totals)."""
    parts = torch.nn.functional.pad(values, (0, -values.numel() % BLOCK)).view(-1, BLOCK).sum(1)
    return torch.stack([parts[t::totals].sum() for t in range(totals)])


def _total_outputs(args):
    return {"total": ((args["totals"],), torch.float32)}


def _total_oracle(args):
    return {"total": _per_total(args["x"], args["totals"])}


def _total_tolerance(args, refs, dtype):
    x, totals = args["x"], args["totals"]
    terms = _per_total(torch.ones_like(x), totals)
    u = 2.0 ** -24
    return {"total": Tolerance(u, (terms + 1) * u * _per_total(x.abs(), totals),
                               "rtol = u(fp32); atol = (n + 1) u(fp32) sum |x| over each total's n terms")}


# ---- (e) column sums whose atomic_add has no mask ------------------------------------------------

@triton.jit
def colsum_kernel(x_ptr, y_ptr, rows, cols, MASKED: tl.constexpr, BLOCK: tl.constexpr):
    c = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + tl.program_id(0) * cols + c, mask=c < cols, other=0.0)
    if MASKED:
        tl.atomic_add(y_ptr + c, x, mask=c < cols)
    else:
        tl.atomic_add(y_ptr + c, x)   # the lanes past cols add their 0.0 past y's end


def _colsum_inputs(dtype, max_elements):
    return st.fixed_dictionaries({"dtype": st.just(dtype), "rows": st.integers(1, 4), "cols": st.integers(1, 40),
                                  "seed": st.integers(0, 99)})


def _colsum_make(spec, device):
    g = torch.Generator().manual_seed(spec["seed"])
    return {"x": torch.randn(spec["rows"], spec["cols"], generator=g).to(device)}


def _colsum_launch(masked):
    def launch(args, outs):
        rows, cols = args["x"].shape
        outs["y"].zero_()
        colsum_kernel[(rows,)](args["x"], outs["y"], rows, cols, MASKED=masked,
                               BLOCK=triton.next_power_of_2(cols))
    return launch


def _colsum_tolerance(args, refs, dtype):
    x = args["x"]
    u = 2.0 ** -24
    return {"y": Tolerance(u, x.shape[0] * u * x.abs().sum(0) + x.shape[0] * 2.0 ** -126,
                           "rtol = u(fp32); atol = n u(fp32) sum |x| + n tiny(fp32) over each column's n rows")}


# ---- (f) row sums of a masked load without other= ------------------------------------------------

@triton.jit
def rowsum_kernel(x_ptr, y_ptr, cols, DEFINED: tl.constexpr, BLOCK: tl.constexpr):
    c = tl.arange(0, BLOCK)
    ptrs = x_ptr + tl.program_id(0) * cols + c
    if DEFINED:
        x = tl.load(ptrs, mask=c < cols, other=0.0)
    else:
        x = tl.load(ptrs, mask=c < cols)   # the lanes past cols: undefined in the language
    tl.store(y_ptr + tl.program_id(0), tl.sum(x, axis=0))


def _rowsum_launch(defined):
    def launch(args, outs):
        rows, cols = args["x"].shape
        rowsum_kernel[(rows,)](args["x"], outs["y"], cols, DEFINED=defined, BLOCK=triton.next_power_of_2(cols))
    return launch


def _rowsum_tolerance(args, refs, dtype):
    x = args["x"]
    u = 2.0 ** -24
    return {"y": Tolerance(u, x.shape[1] * u * x.abs().sum(1),
                           "rtol = u(fp32); atol = n u(fp32) sum |x| over each row's n columns")}


# ---- registration -----------------------------------------------------------------------------

def _case(name, inputs, make, outputs, launch, oracle, tolerance, **extra):
    return register(Case(name=name, family="planted", dtypes=("fp32",), inputs=inputs, make=make,
                         outputs=outputs, launch=launch, oracle=oracle, tolerance=tolerance,
                         cost=lambda a: Cost(0), **extra))


for suffix, right in (("", False), ("_ok", True)):
    _case(f"planted_row_before{suffix}", _cache_inputs, _cache_make, _cache_outputs, _cache_launch(right),
          _cache_oracle, lambda a, r, d: {"cache": exact("a copy")})
    _case(f"planted_past_end{suffix}", _copy_inputs, _copy_make,
          lambda a: {"y": (tuple(a["x"].shape), torch.float32)}, _copy_launch(not right),
          lambda a: {"y": a["x"]}, lambda a, r, d: {"y": rounding(d)})
    _case(f"planted_k_tail{suffix}", _matmul_inputs, _matmul_make,
          lambda a: {"c": ((a["a"].shape[0], a["b"].shape[1]), torch.float32)}, _matmul_launch(right),
          lambda a: {"c": a["a"] @ a["b"]}, _matmul_tolerance)
    _case(f"planted_race{suffix}", _total_inputs, _total_make, _total_outputs,
          _total_launch("two_pass" if right else "read_modify_write"), _total_oracle, _total_tolerance)
    _case(f"planted_atomic{suffix}", _total_inputs, _total_make, _total_outputs,
          _total_launch("atomic"), _total_oracle, _total_tolerance, nondeterministic=right)
    _case(f"planted_scratch{suffix}", _total_inputs, _total_make, _total_outputs,
          _total_launch("scratch_zeroed" if right else "scratch"), _total_oracle, _total_tolerance,
          nondeterministic=True)
    _case(f"planted_atomic_tail{suffix}", _colsum_inputs, _colsum_make,
          lambda a: {"y": ((a["x"].shape[1],), torch.float32)}, _colsum_launch(right),
          lambda a: {"y": a["x"].sum(0)}, _colsum_tolerance, nondeterministic=True)
    _case(f"planted_undefined_lanes{suffix}", _colsum_inputs, _colsum_make,
          lambda a: {"y": ((a["x"].shape[0],), torch.float32)}, _rowsum_launch(right),
          lambda a: {"y": a["x"].sum(1)}, _rowsum_tolerance)
