"""Reading what the compiler produced: code size, matrix instructions, copies, dots and resources.

  NVIDIA: `cuobjdump --dump-resource-usage` (bundled in the triton wheel) on the cubin gives REG,
          STACK (spills land there) and LOCAL; shared memory is `metadata.shared` (dynamic).
  AMD:    the amdgcn text states VGPRs, SGPRs, AGPRs, spill counts, scratch and occupancy;
          LDS is `metadata.shared` (`.group_segment_fixed_size` says 0: Triton's LDS is dynamic).

Everything here reads text or bytes; a change to what it extracts must bump
portcheck.compile.worker.EXTRACT_VERSION (the facts cache).
"""
from __future__ import annotations

import os
import re
import struct
import subprocess
import tempfile


def _elf_text_bytes(blob: bytes) -> int | None:
    """Sum of the .text* section sizes of a 64-bit little-endian ELF (cubin, hsaco)."""
    if len(blob) < 64 or blob[:4] != b"\x7fELF" or blob[4] != 2 or blob[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", blob, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", blob, 0x3A)
    if not shoff or shoff + shnum * shentsize > len(blob):
        return None

    def section(i):
        name, _t, _f, _a, off, size = struct.unpack_from("<IIQQQQ", blob, shoff + i * shentsize)
        return name, off, size
    _, stroff, _ = section(shstrndx)
    total = 0
    for i in range(shnum):
        name_off, _, size = section(i)
        end = blob.find(b"\0", stroff + name_off)
        if blob[stroff + name_off:end].startswith(b".text"):
            total += size
    return total


_NV_FAMILIES = (("tcgen05", re.compile(r"\btcgen05\.mma\S*")), ("wgmma", re.compile(r"\bwgmma\.mma_async\S*")),
                ("mma.sync", re.compile(r"\bmma\.sync\S*")))
_AMD_FAMILIES = (("mfma", re.compile(r"\bv_s?mfma\w*")), ("wmma", re.compile(r"\bv_s?wmma\w*")))


def matrix_instructions(asm_text: str, amd: bool, every: bool = False) -> tuple[str, list[str]]:
    """The matrix-instruction family in the assembly (mfma, wmma, mma.sync, wgmma, tcgen05 or
    none) and the distinct instructions seen (the first four, or all with `every`)."""
    for family, pattern in (_AMD_FAMILIES if amd else _NV_FAMILIES):
        found = sorted(set(pattern.findall(asm_text)))
        if found:
            return family, found if every else found[:4]
    return "none", []


# cp.async{.ca,.cg}.shared.global [dst], [src], cp-size{, src-size}: cp-size is 4, 8 or 16 bytes
_CP_ASYNC = re.compile(r"\bcp\.async\.c[ag]\.shared\.global\S*\s+\[[^]]*\],\s*\[[^]]*\],\s*(0x[0-9a-fA-F]+|\d+)")


def async_copy_sizes(ptx: str) -> dict:
    """How many cp.async instructions the PTX has per copy size in bytes (static counts). Copies
    under 16 bytes mean that the global layout does not match the shared layout, or that the
    compiler could not prove 16-byte alignment: e.g. a row-major fp32 B feeding sm_90a's tf32
    wgmma, which reads K-major operands only, is copied 4 bytes at a time."""
    sizes: dict = {}
    for size in _CP_ASYNC.findall(ptx):
        key = str(int(size, 0))
        sizes[key] = sizes.get(key, 0) + 1
    return sizes


_DOT = re.compile(r"(?:(%[\w.#]+)\s*=\s*)?tt\.dot(?:_scaled)?\s+([^:{]*)(\{[^}]*\})?\s*:\s*"
                  r"tensor<([^>]*)>\s*\*\s*tensor<([^>]*)>\s*->\s*tensor<([^>]*)>")
_PRECISION = re.compile(r"inputPrecision\s*=\s*(\w+)")
# an operand converted just before the dot: `%x = tt.fp_to_fp %y : tensor<..xf8E4M3FNUZ> -> tensor<..xf16>`
_UPCAST = re.compile(r"(%[\w.#]+)\s*=\s*tt\.fp_to_fp\s+%[\w.#]+[^:]*:\s*tensor<([^>]*)>\s*->\s*tensor<([^>]*)>")


def _elem(tensor_type: str) -> str:
    return tensor_type.split("x")[-1].split(",")[0].strip()


def dots_in(ttir: str) -> list[dict]:
    """Each tl.dot in the TTIR: operand and result element types and input precision.

    The precision is given for fp32 operands only (TTIR prints the backend's default, e.g. tf32
    on NVIDIA, on every dot, where it means nothing for fp16 or fp8; it omits ieee). An operand
    the frontend upcast right before the dot (an fp8 format the arch does not take natively, as
    gfx950 does with FNUZ) is reported as the format the kernel gave, with `upcast` naming what
    the dot received."""
    upcast = {m.group(1): (_elem(m.group(2)), _elem(m.group(3))) for m in _UPCAST.finditer(ttir)}
    out = []
    for m in _DOT.finditer(ttir):
        elem = [_elem(t) for t in m.group(4, 5, 6)]
        operands = [o.strip() for o in m.group(2).split(",")][:2]
        dot = {"a": elem[0], "b": elem[1], "acc": elem[2], "precision": None}
        for key, name in zip(("a", "b"), operands):
            src = upcast.get(name)
            if src and src[0].startswith("f8"):
                dot[key] = src[0]
                dot["upcast"] = src[1]
        if elem[0] == "f32" and "upcast" not in dot:
            given = _PRECISION.search(m.group(2) + (m.group(3) or ""))
            dot["precision"] = given.group(1) if given else "ieee"
        out.append(dot)
    return out


# The operand type of a matrix instruction, from its name: what the hardware multiplies.
# AMD (gfx90a writes no '_' before the type): v_mfma_f32_32x32x8_f16, ..._bf16(_1k), ..._xf32 (tf32), ..._f32, ..._fp8_fp8 / _bf8_fp8 (FNUZ on
# gfx942, OCP on gfx950 and gfx12), ..._f8f6f4 (gfx950), ..._i8 / _iu8, v_mfma_f64_*. NVIDIA:
# mma.sync / wgmma name A's and B's types (.f16, .bf16, .tf32, .e4m3, .e5m2, .s8, .f64);
# tcgen05.mma names a kind (kind::f16 covers f16 and bf16, kind::f8f6f4 the 8-bit and smaller).
_AMD_OPERAND = (("fp8", re.compile(r"(?:fp8|bf8)_(?:fp8|bf8)$|f8f6f4$")), ("tf32", re.compile(r"xf32$")),
                ("bf16", re.compile(r"bf16(?:_1k)?$")), ("f16", re.compile(r"f16$")),
                ("i8", re.compile(r"iu?8$")), ("f64", re.compile(r"^v_mfma_f64")), ("f32", re.compile(r"f32$")))
_NV_OPERAND = (("fp8", re.compile(r"\.e4m3|\.e5m2|kind::f8f6f4")), ("tf32", re.compile(r"\.tf32|kind::tf32")),
               ("bf16", re.compile(r"\.bf16")), ("f16", re.compile(r"\.f16\.|kind::f16")),
               ("i8", re.compile(r"\.[su]8|kind::i8")), ("f64", re.compile(r"\.f64\.f64")))


def matrix_operand(instruction: str) -> str:
    """'fp8', 'f16', 'bf16', 'tf32', 'f32', 'i8', 'f64' or '?' for one matrix instruction."""
    table = _AMD_OPERAND if instruction.startswith("v_") else _NV_OPERAND
    return next((kind for kind, pattern in table if pattern.search(instruction)), "?")


def _cuobjdump() -> str | None:
    import triton
    path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    return path if os.path.exists(path) else None


def nvidia_resources(cubin: bytes) -> dict:
    """REG / STACK / LOCAL / static SHARED per function from the bundled cuobjdump."""
    tool = _cuobjdump()
    if tool is None:
        return {"note": "no cuobjdump in this triton wheel; registers unknown"}
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([tool, "--dump-resource-usage", f.name], capture_output=True, text=True,
                             timeout=60).stdout
    m = re.search(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)", out)
    if not m:
        return {"note": f"cuobjdump printed no resource usage: {out.strip()[:200]}"}
    reg, stack, static_shared, local = map(int, m.groups())
    return {"registers": reg, "stack_bytes": stack, "local_bytes": local, "static_shared": static_shared}


def _amd_int(pattern: str, text: str) -> int | None:
    m = re.search(pattern, text, re.M)
    return int(m.group(1)) if m else None


def amd_resources(amdgcn: str) -> dict:
    vgpr = _amd_int(r"^\s*\.vgpr_count:\s+(\d+)", amdgcn)
    return {"registers": vgpr, "vgpr": vgpr,
            "arch_vgpr": _amd_int(r"; NumVgprs: (\d+)", amdgcn),
            "agpr": _amd_int(r"; NumAgprs: (\d+)", amdgcn) or 0,
            "sgpr": _amd_int(r"^\s*\.sgpr_count:\s+(\d+)", amdgcn),
            "vgpr_spill_count": _amd_int(r"^\s*\.vgpr_spill_count:\s+(\d+)", amdgcn) or 0,
            "sgpr_spill_count": _amd_int(r"^\s*\.sgpr_spill_count:\s+(\d+)", amdgcn) or 0,
            "scratch_bytes": _amd_int(r"; ScratchSize: (\d+)", amdgcn) or 0,
            "occupancy_compiler": _amd_int(r"; Occupancy: (\d+)", amdgcn),
            "group_segment_fixed_size": _amd_int(r"^\s*\.group_segment_fixed_size:\s+(\d+)", amdgcn),
            "code_len": _amd_int(r"; codeLenInByte = (\d+)", amdgcn)}


def read_resources(kernel, arch) -> dict:
    """Registers, spills, occupancy as stated, matrix instructions, dots and code size."""
    asm = kernel.asm
    res: dict = {}
    if arch.is_amd:
        res.update(amd_resources(asm["amdgcn"]))
        res["code_bytes"] = _elf_text_bytes(asm.get("hsaco", b"")) or res.get("code_len")
        family, instrs = matrix_instructions(asm["amdgcn"], True, every=True)
    else:
        res.update(nvidia_resources(asm["cubin"]))
        res["code_bytes"] = _elf_text_bytes(asm["cubin"])
        family, instrs = matrix_instructions(asm["ptx"], False, every=True)
        res["async_copy_sizes"] = async_copy_sizes(asm["ptx"])
    res.update(matrix_family=family, matrix_instructions=instrs[:4],
               matrix_operands=sorted({matrix_operand(i) for i in instrs}),
               dots=dots_in(asm.get("ttir", "")))
    return res

