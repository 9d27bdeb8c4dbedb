"""MoE token alignment: group the (token, expert) assignments by expert, each expert's run padded
to a multiple of the GEMM's BLOCK_M, so that every BLOCK_M slice of the list belongs to one expert.

Contract (deterministic; the oracle follows it): assignment i = t * k + j is topk_ids[t, j].
Experts come in index order, an expert's assignments in increasing i, then pad slots holding the
sentinel T * k; experts without assignments get no block. expert_ids[b] is the expert of slice
b, -1 past the used length; num_tokens_post_padded holds that length. Ids outside
[0, num_experts) are not placed (the expert-parallel convention: another rank owns them).

Three launches, no host synchronization (the GEMM reads the length on the device):
  count  one program per chunk of assignments: a histogram over experts -> counts[chunk, e]
  offsets one program: expert totals, padded bases, each chunk's first slot per expert
          (in place over counts), the pad slots, expert_ids and the used length
  place  one program per chunk: slot = offsets[chunk, e_i] + rank of i among the chunk's
          assignments to e_i (a stable counting sort)
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

from .. import strategies as S
from ..cases import Case, Cost, Variant, launch_divisibility, register
from ..oracles.moe import align_block_size as align_ref
from ..tolerance import exact
from ..facts.device import warp_size
from ._launch import num_warps_for

CHUNK = 128          # assignments per count/place program; place compares CHUNK x CHUNK pairs
MAX_EXPERTS = 1024
MAX_BLOCK_M = 256
TILE = 2048          # elements per loop step of the single offsets program (4096 with 16 warps spills on sm_80)


# sizes that change with every batch are not specialized: one compiled kernel serves them all
@triton.jit(do_not_specialize=["numel"])
def moe_count_kernel(ids_ptr, counts_ptr, numel, n_experts,
                     CHUNK: tl.constexpr, BLOCK_E: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * CHUNK + tl.arange(0, CHUNK)
    inside = offs < numel
    e = tl.load(ids_ptr + offs, mask=inside, other=-1).to(tl.int32)
    placed = inside & (e >= 0) & (e < n_experts)
    hist = tl.histogram(tl.where(placed, e, 0), BLOCK_E, mask=placed)
    experts = tl.arange(0, BLOCK_E)
    tl.store(counts_ptr + pid * n_experts + experts, hist, mask=experts < n_experts)


@triton.jit(do_not_specialize=["n_chunks", "max_padded", "n_blocks", "sentinel"])
def moe_offsets_kernel(counts_ptr, sorted_ptr, expert_ids_ptr, n_post_ptr,
                       n_experts, n_chunks, max_padded, n_blocks, sentinel,
                       BLOCK_M: tl.constexpr, BLOCK_E: tl.constexpr, TILE_C: tl.constexpr,
                       TILE_E: tl.constexpr, TILE_P: tl.constexpr):
    experts = tl.arange(0, BLOCK_E)
    e_ok = experts < n_experts
    chunks = tl.arange(0, TILE_C)[:, None]
    # pass 1: assignments per expert
    total = tl.zeros([BLOCK_E], tl.int32)
    for start in range(0, n_chunks, TILE_C):
        c = tl.load(counts_ptr + (start + chunks) * n_experts + experts[None, :],
                    mask=(start + chunks < n_chunks) & e_ok[None, :], other=0)
        total += tl.sum(c, axis=0)
    padded = (total + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    end = tl.cumsum(padded, axis=0)
    base = end - padded
    used = tl.sum(padded, axis=0)
    tl.store(n_post_ptr, used)
    # pass 2: each chunk's first slot per expert = base + assignments in earlier chunks
    carry = base
    for start in range(0, n_chunks, TILE_C):
        ptrs = counts_ptr + (start + chunks) * n_experts + experts[None, :]
        mask = (start + chunks < n_chunks) & e_ok[None, :]
        c = tl.load(ptrs, mask=mask, other=0)
        tl.store(ptrs, carry[None, :] + tl.cumsum(c, axis=0) - c, mask=mask)
        carry += tl.sum(c, axis=0)
    # pad slots at the end of each expert's run: base + total + j for j < padded - total
    lanes = tl.arange(0, TILE_E)[:, None]
    pads = tl.arange(0, BLOCK_M)[None, :]
    for e0 in range(0, n_experts, TILE_E):
        # pick this tile's bases and totals out of the register vectors with a one-hot sum
        hit = (e0 + lanes) == experts[None, :]
        first = tl.sum(tl.where(hit, (base + total)[None, :], 0), axis=1)[:, None]
        gap = tl.sum(tl.where(hit, padded - total, 0), axis=1)[:, None]
        tl.store(sorted_ptr + first + pads, tl.full([TILE_E, BLOCK_M], sentinel, tl.int32),
                 mask=(pads < gap) & (e0 + lanes < n_experts))
    # the slots past the used length
    slot = tl.arange(0, TILE_P)
    for start in range(used // TILE_P * TILE_P, max_padded, TILE_P):
        p = start + slot
        tl.store(sorted_ptr + p, tl.full([TILE_P], sentinel, tl.int32),
                 mask=(p >= used) & (p < max_padded))
    # block b belongs to the expert whose run covers it: the number of runs ending at or before
    # b (empty runs end where they start and are counted without owning a block)
    end_block = (end // BLOCK_M)[None, :]
    blocks = tl.arange(0, TILE_P // BLOCK_E)[:, None]
    for start in range(0, n_blocks, TILE_P // BLOCK_E):
        b = start + blocks
        owner = tl.sum(((end_block <= b) & e_ok[None, :]).to(tl.int32), axis=1)[:, None]
        owner = tl.where(b < used // BLOCK_M, owner, -1)
        tl.store(expert_ids_ptr + b, owner, mask=b < n_blocks)


@triton.jit(do_not_specialize=["numel"])
def moe_place_kernel(ids_ptr, offsets_ptr, sorted_ptr, numel, n_experts, CHUNK: tl.constexpr):
    pid = tl.program_id(0)
    lane = tl.arange(0, CHUNK)
    offs = pid * CHUNK + lane
    inside = offs < numel
    e = tl.load(ids_ptr + offs, mask=inside, other=-1).to(tl.int32)
    placed = inside & (e >= 0) & (e < n_experts)
    # rank of i among the chunk's earlier assignments to the same expert
    before = (e[:, None] == e[None, :]) & (lane[None, :] < lane[:, None])
    rank = tl.sum(before.to(tl.int32), axis=1)
    first = tl.load(offsets_ptr + pid * n_experts + e, mask=placed, other=0)
    tl.store(sorted_ptr + first + rank, offs, mask=placed)


def max_padded_len(numel: int, num_experts: int, block_m: int) -> int:
    """Longest the sorted list can be: every assignment plus block_m - 1 pads per used expert."""
    return numel + min(num_experts, numel) * (block_m - 1)


def _offsets_config(n_experts: int, block_m: int, warp: int) -> dict:
    block_e = triton.next_power_of_2(n_experts)
    return {"BLOCK_E": block_e, "TILE_C": max(1, TILE // block_e),
            "TILE_E": max(1, min(block_e, TILE // max(block_e, block_m))), "TILE_P": max(TILE, block_e),
            "num_warps": num_warps_for(TILE, warp)}


def moe_align_block_size(topk_ids: torch.Tensor, num_experts: int, block_m: int, *,
                         chunk: int = CHUNK, out: tuple | None = None):
    """(sorted_token_ids, expert_ids, num_tokens_post_padded [1]) for topk_ids [T, k]; see the
    module docstring for the contract. `chunk` (a power of two) sizes the count/place programs."""
    if not isinstance(topk_ids, torch.Tensor) or topk_ids.dim() != 2:
        raise ValueError(f"topk_ids must be a 2-D tensor [tokens, top_k], got "
                         f"{tuple(topk_ids.shape) if isinstance(topk_ids, torch.Tensor) else type(topk_ids).__name__}")
    if topk_ids.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"topk_ids has dtype {topk_ids.dtype}; expected torch.int32 or torch.int64")
    if not topk_ids.is_contiguous():
        raise ValueError("topk_ids must be contiguous: assignment i is element i of its flat view")
    if isinstance(num_experts, bool) or not isinstance(num_experts, int) or not 1 <= num_experts <= MAX_EXPERTS:
        raise ValueError(f"num_experts must be an int in [1, {MAX_EXPERTS}], got {num_experts!r}")
    if topk_ids.shape[1] > num_experts:
        raise ValueError(f"top_k={topk_ids.shape[1]} is larger than the expert count {num_experts}")
    for name, v, most in (("block_m", block_m, MAX_BLOCK_M), ("chunk", chunk, 1024)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1 or v > most or v & (v - 1):
            raise ValueError(f"{name} must be a power of two in [1, {most}], got {v!r}")
    numel = topk_ids.numel()
    length = max_padded_len(numel, num_experts, block_m)
    if length >= 2**31:
        raise ValueError(f"{numel} assignments padded to {length} slots overflow int32 indices")
    n_blocks = triton.cdiv(length, block_m)
    dev = topk_ids.device
    if out is None:
        out = (torch.empty(length, dtype=torch.int32, device=dev),
               torch.empty(n_blocks, dtype=torch.int32, device=dev),
               torch.empty(1, dtype=torch.int32, device=dev))
    for name, t, shape in zip(("sorted_token_ids", "expert_ids", "num_tokens_post_padded"), out,
                              ((length,), (n_blocks,), (1,))):
        if tuple(t.shape) != shape or t.dtype != torch.int32 or not t.is_contiguous() or t.device != dev:
            raise ValueError(f"{name} must be a contiguous int32 tensor of shape {shape} on {dev}, "
                             f"got {t.dtype} {tuple(t.shape)} on {t.device}")
    sorted_ids, expert_ids, n_post = out
    n_chunks = max(1, triton.cdiv(numel, chunk))
    counts = torch.empty(n_chunks, num_experts, dtype=torch.int32, device=dev)
    warp = warp_size()
    block_e = triton.next_power_of_2(num_experts)
    moe_count_kernel[(n_chunks,)](topk_ids, counts, numel, num_experts, CHUNK=chunk, BLOCK_E=block_e,
                                  num_warps=num_warps_for(max(chunk, block_e), warp))
    cfg = _offsets_config(num_experts, block_m, warp)
    moe_offsets_kernel[(1,)](counts, sorted_ids, expert_ids, n_post, num_experts, n_chunks, length,
                             n_blocks, numel, BLOCK_M=block_m, BLOCK_E=cfg["BLOCK_E"],
                             TILE_C=cfg["TILE_C"], TILE_E=cfg["TILE_E"], TILE_P=cfg["TILE_P"],
                             num_warps=cfg["num_warps"])
    if numel:
        moe_place_kernel[(n_chunks,)](topk_ids, counts, sorted_ids, numel, num_experts, CHUNK=chunk,
                                      num_warps=num_warps_for(chunk * chunk, warp))
    return sorted_ids, expert_ids, n_post


# ---- routing inputs shared by the MoE cases ----------------------------------------------------

ROUTINGS = ("uniform", "skewed", "hot", "expert_parallel")


def routing_ids(tokens: int, top_k: int, experts: int, routing: str, gen: torch.Generator) -> torch.Tensor:
    """topk_ids [tokens, top_k] int64, each token's k experts distinct, drawn on the CPU.

    uniform: every expert equally likely (balanced runs); skewed: expert e weighted 1/(e+1)^2,
    so a few experts take most tokens and many get none; hot: every token picks the same k;
    expert_parallel: uniform, then the ids of a random half of the experts become -1 (owned by
    another rank, so not placed).
    """
    if routing == "hot":
        return torch.randperm(experts, generator=gen)[:top_k].expand(tokens, top_k).clone()
    scores = torch.rand(tokens, experts, generator=gen, dtype=torch.float64)
    if routing == "skewed":  # Gumbel top-k samples without replacement by weight
        gumbel = -torch.log(-torch.log(scores.clamp_min(1e-300)))
        scores = gumbel - 2 * torch.log(torch.arange(1, experts + 1, dtype=torch.float64))
    ids = torch.topk(scores, top_k, dim=-1).indices
    if routing == "expert_parallel":
        remote = torch.randperm(experts, generator=gen)[: experts // 2]
        ids = torch.where(torch.isin(ids, remote), torch.full_like(ids, -1), ids)
    elif routing not in ("uniform", "skewed"):
        raise ValueError(f"unknown routing {routing!r}; known: {', '.join(ROUTINGS)}")
    return ids


# ---- the case --------------------------------------------------------------------------------

ID_DTYPES = {"int32": torch.int32, "int64": torch.int64}
EXPERT_COUNTS = (1, 2, 3, 8, 13, 16, 64, 128, 256, 1024)


def _inputs(dtype: str, max_elements: int):
    small = max_elements <= 65536

    def shape(e):
        most = max(1, min(64 if small else 1 << 16, max_elements // 8))
        return st.tuples(st.just(e), S.lengths(CHUNK // 8, most), st.integers(1, min(e, 8)))

    counts = [e for e in EXPERT_COUNTS if e <= (64 if small else MAX_EXPERTS)]
    return st.sampled_from(counts).flatmap(shape).flatmap(lambda etk: st.fixed_dictionaries({
        "dtype": st.just(dtype), "experts": st.just(etk[0]), "tokens": st.just(etk[1]),
        "top_k": st.just(etk[2]), "block_m": st.sampled_from((1, 16, 32, 64, 128, 256)),
        # small chunks make several count/place programs even on interpreter-sized inputs
        "chunk": st.sampled_from((16, 32, CHUNK)), "routing": st.sampled_from(ROUTINGS),
        "seed": S.seeds()}))


def _make(spec: dict, device: str) -> dict:
    ids = routing_ids(spec["tokens"], spec["top_k"], spec["experts"], spec["routing"],
                      S.generator(spec["seed"]))
    return {"topk_ids": ids.to(device=device, dtype=ID_DTYPES[spec["dtype"]]),
            "num_experts": spec["experts"], "block_m": spec["block_m"], "chunk": spec["chunk"]}


def _outputs(args):
    length = max_padded_len(args["topk_ids"].numel(), args["num_experts"], args["block_m"])
    return {"sorted_token_ids": ((length,), torch.int32),
            "expert_ids": ((triton.cdiv(length, args["block_m"]),), torch.int32),
            "num_tokens_post_padded": ((1,), torch.int32)}


def _launch(args, outs):
    moe_align_block_size(args["topk_ids"], args["num_experts"], args["block_m"], chunk=args["chunk"],
                         out=(outs["sorted_token_ids"], outs["expert_ids"], outs["num_tokens_post_padded"]))


def _oracle(args):
    s, e, n = align_ref(args["topk_ids"], args["num_experts"], args["block_m"])
    return {"sorted_token_ids": s, "expert_ids": e, "num_tokens_post_padded": n}


def _tolerance(args, refs, dtype):
    why = "bitwise: the contract fixes the order (experts ascending, assignments ascending within)"
    return {name: exact(why) for name in refs}


def _cost(args):
    ids = args["topk_ids"]
    length = max_padded_len(ids.numel(), args["num_experts"], args["block_m"])
    return Cost(bytes=ids.numel() * ids.element_size() + 4 * (length + triton.cdiv(length, args["block_m"]) + 1))


def torch_align(topk_ids: torch.Tensor, num_experts: int, block_m: int):
    """The same contract in eager torch, without host synchronization (the speed baseline)."""
    flat = topk_ids.flatten().to(torch.int64)
    numel, dev = flat.numel(), flat.device
    key = torch.where((flat >= 0) & (flat < num_experts), flat, num_experts)
    order = torch.sort(key, stable=True).indices
    skey = key[order]
    counts = torch.zeros(num_experts + 1, dtype=torch.int64, device=dev).scatter_add_(0, key, torch.ones_like(key))
    padded = (counts[:num_experts] + block_m - 1) // block_m * block_m
    end = torch.cumsum(padded, 0)
    base = torch.cat([end - padded, end[-1:]])          # the unplaced key E goes to a dump slot
    start = torch.cumsum(counts, 0) - counts
    length = max_padded_len(numel, num_experts, block_m)
    pos = torch.where(skey < num_experts, base[skey] + torch.arange(numel, device=dev) - start[skey], length)
    sorted_ids = torch.full((length + 1,), numel, dtype=torch.int32, device=dev)
    sorted_ids.scatter_(0, pos, order.to(torch.int32))
    blocks = torch.arange(triton.cdiv(length, block_m), device=dev)
    owner = torch.searchsorted(end // block_m, blocks, right=True)
    expert_ids = torch.where(blocks < end[-1] // block_m, owner, -1).to(torch.int32)
    return sorted_ids[:length], expert_ids, end[-1:].to(torch.int32)


def _baselines(args):
    return {"torch": lambda: torch_align(args["topk_ids"], args["num_experts"], args["block_m"])}


def _variants(arch) -> list[Variant]:
    out = []
    for dtype, tname in (("int32", "*i32"), ("int64", "*i64")):
        for e in (8, 64, 256, 1024):
            block_e = triton.next_power_of_2(e)
            sig = {"ids_ptr": tname, "counts_ptr": "*i32", "numel": "i32", "n_experts": "i32"}
            out.append(Variant(moe_count_kernel, sig, {"CHUNK": CHUNK, "BLOCK_E": block_e},
                               num_warps_for(max(CHUNK, block_e), arch.warp_size),
                               label=f"count {dtype} E={e}",
                               divisible_by_16=launch_divisibility(sig, n_experts=e)))
        sig = {"ids_ptr": tname, "offsets_ptr": "*i32", "sorted_ptr": "*i32", "numel": "i32",
               "n_experts": "i32"}
        out.append(Variant(moe_place_kernel, sig, {"CHUNK": CHUNK}, num_warps_for(CHUNK * CHUNK, arch.warp_size),
                           label=f"place {dtype}", divisible_by_16=launch_divisibility(sig)))
    for e in (8, 64, 256, 1024):
        for bm in (16, 128):
            cfg = _offsets_config(e, bm, arch.warp_size)
            sig = {"counts_ptr": "*i32", "sorted_ptr": "*i32", "expert_ids_ptr": "*i32",
                   "n_post_ptr": "*i32", "n_experts": "i32", "n_chunks": "i32",
                   "max_padded": "i32", "n_blocks": "i32", "sentinel": "i32"}
            consts = {"BLOCK_M": bm, **{k: cfg[k] for k in ("BLOCK_E", "TILE_C", "TILE_E", "TILE_P")}}
            out.append(Variant(moe_offsets_kernel, sig, consts, cfg["num_warps"],
                               label=f"offsets E={e} block_m={bm}",
                               divisible_by_16=launch_divisibility(sig, n_experts=e)))
    return out


register(Case(
    name="moe_align", family="moe", dtypes=tuple(ID_DTYPES), inputs=_inputs, make=_make,
    outputs=_outputs, launch=_launch, oracle=_oracle, tolerance=_tolerance, cost=_cost,
    bench=({"dtype": "int32", "tokens": 4096, "top_k": 8, "experts": 64, "block_m": 64,
            "chunk": CHUNK, "routing": "uniform", "seed": 0},
           {"dtype": "int64", "tokens": 4096, "top_k": 8, "experts": 64, "block_m": 64,
            "chunk": CHUNK, "routing": "uniform", "seed": 0}),
    variants=_variants, baselines=_baselines,
    description="MoE alignment: assignments sorted by expert, runs padded to the GEMM's BLOCK_M"))
