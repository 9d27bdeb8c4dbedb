"""MoE routing: softmax over each token's gating logits, then its top-k experts.

Contract (the oracle follows it): selection is on the logits, which orders experts exactly as
their softmax probabilities do but cannot create ties by rounding; among equal logits the lower
expert index wins, and the k picks are listed by descending logit, ties by ascending index.
weights[t, j] = softmax(logits[t])[ids[t, j]], or with renormalize those k values divided by
their sum. Weights are float32, ids int32 (what the grouped GEMM reads). NaN logits are outside
the contract (their ids are unspecified).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

from .. import strategies as S
from ..cases import Case, Cost, Variant, launch_divisibility, register
from ..facts.numerics import DIV_ULP, EXP_ULP
from ..oracles.moe import topk_softmax as topk_softmax_ref
from ..tolerance import Tolerance, exact, fmt, near_zero
from ..facts.device import warp_size
from ._launch import check_2d, num_warps_for

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
MAX_EXPERTS = 1024          # one row of logits is held in registers
ELEMS_PER_PROGRAM = 2048    # short rows are packed several to a program


@triton.jit(do_not_specialize=["n_tokens", "top_k"])
def topk_softmax_kernel(logits_ptr, weights_ptr, ids_ptr, n_tokens, n_experts, top_k,
                        stride_l, stride_w, stride_i,
                        RENORMALIZE: tl.constexpr, ROWS: tl.constexpr, BLOCK_E: tl.constexpr,
                        BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, BLOCK_E)[None, :]
    row_ok = rows < n_tokens
    rows64 = rows.to(tl.int64)
    x = tl.load(logits_ptr + rows64 * stride_l + cols, mask=row_ok & (cols < n_experts),
                other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=1)[:, None]
    # rows past the end are all -inf; give them m = 0 so they compute zeros, not NaN
    m = tl.where(m == -float("inf"), 0.0, m)
    e = tl.exp(x - m)
    total = tl.sum(e, axis=1)[:, None]
    ks = tl.arange(0, BLOCK_K)[None, :]
    w_out = tl.zeros([ROWS, BLOCK_K], tl.float32)
    i_out = tl.zeros([ROWS, BLOCK_K], tl.int32)
    # Rank by an integer key whose signed order is the logits' order (sign-magnitude bits with
    # the magnitude flipped for negatives; -0 joins +0 first), so one argmax that breaks ties to
    # the left makes each pick. Integer ops only: a float compare could flush subnormal logits.
    # Picked and padding experts get the lowest key, below any logit (-inf included), so -inf
    # logits are still ranked, by index.
    bits = x.to(tl.int32, bitcast=True)
    bits = tl.where((bits & 0x7FFFFFFF) == 0, 0, bits)
    key = bits ^ ((bits >> 31) & 0x7FFFFFFF)
    taken = -2147483648
    key = tl.where((cols < n_experts) & (rows >= 0), key, taken)
    for j in range(top_k):
        best, pick = tl.max(key, axis=1, return_indices=True, return_indices_tie_break_left=True)
        # the key maps back to the picked logit: its weight needs no gather
        best_bits = best ^ ((best >> 31) & 0x7FFFFFFF)
        picked = best_bits.to(tl.float32, bitcast=True)[:, None]
        w_out = tl.where(ks == j, tl.exp(picked - m), w_out)
        i_out = tl.where(ks == j, pick[:, None], i_out)
        key = tl.where(cols == pick[:, None], taken, key)
    if RENORMALIZE:
        w_out = w_out / tl.sum(w_out, axis=1)[:, None]
    else:
        w_out = w_out / total
    out_mask = row_ok & (ks < top_k)
    tl.store(weights_ptr + rows64 * stride_w + ks, w_out, mask=out_mask)
    tl.store(ids_ptr + rows64 * stride_i + ks, i_out, mask=out_mask)


def config(n_experts: int, top_k: int, warp: int) -> dict:
    block_e = triton.next_power_of_2(n_experts)
    rows = max(1, ELEMS_PER_PROGRAM // block_e)
    return {"ROWS": rows, "BLOCK_E": block_e, "BLOCK_K": triton.next_power_of_2(top_k),
            "num_warps": num_warps_for(rows * block_e, warp)}


def topk_softmax(logits: torch.Tensor, top_k: int, renormalize: bool = False,
                 weights: torch.Tensor | None = None, ids: torch.Tensor | None = None):
    """(weights [T, k] float32, ids [T, k] int32) of the top-k experts of softmax(logits [T, E])."""
    check_2d("logits", logits, tuple(DTYPES.values()))
    n_tokens, n_experts = logits.shape
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be a positive int, got {top_k!r}")
    if top_k > n_experts:
        raise ValueError(f"top_k={top_k} is larger than the expert count {n_experts}")
    if n_experts > MAX_EXPERTS:
        raise ValueError(f"{n_experts} experts: this kernel holds a row in registers and takes "
                         f"at most {MAX_EXPERTS}")
    weights = torch.empty(n_tokens, top_k, dtype=torch.float32, device=logits.device) if weights is None else weights
    ids = torch.empty(n_tokens, top_k, dtype=torch.int32, device=logits.device) if ids is None else ids
    for name, t, dt in (("weights", weights, torch.float32), ("ids", ids, torch.int32)):
        check_2d(name, t, (dt,))
        if tuple(t.shape) != (n_tokens, top_k):
            raise ValueError(f"{name} has shape {tuple(t.shape)}, expected {(n_tokens, top_k)}")
        if t.device != logits.device:
            raise ValueError(f"{name} is on {t.device}, logits on {logits.device}")
    if n_tokens == 0:
        return weights, ids
    cfg = config(n_experts, top_k, warp_size())
    topk_softmax_kernel[(triton.cdiv(n_tokens, cfg["ROWS"]),)](
        logits, weights, ids, n_tokens, n_experts, top_k,
        logits.stride(0), weights.stride(0), ids.stride(0), RENORMALIZE=bool(renormalize),
        ROWS=cfg["ROWS"], BLOCK_E=cfg["BLOCK_E"], BLOCK_K=cfg["BLOCK_K"], num_warps=cfg["num_warps"])
    return weights, ids


# ---- the case --------------------------------------------------------------------------------

EXPERT_COUNTS = (1, 2, 3, 8, 13, 16, 60, 64, 128, 160, 256, 512)
# "ties": logits on a coarse integer grid, so some but not all of a row are equal
REGIMES = ("normal", "large", "tiny", "equal", "ties")


def _inputs(dtype: str, max_elements: int):
    small = max_elements <= 65536
    counts = [e for e in EXPERT_COUNTS if e <= (64 if small else MAX_EXPERTS) and e <= max_elements]

    def shape(e):
        most_tokens = max(1, min(64 if small else 1 << 16, max_elements // e))
        return st.tuples(st.just(e), S.lengths(ELEMS_PER_PROGRAM // triton.next_power_of_2(e), most_tokens),
                         st.integers(1, min(e, 8)) | st.integers(1, e))

    return st.sampled_from(counts).flatmap(shape).flatmap(lambda etk: st.fixed_dictionaries({
        "dtype": st.just(dtype), "experts": st.just(etk[0]), "tokens": st.just(etk[1]),
        "top_k": st.just(etk[2]), "renormalize": st.booleans(), "regime": st.sampled_from(REGIMES),
        "layout": S.layouts(), "seed": S.seeds()}))


def _make(spec: dict, device: str) -> dict:
    gen = S.generator(spec["seed"])
    shape = (spec["tokens"], spec["experts"])
    if spec["regime"] == "ties":
        grid = torch.randint(-3, 4, shape, generator=gen).to(torch.float64)
        x = grid.to(DTYPES[spec["dtype"]])
    else:
        x = S.values(shape, spec["dtype"], spec["regime"], gen)
    return {"logits": S.laid_out(x, spec["layout"], device), "top_k": spec["top_k"],
            "renormalize": spec["renormalize"]}


def _outputs(args):
    t = args["logits"].shape[0]
    return {"weights": ((t, args["top_k"]), torch.float32), "ids": ((t, args["top_k"]), torch.int32)}


def _launch(args, outs):
    topk_softmax(args["logits"], args["top_k"], args["renormalize"], outs["weights"], outs["ids"])


def _oracle(args):
    w, ids = topk_softmax_ref(args["logits"], args["top_k"], args["renormalize"])
    return {"weights": w, "ids": ids}




def _tolerance(args, refs, dtype):
    """weights_j: (n + 4 EXP_ULP + 2 DIV_ULP + 2|x_j - m| + 2 sum_l p_l |x_l - m|) u(fp32).

    One ULP is at most 2u. exp(t), t = x - m, computed as 2^(t log2 e) has relative error
    2|t| u from rounding x - m and the product, plus EXP_ULP ULP; the normalizing sum over n
    terms (every expert, or the k picks when renormalizing) adds n u and the p-weighted mean of
    its terms' exp errors; the division adds DIV_ULP ULP. The weights are fp32, so no further
    rounding. ids are exact: the kernel ranks the exact logits by the oracle's rule.
    """
    x = args["logits"]
    m = x.amax(dim=-1, keepdim=True)
    dist = (x - m).abs()
    picked = torch.gather(dist, 1, refs["ids"].to(torch.int64))
    if args["renormalize"]:
        n, weighted = args["top_k"], (refs["weights"] * picked).sum(dim=-1, keepdim=True)
    else:
        n = x.shape[-1]
        weighted = (torch.softmax(x, dim=-1) * dist).sum(dim=-1, keepdim=True)
    u = fmt("fp32").unit_roundoff
    rtol = (n + 4 * EXP_ULP + 2 * DIV_ULP + 2 * picked + 2 * weighted) * u
    floor, floor_text = near_zero("fp32", "fp32", EXP_ULP + DIV_ULP)
    over = "the k picks" if args["renormalize"] else "all experts"
    formula = (f"rtol_j = (n + 4*{EXP_ULP} + 2*{DIV_ULP} + 2|x_j-m| + 2 sum_l p_l|x_l-m|) u(fp32), "
               f"n = {n} (sum over {over}); atol = {floor_text}; ids exact (ties: lowest index)")
    return {"weights": Tolerance(rtol, floor, formula),
            "ids": exact("bitwise: top-k by logit, ties to the lower expert index")}


def _cost(args):
    x = args["logits"]
    t, e = x.shape
    k = args["top_k"]
    return Cost(bytes=x.numel() * x.element_size() + t * k * 8, flops=t * e * (4 + 2 * k))


def _baselines(args):
    x, k, renorm = args["logits"], args["top_k"], args["renormalize"]

    def eager():
        w, ids = torch.topk(torch.softmax(x, dim=-1, dtype=torch.float32), k, dim=-1)
        return (w / w.sum(dim=-1, keepdim=True) if renorm else w), ids.to(torch.int32)
    return {"torch": eager}


def _variants(arch) -> list[Variant]:
    out = []
    for dtype in DTYPES:
        t = "*" + fmt(dtype).triton_name
        sig = {"logits_ptr": t, "weights_ptr": "*fp32", "ids_ptr": "*i32", "n_tokens": "i32",
               "n_experts": "i32", "top_k": "i32", "stride_l": "i32", "stride_w": "i32",
               "stride_i": "i32"}
        for e, k, renorm in ((8, 2, False), (64, 8, False), (64, 8, True), (256, 8, True), (1024, 32, False)):
            cfg = config(e, k, arch.warp_size)
            consts = {"RENORMALIZE": renorm, "ROWS": cfg["ROWS"], "BLOCK_E": cfg["BLOCK_E"],
                      "BLOCK_K": cfg["BLOCK_K"]}
            out.append(Variant(topk_softmax_kernel, sig, consts, cfg["num_warps"],
                               label=f"{dtype} E={e} k={k}{' renorm' if renorm else ''}",
                               divisible_by_16=launch_divisibility(
                                   sig, n_experts=e, top_k=k, stride_l=e, stride_w=k, stride_i=k)))
    return out


register(Case(
    name="moe_topk_softmax", family="moe", dtypes=tuple(DTYPES), inputs=_inputs, make=_make,
    outputs=_outputs, launch=_launch, oracle=_oracle, tolerance=_tolerance, cost=_cost,
    bench=({"dtype": "bf16", "tokens": 524288, "experts": 256, "top_k": 8, "renormalize": True,
            "regime": "normal", "layout": "contiguous", "seed": 0},
           {"dtype": "bf16", "tokens": 4096, "experts": 64, "top_k": 8, "renormalize": False,
            "regime": "normal", "layout": "contiguous", "seed": 0}),
    variants=_variants, baselines=_baselines, math=("exp",),
    description="MoE routing: softmax then top-k (ties to the lower expert), optional renormalize"))
