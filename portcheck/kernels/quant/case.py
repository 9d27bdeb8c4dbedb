"""quant's cases: inputs that probe rounding (ties, specials, every fp8 code), the bit-exact
oracles, baselines, and the compile variants of each launch."""
from __future__ import annotations

import torch
import triton
from hypothesis import strategies as st

from ... import strategies as S
from ...cases import Case, Cost, Variant, launch_divisibility, register
from ...dtypes import fmt
from ...oracles import quant as quant_ref
from ...tolerance import Tolerance, exact
from .kernel import (amax_kernel, dequant_kernel, quant_long_rows_kernel, quant_rows_kernel,
                     quant_tensor_kernel)
from .launcher import (FP8_DTYPES, IN_DTYPES, dequant, device_fp8, fp8_for, min_scale_of,
                       qmax_of, quant_per_tensor, quant_per_token, row_config, tile_config)

# ---- inputs ---------------------------------------------------------------------------------

QUANT_REGIMES = ("normal", "large", "tiny", "equal", "zeros", "special", "ties")


def quant_values(spec: dict, out_dtype: torch.dtype, gen: torch.Generator, per_row: bool) -> torch.Tensor:
    shape = (spec["rows"], spec["cols"])
    if spec["regime"] == "ties":
        return S.tie_values(shape, spec["dtype"], (out_dtype,), gen, per_row).to(fmt(spec["dtype"]).torch_dtype)
    return S.values(shape, spec["dtype"], spec["regime"], gen)


LOOP_ROWS = 4   # the loop path runs one program per row: a few rows keep the interpreter quick


def _quant_inputs(tile: int, extra: dict):
    def inputs(dtype: str, max_elements: int):
        return S.rows_and_cols(tile, max_elements).flatmap(lambda rc: st.fixed_dictionaries({
            "dtype": st.just(dtype), "rows": st.just(rc[0]), "cols": st.just(rc[1]),
            "regime": st.sampled_from(QUANT_REGIMES), "layout": S.layouts(), "seed": S.seeds(),
            **extra})).map(_few_rows_on_loop_path)
    return inputs


def _few_rows_on_loop_path(spec: dict) -> dict:
    if spec.get("path") == "loop":
        return {**spec, "rows": min(spec["rows"], LOOP_ROWS)}
    return spec


# ---- per-token cases ------------------------------------------------------------------------

def _per_token_make(codes: str):
    def make(spec: dict, device: str) -> dict:
        out_dtype = torch.int8 if codes == "int8" else device_fp8()
        gen = S.generator(spec["seed"])
        x = quant_values(spec, out_dtype, gen, per_row=True)
        long_rows = spec.get("path") == "loop"
        # the loop path on small rows uses a quarter-row chunk so that it loops and ends partial
        chunk = max(16, triton.next_power_of_2(spec["cols"]) // 4) if long_rows else None
        return {"x": S.laid_out(x, spec["layout"], device), "out_dtype": out_dtype,
                "long_rows": long_rows, "chunk": chunk}
    return make


def _per_token_outputs(args):
    rows, cols = args["x"].shape
    return {"q": ((rows, cols), args["out_dtype"]), "scale": ((rows, 1), torch.float32)}


def _per_token_launch(args, outs):
    quant_per_token(args["x"], args["out_dtype"], outs["q"], outs["scale"],
                    long_rows=args["long_rows"], chunk=args["chunk"])


def _codes_name(out_dtype: torch.dtype) -> str:
    return "int8" if out_dtype == torch.int8 else FP8_DTYPES[out_dtype]


def _per_token_oracle(args):
    return quant_ref.quantize_per_token(args["x"], _codes_name(args["out_dtype"]))


def _scale_tolerance(args, refs, dtype):
    u = fmt("fp32").unit_roundoff
    return Tolerance(u, 0.0, f"rtol = u(fp32) = {u:.3g}: the scale is one fp32 division of the exact amax")


def _quant_tolerance(args, refs, dtype):
    name = _codes_name(args["out_dtype"])
    tols = {"q": exact(f"{name} codes bit for bit: the oracle follows the kernel's fp32 steps exactly")}
    if "scale" in refs:
        tols["scale"] = _scale_tolerance(args, refs, dtype)
    return tols


def _per_token_cost(args):
    x, out_dtype = args["x"], args["out_dtype"]
    n = x.numel()
    return Cost(bytes=n * x.element_size() + n * out_dtype.itemsize + 4 * x.shape[0], flops=3 * n)


def _torch_per_token(x: torch.Tensor, out_dtype: torch.dtype):
    qmax, floor = qmax_of(out_dtype), min_scale_of(out_dtype)

    def run():
        xf = x.float()
        scale = (xf.abs().amax(dim=-1, keepdim=True) / qmax).clamp_min(floor)
        y = (xf * scale.reciprocal()).clamp(-qmax, qmax)
        return (y.round() if out_dtype == torch.int8 else y).to(out_dtype), scale
    return run


def _per_token_baselines(args):
    """torch eager; for fp8, FlagGems' per_token_group_quant_fp8 with one group per row (the same
    operation: a scale per token from its amax) where it imports."""
    from ...speed import peers
    x, out_dtype = args["x"], args["out_dtype"]
    out = {"torch": _torch_per_token(x, out_dtype)}
    gems = peers.load("flag_gems") if out_dtype != torch.int8 else None
    if gems is not None and x.shape[1] > 0:
        out[peers.FLAGGEMS] = lambda: gems.per_token_group_quant_fp8(x, x.shape[1], dtype=out_dtype)
    return out


def _bench_rows(dtype="bf16", rows=16384, cols=8192, **extra) -> dict:
    return {"dtype": dtype, "rows": rows, "cols": cols, "regime": "normal", "layout": "contiguous",
            "seed": 0, **extra}


def bench_first(variants: list, label: str) -> list:
    """The benchmarked configuration first: a CI compile of one variant per arch builds that one."""
    return sorted(variants, key=lambda v: v.label != label)


def _sig_type(dtype) -> str:
    return "*" + fmt(dtype).triton_name


def _quant_row_variants(codes: str):
    def variants(arch) -> list[Variant]:
        out_dtype = torch.int8 if codes == "int8" else fp8_for(arch)
        qt = _sig_type(out_dtype)
        consts = {"QMAX": qmax_of(out_dtype), "MIN_SCALE": min_scale_of(out_dtype),
                  "INT8": out_dtype == torch.int8}
        out = []
        for dtype in IN_DTYPES:
            xt = _sig_type(dtype)
            for n in (128, 8192, 16384):
                cfg = row_config(n, arch.warp_size)
                sig = {"x_ptr": xt, "q_ptr": qt, "s_ptr": "*fp32", "n_rows": "i32",
                       "n_cols": "i32", "x_stride": "i32", "q_stride": "i32"}
                out.append(Variant(quant_rows_kernel, sig,
                                   {**consts, "ROWS": cfg["ROWS"], "BLOCK": cfg["BLOCK"]},
                                   cfg["num_warps"], label=f"{dtype} n={n}",
                                   divisible_by_16=launch_divisibility(sig, n_cols=n, x_stride=n,
                                                                       q_stride=n)))
            cfg = row_config(65536, arch.warp_size)
            sig = {"x_ptr": xt, "q_ptr": qt, "s_ptr": "*fp32", "n_cols": "i32", "x_stride": "i32",
                   "q_stride": "i32"}
            out.append(Variant(quant_long_rows_kernel, sig,
                               {**consts, "BLOCK": cfg["BLOCK"]}, cfg["num_warps"],
                               label=f"{dtype} n=65536 loop",
                               divisible_by_16=launch_divisibility(sig, n_cols=65536,
                                                                   x_stride=65536, q_stride=65536)))
        return bench_first(out, "bf16 n=8192")
    return variants


for _codes in ("int8", "fp8"):
    register(Case(
        name=f"quant_{_codes}_per_token", family="quant", dtypes=tuple(IN_DTYPES),
        inputs=_quant_inputs(1024, {"path": st.sampled_from(("fused", "loop"))}),
        make=_per_token_make(_codes), outputs=_per_token_outputs, launch=_per_token_launch,
        oracle=_per_token_oracle, tolerance=_quant_tolerance, cost=_per_token_cost,
        bench=(_bench_rows(path="fused"),), variants=_quant_row_variants(_codes),
        baselines=_per_token_baselines,
        description=(f"dynamic per-token symmetric quantization to {_codes} "
                     f"({'the device e4m3: OCP e4m3fn, FNUZ on gfx942' if _codes == 'fp8' else 'round half to even'}), "
                     "fp32 scale per row")))


# ---- per-tensor fp8 case --------------------------------------------------------------------

STATIC_FACTORS = (0.5, 1.0, 2.0)   # static scale = amax / qmax * factor: 0.5 saturates the top


def _per_tensor_make(spec: dict, device: str) -> dict:
    out_dtype = device_fp8()
    gen = S.generator(spec["seed"])
    x = quant_values(spec, out_dtype, gen, per_row=False)
    args = {"x": S.laid_out(x, spec["layout"], device), "out_dtype": out_dtype, "scale": None}
    if spec["mode"] == "static":
        finite = x.to(torch.float64).abs().nan_to_num(nan=0.0, posinf=0.0)
        amax = float(finite.max()) if finite.numel() else 0.0
        s = max(amax / qmax_of(out_dtype), 1e-3) * STATIC_FACTORS[spec["factor"]]
        args["scale"] = torch.tensor([s], dtype=torch.float32, device=device)
    return args


def _per_tensor_outputs(args):
    rows, cols = args["x"].shape
    outs = {"q": ((rows, cols), args["out_dtype"])}
    if args["scale"] is None:
        outs["scale"] = ((1,), torch.float32)
    return outs


def _per_tensor_launch(args, outs):
    quant_per_tensor(args["x"], args["out_dtype"], args["scale"], outs["q"], outs.get("scale"))


def _per_tensor_oracle(args):
    return quant_ref.quantize_per_tensor(args["x"], _codes_name(args["out_dtype"]), args["scale"])


def _per_tensor_cost(args):
    x, out_dtype = args["x"], args["out_dtype"]
    n = x.numel()
    # dynamic: the amax pass must finish before any code is written, and a tensor worth timing
    # does not stay on chip in between, so x is read twice
    reads = 1 if args["scale"] is not None else 2
    return Cost(bytes=reads * n * x.element_size() + n * out_dtype.itemsize + 4, flops=3 * n)


def _torch_per_tensor(x: torch.Tensor, out_dtype: torch.dtype, scale):
    qmax, floor = qmax_of(out_dtype), min_scale_of(out_dtype)

    def run():
        xf = x.float()
        s = scale if scale is not None else (xf.abs().amax() / qmax).clamp_min(floor)
        return (xf * s.reciprocal()).clamp(-qmax, qmax).to(out_dtype), s
    return run


def _per_tensor_baselines(args):
    return {"torch": _torch_per_tensor(args["x"], args["out_dtype"], args["scale"])}


def _per_tensor_variants(arch) -> list[Variant]:
    out_dtype = fp8_for(arch)
    qt = _sig_type(out_dtype)
    out = []
    bench = _bench_rows()   # the tiles and the divisibility of the bench's launch
    n = bench["cols"]
    for dtype in IN_DTYPES:
        xt = _sig_type(dtype)
        cfg = tile_config(bench["rows"], n, arch.warp_size)
        tiles = {"ROWS": cfg["ROWS"], "BLOCK": cfg["BLOCK"]}
        sig = {"x_ptr": xt, "amax_bits_ptr": "*i32", "n_rows": "i32", "n_cols": "i32",
               "x_stride": "i32"}
        out.append(Variant(amax_kernel, sig, tiles, cfg["num_warps"], label=f"{dtype} amax",
                           divisible_by_16=launch_divisibility(sig, n_cols=n, x_stride=n)))
        sig = {"x_ptr": xt, "q_ptr": qt, "scale_ptr": "*fp32", "amax_bits_ptr": "*i32",
               "n_rows": "i32", "n_cols": "i32", "x_stride": "i32", "q_stride": "i32"}
        for static in (False, True):
            out.append(Variant(quant_tensor_kernel, sig,
                               {"QMAX": qmax_of(out_dtype), "MIN_SCALE": min_scale_of(out_dtype),
                                "INT8": False, "STATIC": static, **tiles},
                               cfg["num_warps"], label=f"{dtype} {'static' if static else 'dynamic'}",
                               divisible_by_16=launch_divisibility(sig, n_cols=n, x_stride=n,
                                                                   q_stride=n)))
    return bench_first(out, "bf16 dynamic")


register(Case(
    name="quant_fp8_per_tensor", family="quant", dtypes=tuple(IN_DTYPES),
    inputs=_quant_inputs(1024, {"mode": st.sampled_from(("dynamic", "static")),
                                "factor": st.integers(0, len(STATIC_FACTORS) - 1)}),
    make=_per_tensor_make, outputs=_per_tensor_outputs, launch=_per_tensor_launch,
    oracle=_per_tensor_oracle, tolerance=_quant_tolerance, cost=_per_tensor_cost,
    bench=(_bench_rows(mode="dynamic", factor=1), _bench_rows(mode="static", factor=1)),
    variants=_per_tensor_variants, baselines=_per_tensor_baselines,
    description="per-tensor fp8 quantization (device e4m3): dynamic (amax pass + code pass) or static scale"))


# ---- dequantization cases -------------------------------------------------------------------

DEQUANT_REGIMES = ("normal", "large", "tiny")
# scale magnitudes per regime: ordinary, products past fp16's max, products in fp32's subnormals
SCALE_EXP = {"normal": (-12, 0), "large": (4, 12), "tiny": (-125, -115)}


def _dequant_inputs(dtype: str, max_elements: int):
    return S.rows_and_cols(1024, max_elements).flatmap(lambda rc: st.fixed_dictionaries({
        "dtype": st.just(dtype), "rows": st.just(rc[0]), "cols": st.just(rc[1]),
        "per": st.sampled_from(("token", "tensor")), "regime": st.sampled_from(DEQUANT_REGIMES),
        "layout": S.layouts(), "seed": S.seeds()}))


def all_codes(shape, gen: torch.Generator) -> torch.Tensor:
    """Random bytes whose first 256 (in a random order) are every code once: NaN, inf, +-0 and
    the subnormals appear in every input large enough to hold them."""
    rows, cols = shape
    n = rows * cols
    flat = S.integers(0, 256, (n,), gen)   # a bench's 134 M codes on the GPU: seconds less
    k = min(n, 256)
    flat[:k] = torch.randperm(256, generator=gen)[:k].to(flat.device)
    return flat.to(torch.uint8).reshape(rows, cols)


def _dequant_make(codes: str):
    def make(spec: dict, device: str) -> dict:
        gen = S.generator(spec["seed"])
        rows, cols = spec["rows"], spec["cols"]
        bits = all_codes((rows, cols), gen)
        q_dtype = torch.int8 if codes == "int8" else device_fp8()
        q = bits.view(q_dtype)
        lo, hi = SCALE_EXP[spec["regime"]]
        n_scales = rows if spec["per"] == "token" else 1
        mant = 1 + torch.rand(n_scales, generator=gen, dtype=torch.float64)
        scale = torch.ldexp(mant, torch.randint(lo, hi + 1, (n_scales,), generator=gen)).to(torch.float32)
        scale = scale.reshape(rows, 1) if spec["per"] == "token" else scale.reshape(1)
        q = _laid_out_codes(q, spec["layout"], device)
        # q_bits: the same codes as uint8, which the harness hands to the oracle unconverted
        return {"q": q, "q_bits": q.view(torch.uint8), "q_dtype": q_dtype, "scale": scale.to(device),
                "out_dtype": fmt(spec["dtype"]).torch_dtype}
    return make


def _laid_out_codes(q: torch.Tensor, layout: str, device: str) -> torch.Tensor:
    """Codes in a row layout of S.laid_out: past a padded or far row, the format's NaN / -128."""
    fill = 0x80 if q.dtype in (torch.int8, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz) else 0x7f
    return S.laid_out(q.view(torch.uint8), layout, device, fill=fill).view(q.dtype)


def _dequant_outputs(args):
    return {"out": (tuple(args["q"].shape), args["out_dtype"])}


def _dequant_launch(args, outs):
    dequant(args["q"], args["scale"], args["out_dtype"], outs["out"])


def _dequant_oracle(args):
    q = args["q_bits"].view(args["q_dtype"])
    return {"out": quant_ref.dequantize(q, args["scale"], args["out_dtype"])}


def _dequant_tolerance(args, refs, dtype):
    """Every finite value exactly: two distinct numbers of the format differ by at least its
    smallest subnormal, so half of it as atol admits only equality. Compared as values rather
    than bits because a NaN's payload and sign after fp32 arithmetic are the hardware's choice."""
    f = fmt(dtype)
    half_step = 2.0 ** (f.min_exp - f.mantissa_bits - 1)
    return {"out": Tolerance(0.0, half_step, f"exact: fl_{dtype}(fl32(q * scale)), the kernel's two "
                                             f"roundings; atol = half the smallest {dtype} subnormal; NaN where NaN")}


def _dequant_cost(args):
    q = args["q"]
    n = q.numel()
    return Cost(bytes=n * (1 + args["out_dtype"].itemsize) + 4 * args["scale"].numel(), flops=n)


def _dequant_baselines(args):
    q, s, out_dtype = args["q"], args["scale"], args["out_dtype"]
    return {"torch": lambda: (q.float() * s).to(out_dtype)}


def _dequant_variants(codes: str):
    def variants(arch) -> list[Variant]:
        q_dtype = torch.int8 if codes == "int8" else fp8_for(arch)
        bench = _bench_rows()   # the tiles and the divisibility of the bench's launch
        n = bench["cols"]
        cfg = tile_config(bench["rows"], n, arch.warp_size)
        out = []
        for dtype in IN_DTYPES:
            sig = {"q_ptr": _sig_type(q_dtype), "s_ptr": "*fp32", "o_ptr": _sig_type(dtype),
                   "n_rows": "i32", "n_cols": "i32", "q_stride": "i32", "o_stride": "i32"}
            for per_token in (True, False):
                out.append(Variant(dequant_kernel, sig,
                                   {"PER_TOKEN": per_token, "ROWS": cfg["ROWS"], "BLOCK": cfg["BLOCK"]},
                                   cfg["num_warps"], label=f"{dtype} per-{'token' if per_token else 'tensor'}",
                                   divisible_by_16=launch_divisibility(sig, n_cols=n, q_stride=n,
                                                                       o_stride=n)))
        return bench_first(out, "bf16 per-token")
    return variants


for _codes in ("int8", "fp8"):
    register(Case(
        name=f"dequant_{_codes}", family="quant", dtypes=tuple(IN_DTYPES),
        inputs=_dequant_inputs, make=_dequant_make(_codes), outputs=_dequant_outputs,
        launch=_dequant_launch, oracle=_dequant_oracle, tolerance=_dequant_tolerance,
        cost=_dequant_cost,
        bench=({"dtype": "bf16", "rows": 16384, "cols": 8192, "per": "token", "regime": "normal",
                "layout": "contiguous", "seed": 0},),
        variants=_dequant_variants(_codes), baselines=_dequant_baselines,
        description=f"dequantization of {_codes} codes with per-token or per-tensor fp32 scales"))
