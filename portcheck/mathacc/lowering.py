"""Which instructions each math function lowers to on each arch, read from cross-compiled code.

The kernels are compiled (no GPU needed) for every arch of the table, and the special-function
instructions are picked out of the PTX (NVIDIA) or AMDGCN (AMD): `ex2.approx.f32`,
`v_exp_f32`, `div.rn.f32`, ... plus the number of FMAs, which shows a software sequence (a
libdevice / ocml polynomial) around or instead of a hardware approximation.
"""
from __future__ import annotations

import re

PTX_SPECIAL = re.compile(r"\b((?:ex2|lg2|sin|cos|sqrt|rsqrt|rcp|tanh)\.(?:approx|rn)(?:\.ftz)?\.f32"
                         r"|div\.(?:rn|full|approx)(?:\.ftz)?\.f32)")
PTX_FMA = re.compile(r"\bfma\.rn(?:\.ftz)?\.f32")
GCN_SPECIAL = re.compile(r"\b(v_(?:exp|log|sin|cos|sqrt|rsq|rcp)_f32|v_div_(?:scale|fmas|fixup)_f32)")
GCN_FMA = re.compile(r"\bv_(?:fma|fmac|mad|mac)_f32")


def fingerprint(asm: str, vendor: str) -> str:
    """'ex2.approx.f32' or 'v_exp_f32 + fma' from one kernel's assembly text: the distinct
    special-function instructions (counts only repeat the vector width, so they are left out)
    and whether an FMA sequence (a software polynomial or refinement) surrounds them."""
    special, fma = (PTX_SPECIAL, PTX_FMA) if vendor == "nvidia" else (GCN_SPECIAL, GCN_FMA)
    parts = sorted(set(m.group(1) for m in special.finditer(asm)))
    if fma.search(asm):
        parts.append("fma")
    return " + ".join(parts) or "plain arithmetic"


def lower(fn_name: str, arch) -> str:
    """Cross-compile the apply kernel for one function and arch; return its fingerprint."""
    import triton
    from triton.backends.compiler import GPUTarget
    from .kernels import apply_kernel
    src = triton.compiler.ASTSource(fn=apply_kernel,
                                    signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32",
                                               "FN": "constexpr", "BLOCK": "constexpr"},
                                    constexprs={"FN": fn_name, "BLOCK": 1024})
    kernel = triton.compile(src, target=GPUTarget(arch.backend, arch.triton_arch, arch.warp_size),
                            options={"num_warps": 4})
    asm = kernel.asm["ptx" if arch.vendor == "nvidia" else "amdgcn"]
    return fingerprint(asm, arch.vendor)
