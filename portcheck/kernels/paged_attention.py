"""Paged decode attention: one new query token per sequence attends its whole context, read from a
paged key/value cache through a block table (vLLM's layout), split over the context when the
batch alone cannot fill the device (flash-decoding).

Layout:
  query        [num_seqs, heads_q, head_dim]
  key_cache    [num_blocks, block_size, heads_kv, head_dim]   (value_cache alike; vLLM's flash
               layout; any strides with a unit stride along head_dim)
  block_tables [num_seqs, max_blocks] int32: token t of sequence s lives in cache block
               block_tables[s, t // block_size], slot t % block_size
  context_lens [num_seqs] int32, 1 <= context_lens[s] <= max_blocks * block_size
  out          [num_seqs, heads_q, head_dim]
Query head h reads key/value head h // (heads_q // heads_kv).

One program takes one sequence, one key/value head and one split of the context: the query heads
of the group (padded to 16 rows for tl.dot) against BLOCK_N tokens at a time, gathered through
the block table, with the online softmax of the dense kernel. With one split it writes the output;
with several it writes each split's (acc, running max, running sum) and a second kernel rescales
and sums them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

from .. import strategies as S
from ..cases import Case, Cost, Variant, register
from ..oracles.attention import default_scale, gather_context, paged_decode_attention as paged_ref
from ..tolerance import Tolerance, fmt
from ..facts.archs import Arch
from ..facts.device import compute_units, current_arch, interpreted
from . import _plans
from ._configs import amd_options, family_table, load
from ._launch import scratch
from .attention import HEAD_DIMS, LOG2E, check_heads, check_tensor, convex_combination_bound

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
MIN_GROUP_ROWS = 16       # tl.dot needs at least 16 rows: a query group is padded up to it
MAX_SPLITS = 128
MIN_SPLIT_TOKENS = 256    # shorter splits cost more in partial results than they gain
MAX_GRID_YZ = 65535


@dataclass(frozen=True)
class DecodeConfig:
    block_n: int          # context tokens per tile
    num_warps: int
    num_stages: int
    programs_per_unit: int    # split until the grid holds this many programs per SM / CU
    options: tuple = ()       # AMD compiler knobs, as (name, value) pairs


def arch_config(arch: Arch) -> DecodeConfig:
    """The decode configuration of an arch, from configs/paged_attention.toml (by config family)."""
    e = family_table("paged_attention", arch)
    return DecodeConfig(e["block_n"], e["warps"], e["stages"], e["programs_per_unit"],
                        tuple(amd_options(e).items()))


MIN_BLOCK_N = min(e["block_n"] for e in load("paged_attention").values())


def choose_splits(programs: int, max_context: int, block_n: int, units: int, per_unit: int) -> int:
    """Splits of the context so the grid has about per_unit programs per SM, each split at least
    MIN_SPLIT_TOKENS long."""
    want = triton.cdiv(units * per_unit, max(1, programs))
    most = max(1, max_context // MIN_SPLIT_TOKENS)
    return max(1, min(want, most, MAX_SPLITS, triton.cdiv(max_context, block_n)))


# ---- the kernels --------------------------------------------------------------------------------

@triton.jit
def paged_decode_kernel(q_ptr, k_cache_ptr, v_cache_ptr, block_tables_ptr, context_lens_ptr,
                        out_ptr, part_acc_ptr, part_max_ptr, part_sum_ptr, qk_scale,
                        stride_qs, stride_qh, stride_kb, stride_kt, stride_kh,
                        stride_vb, stride_vt, stride_vh, stride_bs, stride_os, stride_oh,
                        heads_q, group, tokens_per_split, num_splits,
                        BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr, GROUP_ROWS: tl.constexpr,
                        BLOCK_N: tl.constexpr, SPLIT: tl.constexpr):
    seq = tl.program_id(0)
    kv_h = tl.program_id(1)
    split = tl.program_id(2)
    context = tl.load(context_lens_ptr + seq)
    start = split * tokens_per_split
    end = tl.minimum(context, start + tokens_per_split)

    rows = tl.arange(0, GROUP_ROWS)
    heads = kv_h * group + rows
    head_ok = rows < group
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    q = tl.load(q_ptr + seq.to(tl.int64) * stride_qs + heads[:, None] * stride_qh + offs_d[None, :],
                mask=head_ok[:, None], other=0.0)
    table = block_tables_ptr + seq.to(tl.int64) * stride_bs
    k_head = k_cache_ptr + kv_h.to(tl.int64) * stride_kh
    v_head = v_cache_ptr + kv_h.to(tl.int64) * stride_vh

    m_i = tl.full([GROUP_ROWS], float("-inf"), tl.float32)
    l_i = tl.zeros([GROUP_ROWS], tl.float32)
    acc = tl.zeros([GROUP_ROWS, HEAD_DIM], tl.float32)
    # the first token of a non-empty split is visible to every row, so m_i is finite after the
    # first tile; an empty split (start >= context) leaves (acc, m, l) = (0, -inf, 0)
    for start_n in range(start, end, BLOCK_N):
        toks = start_n + offs_n
        live = toks < end
        block = tl.load(table + toks // BLOCK_SIZE, mask=live, other=0).to(tl.int64)
        slot = toks % BLOCK_SIZE
        k = tl.load(k_head + (block * stride_kb + slot * stride_kt)[None, :] + offs_d[:, None],
                    mask=live[None, :], other=0.0)
        qk = tl.dot(q, k)
        qk = tl.where(live[None, :], qk * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        # masked V rows load as 0: a NaN past the context must not meet p = 0 in the dot
        v = tl.load(v_head + (block * stride_vb + slot * stride_vt)[:, None] + offs_d[None, :],
                    mask=live[:, None], other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new

    if SPLIT:
        part = (seq * heads_q + heads).to(tl.int64) * num_splits + split
        tl.store(part_acc_ptr + part[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=head_ok[:, None])
        tl.store(part_max_ptr + part, m_i, mask=head_ok)
        tl.store(part_sum_ptr + part, l_i, mask=head_ok)
    else:
        out = acc / l_i[:, None]
        tl.store(out_ptr + seq.to(tl.int64) * stride_os + heads[:, None] * stride_oh + offs_d[None, :],
                 out.to(out_ptr.dtype.element_ty), mask=head_ok[:, None])


@triton.jit
def paged_decode_reduce_kernel(part_acc_ptr, part_max_ptr, part_sum_ptr, out_ptr,
                               stride_os, stride_oh, heads_q, num_splits,
                               HEAD_DIM: tl.constexpr, BLOCK_SPLITS: tl.constexpr):
    """out = sum_s 2^(m_s - M) acc_s / sum_s 2^(m_s - M) l_s over the splits of one head."""
    seq = tl.program_id(0)
    head = tl.program_id(1)
    splits = tl.arange(0, BLOCK_SPLITS)
    ok = splits < num_splits
    part = (seq * heads_q + head).to(tl.int64) * num_splits + splits
    m = tl.load(part_max_ptr + part, mask=ok, other=float("-inf"))
    l = tl.load(part_sum_ptr + part, mask=ok, other=0.0)
    big = tl.max(m, 0)       # finite: split 0 holds the first token
    w = tl.where(m > float("-inf"), tl.math.exp2(m - big), 0.0)
    offs_d = tl.arange(0, HEAD_DIM)
    acc = tl.load(part_acc_ptr + part[:, None] * HEAD_DIM + offs_d[None, :], mask=ok[:, None], other=0.0)
    out = tl.sum(acc * w[:, None], 0) / tl.sum(l * w, 0)
    tl.store(out_ptr + seq.to(tl.int64) * stride_os + head * stride_oh + offs_d,
             out.to(out_ptr.dtype.element_ty))


# ---- the launcher -------------------------------------------------------------------------------

def check_tables(block_tables: torch.Tensor, context_lens: torch.Tensor, num_seqs: int,
                 num_blocks: int, block_size: int) -> int:
    """Refuse context lengths outside [1, table capacity] and table entries a sequence uses that
    point outside the cache; return the longest context. Reads the tables back (one sync)."""
    capacity = block_tables.shape[1] * block_size
    lens = context_lens.to(torch.int64)
    used = torch.arange(block_tables.shape[1], device=lens.device)[None, :] < \
        ((lens + block_size - 1) // block_size)[:, None]
    bad_entry = used & ((block_tables < 0) | (block_tables >= num_blocks))
    summary = torch.stack([lens.max(), lens.min(), bad_entry.sum()]).tolist() if num_seqs else [0, 1, 0]
    longest, shortest, bad = summary
    if longest > capacity:
        s = int(torch.argmax(lens))
        raise ValueError(f"context_lens[{s}] = {longest} exceeds its block table: "
                         f"{block_tables.shape[1]} blocks x block_size {block_size} = {capacity} tokens")
    if shortest < 1:
        s = int(torch.argmin(lens))
        raise ValueError(f"context_lens[{s}] = {shortest}: every sequence needs at least one token")
    if bad:
        s, j = (int(x) for x in bad_entry.nonzero()[0])
        raise ValueError(f"block_tables[{s}, {j}] = {int(block_tables[s, j])} points outside the "
                         f"cache of {num_blocks} blocks")
    return int(longest)


def split_workspace(num_seqs: int, heads_q: int, num_splits: int, head_dim: int) -> tuple[int, int, int]:
    """(float32 elements, offset of the running maxima, offset of the running sums) of a split
    launch's one workspace: the partial outputs, then the maxima, then the sums, each part
    starting 16 bytes aligned (Triton specializes the pointers on it). One allocation, not
    three: a planned launch's host time is counted in microseconds."""
    parts = num_seqs * heads_q * num_splits
    at_max = triton.cdiv(parts * head_dim, 4) * 4
    at_sum = at_max + triton.cdiv(parts, 4) * 4
    return at_sum + parts, at_max, at_sum


@dataclass
class _DecodePlan:
    """The planned launches of one key (_plans.py): the main kernel, then with several splits
    the reduction, over this stream's scratch (split_workspace's size)."""
    main: _plans.Plan         # leading: the 6 tensors, with splits also the 3 workspace parts
    reduce: _plans.Plan | None   # leading: the 3 workspace parts and out
    workspace: tuple | None   # split_workspace(...)

    def launch(self, stream: int, query, key_cache, value_cache, block_tables, context_lens, out):
        if out is None:
            out = torch.empty_like(query)
        # every pointer as its address: Triton's launcher calls data_ptr() and
        # cuPointerGetAttribute for a tensor, neither for an int (the key has every tensor's
        # device, checked when the plan was made): 1 of 20 us on the H200's host
        # (reports/examples/host-overhead-h200/ninth-session/int-args-run*.json)
        tensors = (query.data_ptr(), key_cache.data_ptr(), value_cache.data_ptr(), block_tables.data_ptr(),
                   context_lens.data_ptr(), out.data_ptr())
        if self.reduce is None:
            self.main.launch(stream, *tensors)
            return out
        elements, at_max, at_sum = self.workspace
        # this stream's scratch: work queued after both kernels on it may reuse it, none before
        at = scratch(query.device, elements, torch.float32, stream).data_ptr()
        parts = at, at + 4 * at_max, at + 4 * at_sum
        self.main.launch(stream, *tensors, *parts)
        self.reduce.launch(stream, *parts, tensors[-1])
        return out


_PLANS = _plans.Plans()


def paged_decode_attention(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                           block_tables: torch.Tensor, context_lens: torch.Tensor, *,
                           scale: float | None = None, out: torch.Tensor | None = None,
                           max_context_len: int | None = None, num_splits: int | None = None,
                           validate: bool = True, config: DecodeConfig | None = None) -> torch.Tensor:
    """Decode attention through a paged cache; output in query's dtype.

    max_context_len: the longest context (as vLLM passes it); default: the block table's
    capacity. num_splits: force a split count (default: chosen to fill the device).
    validate: read block_tables and context_lens back and refuse out-of-range values (one
    device sync); a serving loop that builds its tables itself may turn it off.
    config: replaces the table's entry (for tuning sweeps).

    On a GPU, launches with validate=False are planned (_plans.py): the first launch of an
    arguments' metadata key (shapes, strides, dtypes, alignment; scale, max_context_len,
    num_splits, config) is checked and recorded, later ones skip the checks and Triton's
    dispatch. validate=True reads the tables' contents, which no key holds: checked every time.
    """
    plan_key = None if validate else _plans.key(
        (query, key_cache, value_cache, block_tables, context_lens, out),
        (scale, max_context_len, num_splits, config))
    plan = _PLANS.get(plan_key)
    if plan is not None:
        return plan.launch(_plans.stream(plan_key), query, key_cache, value_cache, block_tables, context_lens, out)
    check_tensor("query", query, 3, "[num_seqs, heads_q, head_dim]", tuple(DTYPES.values()))
    check_tensor("key_cache", key_cache, 4, "[num_blocks, block_size, heads_kv, head_dim]", (query.dtype,))
    check_tensor("value_cache", value_cache, 4, "[num_blocks, block_size, heads_kv, head_dim]", (query.dtype,))
    num_seqs, heads_q, head_dim = query.shape
    num_blocks, block_size, heads_kv, _ = key_cache.shape
    if tuple(value_cache.shape) != tuple(key_cache.shape):
        raise ValueError(f"key_cache and value_cache differ in shape: {tuple(key_cache.shape)} "
                         f"and {tuple(value_cache.shape)}")
    check_heads(heads_q, heads_kv, head_dim, key_cache.shape[-1], "the cache")
    if block_size < 1 or block_size & (block_size - 1):
        raise ValueError(f"block_size must be a power of two, got {block_size}")
    if not isinstance(block_tables, torch.Tensor) or block_tables.dim() != 2 or block_tables.dtype != torch.int32:
        raise ValueError("block_tables must be a 2-D int32 tensor [num_seqs, max_blocks], got "
                         f"{getattr(block_tables, 'dtype', type(block_tables).__name__)} "
                         f"{tuple(getattr(block_tables, 'shape', ()))}")
    if block_tables.shape[0] != num_seqs or (num_seqs and block_tables.stride(1) != 1):
        raise ValueError(f"block_tables must have {num_seqs} rows with unit column stride, got shape "
                         f"{tuple(block_tables.shape)} strides {block_tables.stride()}")
    if not isinstance(context_lens, torch.Tensor) or context_lens.dim() != 1 or \
            context_lens.dtype != torch.int32 or context_lens.shape[0] != num_seqs:
        raise ValueError(f"context_lens must be a 1-D int32 tensor of {num_seqs} lengths, got "
                         f"{getattr(context_lens, 'dtype', type(context_lens).__name__)} "
                         f"{tuple(getattr(context_lens, 'shape', ()))}")
    if num_seqs > 1 and context_lens.stride(0) != 1:   # the kernel reads context_lens[s] at s
        raise ValueError(f"context_lens must be contiguous, got stride {context_lens.stride(0)}")
    devices = {t.device for t in (query, key_cache, value_cache, block_tables, context_lens)}
    if out is None:
        out = torch.empty_like(query)
    else:
        check_tensor("out", out, 3, "[num_seqs, heads_q, head_dim]", (query.dtype,))
        if tuple(out.shape) != tuple(query.shape):
            raise ValueError(f"out has shape {tuple(out.shape)}, expected {tuple(query.shape)}")
        devices.add(out.device)
    if len(devices) > 1:
        raise ValueError(f"all tensors must be on one device, got {sorted(map(str, devices))}")
    if scale is not None and not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a finite positive number, got {scale!r}")
    if heads_kv > MAX_GRID_YZ:
        raise ValueError(f"heads_kv = {heads_kv} exceeds the grid limit {MAX_GRID_YZ}")
    capacity = block_tables.shape[1] * block_size
    if validate:
        longest = check_tables(block_tables, context_lens, num_seqs, num_blocks, block_size)
        if max_context_len is not None and max_context_len < longest:
            raise ValueError(f"max_context_len = {max_context_len} is shorter than the longest "
                             f"context, {longest}")
        max_context_len = longest if max_context_len is None else max_context_len
    if max_context_len is None:
        max_context_len = capacity
    if max_context_len > capacity:
        raise ValueError(f"max_context_len = {max_context_len} exceeds the block table's "
                         f"capacity of {capacity} tokens")
    if num_seqs == 0 or max_context_len == 0:
        return out

    cfg = config or arch_config(current_arch())
    if cfg.block_n < 16 or cfg.block_n & (cfg.block_n - 1):
        raise ValueError(f"BLOCK_N must be a power of two of at least 16 (tl.dot), got {cfg.block_n}")
    programs = num_seqs * heads_kv
    if num_splits is None:
        units = compute_units(query.device) if query.device.type == "cuda" else 4   # the interpreter: 4
        num_splits = choose_splits(programs, max_context_len, cfg.block_n, units, cfg.programs_per_unit)
    if not 1 <= num_splits <= MAX_SPLITS:
        raise ValueError(f"num_splits must be in [1, {MAX_SPLITS}], got {num_splits}")
    tokens_per_split = triton.cdiv(triton.cdiv(max_context_len, num_splits), cfg.block_n) * cfg.block_n
    num_splits = triton.cdiv(max_context_len, tokens_per_split)
    group = heads_q // heads_kv
    split = num_splits > 1
    workspace = split_workspace(num_seqs, heads_q, num_splits, head_dim) if split else None
    if split:   # [num_seqs, heads_q, num_splits, head_dim], then [num_seqs, heads_q, num_splits] twice, flat
        elements, at_max, at_sum = workspace
        ws = torch.empty(elements, dtype=torch.float32, device=query.device)
        part_acc, part_max, part_sum = ws[:at_max], ws[at_max:at_sum], ws[at_sum:]
    else:   # not touched when SPLIT is off
        part_acc = part_max = part_sum = torch.empty(1, dtype=torch.float32, device=query.device)
    qk_scale = (default_scale(head_dim) if scale is None else scale) * LOG2E
    grid = (num_seqs, heads_kv, num_splits)
    args = (query, key_cache, value_cache, block_tables, context_lens, out, part_acc, part_max,
            part_sum, qk_scale,
            query.stride(0), query.stride(1), key_cache.stride(0), key_cache.stride(1),
            key_cache.stride(2), value_cache.stride(0), value_cache.stride(1), value_cache.stride(2),
            block_tables.stride(0), out.stride(0), out.stride(1),
            heads_q, group, tokens_per_split, num_splits)
    consts = {"BLOCK_SIZE": block_size, "HEAD_DIM": head_dim,
              "GROUP_ROWS": max(MIN_GROUP_ROWS, triton.next_power_of_2(group)), "BLOCK_N": cfg.block_n,
              "SPLIT": split}
    kernel = paged_decode_kernel[grid](*args, **consts, num_warps=cfg.num_warps,
                                       num_stages=cfg.num_stages, **dict(cfg.options))
    # with one split the (untouched) 1-element workspace stays in the plan; else it is per launch
    main = _plans.record(paged_decode_kernel, kernel, grid, args, consts, 9 if split else 6) \
        if plan_key is not None else None
    reduce = None
    if split:
        r_grid = (num_seqs, heads_q)
        r_args = (part_acc, part_max, part_sum, out, out.stride(0), out.stride(1), heads_q, num_splits)
        r_consts = {"HEAD_DIM": head_dim, "BLOCK_SPLITS": triton.next_power_of_2(num_splits)}
        kernel = paged_decode_reduce_kernel[r_grid](
            *r_args, **r_consts, num_warps=4 if head_dim * triton.next_power_of_2(num_splits) >= 4096 else 2)
        reduce = _plans.record(paged_decode_reduce_kernel, kernel, r_grid, r_args, r_consts, 4) \
            if main is not None else None
    if main is not None and (reduce is not None or not split):
        _PLANS.put(plan_key, _DecodePlan(main, reduce, workspace))
    return out


# ---- the case -----------------------------------------------------------------------------------

def _inputs(dtype: str, max_elements: int):
    small = interpreted()

    def with_heads(h):
        head_dim, heads_kv, group, block_size = h
        tokens = max_elements // (heads_kv * head_dim)     # cache slots the budget allows
        most_seqs = max(1, min(3 if small else 8, tokens // (3 * block_size)))

        def with_seqs(num_seqs):
            cap = max(1, min(64 if small else 4096, tokens // num_seqs - 2 * block_size))
            return st.fixed_dictionaries({
                "dtype": st.just(dtype), "heads_kv": st.just(heads_kv), "group": st.just(group),
                "head_dim": st.just(head_dim), "block_size": st.just(block_size),
                "context_lens": st.lists(S.lengths(16 if small else 64, cap), min_size=num_seqs,
                                         max_size=num_seqs),
                "spare_columns": st.integers(0, 2),
                "hint": st.booleans(),           # pass max_context_len, or let the table bound it
                "splits": st.sampled_from((None, 1, 2, 3, 5)),
                "scale": st.sampled_from((None, 0.3)),
                "regime": st.sampled_from(("normal", "peaked")), "seed": S.seeds()})
        return st.integers(1, most_seqs).flatmap(with_seqs)

    heads = st.tuples(st.sampled_from(HEAD_DIMS), st.integers(1, 2 if small else 4),
                      st.sampled_from((1, 2, 4, 8)), st.sampled_from((8, 16) if small else (8, 16, 32)))
    return heads.flatmap(with_heads)


def _make(spec: dict, device: str) -> dict:
    """A shuffled cache: each sequence's blocks are scattered; every slot no context covers,
    and the block that unused table entries point at, hold NaN (a read past a context shows)."""
    gen = S.generator(spec["seed"])
    dtype, hkv, d, bs = spec["dtype"], spec["heads_kv"], spec["head_dim"], spec["block_size"]
    hq = hkv * spec["group"]
    lens = [int(n) for n in spec["context_lens"]]
    need = [triton.cdiv(n, bs) for n in lens]
    num_blocks = sum(need) + 1
    poison = num_blocks - 1
    max_blocks = max(need) + spec.get("spare_columns", 0)
    order = torch.randperm(num_blocks - 1, generator=gen)
    tables = torch.full((len(lens), max_blocks), poison, dtype=torch.int32)
    nan_slots = torch.ones(num_blocks, bs, dtype=torch.bool)
    at = 0
    for s, (n, b) in enumerate(zip(lens, need)):
        blocks = order[at:at + b]
        at += b
        tables[s, :b] = blocks.to(torch.int32)
        used = torch.arange(b * bs) < n
        nan_slots[blocks] = ~used.view(b, bs)
    q_scale = 16.0 if spec.get("regime") == "peaked" else 1.0
    query = S.values((len(lens), hq, d), dtype, "normal", gen, scale=q_scale)
    caches = []
    for _ in range(2):
        c = S.values((num_blocks, bs, hkv, d), dtype, "normal", gen)
        c[nan_slots] = float("nan")
        caches.append(c.to(device))
    return {"query": query.to(device), "key_cache": caches[0], "value_cache": caches[1],
            "block_tables": tables.to(device),
            "context_lens": torch.tensor(lens, dtype=torch.int32, device=device),
            "max_context_len": max(lens) if spec.get("hint", True) else None,
            "num_splits": spec.get("splits"), "scale": spec.get("scale"),
            "validate": spec.get("validate", True)}


def _outputs(args):
    return {"out": (tuple(args["query"].shape), args["query"].dtype)}


def _launch(args, outs):
    paged_decode_attention(args["query"], args["key_cache"], args["value_cache"],
                           args["block_tables"], args["context_lens"], scale=args["scale"],
                           out=outs["out"], max_context_len=args["max_context_len"],
                           num_splits=args["num_splits"], validate=args["validate"])


def _oracle(args):
    return {"out": paged_ref(args["query"], args["key_cache"], args["value_cache"],
                             args["block_tables"], args["context_lens"], scale=args["scale"])}


def _tolerance(args, refs, dtype):
    """The dense attention bound per sequence; the split reduction adds at most one rescale and
    one rounded add per tile, counted as T more rescales."""
    q, ref = args["query"], refs["out"]
    atol = torch.empty_like(ref)
    formula = ""
    for s, n in enumerate(args["context_lens"].tolist()):
        k = gather_context(args["key_cache"], args["block_tables"][s], n)[None]
        v = gather_context(args["value_cache"], args["block_tables"][s], n)[None]
        bound, formula = convex_combination_bound(
            q[s][None, :, None, :], k, v, ref[s][None, :, None, :], args["scale"], False,
            dtype, dtype, extra_rescales=triton.cdiv(n, MIN_BLOCK_N), min_block_n=MIN_BLOCK_N)
        atol[s] = bound[0, :, 0, :]
    f_out = fmt(dtype)
    return {"out": Tolerance(f_out.unit_roundoff, atol + f_out.subnormal_step,
                             formula.replace("T = ", "per sequence, T = ") + " (split-K: T doubled)")}


def _cost(args):
    kc, q = args["key_cache"], args["query"]
    tokens = int(args["context_lens"].sum())
    _, _, heads_kv, d = kc.shape
    kv_bytes = 2 * tokens * heads_kv * d * kc.element_size()
    return Cost(bytes=kv_bytes + 2 * q.numel() * q.element_size() + args["block_tables"].numel() * 4,
                flops=4 * tokens * q.shape[1] * d)


def _baselines(args):
    """torch eager: gather every sequence's context through its table, then attention with a
    length mask, by explicit softmax ('torch') and by scaled_dot_product_attention ('sdpa')."""
    import torch.nn.functional as F
    q, kc, vc = args["query"], args["key_cache"], args["value_cache"]
    tables, lens, scale = args["block_tables"].long(), args["context_lens"], args["scale"]
    num_seqs, heads_q, d = q.shape
    bs, heads_kv = kc.shape[1], kc.shape[2]
    length = tables.shape[1] * bs
    sc = default_scale(d) if scale is None else scale

    def gathered(cache):        # [num_seqs, heads_kv, length, d]
        return cache[tables].reshape(num_seqs, length, heads_kv, d).transpose(1, 2)

    def mask():
        return torch.arange(length, device=q.device)[None, :] < lens[:, None].long()

    def eager():
        k = gathered(kc).repeat_interleave(heads_q // heads_kv, dim=1)
        v = gathered(vc).repeat_interleave(heads_q // heads_kv, dim=1)
        s = (q[:, :, None, :] @ k.transpose(-1, -2)).float() * sc
        s = s.masked_fill(~mask()[:, None, None, :], float("-inf"))
        return (torch.softmax(s, dim=-1).to(q.dtype) @ v)[:, :, 0, :]

    def sdpa():
        return F.scaled_dot_product_attention(
            q[:, :, None, :], gathered(kc), gathered(vc), attn_mask=mask()[:, None, None, :],
            scale=sc, enable_gqa=heads_q != heads_kv)[:, :, 0, :]

    return {"torch": eager, "sdpa": sdpa}


DIVISIBLE = ("q_ptr", "k_cache_ptr", "v_cache_ptr", "block_tables_ptr", "context_lens_ptr",
             "out_ptr", "part_acc_ptr", "part_max_ptr", "part_sum_ptr", "stride_qs", "stride_qh",
             "stride_kb", "stride_kt", "stride_kh", "stride_vb", "stride_vt", "stride_vh",
             "stride_os", "stride_oh")


def _variants(arch) -> list[Variant]:
    cfg = arch_config(arch)
    out = []
    for dtype in DTYPES:
        t = "*" + fmt(dtype).triton_name
        sig = {"q_ptr": t, "k_cache_ptr": t, "v_cache_ptr": t, "block_tables_ptr": "*i32",
               "context_lens_ptr": "*i32", "out_ptr": t, "part_acc_ptr": "*fp32",
               "part_max_ptr": "*fp32", "part_sum_ptr": "*fp32", "qk_scale": "fp32",
               **{n: "i32" for n in ("stride_qs", "stride_qh", "stride_kb", "stride_kt", "stride_kh",
                                     "stride_vb", "stride_vt", "stride_vh", "stride_bs",
                                     "stride_os", "stride_oh", "heads_q", "group",
                                     "tokens_per_split", "num_splits")}}
        for head_dim in HEAD_DIMS:
            for group, split in ((4, True), (8, False)):
                out.append(Variant(
                    paged_decode_kernel, sig,
                    {"BLOCK_SIZE": 16, "HEAD_DIM": head_dim, "GROUP_ROWS": max(MIN_GROUP_ROWS, group),
                     "BLOCK_N": cfg.block_n, "SPLIT": split},
                    cfg.num_warps, cfg.num_stages, dict(cfg.options),
                    label=f"{dtype} d={head_dim} group={group} {'split' if split else 'whole'}",
                    divisible_by_16=DIVISIBLE))
            rsig = {"part_acc_ptr": "*fp32", "part_max_ptr": "*fp32", "part_sum_ptr": "*fp32",
                    "out_ptr": t, "stride_os": "i32", "stride_oh": "i32", "heads_q": "i32",
                    "num_splits": "i32"}
            out.append(Variant(paged_decode_reduce_kernel, rsig,
                               {"HEAD_DIM": head_dim, "BLOCK_SPLITS": 8}, 2,
                               label=f"{dtype} d={head_dim} reduce",
                               divisible_by_16=("part_acc_ptr", "part_max_ptr", "part_sum_ptr",
                                                "out_ptr", "stride_os", "stride_oh")))
    return out


def _bench_spec(num_seqs: int, context: int) -> dict:
    return {"dtype": "bf16", "heads_kv": 8, "group": 4, "head_dim": 128, "block_size": 16,
            "context_lens": [context] * num_seqs, "spare_columns": 0, "hint": True,
            "splits": None, "scale": None, "regime": "normal", "seed": 0,
            # timing the kernel: a serving loop builds its tables itself and skips the readback
            "validate": False}


register(Case(
    name="paged_attention", family="attention", dtypes=tuple(DTYPES), inputs=_inputs, make=_make,
    outputs=_outputs, launch=_launch, oracle=_oracle, tolerance=_tolerance, cost=_cost,
    # 64 sequences x 4096 tokens (grid-filling batch) and 4 x 32768 (split-K territory)
    bench=(_bench_spec(64, 4096), _bench_spec(4, 32768)),
    variants=_variants, baselines=_baselines, math=("exp2",),
    description="paged decode attention through block tables (vLLM layout), split-K over the "
                "context with a reduction kernel when the batch is small"))
