"""How many warps (NVIDIA: per SM) or waves (AMD: per SIMD) of a compiled kernel can be resident
at once, from the resources the compiler reported and the arch's limits.

The arch table (portcheck.facts.archs) gives threads per SM / CU, registers per SM, shared
memory per block, resident blocks per SM and LDS per CU; the vendor-wide constants are below.
"""
from __future__ import annotations

import math

# NVIDIA (CUDA C++ Programming Guide, "Technical Specifications per Compute Capability"): the
# 1 KB of shared memory the system reserves per block (so an SM's shared memory is the per-block
# maximum + 1 KB); registers are allocated per warp in units of 256. AMD: SIMDs per CU. Resident
# blocks per SM and the LDS per CU are the arch table's (max_blocks_per_sm, lds_per_cu).
_NV_RESERVED_SHARED = 1024
_NV_REG_UNIT = 256
_AMD_SIMDS = 4


def _amd_max_waves(arch) -> int:
    """The most waves a SIMD holds: the CU's (RDNA: WGP's) resident threads from the arch table,
    in waves, over its SIMDs; 8 on CDNA and 16 on RDNA 3 and 4, as LLVM's getMaxWavesPerEU says."""
    return arch.max_threads_per_sm // arch.warp_size // _AMD_SIMDS


def occupancy(arch, raw: dict) -> dict:
    """NVIDIA: resident warps per SM from registers, shared memory and threads. AMD: the
    compiler's waves per SIMD, bounded by how many workgroups the LDS admits."""
    warps = raw.get("num_warps") or 0
    shared = raw.get("shared") or 0
    if not warps:
        return {}
    if arch.is_amd:
        stated = raw.get("occupancy_compiler")
        most = _amd_max_waves(arch)
        if stated is None:
            return {}
        # workgroups the CU's LDS holds at once, their waves spread over its SIMDs
        lds_bound = math.ceil((arch.lds_per_cu // shared) * warps / _AMD_SIMDS) if shared else most
        effective = min(stated, lds_bound, most)
        return {"occupancy": stated, "occupancy_effective": effective, "occupancy_max": most,
                "occupancy_unit": "waves/SIMD", "occupancy_fraction": round(effective / most, 4)}
    regs = raw.get("registers")
    if regs is None:
        return {}
    most = arch.max_threads_per_sm // arch.warp_size
    per_warp = math.ceil(regs * arch.warp_size / _NV_REG_UNIT) * _NV_REG_UNIT
    by_regs = (arch.regs_per_sm // per_warp) // warps if per_warp else most
    by_shared = (arch.shared_per_block + _NV_RESERVED_SHARED) // (shared + _NV_RESERVED_SHARED)
    blocks = min(arch.max_blocks_per_sm, most // warps, by_regs, by_shared)
    active = blocks * warps
    return {"occupancy": active, "occupancy_effective": active, "occupancy_max": most,
            "occupancy_unit": "warps/SM", "occupancy_fraction": round(active / most, 4)}
