"""matmul's cases: inputs that break tiling and layouts, the float64 oracle, the tolerance from a
model of the matrix units' accumulation, baselines, and every configuration as a compile variant."""
from __future__ import annotations

import math
import random

import torch
from hypothesis import strategies as st

from ... import strategies as S
from ...cases import Case, Cost, Variant, register
from ...dtypes import fmt
from ...facts.archs import Arch
from ...facts.device import current_arch, dot_fp32_precision, fp8_accumulation, fp32_matmul
from ...facts.numerics import ERF_ULP, EXP_ULP, U_ADD, U_FP22, U_TF32
from ...oracles.matmul import ACTIVATIONS, abs_product, int_matmul
from ...oracles.matmul import matmul as matmul_ref
from ...tolerance import Tolerance, exact
from .kernel import matmul_kernel, matmul_tma_kernel
from .launcher import (FLOAT_DTYPES, FP8_DTYPES, FP8_OUT, INT_ACTIVATIONS, NARROW_M, Config,
                       arch_configs, configs, k_major_only, matmul, tma_arch, tma_shared_bytes)

FP8_MMA_K = 32             # k of one fp8 MMA instruction (wgmma / mma.sync m16n8k32)

# ---- inputs ------------------------------------------------------------------------------------

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
            "fp8_acc": fp8_accumulation(arch) if dtype in FP8_DTYPES and arch else None}


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
    from ...speed import peers
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

SPLIT_VARIANT = 4   # the split-K compile variant's SPLIT_K (any count above 1 builds the same code paths)
_DIVISIBLE = ("a_ptr", "b_ptr", "c_ptr", "bias_ptr", "M", "N", "K", "stride_am", "stride_bk",
              "stride_bn", "stride_cm")


def _variant(arch, dtype: str, out: str, cfg: Config, *, b_col: bool, bias: bool = False,
             activation: str = "none", split: int = 1) -> Variant:
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
              "FP8_ACC": fp8_accumulation(arch) if fp8 else "none",
              # a bench-sized launch: its last tiles move back to fit (M skinny under split-K)
              "M_FITS": split == 1, "N_FITS": True}
    if split > 1:   # split-K: a K tail, the partial tiles and the arrival counters
        consts.update({"SPLIT_K": split, "EVEN_K": False})
        sig.update({"ws_ptr": "*i32" if dtype == "int8" else "*fp32", "lock_ptr": "*i32"})
    if not bias:
        consts["bias_ptr"] = None
    if not fp8:
        consts["scale_a_ptr"] = consts["scale_b_ptr"] = None
    for name in consts:
        sig.setdefault(name, "constexpr")
    epilogue = (f" bias+{activation}" if bias else "") + (f" split-K {split}" if split > 1 else "")
    return Variant(matmul_kernel, sig, consts, cfg.num_warps, cfg.num_stages, dict(cfg.options),
                   label=f"{dtype} {cfg.label} out={out}{' B col-major' if b_col else ''}{epilogue}",
                   divisible_by_16=tuple(n for n in _DIVISIBLE if sig[n] != "constexpr"))


def tma_variants(arch: Arch, dtypes=("bf16",)) -> list[Variant]:
    """The matmul_tma_kernel launches of an arch that runs it (launcher.tma_arch: sm_90a,
    sm_100a): every wide configuration of the dtype, B row-major and C through a descriptor, as
    a bench-sized launch makes them. Kept apart from the case's variants, which `portcheck
    prune` reads as the pointer kernel's autotune launches (a configuration is judged by every
    variant carrying its tiles); tests/kernels/test_matmul_compile.py builds these through the
    same compile pipeline and lints."""
    if arch.is_interpreter or not tma_arch(arch):
        return []
    out = []
    for dtype in dtypes:
        t = fmt(dtype).triton_name
        in_bytes = fmt(dtype).torch_dtype.itemsize
        for cfg in arch_configs(arch, dtype, None):
            if cfg.block_m <= NARROW_M or tma_shared_bytes(cfg, in_bytes, arch) > arch.shared_per_block:
                continue
            bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
            sig = {"a_desc": f"tensordesc<{t}[{bm}, {bk}]>", "b_desc": f"tensordesc<{t}[{bk}, {bn}]>",
                   "c": f"tensordesc<{t}[{bm}, {bn // 2}]>", "M": "i32", "N": "i32", "K": "i32", "stride_cm": "i32"}
            consts = {"bias_ptr": None, "scale_a_ptr": None, "scale_b_ptr": None, "stride_cn": 1,
                      **cfg.constexprs(), "B_KMAJOR": False, "C_DESC": True, "WIDE": False,
                      "HAS_BIAS": False, "HAS_SCALES": False, "ACTIVATION": "none",
                      "PRECISION": "ieee", "FP8_ACC": "none"}
            for name in consts:
                sig.setdefault(name, "constexpr")
            out.append(Variant(matmul_tma_kernel, sig, consts, cfg.num_warps, cfg.num_stages,
                               dict(cfg.options), label=f"{dtype} {cfg.label} tma"))
    return out


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
            # split-K, where skinny M runs it: once per dtype, on the first narrow configuration
            narrow = [c for c in cfgs if c.block_m <= NARROW_M]
            if narrow:
                found.append(_variant(arch, dtype, out_of(dtype), narrow[0],
                                      b_col=b_col(arch, dtype, narrow[0]), split=SPLIT_VARIANT))
        return found
    return variants


def _configs_for(dtypes_of):
    """Case.configs: the configurations an arch declares for a dtype it takes (the same lists
    as the variants), [] for one it does not."""
    def configs_of(arch, dtype) -> list[Config]:
        return arch_configs(arch, dtype, arch.shared_per_block) if dtype in dtypes_of(arch) else []
    return configs_of


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
    configs=_configs_for(lambda arch: tuple(FLOAT_DTYPES)),
    baselines=_baselines, math=("erf", "exp"),
    description="C = act(A @ B + bias), fp16 / bf16 / fp32 (tf32 where the arch has it), fp32 accumulation"))

register(Case(
    name="matmul_fp8", family="matmul", dtypes=tuple(FP8_DTYPES),
    inputs=_inputs(FP8_REGIMES, ACTIVATIONS, outs=("bf16",)), make=_make, outputs=_outputs,
    launch=_launch, oracle=_oracle, tolerance=_tolerance, cost=_cost,
    bench=tuple(_spec(d, s, s, s, b_layout="col", out="bf16") for d in ("fp8e4nv", "fp8e4b8")
                for s in SQUARES),
    variants=_variants_for(lambda arch: arch.fp8_native, lambda d: "bf16", b_col=_b_column_major),
    configs=_configs_for(lambda arch: arch.fp8_native),
    baselines=_baselines, math=("erf", "exp"),
    description="C = act(scale_a scale_b (A @ B) + bias) in bf16, fp8 inputs with per-tensor scales"))

register(Case(
    name="matmul_fp8_out", family="matmul", dtypes=tuple(FP8_DTYPES),
    inputs=_inputs(FP8_REGIMES, ACTIVATIONS, outs=("fp32", "fp16")), make=_make, outputs=_outputs,
    launch=_launch, oracle=_oracle, tolerance=_tolerance, cost=_cost,
    # the same kernel as matmul_fp8 but for the store: one format's configurations suffice
    variants=_variants_for(lambda arch: arch.fp8_native[:1], lambda d: "fp32", b_col=_b_column_major),
    configs=_configs_for(lambda arch: arch.fp8_native),
    baselines=_baselines, math=("erf", "exp"),
    description="the fp8 matmul writing fp32 or fp16 (no bf16 rounding: checkable on the interpreter)"))

register(Case(
    name="matmul_int8", family="matmul", dtypes=("int8",),
    inputs=_inputs(INT_REGIMES, INT_ACTIVATIONS), make=_make, outputs=_outputs, launch=_launch,
    oracle=_oracle, tolerance=_tolerance, cost=_cost,
    bench=tuple(_spec("int8", s, s, s, b_layout="col") for s in SQUARES),
    variants=_variants_for(lambda arch: ("int8",), lambda d: "int32", b_col=_b_column_major),
    configs=_configs_for(lambda arch: ("int8",)),
    baselines=_baselines,
    description="int8 x int8 -> int32, exact; optional int32 bias and relu"))
