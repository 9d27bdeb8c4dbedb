"""How many warps (NVIDIA: per SM) or waves (AMD: per SIMD) of a compiled kernel can be resident
at once, from the resources the compiler reported and the arch's limits.

The arch table (portcheck.facts.archs) gives threads per SM / CU, registers per SM and shared
memory per block; the few limits it does not hold are below, with their sources.
"""
from __future__ import annotations

import math

# Per compute capability (CUDA C++ Programming Guide, "Technical Specifications per Compute
# Capability"): resident blocks per SM, and the 1 KB of shared memory the system reserves per
# block (so an SM's shared memory is the per-block maximum + 1 KB). Registers are allocated per
# warp in units of 256.
_NV_MAX_BLOCKS = {80: 32, 89: 24, 90: 32, 100: 32, 120: 32}
_NV_RESERVED_SHARED = 1024
_NV_REG_UNIT = 256
# AMD: LDS a CU (RDNA: a WGP) shares between its workgroups (on RDNA twice what one workgroup
# may use), and its SIMD count.
_AMD_LDS_PER_CU = {"gfx90a": 65536, "gfx942": 65536, "gfx950": 163840, "gfx1100": 131072, "gfx1201": 131072}
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
        lds_bound = math.ceil((_AMD_LDS_PER_CU[arch.name] // shared) * warps / _AMD_SIMDS) if shared else most
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
    blocks = min(_NV_MAX_BLOCKS.get(arch.triton_arch, 32), most // warps, by_regs, by_shared)
    active = blocks * warps
    return {"occupancy": active, "occupancy_effective": active, "occupancy_max": most,
            "occupancy_unit": "warps/SM", "occupancy_fraction": round(active / most, 4)}
