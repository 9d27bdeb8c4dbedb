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

kernel.py holds the @triton.jit sources, launcher.py the formats, configurations, checks and
launches, case.py the Cases (registered when this package is imported).
"""
from . import case  # noqa: F401  (registers the cases)
from .launcher import (FP8_DTYPES, IN_DTYPES, check_out_dtype, dequant, device_fp8, fp8_for,
                       fp8_names_for, min_scale_of, qmax_of, quant_per_tensor, quant_per_token,
                       target_fp8_names)

__all__ = ["FP8_DTYPES", "IN_DTYPES", "check_out_dtype", "dequant", "device_fp8", "fp8_for",
           "fp8_names_for", "min_scale_of", "qmax_of", "quant_per_tensor", "quant_per_token",
           "target_fp8_names"]
