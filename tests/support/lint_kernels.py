"""Purpose-built kernels for the compile lints: each LINT_CASES entry breaks exactly one hardware
limit on one arch (or, for `ok`, breaks none), so every rule is proven both ways on real compiler
output. They are not portcheck's kernels and are never registered.

Each configuration is a real portability failure reported by kernel teams (FACTS.md): an
NVIDIA-tuned tile that needs more than gfx942's 64 KB of LDS, tf32 asked of an arch that has no
tf32 path, an FNUZ fp8 format on NVIDIA, 32 warps on a wave64 arch, an fp32 dot on RDNA (no fp32
WMMA) that runs out of VGPRs, an AMD-only knob handed to an NVIDIA target, and fp8 dots in a
format the arch's matrix units do not take (FNUZ vs OCP on MI300 and MI355, none on MI250).
"""
import triton
import triton.language as tl

from portcheck.cases import Variant


@triton.jit
def tile_dot(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
             PRECISION: tl.constexpr):
    """One BM x BN tile of A (BM x K, row-major) @ B (K x BN, row-major), K a multiple of BK."""
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc.to(c_ptr.dtype.element_ty))


@triton.jit
def convert(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """y = x cast to y's element type (an fp8 format, say)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x.to(y_ptr.dtype.element_ty), mask=mask)


def _dot(dtype: str, bm: int, bn: int, bk: int, precision: str = "ieee", warps: int = 4,
         stages: int = 2, label: str = "") -> Variant:
    t = f"*{dtype}"
    return Variant(tile_dot, {"a_ptr": t, "b_ptr": t, "c_ptr": "*fp32", "K": "i32"},
                   {"BM": bm, "BN": bn, "BK": bk, "PRECISION": precision}, warps, stages,
                   label=label or f"{dtype} {bm}x{bn}x{bk} {precision} w{warps}",
                   divisible_by_16=("a_ptr", "b_ptr", "c_ptr", "K"))


def _convert(src: str, dst: str, warps: int = 4, options: dict | None = None, label: str = "") -> Variant:
    return Variant(convert, {"x_ptr": f"*{src}", "y_ptr": f"*{dst}", "n": "i32"}, {"BLOCK": 1024},
                   warps, 2, dict(options or {}), label=label or f"{src}->{dst} w{warps}",
                   divisible_by_16=("x_ptr", "y_ptr"))


# name: (variant, arch, the rule it must trigger, or None: it must trigger no warning or error)
LINT_CASES = {
    # 256x256 fp16 A tile: 128 KB of LDS on gfx942 (limit 64 KB); Triton compiles it anyway
    "lds_heavy": (_dot("fp16", 256, 32, 256, warps=4), "gfx942", "shared-over-limit"),
    "lds_fits": (_dot("fp16", 256, 32, 64, warps=4), "gfx942", None),
    # gfx950 takes ieee / bf16x3 / bf16x6 only; gfx942 has xf32 MFMA
    "tf32_gfx950": (_dot("fp32", 64, 64, 32, "tf32"), "gfx950", "rejected-precision"),
    "tf32_gfx942": (_dot("fp32", 64, 64, 32, "tf32"), "gfx942", None),
    # FNUZ e4m3 (MI300's format) on Hopper, which takes OCP fp8 only
    "fnuz_cast_sm90": (_convert("fp32", "fp8e4b8"), "sm_90a", "rejected-dtype"),
    "ocp_cast_sm90": (_convert("fp32", "fp8e4nv"), "sm_90a", None),
    # 32 warps: 1024 threads on NVIDIA, 2048 on a wave64 arch
    "warps32_gfx942": (_convert("fp32", "fp16", warps=32), "gfx942", "threads-over-limit"),
    "warps32_sm90": (_convert("fp32", "fp16", warps=32), "sm_90a", None),
    "warps16_gfx942": (_convert("fp32", "fp16", warps=16), "gfx942", None),
    # exact fp32 has no WMMA on RDNA3: a 128x128 fp32 tile on 4 waves runs out of 256 VGPRs
    "spill_fp32_gfx1100": (_dot("fp32", 128, 128, 16, warps=4), "gfx1100", "spills"),
    "fp16_gfx1100": (_dot("fp16", 128, 128, 16, warps=4), "gfx1100", None),
    # OCP e4m3 on gfx942 (native: FNUZ) is upcast to an fp16 MFMA; gfx950 upcasts FNUZ likewise;
    # gfx90a has no fp8 MFMA at all (an FMA loop). The native formats reach the fp8 MFMA.
    "ocp_fp8_gfx942": (_dot("fp8e4nv", 64, 64, 64), "gfx942", "fp8-emulated"),
    "fnuz_fp8_gfx950": (_dot("fp8e4b8", 64, 64, 64), "gfx950", "fp8-emulated"),
    "fp8_gfx90a": (_dot("fp8e4b8", 64, 64, 64), "gfx90a", "fp8-unsupported"),
    "fnuz_fp8_gfx942": (_dot("fp8e4b8", 64, 64, 64), "gfx942", None),
    "ocp_fp8_gfx950": (_dot("fp8e4nv", 64, 64, 64), "gfx950", None),
    # waves_per_eu reaches only the AMD compiler; NVIDIA's ignores it (a JIT launch rejects it)
    "amd_option_sm90": (_convert("fp32", "fp16", options={"waves_per_eu": 2}), "sm_90a", "amd-option-on-nvidia"),
    "amd_option_gfx942": (_convert("fp32", "fp16", options={"waves_per_eu": 2}), "gfx942", None),
}


# An autotuned kernel for variant capture: every config must be recorded (and cross-compiled),
# not only the one the autotuner would pick on the machine at hand.
COPY_CONFIGS = [triton.Config({"BLOCK": 256}, num_warps=2), triton.Config({"BLOCK": 1024}, num_warps=4),
                triton.Config({"BLOCK": 4096}, num_warps=8, num_stages=2)]


@triton.autotune(configs=COPY_CONFIGS, key=["n"])
@triton.jit
def autotuned_scale(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)
