"""One table of the numerics facts tolerances are built from: per-function ULP bounds (documented
by each vendor, and measured on the H200), and the error of division, rsqrt, tl.dot and matrix-unit
accumulation. Kernels' tolerances and `portcheck math` read them from here; the unit roundoff of
each format stays where the format is described, `portcheck.dtypes.fmt(name).unit_roundoff`.

One ULP is at most 2u relative (u the unit roundoff of fp32).
"""
from __future__ import annotations

from dataclasses import dataclass

BOUNDS_SOURCE = ("CUDA C++ Programming Guide, Mathematical Functions appendix (single precision); "
                 "HIP math API reference, single-precision functions (ROCm documentation)")


@dataclass(frozen=True)
class UlpBound:
    """Max error in ULP of a single-precision function; None where unknown (never guessed)."""
    cuda: float | None         # CUDA math API, documented
    hip: float | None          # HIP math API, documented
    h200: float | None = None  # measured on the H200 over every normal fp32 input (reports/examples/math-h200/math.md)

    @property
    def documented(self) -> float:
        """The larger of the vendors' documented bounds: what a portable tolerance counts."""
        return max(b for b in (self.cuda, self.hip) if b is not None)


# CUDA: expf 2, exp2f 2, logf 1, log2f 1, sinf 2, cosf 2, sqrtf 0 (IEEE, -prec-sqrt=true),
# rsqrtf 2, erff 2, tanhf 2, x/y 0 (IEEE, -prec-div=true); the intrinsics behind tl.* lowering
# (__expf: "2 + floor(abs(1.173 * x))", __fdividef 2) have wider bounds.
# HIP: expf 1, logf 2, sinf 1, tanhf 2, erff 4 (as HIP's math API documentation quotes them); the others are
# not re-checked here. H200 (triton 3.6, all 2^32 inputs): libdevice exp 1.93 (tl.exp 63.8 at
# x = 88, 3.9 for |x| <= pi), exp2 2.05, log 0.86, log2 0.92, sin 1.50, cos 1.51, sqrt 0.94
# (sqrt_rn 0.50), rsqrt 1.51, erf 1.14, tanh 1.81.
ULP_BOUNDS: dict[str, UlpBound] = {
    "exp": UlpBound(2, 1, 1.93), "exp2": UlpBound(2, None, 2.05), "log": UlpBound(1, 2, 0.86),
    "log2": UlpBound(1, None, 0.92), "sin": UlpBound(2, 1, 1.50), "cos": UlpBound(2, None, 1.51),
    "sqrt": UlpBound(0, None, 0.94), "sqrt_rn": UlpBound(0, None, 0.50),
    "rsqrt": UlpBound(2, None, 1.51), "erf": UlpBound(2, 4, 1.14), "tanh": UlpBound(2, 2, 1.81),
    "sigmoid": UlpBound(None, None), "recip": UlpBound(0, None),
}

# ---- what kernels' tolerances count, in ULP ----------------------------------------------------
# tl.exp is ex2.approx.f32 (NVIDIA) / v_exp_f32 (AMD) after a multiply by log2(e); the argument's
# rounding, which grows with |x|, is a separate term of each formula.
EXP_ULP = ULP_BOUNDS["exp"].documented       # 2
ERF_ULP = ULP_BOUNDS["erf"].documented       # 4 (HIP's; CUDA documents 2)
RSQRT_ULP = ULP_BOUNDS["rsqrt"].documented   # 2 (CUDA's rsqrtf; 1.51 measured on the H200)
# tl.math.exp2: ex2.approx.f32 measured at 2.05 ULP on the H200 (PTX documents 2), v_exp_f32
# documented at 1 ULP: the measurement, rounded up
EXP2_ULP = 3
# Triton lowers an fp32 `/` to div.full.f32 on NVIDIA (PTX ISA: 2 ULP), not the IEEE div.rn
# that the CUDA table's 0 describes
DIV_ULP = 2
# per addition inside tl.dot: tensor cores accumulate with truncation, so an add may lose one ULP
# (2u) instead of half (Fasi, Higham, Mikaitis, Pranesh, "Numerical behavior of NVIDIA tensor
# cores", PeerJ CS 7:e330, 2021)
DOT_ULP = 2

# ---- matrix-unit accumulation, as relative errors of one addend --------------------------------
U_ADD = 2.0 ** -23    # one unit in the last place of fp32's 24-bit significand: what one addend
                      # loses to a matrix unit that aligns and truncates (Fasi et al. 2021);
                      # round-to-nearest (numpy's sgemm on the interpreter) loses half of it
U_FP22 = 2.0 ** -13   # NVIDIA fp8 MMA (sm_89, sm_90, sm_120): addends aligned to the largest
                      # exponent keep 13 fraction bits (DeepSeek-V3 report sec. 3.5.2)
U_TF32 = 2.0 ** -10   # tf32 keeps 10 fraction bits; Triton may truncate, not round (tl.dot doc)
