"""Matrix multiply with fp32 accumulation (int32 for int8), per-tensor fp8 scales and an optional
bias + activation epilogue:   C = act(scale_a * scale_b * (A @ B) + bias).

One program computes a BLOCK_M x BLOCK_N tile of C, stepping through K in BLOCK_K slices with
tl.dot into an fp32 (int32) accumulator. Programs are ordered in groups of GROUP_M tile rows, so
that programs running together share B panels in L2. The last tile along M or N moves back to
end at M or N (storing only its own rows and columns), so loads stay in bounds and contiguous;
narrower than one tile, indices wrap instead. Whole K slices load unmasked and the K tail once,
masked. When the tiles leave SMs / CUs idle (skinny M), SPLIT_K programs share a tile's K and the
last to finish sums their partial tiles in split order (deterministic). A compute-bound launch
copies operands whose rows are not 16-byte aligned (K = 4097) into aligned K-major rows first.
On sm_90a and sm_100a (matrix units that read shared memory) a 16-bit launch of wide tiles
without split-K whose operands are 16-byte aligned reads its tiles through tensor descriptors
instead (matmul_tma_kernel, persistent: at most one program per SM, each walking C tiles;
`tma=False` keeps the pointer kernel): the copy engine zero-fills past M, N and K, so that
kernel has no tails and no tile that moves back. Where both operands' rows fall off 128-byte
lines (N = K = 4104), A is copied into whole-line rows first: the copy engine fetches a tile
row by row, and a row across two lines costs it two requests.
On a GPU the first launch of an arguments' metadata records a plan, and later ones launch the
compiled kernel directly (launcher.py).

What it takes (A [M, K], B [K, N], any strides):
  fp16, bf16        -> C in the same dtype;
  fp32              -> fp32, with tf32 matrix inputs where the arch has them (every NVIDIA arch,
                       gfx942) and exact ieee fp32 where it does not (gfx90a, gfx950, RDNA);
  fp8 + fp32 scales -> bf16 (default), fp16 or fp32; only the formats the arch's matrix units
                       take: OCP e4m3fn / e5m2 on NVIDIA sm_89+, gfx950 and gfx12, FNUZ on gfx942;
  int8              -> int32, exact (bias int32; relu is the one activation that keeps it exact).

fp8 accumulation: NVIDIA's fp8 MMA (sm_89, sm_90, sm_120) sums into a 22-bit register (13
fraction bits, products aligned to the largest exponent and truncated: DeepSeek-V3 report
sec. 3.5.2, SageAttention2). The kernel therefore promotes every BLOCK_K slice into the fp32
accumulator: on Hopper through tl.dot's max_num_imprecise_acc (a partial accumulator per slice),
on sm_89 / sm_120 by adding each slice's tl.dot to the accumulator in fp32 itself. Blackwell's
tcgen05 (25 fraction bits) and AMD's MFMA accumulate in place.

Launch configurations are data (portcheck/kernels/configs/matmul.toml), per vendor and input
class; the autotuner times the ones whose shared memory fits the device.

kernel.py holds the @triton.jit source, launcher.py the configurations, checks and launch,
case.py the Cases (registered when this package is imported) and their tolerance model.
"""
from .case import FP8_MMA_K, accumulation_bound, tma_variants
from .kernel import matmul_kernel, matmul_tma_kernel
from .launcher import (FLOAT_DTYPES, FP8_DTYPES, FP8_OUT, MBARRIER_BYTES, NARROW_M, TMA_DTYPES, Config,
                       TmaLayout, alignment_hints, arch_configs, config_table, configs, dtype_class,
                       k_major_only, matmul, shared_bytes, tma_layout, tma_shared_bytes, vendor)

__all__ = ["FLOAT_DTYPES", "FP8_DTYPES", "FP8_MMA_K", "FP8_OUT", "MBARRIER_BYTES", "NARROW_M",
           "TMA_DTYPES", "Config", "TmaLayout", "accumulation_bound", "alignment_hints", "arch_configs",
           "config_table", "configs", "dtype_class", "k_major_only", "matmul", "matmul_kernel",
           "matmul_tma_kernel", "shared_bytes", "tma_layout", "tma_shared_bytes", "tma_variants", "vendor"]
