"""One table of the architectures portcheck knows: limits, formats, matrix units and datasheet peaks.

Compiler-facing facts (warp size, fp8 names Triton accepts, legal dot precisions) were read from
Triton's own compile metadata (triton 3.9.0, `portcheck targets --compiler` re-reads them). Peak
figures are vendor datasheet numbers for the example part named in each row: they are leads for a
roofline model, never a measurement, and a report labels them so.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import UsageError


@dataclass(frozen=True)
class Arch:
    name: str                 # sm_90a, gfx942, ...
    vendor: str               # nvidia | amd
    backend: str              # Triton backend: cuda | hip
    triton_arch: object       # GPUTarget's arch: compute capability int (cuda) or gfx name (hip)
    example: str              # the part the peak figures belong to
    warp_size: int
    max_threads_per_block: int
    shared_per_block: int     # bytes of shared memory / LDS one block may use
    regs_per_sm: int          # 32-bit registers per SM (NVIDIA) or VGPRs per SIMD lane file (AMD)
    max_threads_per_sm: int
    fp8_native: tuple[str, ...]        # fp8 formats the matrix units take natively
    fp8_triton: tuple[str, ...]        # fp8 formats Triton accepts for the arch (some emulated)
    dot_precisions: tuple[str, ...]    # legal tl.dot input_precision values for fp32 operands
    dot_default: str                   # what tl.dot uses for fp32 when none is given
    matrix_family: str                 # mma.sync | wgmma | tcgen05 | mfma | wmma
    # launch configurations are looked up by this key: arches with the same class of shared memory
    # per block, warp size and matrix instruction share them (sm_120: 99 KB and mma.sync, as sm_89)
    config_family: str
    peak_bw_gbs: float                 # HBM/GDDR bandwidth, GB/s (datasheet)
    peak_tflops: dict = field(default_factory=dict)  # dense matrix TFLOP/s (TOP/s for int8) by dtype
    source: str = ""                   # where the peak figures come from
    # operand element types (as Triton's TTIR spells them) the matrix units take besides the fp8
    # formats above; fp32 counts as "tf32" when a dot asks for tf32 (compile/lints.py). Sources:
    # PTX ISA (mma / wgmma / tcgen05 kinds), AMD CDNA2-4 and RDNA3-4 ISA guides, FACTS.md
    matrix_dtypes: frozenset = frozenset()
    # NVIDIA: resident blocks per SM (CUDA C++ Programming Guide, "Technical Specifications per
    # Compute Capability"); AMD: LDS bytes a CU (RDNA: a WGP) shares between its workgroups
    max_blocks_per_sm: int = 32
    lds_per_cu: int = 0

    @property
    def is_amd(self) -> bool:
        return self.vendor == "amd"

    @property
    def is_interpreter(self) -> bool:
        return self.name == INTERPRETER_NAME

    def fp32_dot_precision(self) -> str:
        """tf32 where the arch's matrix units take it, else exact ieee fp32."""
        return "tf32" if "tf32" in self.dot_precisions else "ieee"

    def fp8_formats(self) -> tuple[str, str] | None:
        """The (e4m3, e5m2) pair a kernel should use on this arch, native formats first."""
        if "fp8e4b8" in self.fp8_native:
            return ("fp8e4b8", "fp8e5b16")
        if "fp8e4nv" in self.fp8_native:
            return ("fp8e4nv", "fp8e5")
        return None

    def fp8_storage(self) -> str:
        """The fp8 format a kernel stores 8-bit floats in (quantized activations, KV caches): the
        arch's native e4m3, else OCP e4m3fn where Triton converts to it, else e5m2 (sm_80)."""
        native = [f for f in self.fp8_native if f.startswith("fp8e4")]
        if native:
            return native[0]
        return "fp8e4nv" if "fp8e4nv" in self.fp8_triton else "fp8e5"

    @property
    def fp8_accumulation(self) -> str:
        """How an fp8 dot reaches an fp32 accumulator: NVIDIA's fp8 MMA sums into 13 fraction bits,
        so kernels promote every K slice: 'partial' (wgmma: tl.dot's partial accumulator),
        'split' (mma.sync: each slice's dot added in fp32); 'fused' where the unit accumulates
        in fp32 (tcgen05, MFMA, WMMA, the interpreter)."""
        return {"wgmma": "partial", "mma.sync": "split"}.get(self.matrix_family, "fused")

    def __hash__(self) -> int:   # rows are unique by name (peak_tflops, a dict, has no hash)
        return hash(self.name)


_NV_DOT = ("tf32", "tf32x3", "ieee", "bf16x3", "bf16x6")
_NV_FP8 = ("fp8e4b15", "fp8e4nv", "fp8e5")
_AMD_FP8 = ("fp8e4b8", "fp8e4nv", "fp8e5", "fp8e5b16")
_AMD_DOT = ("ieee", "bf16x3", "bf16x6")
_NV_MATRIX = frozenset({"f16", "bf16", "f64", "i8", "tf32"})
_CDNA_MATRIX = frozenset({"f16", "bf16", "f64", "i8", "f32"})     # exact fp32 MFMA on CDNA only
_RDNA_MATRIX = frozenset({"f16", "bf16", "i8"})

ARCHS: dict[str, Arch] = {a.name: a for a in [
    # NVIDIA A100 datasheet (SXM4 80GB): 2039 GB/s; dense TF32 156, BF16/FP16 312, INT8 624.
    Arch("sm_80", "nvidia", "cuda", 80, "A100 SXM4 80GB", 32, 1024, 166912, 65536, 2048,
         (), ("fp8e4b15", "fp8e5"), _NV_DOT, "tf32", "mma.sync", "sm_80", 2039.0,
         {"tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "int8": 624.0},
         "NVIDIA A100 Tensor Core GPU datasheet",
         matrix_dtypes=_NV_MATRIX, max_blocks_per_sm=32),
    # NVIDIA Ada whitepaper, appendix A (RTX 4090): 1008 GB/s; dense, fp32 accumulate.
    Arch("sm_89", "nvidia", "cuda", 89, "GeForce RTX 4090", 32, 1024, 101376, 65536, 1536,
         ("fp8e4nv", "fp8e5"), _NV_FP8, _NV_DOT, "tf32", "mma.sync", "sm_89", 1008.0,
         {"tf32": 82.6, "bf16": 165.2, "fp16": 165.2, "fp8": 330.3, "int8": 660.6},
         "NVIDIA Ada Lovelace GPU Architecture whitepaper, appendix A",
         matrix_dtypes=_NV_MATRIX, max_blocks_per_sm=24),
    # NVIDIA H200 datasheet (SXM): 4.8 TB/s; dense TF32 494.5, BF16/FP16 989.5, FP8/INT8 1979.
    Arch("sm_90a", "nvidia", "cuda", 90, "H200 SXM", 32, 1024, 232448, 65536, 2048,
         ("fp8e4nv", "fp8e5"), _NV_FP8, _NV_DOT, "tf32", "wgmma", "sm_90", 4800.0,
         {"tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979.0, "int8": 1979.0},
         "NVIDIA H200 Tensor Core GPU datasheet (sparse figures halved)",
         matrix_dtypes=_NV_MATRIX, max_blocks_per_sm=32),
    # NVIDIA HGX B200 datasheet, per GPU: 8 TB/s; dense TF32 1100, BF16/FP16 2250, FP8/INT8 4500.
    Arch("sm_100a", "nvidia", "cuda", 100, "B200", 32, 1024, 232448, 65536, 2048,
         ("fp8e4nv", "fp8e5"), _NV_FP8, _NV_DOT, "tf32", "tcgen05", "sm_100", 8000.0,
         {"tf32": 1100.0, "bf16": 2250.0, "fp16": 2250.0, "fp8": 4500.0, "int8": 4500.0},
         "NVIDIA HGX B200 datasheet (sparse figures halved)",
         matrix_dtypes=_NV_MATRIX, max_blocks_per_sm=32),
    # NVIDIA Blackwell (RTX) whitepaper, RTX 5090: 1792 GB/s; dense, fp32 accumulate.
    Arch("sm_120", "nvidia", "cuda", 120, "GeForce RTX 5090", 32, 1024, 101376, 65536, 1536,
         ("fp8e4nv", "fp8e5"), _NV_FP8, _NV_DOT, "tf32", "mma.sync", "sm_89", 1792.0,
         {"tf32": 104.8, "bf16": 209.5, "fp16": 209.5, "fp8": 419.0, "int8": 838.0},
         "NVIDIA RTX Blackwell GPU Architecture whitepaper, appendix",
         matrix_dtypes=_NV_MATRIX, max_blocks_per_sm=32),
    # AMD Instinct MI250X datasheet: 3.2768 TB/s; FP16/BF16 383, INT8 383, no fp8.
    Arch("gfx90a", "amd", "hip", "gfx90a", "Instinct MI250X", 64, 1024, 65536, 512, 2048,
         (), _AMD_FP8, _AMD_DOT, "ieee", "mfma", "gfx90a", 3276.8,
         {"fp32": 95.7, "bf16": 383.0, "fp16": 383.0, "int8": 383.0},
         "AMD Instinct MI250X accelerator datasheet",
         matrix_dtypes=_CDNA_MATRIX, lds_per_cu=65536),
    # AMD Instinct MI300X datasheet: 5.3 TB/s; dense TF32 653.7, FP16/BF16 1307.4, FP8/INT8 2614.9.
    Arch("gfx942", "amd", "hip", "gfx942", "Instinct MI300X", 64, 1024, 65536, 512, 2048,
         ("fp8e4b8", "fp8e5b16"), _AMD_FP8, ("ieee", "bf16x3", "bf16x6", "tf32"), "ieee", "mfma", "gfx942",
         5300.0, {"tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9, "int8": 2614.9},
         "AMD Instinct MI300X accelerator datasheet",
         matrix_dtypes=_CDNA_MATRIX | {"tf32"}, lds_per_cu=65536),
    # AMD Instinct MI355X datasheet: 8 TB/s; dense FP16/BF16 2516, FP8 5033, INT8 5033; 160 KB LDS.
    Arch("gfx950", "amd", "hip", "gfx950", "Instinct MI355X", 64, 1024, 163840, 512, 2048,
         ("fp8e4nv", "fp8e5"), _AMD_FP8, _AMD_DOT, "ieee", "mfma", "gfx950", 8000.0,
         {"bf16": 2516.6, "fp16": 2516.6, "fp8": 5033.2, "int8": 5033.2},
         "AMD Instinct MI355X accelerator datasheet",
         matrix_dtypes=_CDNA_MATRIX, lds_per_cu=163840),
    # AMD Radeon RX 7900 XTX specifications: 960 GB/s; FP16 122.8 (WMMA); no fp8.
    Arch("gfx1100", "amd", "hip", "gfx1100", "Radeon RX 7900 XTX", 32, 1024, 65536, 1536, 2048,
         (), _AMD_FP8, _AMD_DOT, "ieee", "wmma", "rdna3", 960.0,
         {"bf16": 122.8, "fp16": 122.8, "int8": 122.8},
         "AMD Radeon RX 7900 XTX product specifications",
         matrix_dtypes=_RDNA_MATRIX, lds_per_cu=131072),
    # AMD Radeon RX 9070 XT specifications: 644.6 GB/s; dense FP16 194.7, FP8/INT8 389.3.
    Arch("gfx1201", "amd", "hip", "gfx1201", "Radeon RX 9070 XT", 32, 1024, 65536, 1536, 2048,
         ("fp8e4nv", "fp8e5"), _AMD_FP8, _AMD_DOT, "ieee", "wmma", "rdna4", 644.6,
         {"bf16": 194.7, "fp16": 194.7, "fp8": 389.3, "int8": 389.3},
         "AMD Radeon RX 9070 XT product specifications (sparse figures halved)",
         matrix_dtypes=_RDNA_MATRIX, lds_per_cu=131072),
]}

DEFAULT_ARCHS = tuple(ARCHS)

INTERPRETER_NAME = "interpreter"
# What kernels run on under TRITON_INTERPRET: not in ARCHS, since nothing cross-compiles for it.
# Launchers pick its own small configurations ("interpreter": its cost is per program, not per
# element); numpy decodes every fp8 format exactly; an fp32 dot takes Triton's interpreter's
# precisions, tf32 by default as on NVIDIA (portcheck's numerics layer rounds its operands to
# tf32, targets/interpreter_numerics.py); no shared-memory limit, no peak figures, no matrix unit.
INTERPRETER = Arch(INTERPRETER_NAME, "cpu", "interpreter", None, "CPU (Triton interpreter)", 32, 1024,
                   0, 0, 0, ("fp8e4nv", "fp8e5", "fp8e4b8", "fp8e5b16"),
                   ("fp8e4nv", "fp8e5", "fp8e4b8", "fp8e5b16"), ("tf32", "tf32x3", "ieee"), "tf32", "none",
                   "interpreter", 0.0, {}, "")


def arch(name: str) -> Arch:
    try:
        return ARCHS[name]
    except KeyError:
        raise UsageError(f"unknown arch {name!r}; known: {', '.join(ARCHS)}") from None


def parse_archs(text: str | None) -> tuple[str, ...]:
    """'gfx942,sm_90a' or 'all' -> validated names; None -> every arch."""
    if not text or text == "all":
        return DEFAULT_ARCHS
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    for n in names:
        arch(n)
    return names


def arch_from_triton_target(backend: str, triton_arch) -> str:
    """Triton's GPUTarget (backend, arch) -> the table's name: ('cuda', 90) -> sm_90a."""
    if backend == "cuda":
        return arch_from_cuda_capability(*divmod(int(triton_arch), 10))
    if backend == "hip":
        return arch_from_gcn_name(str(triton_arch))
    raise ValueError(f"no arch for Triton backend {backend!r}")


def arch_from_cuda_capability(major: int, minor: int) -> str:
    """(9, 0) -> sm_90a: Triton compiles 9.0 and 10.0 for the arch-specific 'a' feature set."""
    suffix = "a" if major in (9, 10) and minor == 0 else ""
    return f"sm_{major}{minor}{suffix}"


def arch_from_gcn_name(gcn_arch_name: str) -> str:
    """'gfx942:sramecc+:xnack-' -> gfx942 (the feature flags after ':' do not change the ISA)."""
    name = gcn_arch_name.strip().split(":")[0]
    if not name.startswith("gfx"):
        raise ValueError(f"not an AMD GCN arch name: {gcn_arch_name!r}")
    return name


# ---- a device with no row of its own -----------------------------------------------------------

def _generation(name: str) -> tuple[str, str, int] | None:
    """(vendor, matrix-unit generation, version) of an arch name, or None for a name of neither
    form: sm_86 -> ('nvidia', 'sm_8x', 86), the compute capability's major; gfx942 -> ('amd',
    'gfx94x', 0x42), CDNA's generations are the digit after gfx9 (gfx90x, gfx94x, gfx95x);
    gfx1101 -> ('amd', 'gfx11xx', 0x01), RDNA's are the gfx major."""
    if name.startswith("sm_") and name[3:].rstrip("a").isdigit():
        capability = int(name[3:].rstrip("a"))
        return "nvidia", f"sm_{capability // 10}x", capability
    body = name[3:]
    if not (name.startswith("gfx") and len(body) >= 3 and body[:-2].isdigit()):
        return None
    try:
        version = int(body[-2:], 16)
    except ValueError:
        return None
    family = f"gfx{body[:2]}x" if body[:-2] == "9" else f"gfx{body[:-2]}xx"
    return "amd", family, version


def _arch_specific(arch: Arch) -> bool:
    """sm_90a, sm_100a: features (wgmma, tcgen05) that only their own generation has."""
    return arch.vendor == "nvidia" and arch.name.endswith("a")


def nearest_row(name: str) -> tuple[Arch, str]:
    """The row a device runs as, and why when it is not its own row: the nearest row of its vendor
    and matrix-unit generation at or below it (sm_86, sm_87 -> sm_80; sm_103 -> sm_100a; gfx1151
    -> gfx1100); on AMD, whose chips of a generation share their matrix units, else the nearest
    above it (gfx1200 -> gfx1201, gfx941 -> gfx942). An NVIDIA arch of a generation with no row
    (sm_110, sm_130) runs as the newest older row whose features it has: not an arch-specific one.
    Raises ValueError when no row of the vendor fits (sm_75, gfx1030)."""
    if name in ARCHS:
        return ARCHS[name], ""
    known = f"known: {', '.join(ARCHS)}"
    gen = _generation(name)
    if gen is None:
        raise ValueError(f"the device is {name}, which is not an arch name portcheck can read ({known})")
    vendor, family, version = gen
    rows = sorted(((_generation(a.name)[2], a) for a in ARCHS.values() if a.vendor == vendor),
                  key=lambda row: row[0])
    same = [(v, a) for v, a in rows if _generation(a.name)[1] == family]
    below = [a for v, a in same if v <= version]
    above = [a for v, a in same if v > version]
    older = [a for v, a in rows if v < version and not _arch_specific(a)]
    if below:
        row, how = below[-1], f"the nearest row of its generation ({family}) below it"
    elif above and vendor == "amd":
        row, how = above[0], f"the row of its generation ({family})"
    elif vendor == "nvidia" and older:
        row, how = older[-1], "the newest older row whose features it has (not sm_90a's wgmma, sm_100a's tcgen05)"
    else:
        raise ValueError(f"the device is {name}, and no {vendor} row of portcheck/facts/archs.py has "
                         f"its matrix units ({known}); add one")
    return row, (f"{name} has no row in portcheck/facts/archs.py: it runs as {row.name}, {how}; "
                 f"its launch configurations, limits and peak figures are {row.name}'s")
