"""Float-to-integer conversions on the interpreter, as a GPU lowers them, and the ones whose value
no vendor promises.

Triton lowers `x.to(tl.int8)` (and every float -> int cast) to LLVM's fptosi / fptoui, whose result
is poison for NaN, an infinity or a value outside the integer type's range. The backends then pick
an instruction, and they differ (Triton 3.6, cross-compiled):
  - NVIDIA: `cvt.rzi.s16.f32` for an 8-bit destination (`cvt.rzi.s32.f32` for 32 bits): it
    saturates to the 16-bit (32-bit) range and gives 0 for NaN; an 8-bit store keeps the low byte,
    so 300.0 -> 44 and 40000.0 -> 32767 -> -1;
  - AMD (gfx942): a bare `v_cvt_i32_f32` for both, its low byte stored for int8: where that
    instruction saturates at 32 bits, 40000.0 -> 64. (LLVM does not lean on what it gives out of
    range: its `fptosi.sat` for gfx942 adds compares and selects around it, NaN -> 0 among them;
    not measured here, no AMD GPU);
  - an x86 CPU (numpy, Triton's CPU backend): `cvttss2si` gives the "integer indefinite" value,
    the type's minimum, for NaN and out of range.
A quantization kernel that casts before it clamps, or that divides by a zero scale and casts the
NaN, gives an output that depends on that choice.

`to_int` converts as NVIDIA does, so the interpreter's outputs model a GPU's (Triton's interpreter
takes numpy's cast). `watching()` notes the conversions that met such values (where the kernel's
masked-off lanes hold NaN, many meet one and discard it); `another_lowering()` gives each of them
another value a lowering may give, one that differs from NVIDIA's for every such value: the
type's own range saturated (where NVIDIA wraps an 8-bit result from 16 bits), NaN -1 (an unsigned
type's 1: small, so that an index made from it reads next to its tensor, in a guard band, where
x86's minimum would send the interpreter to an unmapped address). runner relaunches such an example once with it: an output
that changes depends on values no vendor promises, whichever vendor it runs on.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np

from ..frames import calling_line


@dataclass
class Watch:
    """What `watching` saw: the source lines of conversions that met NaN, inf or out-of-range values."""
    lines: list[str] = field(default_factory=list)


_watch: Watch | None = None
_other = False     # inside another_lowering()


def _limits(np_dtype, bits: int) -> tuple[int, int]:
    signed = np.issubdtype(np_dtype, np.signedinteger)
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


def _saturated(t: np.ndarray, bits: int, signed: bool, nan_value: int) -> np.ndarray:
    """Truncated values `t` (float64) saturated to a `bits`-bit integer, NaN -> nan_value, as int64
    or uint64 (wide enough for every destination)."""
    lo, hi = _limits(np.int64 if signed else np.uint64, bits)
    wide = np.int64 if signed else np.uint64
    out = np.zeros(t.shape, dtype=wide)
    inside = (t >= lo) & (t < 2.0 ** (bits - 1 if signed else bits))   # hi + 1 is exact in float64
    out[inside] = t[inside].astype(wide)
    out[t >= 2.0 ** (bits - 1 if signed else bits)] = hi
    out[t < lo] = lo
    out[np.isnan(t)] = nan_value
    return out


def to_int(values, np_dst) -> np.ndarray:
    """Float values -> the integer dtype `np_dst`, truncating toward zero, as NVIDIA converts (or,
    inside another_lowering(), as the other lowering does); notes undefined ones for watching()."""
    np_dst = np.dtype(np_dst)
    bits = 8 * np_dst.itemsize
    signed = np.issubdtype(np_dst, np.signedinteger)
    with np.errstate(invalid="ignore"):
        t = np.trunc(np.asarray(values, dtype=np.float64))
        lo, hi = _limits(np_dst, bits)
        undefined = np.isnan(t) | (t < lo) | (t > hi)
    if _watch is not None and undefined.any():
        where = calling_line()
        if where not in _watch.lines:
            _watch.lines.append(where)
    if _other:   # saturate to the type's own range, NaN -> -1 (unsigned: 1): an index made so stays
        wide = _saturated(t, bits, signed, -1 if signed else 1)   # next to its tensor, in a guard band
    else:        # NVIDIA: at least 16 bits, saturating, NaN -> 0
        wide = _saturated(t, max(bits, 16), signed, 0)
    return wide.astype(np_dst)   # integer narrowing keeps the low bits, as a narrow store does


@contextlib.contextmanager
def watching():
    """Inside, conversions that meet NaN, inf or an out-of-range value are noted (yields a Watch)."""
    global _watch
    saved, _watch = _watch, Watch()
    try:
        yield _watch
    finally:
        _watch = saved


@contextlib.contextmanager
def another_lowering():
    """Inside, undefined conversions take other values a lowering may give (module docstring)."""
    global _other
    saved, _other = _other, True
    try:
        yield
    finally:
        _other = saved


def differs(name: str, first, second, lines: list[str]) -> str | None:
    """The check's message when output `name` differs between the two lowerings (tensors), else None."""
    from ..guards import bits
    a, b = first.detach().cpu(), second.detach().cpu()
    if a.shape != b.shape:
        return None
    differ = (bits(a) != bits(b)).flatten().nonzero()
    if not differ.numel():
        return None
    at = int(differ[0])
    index = [int(i) for i in np.unravel_index(at, tuple(a.shape))] if a.dim() else []
    flat_a, flat_b = a.flatten(), b.flatten()
    return (f"an undefined float-to-integer conversion: {name} depends on what a cast gives for NaN, inf "
            f"or a value outside the integer type's range (LLVM's fptosi: poison), at "
            f"{', '.join(lines) or 'a cast'}: {name}{index} is {flat_a[at].item()} as "
            f"NVIDIA converts (cvt.rzi: saturating to 16 bits or more, then the low bits; NaN -> 0) and "
            f"{flat_b[at].item()} where the conversion saturates to the type's own range and gives NaN -1 "
            "(AMD's gfx942 code stores the low byte of a 32-bit v_cvt_i32_f32; x86 gives the minimum); clamp "
            "to the type's range and handle NaN before the cast")
