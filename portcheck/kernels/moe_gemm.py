"""MoE grouped GEMM: every (token, expert) assignment multiplies the token's row by its expert's
weight matrix, optionally scaled by the routing weight (the vLLM / SGLang fused_moe design).

    out[t * k + j, :] = topk_weights[t, j] * (a[t, :] @ w[topk_ids[t, j]].T)
    a [T, K], w [E, N, K] (an nn.Linear weight per expert), out [T * k, N] in a's dtype

moe_align_block_size groups the assignments by expert in runs padded to BLOCK_M; one program
computes a BLOCK_M x BLOCK_N tile of one run: it gathers the run's token rows of `a`, multiplies
them by w[expert] in fp32 with tl.dot, scales by the routing weights and scatters the rows to
their assignments. Programs past the used length (read on the device) return at once, so the
launch needs no host synchronization. Ids outside [0, E) are not placed: their rows of `out`
are left as they were. Tile configs are data, per arch family and average run length.
"""
from __future__ import annotations

import math
from functools import lru_cache

import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

from .. import strategies as S
from ..cases import Case, Cost, Variant, register
from ..oracles.moe import grouped_gemm as grouped_gemm_ref
from ..tolerance import Tolerance, fmt
from ..facts.device import current_arch
from ._configs import AMD_OPTIONS, amd_options, config_file, families, load
from .moe_align import moe_align_block_size, routing_ids

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


# the slot counts and top_k change with every batch and do not shape the code: not specializing
# them keeps one compiled kernel per config across batches
@triton.jit(do_not_specialize=["EM", "num_valid", "top_k"])
def moe_gemm_kernel(a_ptr, w_ptr, c_ptr, topk_w_ptr, sorted_ptr, expert_ids_ptr, n_post_ptr,
                    N, K, EM, num_valid, top_k, stride_am, stride_we, stride_wn, stride_cm,
                    MUL_ROUTED_WEIGHT: tl.constexpr, EVEN_K: tl.constexpr,
                    DOT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # grouped launch order: GROUP_M consecutive run slices sweep N together, so a slice's rows
    # and an expert's weight columns are reused from L2
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(EM, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % group_m
    pid_n = (pid % in_group) // group_m
    if pid_m * BLOCK_M >= tl.load(n_post_ptr):
        return
    # the used length is a multiple of BLOCK_M, so the whole slice is inside the sorted list
    slot = tl.load(sorted_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    live = slot < num_valid                      # pad slots hold the sentinel T * k
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    rows = (slot // top_k).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None] * stride_am + offs_k[None, :]
    # columns past N wrap around instead of being masked: the loads stay unpredicated and
    # the store drops those columns
    w_ptrs = (w_ptr + expert * stride_we + (offs_n % N).to(tl.int64)[None, :] * stride_wn
              + offs_k[:, None])
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs, mask=live[:, None], other=0.0)
            b = tl.load(w_ptrs)
        else:
            k_left = K - kb * BLOCK_K
            a = tl.load(a_ptrs, mask=live[:, None] & (offs_k[None, :] < k_left), other=0.0)
            b = tl.load(w_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    if MUL_ROUTED_WEIGHT:
        acc = acc * tl.load(topk_w_ptr + slot, mask=live, other=0.0)[:, None]
    c_ptrs = c_ptr + slot.to(tl.int64)[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=live[:, None] & (offs_n[None, :] < N))


# ---- tile configs, as data (configs/moe_gemm.toml) ---------------------------------------------

CONFIG_FILE = config_file("moe_gemm")
_KEYS = {"runs", "block", "group", "warps", "stages", *AMD_OPTIONS}


def _row(entry: dict, where: str) -> tuple:
    unknown, missing = set(entry) - _KEYS, {"block", "group", "warps", "stages"} - set(entry)
    if unknown or missing:
        raise ValueError(f"{CONFIG_FILE}: {where}: "
                         + (f"unknown key(s) {sorted(unknown)}" if unknown else f"missing key(s) {sorted(missing)}"))
    bm, bn, bk = entry["block"]
    cfg = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": entry["group"],
           "num_warps": entry["warps"], "num_stages": entry["stages"],
           "options": amd_options(entry)}
    return entry.get("runs"), cfg


@lru_cache(maxsize=None)
def config_table() -> dict:
    """{family: {"16bit" | "fp32": [(runs bound or None, config), ...]}}, validated."""
    data = load("moe_gemm")
    table = {}
    for family in families():
        table[family] = {}
        for cls in ("16bit", "fp32"):
            entries = data.get(family, {}).get(cls)
            if not entries:
                raise ValueError(f"{CONFIG_FILE}: [{family}] has no {cls!r} rows")
            rows = [_row(e, f"[{family}] {cls} #{i}") for i, e in enumerate(entries, 1)]
            if rows[-1][0] is not None or any(r[0] is None for r in rows[:-1]):
                raise ValueError(f"{CONFIG_FILE}: [{family}] {cls}: only the last row may (and must) "
                                 "leave `runs` out")
            if family.startswith("sm_") and any(cfg["options"] for _, cfg in rows):
                raise ValueError(f"{CONFIG_FILE}: [{family}] {cls}: AMD options on an NVIDIA family")
            table[family][cls] = rows
    return table


def config(family: str, dtype: torch.dtype, run_length: float) -> dict:
    """The tile config of an arch family for a dtype and an average run length T*k/E."""
    rows = config_table()[family]["fp32" if dtype == torch.float32 else "16bit"]
    return next(cfg for upto, cfg in rows if upto is None or run_length <= upto)


def _check(name, t, shape, dtypes, device, unit_last=True):
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a tensor, got {type(t).__name__}")
    if t.dim() != len(shape):
        raise ValueError(f"{name} must be {len(shape)}-D [{', '.join(shape)}], got shape {tuple(t.shape)}")
    if t.dtype not in dtypes:
        raise ValueError(f"{name} has dtype {t.dtype}; expected {' or '.join(map(str, dtypes))}")
    if t.device != device:
        raise ValueError(f"{name} is on {t.device}, a on {device}")
    if unit_last and t.numel() and t.stride(-1) != 1:
        raise ValueError(f"{name} must have unit stride along its last dimension, got {t.stride()}")


def moe_gemm(a: torch.Tensor, w: torch.Tensor, topk_ids: torch.Tensor,
             topk_weights: torch.Tensor | None = None, *, mul_routed_weight: bool = True,
             out: torch.Tensor | None = None, cfg: dict | None = None) -> torch.Tensor:
    """out [T * k, N] (a's dtype) = routing weight x a[t] @ w[expert].T per assignment."""
    _check("a", a, ("T", "K"), tuple(DTYPES.values()), a.device if isinstance(a, torch.Tensor) else None)
    _check("w", w, ("E", "N", "K"), (a.dtype,), a.device)
    if w.stride(1) < w.shape[2] and w.shape[1] > 1:
        raise ValueError(f"w must hold each expert as an [N, K] row-major matrix, got strides {w.stride()}")
    _check("topk_ids", topk_ids, ("T", "k"), (torch.int32, torch.int64), a.device, unit_last=False)
    n_tokens, k_dim = a.shape
    n_experts, n, _ = w.shape
    top_k = topk_ids.shape[1]
    if w.shape[2] != k_dim:
        raise ValueError(f"w has K = {w.shape[2]}, a has K = {k_dim}")
    if topk_ids.shape[0] != n_tokens:
        raise ValueError(f"topk_ids has {topk_ids.shape[0]} rows, a has {n_tokens} tokens")
    if top_k > n_experts:
        raise ValueError(f"top_k={top_k} is larger than the expert count {n_experts}")
    if mul_routed_weight:
        if topk_weights is None:
            raise ValueError("mul_routed_weight needs topk_weights")
        _check("topk_weights", topk_weights, ("T", "k"), (torch.float32,), a.device)
        if tuple(topk_weights.shape) != tuple(topk_ids.shape) or not topk_weights.is_contiguous():
            raise ValueError(f"topk_weights must be a contiguous {tuple(topk_ids.shape)} tensor, "
                             f"got shape {tuple(topk_weights.shape)}, strides {topk_weights.stride()}")
    if out is None:
        out = torch.empty(n_tokens * top_k, n, dtype=a.dtype, device=a.device)
    _check("out", out, ("T*k", "N"), (a.dtype,), a.device)
    if tuple(out.shape) != (n_tokens * top_k, n):
        raise ValueError(f"out has shape {tuple(out.shape)}, expected {(n_tokens * top_k, n)}")
    if out.numel() == 0:
        return out
    if k_dim == 0:
        raise ValueError("a has K = 0 columns")
    cfg = cfg or config(current_arch().config_family, a.dtype, n_tokens * top_k / n_experts)
    sorted_ids, expert_ids, n_post = moe_align_block_size(topk_ids.contiguous(), n_experts, cfg["BLOCK_M"])
    em = sorted_ids.numel()
    grid = (triton.cdiv(em, cfg["BLOCK_M"]) * triton.cdiv(n, cfg["BLOCK_N"]),)
    moe_gemm_kernel[grid](
        a, w, out, topk_weights if mul_routed_weight else out, sorted_ids, expert_ids, n_post,
        n, k_dim, em, n_tokens * top_k, top_k, a.stride(0), w.stride(0), w.stride(1), out.stride(0),
        MUL_ROUTED_WEIGHT=bool(mul_routed_weight), EVEN_K=k_dim % cfg["BLOCK_K"] == 0,
        DOT_PRECISION="ieee", BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"], BLOCK_K=cfg["BLOCK_K"],
        GROUP_M=cfg["GROUP_M"], num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
        **cfg["options"])
    return out


# ---- the case --------------------------------------------------------------------------------

# tiny subnormal inputs are left out: tensor cores and MFMA flush fp32 subnormal partial sums,
# which is the hardware's documented behaviour, not this kernel's
REGIMES = ("normal", "large", "equal")
GEMM_ROUTINGS = ("uniform", "skewed", "hot")   # expert_parallel ids leave rows unwritten by contract


def _inputs(dtype: str, max_elements: int):
    """Sizes drawn in turn so that a [T, K], w [E, N, K] and out [T*k, N] stay within budget."""
    small = max_elements <= 65536
    most_e, most_t, most_nk = (8, 32, 64) if small else (64, 512, 1024)
    tile = 32 if small else 64

    def hidden(e, t, top_k):
        most_k = max(1, min(most_nk, max_elements // max(t, e)))
        return S.lengths(tile, most_k).flatmap(lambda k: st.tuples(
            st.just(e), st.just(t), st.just(top_k), st.just(k),
            S.lengths(tile, max(1, min(most_nk, max_elements // (e * k), max_elements // (t * top_k))))))

    def tokens(e):
        return st.tuples(S.lengths(16, most_t), st.integers(1, min(e, 8))).flatmap(
            lambda tk: hidden(e, *tk))

    return st.sampled_from([e for e in (1, 2, 3, 8, 16, 64) if e <= most_e]).flatmap(tokens).flatmap(
        lambda d: st.fixed_dictionaries({
            "dtype": st.just(dtype), "experts": st.just(d[0]), "tokens": st.just(d[1]),
            "top_k": st.just(d[2]), "k": st.just(d[3]), "n": st.just(d[4]),
            "routing": st.sampled_from(GEMM_ROUTINGS), "regime": st.sampled_from(REGIMES),
            "mul_routed_weight": st.booleans(), "layout": S.layouts(), "seed": S.seeds()}))


DEVICE_DRAW_ABOVE = 1 << 26   # weight tensors larger than this are drawn on the device (bench sizes)


def _expert_weights(spec: dict, device: str) -> torch.Tensor:
    """w [E, N, K] ~ N(0, 1/K), so outputs keep the scale of `a` whatever K is."""
    shape, dt = (spec["experts"], spec["n"], spec["k"]), DTYPES[spec["dtype"]]
    scale = 1.0 / math.sqrt(spec["k"])
    if math.prod(shape) <= DEVICE_DRAW_ABOVE:
        return S.values(shape, spec["dtype"], "normal", S.generator(spec["seed"] + 1), scale).to(device)
    # bench sizes (7.5 GB at E=64, N=14336, K=4096) come from the device's own generator:
    # reproducible per device type, and minutes faster than a float64 CPU draw
    gen = torch.Generator(device=device).manual_seed(spec["seed"] + 1)
    w = torch.empty(shape, dtype=dt, device=device)
    for e in range(shape[0]):
        w[e] = (torch.randn(shape[1:], generator=gen, device=device, dtype=torch.float32) * scale).to(dt)
    return w


def _make(spec: dict, device: str) -> dict:
    gen = S.generator(spec["seed"])
    t, k = spec["tokens"], spec["top_k"]
    a = S.values((t, spec["k"]), spec["dtype"], spec["regime"], gen)
    ids = routing_ids(t, k, spec["experts"], spec["routing"], gen).to(torch.int32)
    weights = torch.rand(t, k, generator=gen, dtype=torch.float32) * 0.95 + 0.05
    return {"a": S.laid_out(a, spec["layout"], device), "w": _expert_weights(spec, device),
            "topk_ids": ids.to(device), "topk_weights": weights.to(device),
            "mul_routed_weight": spec["mul_routed_weight"]}


def _outputs(args):
    t, k = args["topk_ids"].shape
    return {"out": ((t * k, args["w"].shape[1]), args["a"].dtype)}


def _launch(args, outs):
    moe_gemm(args["a"], args["w"], args["topk_ids"], args["topk_weights"],
             mul_routed_weight=args["mul_routed_weight"], out=outs["out"])


def _oracle(args):
    weights = args["topk_weights"] if args["mul_routed_weight"] else None
    return {"out": grouped_gemm_ref(args["a"], args["w"], args["topk_ids"], weights)}


def _gamma(n: int, u: float) -> float:
    return n * u / (1 - n * u)


def _tolerance(args, refs, dtype):
    """|out - ref| <= u(out)|ref| + (1 + u(out)) gamma_{K+1}(u(fp32)) |r| sum_k |a_k||w_k| + sub(out).

    The dot runs in fp32: products of fp16/bf16 values are exact there and fp32 products
    round once, and K fp32 additions give the componentwise bound gamma_K sum|a||w|
    (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., sec. 3.1); the fp32
    multiply by the routing weight r makes it gamma_{K+1}; rounding to the output dtype adds
    u(out) of the result.
    """
    weights = args["topk_weights"].abs() if args["mul_routed_weight"] else None
    magnitude = grouped_gemm_ref(args["a"].abs(), args["w"].abs(), args["topk_ids"], weights)
    k = args["a"].shape[1]
    uo, u32 = fmt(dtype).unit_roundoff, fmt("fp32").unit_roundoff
    g = _gamma(k + 1, u32)
    atol = (1 + uo) * g * magnitude + fmt(dtype).subnormal_step
    formula = (f"atol = (1 + u({dtype})) gamma_(K+1)(u(fp32)) |r| sum_k |a_k||w_k| + sub({dtype}), "
               f"K = {k}, gamma = {g:.3g}; rtol = u({dtype}) = {uo:.3g}")
    return {"out": Tolerance(uo, atol, formula)}


def _cost(args):
    a, w, ids = args["a"], args["w"], args["topk_ids"]
    n_experts, n, k = w.shape
    placed = ids[(ids >= 0) & (ids < n_experts)]
    used = int(torch.unique(placed).numel())
    es = a.element_size()
    moved = (a.shape[0] * k + used * n * k + ids.numel() * n) * es + ids.numel() * 4
    if args["mul_routed_weight"]:
        moved += ids.numel() * 4
    return Cost(bytes=moved, flops=2 * int(placed.numel()) * n * k)


def torch_expert_loop(a, w, topk_ids, topk_weights, mul_routed_weight):
    """The eager formulation serving engines fall back to: one dense GEMM per expert."""
    n_tokens, top_k = topk_ids.shape
    flat = topk_ids.flatten()
    out = torch.zeros(n_tokens * top_k, w.shape[1], dtype=a.dtype, device=a.device)
    for e in range(w.shape[0]):
        rows = (flat == e).nonzero().flatten()
        if rows.numel():
            y = a[rows // top_k] @ w[e].T
            if mul_routed_weight:
                y = (y.float() * topk_weights.flatten()[rows, None]).to(a.dtype)
            out[rows] = y
    return out


def _baselines(args):
    a, w, ids = args["a"], args["w"], args["topk_ids"]
    # the same FLOPs as one dense GEMM: [T*k, K] @ [K, N], the ratio the speed target names
    dense_a = a.repeat_interleave(ids.shape[1], dim=0)
    dense_w = w[0].T
    return {"torch": lambda: torch_expert_loop(a, w, ids, args["topk_weights"], args["mul_routed_weight"]),
            "torch.matmul": lambda: torch.matmul(dense_a, dense_w)}


# what a launch at the bench shapes specializes: 16-byte aligned tensors, and N, K and the row
# strides multiples of 16 (N = 14336, K = 4096)
DIVISIBLE = ("a_ptr", "w_ptr", "c_ptr", "topk_w_ptr", "sorted_ptr", "expert_ids_ptr", "n_post_ptr",
             "N", "K", "stride_am", "stride_we", "stride_wn", "stride_cm")


def _variants(arch) -> list[Variant]:
    family = arch.config_family
    out = []
    for dtype in DTYPES:
        t = "*" + fmt(dtype).triton_name
        sig = {"a_ptr": t, "w_ptr": t, "c_ptr": t, "topk_w_ptr": "*fp32", "sorted_ptr": "*i32",
               "expert_ids_ptr": "*i32", "n_post_ptr": "*i32", "N": "i32", "K": "i32", "EM": "i32",
               "num_valid": "i32", "top_k": "i32", "stride_am": "i32", "stride_we": "i32", "stride_wn": "i32",
               "stride_cm": "i32"}
        rows = config_table()[family]["fp32" if dtype == "fp32" else "16bit"]
        for i, (upto, cfg) in enumerate(rows):
            # every config as the bench runs it; the first also as the ragged-K, unweighted form
            forms = [(True, True)] + ([(False, False)] if i == 0 else [])
            for mul, even_k in forms:
                consts = {"MUL_ROUTED_WEIGHT": mul, "EVEN_K": even_k, "DOT_PRECISION": "ieee",
                          **{key: cfg[key] for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")}}
                label = (f"{dtype} {cfg['BLOCK_M']}x{cfg['BLOCK_N']}x{cfg['BLOCK_K']} runs<={upto or 'any'}"
                         f"{'' if mul else ' unweighted'}{'' if even_k else ' ragged K'}")
                out.append(Variant(moe_gemm_kernel, sig, consts, cfg["num_warps"], cfg["num_stages"],
                                   dict(cfg["options"]), label=label, divisible_by_16=DIVISIBLE))
    return out


BENCH_W1 = {"dtype": "bf16", "tokens": 4096, "experts": 64, "top_k": 8, "n": 14336, "k": 4096,
            "routing": "uniform", "regime": "normal", "mul_routed_weight": True,
            "layout": "contiguous", "seed": 0}

register(Case(
    name="moe_gemm", family="moe", dtypes=tuple(DTYPES), inputs=_inputs, make=_make,
    outputs=_outputs, launch=_launch, oracle=_oracle, tolerance=_tolerance, cost=_cost,
    bench=(BENCH_W1, dict(BENCH_W1, dtype="fp16"),
           dict(BENCH_W1, dtype="fp32", tokens=1024, n=4096)),
    variants=_variants, baselines=_baselines,
    description="MoE grouped GEMM (fused_moe): top-k experts per token, routing weight applied"))
