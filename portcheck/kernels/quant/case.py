"""Symmetric quantization to int8 and fp8, and dequantization, as serving engines ship them.

Semantics (vLLM's scaled_int8_quant / scaled_fp8_quant, with the choices below made explicit):
  amax   = max |x| over a row (per token) or the whole tensor, ignoring inf and NaN
  scale  = max(amax / qmax, 1 / (qmax * 512))      qmax = 127 (int8) or the fp8 format's max;
                                                    the floor is vLLM's fp8 min_scaling_factor,
                                                    applied to int8 too, so a zero row is defined
  inv    = 1 / scale                                one IEEE division per row / tensor (div_rn)
  q      = clamp(x * inv, -qmax, qmax) rounded to the output format, nearest even
Every step is one correctly rounded fp32 operation, in this order: the kernel multiplies by the
reciprocal of the stored scale (x * (1/scale), not x / scale), so dequantizing with the stored
scale is consistent with what was quantized. +-inf saturate to +-qmax; NaN becomes the fp8
format's NaN (0x7f OCP, 0x80 FNUZ) and 0 in int8. The int8 rounding is done in fp32 without
libdevice: adding 1.5 * 2^23 to |y| <= 127 leaves no fraction bits, so the add itself rounds to
nearest even, and subtracting it back is exact (the clamp between the multiply and the add keeps
the compiler from fusing them into one FMA).

fp8 formats: the launcher takes any fp8 dtype the active target's Triton accepts and refuses the
others (fp8e4nv before sm_89, FNUZ on NVIDIA) before launch. The cases quantize to the device's
e4m3: FNUZ on gfx942 (CDNA3), OCP e4m3fn on sm_89+, gfx950 and RDNA4; Triton emulates OCP e4m3fn
on AMD archs without fp8 hardware, and on sm_80 the only fp8 Triton converts to is e5m2.

Dequantization: x' = fl_out(fl32(q * scale)), per token ([rows, 1] scales) or per tensor ([1]).
"""
from __future__ import annotations

from functools import lru_cache

import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

from .. import strategies as S
from ..cases import Case, Cost, Variant, launch_divisibility, register
from ..dtypes import fmt, torch_dtype
from ..oracles import fp8 as fp8_ref
from ..oracles import quant as quant_ref
from ..tolerance import Tolerance, exact
from ..facts.archs import Arch
from ..facts.device import compute_units, current_arch, interpreted, warp_size
from ._launch import check_2d, num_warps_for

INT8_MAX = 127.0
SCALE_FLOOR_FACTOR = 512.0     # min scale = 1 / (qmax * 512), vLLM's fp8 min_scaling_factor
MAX_FUSED = 16384              # longest row whose amax and codes one program keeps in registers
ELEMS_PER_PROGRAM = 8192       # short rows are packed several to a program
# elements per thread of the one-read per-token kernel: 8 warps for an 8192-column bf16 row reach
# 0.90 of copy on the H200 (int8 codes) against 0.83 at 16 warps (tools/sweep_launch.py, 2026-11-30)
ROW_ELEMS_PER_THREAD = 32
TILE_COLS = 1024               # column tile of the elementwise (per-tensor, dequant) kernels
IN_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
FP8_DTYPES = {f.torch_dtype: name for name, f in fp8_ref.FORMATS.items()}
RNE_MAGIC = 12582912.0         # 1.5 * 2^23


# ---- kernels --------------------------------------------------------------------------------

@triton.jit
def _scale_from_amax(amax, QMAX: tl.constexpr, MIN_SCALE: tl.constexpr):
    return tl.maximum(tl.math.div_rn(amax, QMAX), MIN_SCALE)


@triton.jit
def _finite_abs(x):
    """|x| where x is finite, else 0: inf and NaN do not set the scale."""
    a = tl.abs(x)
    return tl.where(a < float("inf"), a, 0.0)


@triton.jit
def _quantize(x, inv, QMAX: tl.constexpr, INT8: tl.constexpr):
    """fp32 x times the fp32 reciprocal scale, clamped (NaN kept); int8: rounded half to even."""
    y = tl.clamp(x * inv, -QMAX, QMAX, propagate_nan=tl.PropagateNan.ALL)
    if INT8:
        y = (y + 12582912.0) - 12582912.0      # RNE_MAGIC: the add rounds to an integer
        y = tl.where(y == y, y, 0.0)           # int8 has no NaN; fptosi(NaN) is undefined
    return y


@triton.jit
def quant_rows_kernel(x_ptr, q_ptr, s_ptr, n_rows, n_cols, x_stride, q_stride,
                      QMAX: tl.constexpr, MIN_SCALE: tl.constexpr, INT8: tl.constexpr,
                      ROWS: tl.constexpr, BLOCK: tl.constexpr):
    """Per-token dynamic quantization of ROWS rows that fit in one BLOCK each: one read."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)[None, :]
    row_ok = rows < n_rows
    mask = row_ok[:, None] & (cols < n_cols)
    rows64 = rows.to(tl.int64)[:, None]
    x = tl.load(x_ptr + rows64 * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    scale = _scale_from_amax(tl.max(_finite_abs(x), axis=1), QMAX, MIN_SCALE)
    inv = tl.math.div_rn(1.0, scale)
    q = _quantize(x, inv[:, None], QMAX, INT8)
    tl.store(q_ptr + rows64 * q_stride + cols, q.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(s_ptr + rows, scale, mask=row_ok)


@triton.jit
def quant_long_rows_kernel(x_ptr, q_ptr, s_ptr, n_cols, x_stride, q_stride,
                           QMAX: tl.constexpr, MIN_SCALE: tl.constexpr, INT8: tl.constexpr,
                           BLOCK: tl.constexpr):
    """Per-token quantization of one row longer than a block: an amax pass, then a code pass
    (the second read of a row mostly hits L2)."""
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_stride
    q_row = q_ptr + row * q_stride
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=0.0).to(tl.float32)
        acc = tl.maximum(acc, _finite_abs(x))
    scale = _scale_from_amax(tl.max(acc, axis=0), QMAX, MIN_SCALE)
    inv = tl.math.div_rn(1.0, scale)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        q = _quantize(x, inv, QMAX, INT8)
        tl.store(q_row + start + cols, q.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(s_ptr + row, scale)


@triton.jit
def amax_kernel(x_ptr, amax_bits_ptr, n_rows, n_cols, x_stride,
                ROWS: tl.constexpr, BLOCK: tl.constexpr):
    """Tensor amax: a grid sized to the machine strides over the tiles, then one atomic max per
    program on the int32 bits of the (non-negative, finite) fp32 amax, which order like ints."""
    pid = tl.program_id(0)
    n_col_tiles = tl.cdiv(n_cols, BLOCK)
    n_tiles = tl.cdiv(n_rows, ROWS) * n_col_tiles
    r = tl.arange(0, ROWS)[:, None]
    c = tl.arange(0, BLOCK)[None, :]
    acc = tl.zeros([ROWS, BLOCK], tl.float32)
    for tile in range(pid, n_tiles, tl.num_programs(0)):
        rows = (tile // n_col_tiles) * ROWS + r
        cols = (tile % n_col_tiles) * BLOCK + c
        mask = (rows < n_rows) & (cols < n_cols)
        x = tl.load(x_ptr + rows.to(tl.int64) * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        acc = tl.maximum(acc, _finite_abs(x))
    amax = tl.max(tl.max(acc, axis=1), axis=0)
    tl.atomic_max(amax_bits_ptr, amax.to(tl.int32, bitcast=True))


@triton.jit
def quant_tensor_kernel(x_ptr, q_ptr, scale_ptr, amax_bits_ptr, n_rows, n_cols, x_stride, q_stride,
                        QMAX: tl.constexpr, MIN_SCALE: tl.constexpr, INT8: tl.constexpr,
                        STATIC: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    """Per-tensor quantization: STATIC reads the caller's scale; otherwise every program derives
    the scale from the amax (bit-identical in each) and the first one stores it."""
    pid_r = tl.program_id(0)
    pid_c = tl.program_id(1)
    if STATIC:
        scale = tl.load(scale_ptr)
    else:
        amax = tl.load(amax_bits_ptr).to(tl.float32, bitcast=True)
        scale = _scale_from_amax(amax, QMAX, MIN_SCALE)
        if (pid_r == 0) & (pid_c == 0):
            tl.store(scale_ptr, scale)
    inv = tl.math.div_rn(1.0, scale)
    rows = pid_r * ROWS + tl.arange(0, ROWS)[:, None]
    cols = pid_c * BLOCK + tl.arange(0, BLOCK)[None, :]
    mask = (rows < n_rows) & (cols < n_cols)
    rows64 = rows.to(tl.int64)
    x = tl.load(x_ptr + rows64 * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    q = _quantize(x, inv, QMAX, INT8)
    tl.store(q_ptr + rows64 * q_stride + cols, q.to(q_ptr.dtype.element_ty), mask=mask)


@triton.jit
def dequant_kernel(q_ptr, s_ptr, o_ptr, n_rows, n_cols, q_stride, o_stride,
                   PER_TOKEN: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)[None, :]
    mask = (rows < n_rows) & (cols < n_cols)
    rows64 = rows.to(tl.int64)
    q = tl.load(q_ptr + rows64 * q_stride + cols, mask=mask).to(tl.float32)   # masked lanes are never stored
    if PER_TOKEN:
        s = tl.load(s_ptr + rows, mask=rows < n_rows, other=1.0)
    else:
        s = tl.load(s_ptr)
    tl.store(o_ptr + rows64 * o_stride + cols, (q * s).to(o_ptr.dtype.element_ty), mask=mask)


# ---- formats and configs --------------------------------------------------------------------

def qmax_of(out_dtype: torch.dtype) -> float:
    return INT8_MAX if out_dtype == torch.int8 else float(torch.finfo(out_dtype).max)


def min_scale_of(out_dtype: torch.dtype) -> float:
    """The floor as the float32 number the kernel compares with (a constexpr rounds to fp32)."""
    return float(torch.tensor(1.0 / (qmax_of(out_dtype) * SCALE_FLOOR_FACTOR), dtype=torch.float32))


def fp8_for(arch: Arch) -> torch.dtype:
    """The fp8 dtype the quantization cases use on an arch: the arch table's storage format."""
    return torch_dtype(arch.fp8_storage())


def device_fp8() -> torch.dtype:
    """fp8_for the active device; the interpreter (which converts any format) takes OCP e4m3fn."""
    return fp8_for(current_arch())


def fp8_names_for(target) -> frozenset:
    """The fp8 formats Triton's compiler accepts for a GPUTarget (its own option defaults)."""
    from triton.backends import backends
    for b in backends.values():
        if b.compiler.supports_target(target):
            return frozenset(b.compiler(target).parse_options({}).supported_fp8_dtypes)
    return frozenset()


@lru_cache(maxsize=None)
def target_fp8_names() -> frozenset:
    """fp8_names_for the active device; the interpreter converts (if not always right) all of them."""
    if interpreted():
        return frozenset(FP8_DTYPES.values())
    return fp8_names_for(triton.runtime.driver.active.get_current_target())


def _device_label() -> str:
    if interpreted():
        return "the Triton interpreter"
    t = triton.runtime.driver.active.get_current_target()
    return f"{t.backend} {t.arch if t.backend == 'hip' else 'sm_%s' % t.arch}"


def check_out_dtype(out_dtype: torch.dtype) -> None:
    """int8, or an fp8 dtype the active target can convert to; anything else is a ValueError."""
    if out_dtype == torch.int8:
        return
    if out_dtype not in FP8_DTYPES:
        raise ValueError(f"quantized dtype {out_dtype} is not int8 or an fp8 format "
                         f"({', '.join(map(str, FP8_DTYPES))})")
    name = FP8_DTYPES[out_dtype]
    if name not in target_fp8_names():
        raise ValueError(f"{out_dtype} ({name}) cannot be produced on {_device_label()}: its Triton "
                         f"accepts only {', '.join(sorted(target_fp8_names()))}")


@lru_cache(maxsize=None)
def _programs_per_machine() -> int:
    """Programs that keep the whole device busy in a grid-stride loop: 4 per SM / CU."""
    if interpreted() or not torch.cuda.is_available():
        return 4
    return 4 * compute_units()


def row_config(n_cols: int, warp: int, long_rows: bool = False, chunk: int | None = None) -> dict:
    if long_rows or n_cols > MAX_FUSED:
        block = chunk or min(triton.next_power_of_2(n_cols), 4096)
        return {"kernel": quant_long_rows_kernel, "ROWS": 1, "BLOCK": block,
                "num_warps": num_warps_for(block, warp)}
    block = triton.next_power_of_2(n_cols)
    rows = max(1, ELEMS_PER_PROGRAM // block)
    return {"kernel": quant_rows_kernel, "ROWS": rows, "BLOCK": block,
            "num_warps": num_warps_for(rows * block, warp, per_thread=ROW_ELEMS_PER_THREAD)}


def tile_config(n_rows: int, n_cols: int, warp: int) -> dict:
    """Tiles of the elementwise kernels: up to TILE_COLS columns, rows stacked to fill a program."""
    block = min(triton.next_power_of_2(n_cols), TILE_COLS)
    rows = min(max(1, ELEMS_PER_PROGRAM // block), triton.next_power_of_2(max(1, n_rows)))
    return {"ROWS": rows, "BLOCK": block, "num_warps": num_warps_for(rows * block, warp)}


# ---- launchers ------------------------------------------------------------------------------

def _check_out(name: str, t: torch.Tensor, shape, dtype) -> None:
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} has shape {tuple(t.shape)}, expected {tuple(shape)}")
    if t.dtype != dtype:
        raise ValueError(f"{name} has dtype {t.dtype}, expected {dtype}")


def _check_device(x: torch.Tensor, **others) -> None:
    for name, t in others.items():
        if t.device != x.device:
            raise ValueError(f"{name} is on {t.device} but the input is on {x.device}")


def _check_scale(name: str, s: torch.Tensor, numel: int, shape_text: str) -> None:
    if s.dtype != torch.float32:
        raise ValueError(f"{name} must be float32, got {s.dtype}")
    if s.numel() != numel or not s.is_contiguous():
        raise ValueError(f"{name} must be a contiguous {shape_text} tensor, got shape {tuple(s.shape)}")


def quant_per_token(x: torch.Tensor, out_dtype: torch.dtype = torch.int8, q: torch.Tensor | None = None,
                    scale: torch.Tensor | None = None, *, long_rows: bool = False,
                    chunk: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic per-token (per-row) quantization of a 2-D x: (codes [rows, cols], scale [rows, 1])."""
    check_2d("x", x, tuple(IN_DTYPES.values()))
    check_out_dtype(out_dtype)
    n_rows, n_cols = x.shape
    q = torch.empty((n_rows, n_cols), dtype=out_dtype, device=x.device) if q is None else q
    scale = torch.empty((n_rows, 1), dtype=torch.float32, device=x.device) if scale is None else scale
    _check_out("q", q, (n_rows, n_cols), out_dtype)
    if q.stride(-1) != 1:
        raise ValueError(f"q must have unit stride along its last dimension, got strides {q.stride()}")
    _check_scale("scale", scale, n_rows, "[rows, 1]")
    _check_device(x, q=q, scale=scale)
    if n_rows == 0 or n_cols == 0:
        scale.fill_(min_scale_of(out_dtype))      # an empty row has amax 0: the floor
        return q, scale
    qmax, floor, is_int8 = qmax_of(out_dtype), min_scale_of(out_dtype), out_dtype == torch.int8
    cfg = row_config(n_cols, warp_size(), long_rows, chunk)
    if cfg["kernel"] is quant_rows_kernel:
        quant_rows_kernel[(triton.cdiv(n_rows, cfg["ROWS"]),)](
            x, q, scale, n_rows, n_cols, x.stride(0), q.stride(0), QMAX=qmax, MIN_SCALE=floor,
            INT8=is_int8, ROWS=cfg["ROWS"], BLOCK=cfg["BLOCK"], num_warps=cfg["num_warps"])
    else:
        quant_long_rows_kernel[(n_rows,)](
            x, q, scale, n_cols, x.stride(0), q.stride(0), QMAX=qmax, MIN_SCALE=floor,
            INT8=is_int8, BLOCK=cfg["BLOCK"], num_warps=cfg["num_warps"])
    return q, scale


def quant_per_tensor(x: torch.Tensor, out_dtype: torch.dtype, scale: torch.Tensor | None = None,
                     q: torch.Tensor | None = None, scale_out: torch.Tensor | None = None,
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-tensor quantization of a 2-D x. With `scale` (fp32, one element) it is static; without,
    dynamic: an amax pass, then the code pass; returns (codes, the scale used)."""
    check_2d("x", x, tuple(IN_DTYPES.values()))
    check_out_dtype(out_dtype)
    n_rows, n_cols = x.shape
    q = torch.empty((n_rows, n_cols), dtype=out_dtype, device=x.device) if q is None else q
    _check_out("q", q, (n_rows, n_cols), out_dtype)
    if q.stride(-1) != 1:
        raise ValueError(f"q must have unit stride along its last dimension, got strides {q.stride()}")
    static = scale is not None
    if static:
        _check_scale("scale", scale, 1, "one-element")
        if scale_out is not None:
            raise ValueError("scale_out is for dynamic quantization; a static scale is not written")
        scale_buf = scale
    else:
        scale_buf = torch.empty((1,), dtype=torch.float32, device=x.device) if scale_out is None else scale_out
        _check_scale("scale_out", scale_buf, 1, "one-element")
    _check_device(x, q=q, scale=scale_buf)
    if n_rows == 0 or n_cols == 0:
        if not static:
            scale_buf.fill_(min_scale_of(out_dtype))
        return q, scale_buf
    warp = warp_size()
    cfg = tile_config(n_rows, n_cols, warp)
    amax_bits = torch.zeros((1,), dtype=torch.int32, device=x.device)   # bits of +0.0
    if not static:
        n_tiles = triton.cdiv(n_rows, cfg["ROWS"]) * triton.cdiv(n_cols, cfg["BLOCK"])
        amax_kernel[(min(n_tiles, _programs_per_machine()),)](
            x, amax_bits, n_rows, n_cols, x.stride(0), ROWS=cfg["ROWS"], BLOCK=cfg["BLOCK"],
            num_warps=cfg["num_warps"])
    grid = (triton.cdiv(n_rows, cfg["ROWS"]), triton.cdiv(n_cols, cfg["BLOCK"]))
    quant_tensor_kernel[grid](
        x, q, scale_buf, amax_bits, n_rows, n_cols, x.stride(0), q.stride(0),
        QMAX=qmax_of(out_dtype), MIN_SCALE=min_scale_of(out_dtype), INT8=out_dtype == torch.int8,
        STATIC=static, ROWS=cfg["ROWS"], BLOCK=cfg["BLOCK"], num_warps=cfg["num_warps"])
    return q, scale_buf


def dequant(q: torch.Tensor, scale: torch.Tensor, out_dtype: torch.dtype = torch.bfloat16,
            out: torch.Tensor | None = None) -> torch.Tensor:
    """codes [rows, cols] (int8 or fp8) times a per-token [rows, 1] or per-tensor [1] fp32 scale."""
    check_2d("q", q, (torch.int8, *FP8_DTYPES))
    if q.dtype != torch.int8:
        check_out_dtype(q.dtype)
    if out_dtype not in IN_DTYPES.values():
        raise ValueError(f"out_dtype {out_dtype} is not one of {', '.join(map(str, IN_DTYPES.values()))}")
    n_rows, n_cols = q.shape
    if scale.dtype != torch.float32 or not scale.is_contiguous():
        raise ValueError(f"scale must be a contiguous float32 tensor, got {scale.dtype} with strides {scale.stride()}")
    if scale.numel() == 1 and scale.dim() <= 1:
        per_token = False
    elif tuple(scale.shape) in ((n_rows, 1), (n_rows,)):
        per_token = True
    else:
        raise ValueError(f"scale has shape {tuple(scale.shape)}; expected [{n_rows}, 1] (per token) "
                         "or [1] (per tensor)")
    out = torch.empty((n_rows, n_cols), dtype=out_dtype, device=q.device) if out is None else out
    _check_out("out", out, (n_rows, n_cols), out_dtype)
    if out.stride(-1) != 1:
        raise ValueError(f"out must have unit stride along its last dimension, got strides {out.stride()}")
    _check_device(q, scale=scale, out=out)
    if n_rows == 0 or n_cols == 0:
        return out
    cfg = tile_config(n_rows, n_cols, warp_size())
    grid = (triton.cdiv(n_rows, cfg["ROWS"]), triton.cdiv(n_cols, cfg["BLOCK"]))
    dequant_kernel[grid](q, scale, out, n_rows, n_cols, q.stride(0), out.stride(0),
                         PER_TOKEN=per_token, ROWS=cfg["ROWS"], BLOCK=cfg["BLOCK"],
                         num_warps=cfg["num_warps"])
    return out


# ---- inputs ---------------------------------------------------------------------------------

QUANT_REGIMES = ("normal", "large", "tiny", "equal", "special", "ties")


def _positive_grid(out_dtype: torch.dtype) -> torch.Tensor:
    """The non-negative values of the output format up to qmax, ascending (float64)."""
    if out_dtype == torch.int8:
        return torch.arange(0, 128, dtype=torch.float64)
    v = fp8_ref.decode(torch.arange(128, dtype=torch.uint8), fp8_ref.fp8_format(out_dtype))
    return torch.unique(v[torch.isfinite(v)])


def tie_values(shape, dtype: str, out_dtype: torch.dtype, gen: torch.Generator, per_row: bool) -> torch.Tensor:
    """Values that land exactly on the midpoints between neighbouring codes after scaling.

    Each row (or the tensor) holds +-qmax * 2^k at its first element, so its scale is exactly
    2^k and x * (1/scale) is exact: the rest are midpoints (and some grid values) times 2^k,
    which only round-half-to-even places right. All are exact in fp16 and bf16 (<= 8 bits)."""
    rows, cols = shape
    grid = _positive_grid(out_dtype)
    qmax = float(grid[-1])
    mids = torch.cat([(grid[1:] + grid[:-1]) / 2, grid[1:]])
    pick = mids[torch.randint(0, mids.numel(), (rows, cols), generator=gen)]
    sign = torch.where(torch.rand(rows, cols, generator=gen) < 0.5, -1.0, 1.0).to(torch.float64)
    # largest k with qmax * 2^k finite in the input format, at most 3
    top = min(3, int(torch.floor(torch.log2(torch.tensor(torch.finfo(fmt(dtype).torch_dtype).max / qmax)))))
    k = torch.randint(-4, top + 1, (rows if per_row else 1, 1), generator=gen).to(torch.float64)
    x = pick * sign * torch.exp2(k)
    if per_row:
        x[:, 0] = sign[:, 0] * qmax * torch.exp2(k[:, 0])
    else:
        x[0, 0] = qmax * float(torch.exp2(k[0, 0]))
    return x.to(fmt(dtype).torch_dtype)


def quant_values(spec: dict, out_dtype: torch.dtype, gen: torch.Generator, per_row: bool) -> torch.Tensor:
    shape = (spec["rows"], spec["cols"])
    if spec["regime"] == "ties":
        return tie_values(shape, spec["dtype"], out_dtype, gen, per_row)
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
    from ..speed import peers
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
    flat = torch.randint(0, 256, (n,), generator=gen, dtype=torch.int64)
    k = min(n, 256)
    flat[:k] = torch.randperm(256, generator=gen)[:k]
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
    """Codes with the row layout of S.laid_out: padded rows hold the format's NaN / -128 past the end."""
    if layout == "contiguous":
        return q.to(device).contiguous()
    rows, cols = q.shape
    fill = 0x80 if q.dtype in (torch.int8, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz) else 0x7f
    buf = torch.full((rows, cols + 17), fill, dtype=torch.uint8, device=device)
    buf[:, :cols] = q.view(torch.uint8).to(device)
    return buf.view(q.dtype)[:, :cols]


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
