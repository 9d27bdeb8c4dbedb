"""quant's launchers: the formats the active target can produce, the launch configurations, and
quant_per_token, quant_per_tensor and dequant, which refuse bad input before launch."""
from __future__ import annotations

from functools import lru_cache

import torch
import triton

from ...dtypes import torch_dtype
from ...facts.archs import Arch
from ...facts.device import NotRunnableHere, compute_units, current_arch, forced, interpreted, warp_size
from ...oracles import fp8 as fp8_ref
from .._launch import check_2d, num_warps_for
from .kernel import (amax_kernel, dequant_kernel, quant_long_rows_kernel, quant_rows_kernel,
                     quant_tensor_kernel)

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
    """fp8_for the active device; the interpreter (which converts any format) takes OCP e4m3fn.
    Under a forced arch (--as-arch) whose format the local device's Triton lacks (gfx942's FNUZ
    on NVIDIA): NotRunnableHere, a recorded skip."""
    dtype = fp8_for(current_arch())
    if forced() is not None and FP8_DTYPES[dtype] not in target_fp8_names():
        raise NotRunnableHere(f"{FP8_DTYPES[dtype]} ({current_arch().name}'s fp8 storage format) cannot be "
                              f"produced on {_device_label()}")
    return dtype


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
