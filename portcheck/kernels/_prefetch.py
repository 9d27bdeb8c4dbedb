"""Chunks brought into L2 ahead of a kernel's loads by the copy engine: NVIDIA sm_90+'s
`cp.async.bulk.prefetch.L2`, one instruction from one thread a chunk, holding no registers and no
shared memory and waited on by nobody. The register loads that follow find the chunk in L2.

It is inline PTX, so a kernel takes it under a constexpr that its launcher sets from l2_prefetch_ok:
never on AMD, before sm_90 or on the interpreter (which runs no asm), where the kernel's code is
what it was without it."""
from __future__ import annotations

import triton
import triton.language as tl

from ._launch import COPY_ALIGN, alignment_obstacle, descriptors_supported


@triton.jit
def lead_thread(dummy):
    """True in the program's thread 0 only (Triton sees a scalar; each thread computes its own).
    `dummy`: any scalar tensor (asm takes no constants), e.g. tl.program_id(0)."""
    return tl.inline_asm_elementwise(
        "{ .reg .pred p; .reg .b32 t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; selp.b32 $0, 1, 0, p; }",
        "=r,r", [dummy], dtype=tl.int32, is_pure=True, pack=1) != 0


@triton.jit
def evict_last_policy(dummy):
    """An L2 evict_last cache policy (as a load's eviction_policy="evict_last" makes), made once."""
    return tl.inline_asm_elementwise("createpolicy.fractional.L2::evict_last.b64 $0, 1.0;", "=l,r", [dummy],
                                     dtype=tl.int64, is_pure=True, pack=1)


@triton.jit
def prefetch_l2(ptr, n, ok, policy):
    """Bring the n elements at ptr into L2 under `policy`, where ok (give ok only to lead_thread:
    each thread that passes ok issues the whole request). ptr and n * element size must be
    multiples of COPY_ALIGN bytes."""
    nbytes = n * (ptr.dtype.element_ty.primitive_bitwidth // 8)
    tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.u32 p, $2, 0; "
        "@p cp.async.bulk.prefetch.L2.global.L2::cache_hint [$1], $3, $4; mov.u32 $0, 0; }",
        "=r,l,r,r,l", [ptr.to(tl.int64, bitcast=True), ok.to(tl.int32), nbytes.to(tl.int32), policy],
        dtype=tl.int32, is_pure=False, pack=1)


def l2_prefetch_ok(arch, x=None, block: int = COPY_ALIGN) -> bool:
    """Whether a kernel may prefetch x's rows (or, with no x, any aligned tensor's) a `block` of
    elements at a time on `arch`: where the copy engine is (NVIDIA sm_90+, descriptors_supported)
    and asm runs (not the interpreter), with x's data and row stride and the block's bytes all
    multiples of COPY_ALIGN (a chunk starts a whole number of blocks into a row)."""
    if arch.is_interpreter or not descriptors_supported(arch):
        return False
    if x is None:
        return True
    return alignment_obstacle(x) is None and (block * x.element_size()) % COPY_ALIGN == 0
