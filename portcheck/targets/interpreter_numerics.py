"""A faithful numerics layer for Triton's CPU interpreter (TRITON_INTERPRET=1).

Triton's interpreter (triton/runtime/interpreter.py) stores bf16 as uint16 and fp8 as uint8 bit
patterns and converts them with one generic bit-shuffling routine, `_convert_float`. That gets
low-precision numerics wrong:
  - fp32 -> bf16 casts truncate instead of rounding to nearest even;
  - bf16 subnormals widen to wrong fp32 values (2^-127 -> 0);
  - fp32 -> fp8 casts round half up on the dropped bits without a sticky or even check (1-5% of
    codes differ), carry a mantissa overflow into the exponent field, turn NaN into finite codes
    and never saturate; fp8 -> fp32 decodes NaN and inf codes as numbers;
  - bf16 arithmetic (`x + y`, `-x`, `tl.sum`, `tl.max`, fma) runs on the bit patterns as integers,
    and a bf16 `tl.dot` multiplies the bit patterns as integers;
  - fp8 `tl.dot` operands go through `_convert_float` to fp16, which loses e5m2 subnormals;
  - a Python float kernel argument stays a Python float (`eps.to(tl.float32)` raises), where the
    JIT passes an fp32 scalar; an integer argument equal to 1 arrives as a tensor, where the JIT
    compiles it as the constant 1 (so `n.to(tl.float32)` passes here and fails on every GPU);
  - `triton.language.extra.libdevice` functions are empty stubs there (they return None).

`install()` patches those points (class attributes and module functions, restored by
`uninstall()`); `portcheck.targets.runtime.select_mode("interpreter")` installs it, and
`--raw-interpreter` (portcheck run, pytest) leaves Triton's own behaviour for a side-by-side look.

What the layer does, and why it models the GPU:
  - Conversions go through torch's CPU conversions (exact, round to nearest even, NaN kept):
    widening is exact; narrowing rounds once. A float64 or integer source is first rounded to
    fp32 with round-to-odd, which makes the second rounding equal to one direct rounding.
  - fp8 narrowing saturates: a finite value beyond the largest finite code, and +-inf, become
    +-max finite; NaN stays NaN. That is NVIDIA's `cvt.rn.satfinite.{e4m3,e5m2}x2` which Triton
    emits on sm_89+; torch instead overflows to NaN (e4m3fn, FNUZ) or inf (e5m2). Below the
    overflow threshold every code equals torch's. `fp_downcast_rounding="rtz"` steps a
    round-to-nearest result that grew in magnitude one code back toward zero.
  - bf16 / fp8 arithmetic decodes to fp32, computes, and rounds back once: correctly rounded for
    + - * / (fp32 has more than 2p+2 bits for p <= 8), as a GPU with native bf16 units does.
    A bf16 or fp16 `tl.sum` adds pairwise in a tree and rounds after every level, like a GPU's
    shuffle-tree reduction in that format (the exact order differs, the error growth does not);
    Triton's own fp16 sum is numpy's, which accumulates in fp32 and rounds once, so a kernel that
    sums fp16 without widening passed here where a GPU rounds every add to fp16.
  - `tl.dot` with a bf16 or fp8 operand widens both operands exactly, forms the products and sums
    in float64, adds the accumulator and rounds once to the accumulator's format. Matrix units
    form exact products and accumulate in fp32 (Hopper's fp8 path in fewer bits, see
    max_num_imprecise_acc); the float64 sum is the value they approximate, within the fp32
    accumulation bound K * u_fp32 * sum|a||b| that portcheck's dot tolerances already carry.
    So the interpreter is never less accurate than the GPU here, and a tolerance failure on it
    is the kernel's.
  - An fp32 `tl.dot` at input_precision "tf32", Triton's default on NVIDIA (the interpreter's
    default too; it cannot tell an explicit "tf32" from it), rounds both operands to tf32 (10
    fraction bits, to nearest even, as Triton's own TMA path rounds them), forms exact products
    and sums them in float64, with one rounding to fp32: a kernel whose fp32 tolerance leaves no
    room for tf32 operands passed here, where NVIDIA's default rounds them. Matrix units may truncate the
    operands instead (tl.dot's documentation allows it), an error at most twice this model's;
    portcheck's own tf32 tolerances bound both. "tf32x3" and "ieee" stay fp32 (numpy's).
  - A `tl.reduce` with its own combine function combines adjacent groups pairwise, level by level
    (log2 n calls of the combine on whole arrays), where Triton's interpreter folds the elements
    one at a time from the left in Python (n calls, each on one element: a chunk's NaN-keeping max
    was a third of a long-row softmax's time on the CPU). Groups stay in order, so any combine
    that Triton accepts (associative, not necessarily commutative) means the same; the rounding
    of a float combine follows a GPU's tree (in-thread runs, then shuffles) more closely than a
    left fold does.
  - `tl.argmax` / `tl.argmin` with tie_break_left=False return the last of equal elements: each
    combine keeps its second operand on a tie, so a GPU's reduction ends on a later index, where
    Triton 3.9's interpreter returns the first (and 3.6's, combining in Python, the last).
  - `tl.maximum`, `tl.minimum` and `tl.clamp` without propagate_nan=ALL drop a NaN operand, as
    the maxnum / minnum they lower to do on both vendors (relu(NaN) is 0 on a GPU); Triton 3.6's
    interpreter kept it (np.maximum, np.clip), 3.9's drops it too. A bf16 or fp8 clamp clamps
    values, where both releases' np.clip with propagate_nan=ALL compared the storage codes.
  - An fp64, fp32 or fp16 `tl.fma` (and an fp64 or fp32 `libdevice.fma`) rounds x * y + z once
    (`fma_fp64`, `fma_fp32`), as fma.rn.f64 / .f32 and v_fma_f64 / _f32 do and 3.9's interpreter
    does; 3.6's rounded the product first.
  - `tl.histogram` counts the elements in [0, bins) that its mask keeps, as 3.9's interpreter and
    the GPUs do (3.6's counted a value equal to bins in the last bin).
  - A float -> integer cast truncates and saturates as NVIDIA's cvt.rzi does: to at least 16 bits
    (an 8-bit result keeps the low byte of the 16-bit one), NaN -> 0; numpy's cast is x86's
    (targets.interpreter_conversions, which also notes the conversions no vendor defines).
  - Float scalar arguments become fp32 scalars, as the JIT's specialization makes them (ints are
    already i32 / u32 / i64 / u64 by range in Triton's own code), and an integer argument equal to
    1 becomes tl.constexpr(1) where the JIT makes it one (no type annotation, not in
    do_not_specialize).
  - libdevice functions (LIBDEVICE below) are computed with numpy in float64 and rounded to the
    argument's format (fp32 or fp64, the formats libdevice takes); predicates return int32.
Not covered: fp8e4b15 (torch has no such dtype; Triton's own path stays), `tl.dot_scaled`,
bf16 cumsum, inline asm, and libdevice's directed-rounding and integer variants.

Proposed upstream fix (triton/runtime/interpreter.py), in the words of a PR description:
  "Interpreter: exact bf16/fp8 numerics. Replace `_convert_float` with conversions that decode
  every source code exactly (subnormals, inf, NaN; FNUZ 0x80 as NaN) and round once to nearest
  even with the target's overflow rule (satfinite for fp8, as the GPU lowering does). Give
  bf16/fp8 operands of binary/unary ops, fma and reductions a decode -> compute in fp32 -> round
  path instead of integer arithmetic on the storage type. In create_dot, widen bf16/fp8 operands
  exactly to fp32 (not to fp16, which loses e5m2 subnormals) and accumulate in fp32 or wider.
  In _implicit_cvt, wrap Python floats as fp32 scalars like the JIT's specialization. Map
  triton.language.extra.libdevice to numpy implementations in interpreter mode. Tests: all
  65536 bf16 and 4 x 256 fp8 codes round-trip against torch; fp32 -> bf16/fp8 on ties,
  subnormals, overflow, inf and NaN."

Supported Triton releases: TRITON_VERSIONS, whose interpreter.py this was written against; any
other release is refused with an error (use --raw-interpreter to run without the layer).
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import math
from fractions import Fraction

import numpy as np

from ..errors import UsageError
from . import interpreter_conversions

LAYER_VERSION = 8   # 2: integer arguments equal to 1 arrive as the JIT specializes them; 3: fp16 sums
                    # in a rounded tree, tf32 dot operands rounded, argmax ties without tie_break_left;
                    # 4: maxnum / minnum / clamp drop NaN, histogram drops values >= bins,
                    # on Triton 3.6 as on 3.9 and the GPUs; 5: an fp32 / fp16 fma rounds once on 3.6 too;
                    # 6: an fp64 fma as well; 7: a tl.reduce with its own combine function
                    # combines in a pairwise tree; 8: float -> int casts saturate as NVIDIA's cvt.rzi
DESCRIPTION = f"faithful bf16/fp8 layer v{LAYER_VERSION}"
TRITON_VERSIONS = ("3.6.0", "3.9.0")   # interpreter.py read and tested for each


class InterpreterNumericsError(UsageError):
    """This Triton's interpreter is not one the layer knows; nothing was patched (a one-line
    error, exit status 2, from portcheck and pytest alike)."""


# (owner, attribute, parameter names it must have): every point the layer replaces
_PATCH_POINTS = (
    ("InterpreterBuilder", "cast_impl", ("self", "src", "dst_type")),
    ("InterpreterBuilder", "create_fp_to_fp", ("self", "src", "dst_type", "rounding_mode")),
    ("InterpreterBuilder", "binary_op", ("self", "lhs", "rhs", "op")),
    ("InterpreterBuilder", "unary_op", ("self", "arg", "op")),
    ("InterpreterBuilder", "create_fma", ("self", "x", "y", "z")),
    ("InterpreterBuilder", "create_dot", ("self", "a", "b", "d", "input_precision", "max_num_imprecise_acc")),
    ("InterpreterBuilder", "create_maxnumf", ("self", "lhs", "rhs")),
    ("InterpreterBuilder", "create_minnumf", ("self", "lhs", "rhs")),
    ("InterpreterBuilder", "create_clampf", ("self", "arg", "lo", "hi", "propagate_nans")),
    ("InterpreterBuilder", "create_histogram", ("self", "data", "bins", "mask")),
    ("ReduceOps", "sum", ("self", "input")),
    ("ReduceOps", "min_max", ("self", "input", "val_reduce_op", "idx_reduce_op")),
    ("ReduceOps", "apply_impl", ("self", "input")),
    (None, "_implicit_cvt", ("arg",)),
    ("InterpretedFunction", "run", ("self", "args", "grid", "warmup", "kwargs")),
    (None, "_patch_lang_tensor", ("tensor", "scope")),
    (None, "_patch_lang_core", ("lang", "scope")),
    (None, "_patch_lang", ("fn",)),
)

_saved: list | None = None      # (object, name, original) while installed


def installed() -> bool:
    return _saved is not None


def describe() -> str:
    """For provenance: which numerics the interpreter target ran with."""
    return DESCRIPTION if installed() else "raw"


def check_supported():
    """The interpreter module, once its version and every patch point are as expected."""
    import triton
    from triton.runtime import interpreter as interp
    version = triton.__version__.split("+")[0]
    if version not in TRITON_VERSIONS:
        raise InterpreterNumericsError(
            f"portcheck's interpreter numerics layer supports Triton {', '.join(TRITON_VERSIONS)}, "
            f"not {triton.__version__}: its interpreter internals are unchecked there. Run with "
            f"--raw-interpreter to use Triton's own interpreter numerics")
    for owner, name, params in _PATCH_POINTS:
        obj = getattr(interp, owner) if owner else interp
        member = getattr(obj, name, None)
        if member is None or tuple(inspect.signature(member).parameters) != params:
            where = f"{owner}.{name}" if owner else name
            raise InterpreterNumericsError(
                f"Triton {triton.__version__}'s interpreter has no {where}{params!r} "
                f"(found {member and tuple(inspect.signature(member).parameters)}): "
                f"the numerics layer cannot patch it; use --raw-interpreter")
    from triton.language.extra import libdevice
    for name, (_, nargs, _) in LIBDEVICE.items():
        stub = getattr(libdevice, name, None)
        if stub is None or len(inspect.signature(stub).parameters) != nargs:
            raise InterpreterNumericsError(f"triton.language.extra.libdevice.{name} is not the "
                                           f"{nargs}-argument stub the numerics layer replaces")
    return interp


def install() -> None:
    """Patch the interpreter (idempotent). Raises InterpreterNumericsError on unknown internals."""
    global _saved
    if _saved is not None:
        return
    interp = check_supported()
    from triton.language.extra import libdevice
    replacements = _replacements(interp)
    saved = []
    for (owner, name, _), new in zip(_PATCH_POINTS, replacements):
        obj = getattr(interp, owner) if owner else interp
        saved.append((obj, name, obj.__dict__[name] if owner else getattr(obj, name)))
        setattr(obj, name, new)
    for name, (fn, nargs, kind) in LIBDEVICE.items():
        saved.append((libdevice, name, getattr(libdevice, name)))
        setattr(libdevice, name, _libdevice_fn(name, fn, kind))
    _saved = saved


def uninstall() -> None:
    """Restore Triton's own interpreter (idempotent)."""
    global _saved
    for obj, name, original in reversed(_saved or []):
        setattr(obj, name, original)
    _saved = None


@contextlib.contextmanager
def active(on: bool = True):
    """`with active(False):` runs a block on Triton's raw interpreter; the state is restored after."""
    was = installed()
    install() if on else uninstall()
    try:
        yield
    finally:
        install() if was else uninstall()


# ---- formats -------------------------------------------------------------------------------------

def _formats():
    """tl dtype -> (torch dtype, numpy storage dtype) for the formats torch converts exactly."""
    import torch
    import triton.language as tl
    return {tl.bfloat16: (torch.bfloat16, np.uint16), tl.float8e4nv: (torch.float8_e4m3fn, np.uint8),
            tl.float8e5: (torch.float8_e5m2, np.uint8), tl.float8e4b8: (torch.float8_e4m3fnuz, np.uint8),
            tl.float8e5b16: (torch.float8_e5m2fnuz, np.uint8)}


_FORMATS: dict = {}


def _fmt(tl_dtype):
    if not _FORMATS:
        _FORMATS.update(_formats())
    return _FORMATS.get(getattr(tl_dtype, "scalar", tl_dtype))


def decode(bits, tl_dtype):
    """Codes of a bf16 / fp8 format -> their exact fp32 values (NaN and inf included)."""
    import torch
    torch_dtype, storage = _fmt(tl_dtype)
    signed = np.int16 if storage == np.uint16 else np.uint8     # torch has no uint16 view everywhere
    t = torch.from_numpy(np.ascontiguousarray(bits, dtype=storage).view(signed))
    return t.view(torch_dtype).to(torch.float32).numpy().reshape(np.shape(bits))


def _fp32_round_to_odd(values):
    """float64 / integer values -> fp32 with round-to-odd, so that rounding the result again to a
    format of at most 22 bits equals rounding the value directly (no double-rounding error)."""
    v = np.asarray(values)
    if v.dtype in (np.float32, np.float16):
        return v.astype(np.float32)
    v = v.astype(np.float64)
    f = v.astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        inexact = (f.astype(np.float64) != v) & ~np.isnan(v)
        grew = inexact & (np.abs(f.astype(np.float64)) > np.abs(v))
    f = np.where(grew, np.nextafter(f, np.float32(0)), f).astype(np.float32)   # toward zero
    return (f.view(np.uint32) | inexact.astype(np.uint32)).view(np.float32)    # odd neighbour


def fma_fp32(x, y, z) -> np.ndarray:
    """x * y + z rounded once to fp32, as fma.rn.f32 and AMD's v_fma_f32 round it (Triton 3.6's
    interpreter rounds the product and the sum apart; 3.9 has its own exact fma_fp32). The product
    is exact in float64 (24 + 24 bits); TwoSum gives the float64 sum's rounding error exactly, and
    an inexact sum moves to its odd neighbour toward the exact value (round-to-odd), so the one
    rounding to fp32 that follows equals rounding the exact value (53 >= 2 * 24 + 2 bits)."""
    x, y, z = (np.asarray(a, dtype=np.float64) for a in np.broadcast_arrays(x, y, z))
    with np.errstate(all="ignore"):
        s, err = _two_sum(x * y, z)               # s + err == x * y + z exactly, for finite s
        return _to_odd(s, np.where(np.isfinite(s), err, 0.0)).astype(np.float32)


_SPLIT = 2.0 ** 27 + 1   # Veltkamp's constant for float64: halves of 26 and 27 bits


def fma_fp64(x, y, z) -> np.ndarray:
    """x * y + z rounded once to fp64, as fma.rn.f64 and v_fma_f64 round it (Triton 3.6's
    interpreter rounds the product and the sum apart; 3.9 has its own exact fma_fp64). Boldo and
    Melquiond's emulation (IEEE Trans. Computers 57(4), 2008): Dekker's product uh + ul = x * y,
    TwoSum th + tl = z + uh, v = tl + ul rounded to odd, then th + v rounded once. Elements where
    an operand is not finite, or where the product's parts could overflow or lose bits to
    underflow, take the exact rational sum instead (Python's int division rounds correctly)."""
    originals = [np.array(a, dtype=np.float64).ravel() for a in np.broadcast_arrays(x, y, z)]
    shape = np.broadcast_shapes(*(np.shape(a) for a in (x, y, z)))
    x, y, z = originals
    with np.errstate(all="ignore"):
        ax, ay = np.abs(x), np.abs(y)
        # Veltkamp's split multiplies by 2^27 + 1 (no overflow below 2^995); the product's last
        # bit stays above 2^-1074 while both factors are 0 or above 2^-969 and it above 2^-960
        plain = (np.isfinite(z) & (np.abs(z) < 2.0 ** 1020) & (ax * ay < 2.0 ** 1020)
                 & ((x == 0) | (y == 0) | (ax * ay > 2.0 ** -960))
                 & (ax < 2.0 ** 995) & (ay < 2.0 ** 995)
                 & ((ax == 0) | (ax > 2.0 ** -969)) & ((ay == 0) | (ay > 2.0 ** -969)))
        x, y, z = (np.where(plain, a, 0.0) for a in (x, y, z))
        xh, yh = (_SPLIT * a - (_SPLIT * a - a) for a in (x, y))
        xl, yl = x - xh, y - yh
        uh = x * y
        ul = ((xh * yh - uh) + xh * yl + xl * yh) + xl * yl    # uh + ul == x * y exactly
        th, tl = _two_sum(z, uh)                                # th + tl == z + uh exactly
        out = th + _to_odd(*_two_sum(tl, ul))
        # an exact zero: x * y == -z exactly, so the plain sum is exact and signs its zero as IEEE does
        out = np.where(out == 0, x * y + z, out)
    for i in np.flatnonzero(~plain):
        out[i] = _fma_exact(*(float(a[i]) for a in originals))
    return out.reshape(shape)


def _two_sum(a, b):
    """s, e with s = a + b rounded and s + e == a + b exactly (Knuth)."""
    s = a + b
    t = s - a
    return s, (a - (s - t)) + (b - t)


def _to_odd(s, err):
    """s + err (err the exact error of s) rounded to odd: an inexact s moves to its odd neighbour
    toward the exact value, so that a later rounding to a narrower format rounds only once."""
    even = (s.view(np.uint64) & np.uint64(1)) == 0
    return np.where((err != 0) & even, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)


def _fma_exact(x: float, y: float, z: float) -> float:
    """x * y + z rounded once, one element: IEEE's rules where an operand is not finite."""
    if not (math.isfinite(x) and math.isfinite(y)):
        return x * y + z      # inf * 0, inf - inf: NaN; otherwise the infinity, as an fma gives
    if not math.isfinite(z):
        return z              # a finite product, however large, leaves z's infinity or NaN
    exact = Fraction(x) * Fraction(y) + Fraction(z)
    if exact == 0:            # the sign of an exact zero: -0 only when both terms are -0 (round to nearest)
        return x * y + z
    try:
        return float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def encode(values, tl_dtype, rtz: bool = False):
    """Values -> codes of a bf16 / fp8 format: round to nearest even (or toward zero), fp8
    saturating to +-max finite like cvt.rn.satfinite; NaN stays NaN."""
    import torch
    torch_dtype, storage = _fmt(tl_dtype)
    f32 = np.ascontiguousarray(_fp32_round_to_odd(values))
    signed = np.int16 if storage == np.uint16 else np.uint8
    bits = torch.from_numpy(f32).to(torch_dtype).view(torch.int16 if signed == np.int16 else torch.uint8)
    bits = bits.numpy().view(storage).copy()
    back = decode(bits, tl_dtype)
    sign = np.asarray(np.signbit(f32), dtype=storage) << storage(8 * bits.itemsize - 1)
    if rtz:     # round-to-nearest went up in magnitude: the next code toward zero (codes are sign-magnitude)
        with np.errstate(invalid="ignore"):
            grew = ~np.isnan(f32) & (np.abs(back) > np.abs(f32))
        stepped = bits - storage(1)
        if torch_dtype in (torch.float8_e4m3fnuz, torch.float8_e5m2fnuz):
            stepped[stepped == 0x80] = 0    # -min subnormal toward zero: FNUZ has no -0 (0x80 is NaN)
        bits = np.where(grew, stepped, bits).astype(storage)
        back = decode(bits, tl_dtype)
    if storage == np.uint8:     # fp8: overflow and +-inf saturate to +-max finite
        top = torch.tensor(torch.finfo(torch_dtype).max).to(torch_dtype).view(torch.uint8).item()
        over = ~np.isnan(f32) & ~np.isfinite(back)
        bits = np.where(over, sign | storage(top), bits).astype(storage)
    return bits.reshape(np.shape(values))


def _values(handle):
    """A TensorHandle's numbers: exact fp32 for bf16 / fp8, the data itself otherwise."""
    return decode(handle.data, handle.dtype) if _fmt(handle.dtype) else handle.data


def _replacements(interp):
    """New members, in _PATCH_POINTS order, each wrapping Triton's own for the formats it leaves alone."""
    import triton.language as tl
    TensorHandle = interp.TensorHandle
    builder, reduce_ops = interp.InterpreterBuilder, interp.ReduceOps
    cast_impl, fp_to_fp = builder.cast_impl, builder.create_fp_to_fp
    binary_op, unary_op, fma, dot = builder.binary_op, builder.unary_op, builder.create_fma, builder.create_dot
    red_sum, red_min_max, implicit_cvt = reduce_ops.sum, reduce_ops.min_max, interp._implicit_cvt
    apply_reduce = reduce_ops.apply_impl
    run = interp.InterpretedFunction.run
    RTZ = interp._ir.ROUNDING_MODE.RTZ
    NAN_NONE = interp._ir.PROPAGATE_NAN.NONE
    TF32 = interp._ir.INPUT_PRECISION.TF32
    fast_max = getattr(tl.standard, "_argmax_combine_tie_break_fast", None)
    fast_min = getattr(tl.standard, "_argmin_combine_tie_break_fast", None)
    # the combines Triton's interpreter reduces with numpy (or, for argmin / argmax, picks an index)
    standard_combines = {getattr(tl.standard, name) for name in dir(tl.standard)
                         if name.startswith(("_argmin_combine", "_argmax_combine", "_elementwise_", "_sum_combine"))}

    def convert(src, dst_type, rtz=False):
        dst = dst_type.scalar
        vals = _values(src)
        if _fmt(dst):
            return TensorHandle(encode(vals, dst, rtz), dst)
        with np.errstate(invalid="ignore", over="ignore"):
            return TensorHandle(vals.astype(interp._get_np_dtype(dst)), dst)

    def new_cast_impl(self, src, dst_type):
        to = dst_type.scalar
        if src.dtype.scalar.is_floating() and to.is_int() and not to.is_bool():   # as a GPU converts
            return TensorHandle(interpreter_conversions.to_int(_values(src), interp._get_np_dtype(to)), to)
        if _fmt(src.dtype) or _fmt(dst_type):
            return convert(src, dst_type)
        return cast_impl(self, src, dst_type)

    def new_fp_to_fp(self, src, dst_type, rounding_mode):
        if _fmt(src.dtype) or _fmt(dst_type):
            return convert(src, dst_type, rtz=rounding_mode == RTZ)
        if dst_type.scalar == tl.float16 and rounding_mode != RTZ:   # numpy's cast rounds to nearest even
            return TensorHandle(src.data.astype(np.float16), tl.float16)
        return fp_to_fp(self, src, dst_type, rounding_mode)

    def new_binary_op(self, lhs, rhs, op):
        fmt = lhs.dtype.scalar if _fmt(lhs.dtype) else rhs.dtype.scalar if _fmt(rhs.dtype) else None
        if fmt is None:
            return binary_op(self, lhs, rhs, op)
        with np.errstate(all="ignore"):     # fp32 then one rounding: correctly rounded for p <= 8
            out = op(_values(lhs), _values(rhs))
        return TensorHandle(out if out.dtype == np.bool_ else encode(out, fmt), lhs.dtype.scalar)

    def new_unary_op(self, arg, op):
        if not _fmt(arg.dtype):
            return unary_op(self, arg, op)
        with np.errstate(all="ignore"):
            return TensorHandle(encode(op(_values(arg)), arg.dtype.scalar), arg.dtype.scalar)

    def new_fma(self, x, y, z):
        native = not _fmt(z.dtype)
        # Triton 3.9 rounds fp64, fp32 and fp16 fmas once itself; 3.6 rounds their product first
        if native and (hasattr(interp._interpreter, "fma_fp32")
                       or z.data.dtype not in (np.float64, np.float32, np.float16)):
            return fma(self, x, y, z)
        if native and z.data.dtype in (np.float64, np.float32):
            once = fma_fp64 if z.data.dtype == np.float64 else fma_fp32
            return TensorHandle(once(x.data, y.data, z.data), z.dtype.scalar)
        # fp16, bf16, fp8 (p <= 11): float64 holds the product exactly and rounds the sum safely
        summed = np.multiply(_values(x), _values(y), dtype=np.float64) + _values(z)
        return TensorHandle(encode(summed, z.dtype.scalar) if not native else summed.astype(z.data.dtype),
                            z.dtype.scalar)

    def new_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        tf32 = input_precision == TF32 and a.dtype.scalar == tl.float32 and b.dtype.scalar == tl.float32
        if not (_fmt(a.dtype) or _fmt(b.dtype) or tf32):
            return dot(self, a, b, d, input_precision, max_num_imprecise_acc)
        # exact products, float64 sums, the accumulator added, one rounding (module docstring)
        a_values, b_values = ((round_to_tf32(a.data), round_to_tf32(b.data)) if tf32 else (_values(a), _values(b)))
        acc = np.matmul(a_values.astype(np.float64), b_values.astype(np.float64)) + _values(d)
        out = d.dtype.scalar
        data = encode(acc, out) if _fmt(out) else acc.astype(interp._get_np_dtype(out))
        return TensorHandle(data, out)

    # tl.maximum / tl.minimum / tl.clamp without propagate_nan=ALL lower to maxnum / minnum (PTX
    # max.f32, AMD's v_max_f32): a NaN operand gives the other one, so relu(NaN) is 0 on a GPU.
    # Triton 3.6's interpreter took np.maximum and np.clip, which keep the NaN (3.9 takes fmax)
    def new_maxnumf(self, lhs, rhs):
        return self.binary_op(lhs, rhs, np.fmax)

    def new_minnumf(self, lhs, rhs):
        return self.binary_op(lhs, rhs, np.fmin)

    def new_clampf(self, arg, lo, hi, propagate_nans):
        # through binary_op, so that bf16 and fp8 clamp their values (np.clip took the codes)
        clamped = self.binary_op(self.binary_op(arg, lo, np.fmax), hi, np.fmin)
        if propagate_nans == NAN_NONE:
            return clamped
        return self.binary_op(clamped, arg, lambda c, x: np.where(np.isnan(x), x, c))

    def new_histogram(self, data, bins, mask):
        # a GPU counts the elements in [0, bins) that the mask keeps, into int32 bins; Triton 3.6's
        # interpreter counted a value equal to bins in the last bin (np.histogram's closed last
        # interval; 3.9's does not)
        keep = np.asarray(mask.data if mask is not None else True) & (data.data >= 0) & (data.data < bins)
        counts = np.bincount(data.data[keep].astype(np.int64), minlength=bins)[:bins]
        return TensorHandle(counts.astype(np.int32), tl.int32)

    def new_sum(self, input):
        fmt = input.dtype.scalar if _fmt(input.dtype) else None
        half_float = input.dtype.scalar == tl.float16
        if fmt is None and not half_float:
            return red_sum(self, input)
        # numpy's own fp16 sum accumulates in fp32 and rounds once: far more accurate than a GPU's
        x = input.handle.data if half_float else _values(input.handle)
        axis = 0 if self.axis is None else self.axis
        x = np.moveaxis(x.reshape(-1) if self.axis is None else x, axis, 0)
        while x.shape[0] > 1:       # a tree of adds in the format, rounded after every level
            if x.shape[0] % 2:
                x = np.concatenate([x, np.zeros_like(x[:1])])
            half = x.shape[0] // 2
            with np.errstate(over="ignore", invalid="ignore"):   # numpy's fp16 add rounds once
                x = x[:half] + x[half:] if half_float else decode(encode(x[:half] + x[half:], fmt), fmt)
        total = x[0]
        if self.keep_dims:
            total = (np.expand_dims(total, axis) if self.axis is not None
                     else total.reshape((1,) * input.handle.data.ndim))
        return self.to_tensor(total if half_float else encode(total, fmt), input.dtype)

    def new_min_max(self, input, val_reduce_op, idx_reduce_op=None):
        one = input[0] if isinstance(input, tuple) else input
        if not _fmt(one.dtype):
            return red_min_max(self, input, val_reduce_op, idx_reduce_op)
        # reduce the fp32 values (the codes' integer order is not their numeric order), then re-encode
        ty = tl.block_type(tl.float32, list(one.shape)) if one.type.is_block() else tl.float32
        shadow = tl.core.tensor(TensorHandle(_values(one.handle), tl.float32), ty)
        out = red_min_max(self, shadow, val_reduce_op, idx_reduce_op)
        if not val_reduce_op:
            return out      # indices only
        val = out[0] if idx_reduce_op else out
        data = encode(val.handle.data, one.dtype.scalar)
        val = self.to_tensor(data if val.type.is_block() else data.reshape(-1)[0], one.dtype)
        return (val, out[1]) if idx_reduce_op else val

    def new_apply_impl(self, input):
        # tl.argmax / argmin(tie_break_left=False): each combine keeps its second operand on a tie,
        # so a GPU's in-thread loop and shuffle tree end on a later index; Triton 3.9 takes the
        # leftmost (np.nanargmax), which hid a kernel that relied on the lower index (3.6 combined
        # one element at a time, in Python, and ended on the last)
        for fast, value_op, index_op in ((fast_max, np.nanmax, np.nanargmax), (fast_min, np.nanmin, np.nanargmin)):
            if fast is not None and self.combine_fn is fast:
                return self.min_max(input[0], val_reduce_op=value_op, idx_reduce_op=_last(index_op))
        if type(self) is reduce_ops and self.combine_fn not in standard_combines:
            return tree_reduce(self, input)
        return apply_reduce(self, input)

    def tree_reduce(self, input):
        # the reduced axis last; each level combines groups 2i and 2i + 1 (a block's dims are powers
        # of two). Every operand is flattened for axis=None (Triton's unravel flattens the first only)
        axis = 0 if self.axis is None else self.axis
        ndim = input[0].handle.data.ndim
        dtypes = [arg.dtype for arg in input]
        data = [np.moveaxis(arg.handle.data.reshape(-1) if self.axis is None else arg.handle.data, axis, -1)
                for arg in input]
        while data[0].shape[-1] > 1:
            out = self.combine_fn.fn(*(self.to_tensor(d[..., 0::2], t) for d, t in zip(data, dtypes)),
                                     *(self.to_tensor(d[..., 1::2], t) for d, t in zip(data, dtypes)))
            half = data[0].shape[:-1] + (data[0].shape[-1] // 2,)
            data = [np.broadcast_to(o.handle.data if isinstance(o, tl.core.tensor) else o, half).astype(d.dtype)
                    for o, d in zip(out if isinstance(out, tuple) else (out,), data)]
        ret = []
        for d, t in zip(data, dtypes):
            d = d[..., 0]
            if self.keep_dims:
                d = np.expand_dims(d, axis) if self.axis is not None else d.reshape((1,) * ndim)
            elif self.axis is None:
                d = d.item()
            ret.append(self.to_tensor(d, t))
        return ret

    def new_implicit_cvt(arg):
        if isinstance(arg, float):      # the JIT specializes a Python float as an fp32 scalar
            return tl.tensor(TensorHandle(np.array([arg], dtype=np.float32), tl.float32), tl.float32)
        return implicit_cvt(arg)

    def new_run(self, *args, grid, warmup, **kwargs):
        args, kwargs = _ones_as_constants(self, args, kwargs)
        outermost = launch["langs"] is None     # an autotuner's or heuristics' run calls run again
        if outermost:
            launch["langs"] = set()
        try:
            return run(self, *args, grid=grid, warmup=warmup, **kwargs)
        finally:
            if outermost:
                launch["langs"] = None

    # Every call of a @triton.jit function inside a kernel (tl.sum, tl.max, a helper) patches
    # triton.language again, about 1 ms of inspect.getmembers a call (a fifth of a long-row softmax's
    # time on the CPU). Within a launch that repeats what the launch's own patch did: the builtins
    # it finds are already wrapped (so _patch_builtin skips them), and the tensor and core members
    # it sets again are the same functions. So each language module is patched once a launch; the
    # launch restores it as before (GridExecutor keeps the scope of its own, first, patch).
    patch_lang, launch = interp._patch_lang, {"langs": None}

    def new_patch_lang(fn):
        langs = {id(v) for v in fn.__globals__.values() if v is tl or v is tl.core}
        if launch["langs"] is not None and langs and langs <= launch["langs"]:
            return interp._LangPatchScope()
        scope = patch_lang(fn)
        if launch["langs"] is not None:
            launch["langs"] |= langs
        return scope

    patch_tensor = interp._patch_lang_tensor

    def new_patch_lang_tensor(tensor, scope):
        patch_tensor(tensor, scope)
        # Triton 3.6 takes a tensor's index as int() of its one-element array, which numpy 2.3 and
        # later refuse (every loop over a range that a kernel argument bounds); 3.9 squeezes it first
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))

    patch_core = interp._patch_lang_core
    fnuz = {"fp8e4b8": "get_fp8e4b8_ty", "fp8e5b16": "get_fp8e5b16_ty"}

    def new_patch_lang_core(lang, scope):
        patch_core(lang, scope)
        # Triton 3.6's interpreter maps no FNUZ fp8 type to its builder's (which has them), so
        # every fp8e4b8 / fp8e5b16 kernel failed with "fail to convert fp8e4b8 to ir type"; 3.9 maps them
        to_ir = lang.dtype.to_ir
        scope.set_attr(lang.dtype, "to_ir", lambda self, builder: getattr(builder, fnuz[self.name])()
                       if self.name in fnuz else to_ir(self, builder))

    return (new_cast_impl, new_fp_to_fp, new_binary_op, new_unary_op, new_fma, new_dot,
            new_maxnumf, new_minnumf, new_clampf, new_histogram, new_sum, new_min_max, new_apply_impl, new_implicit_cvt, new_run, new_patch_lang_tensor,
            new_patch_lang_core, new_patch_lang)


def round_to_tf32(data) -> np.ndarray:
    """fp32 values rounded to tf32 (10 fraction bits), to nearest even; inf and NaN as they are."""
    bits = np.asarray(data, dtype=np.float32).view(np.uint32)
    special = (bits & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
    rounded = (bits + ((bits >> np.uint32(13)) & np.uint32(1)) + np.uint32(0xFFF)) & np.uint32(0xFFFFE000)
    return np.where(special, bits, rounded).view(np.float32)


def _last(index_op):
    """index_op (np.nanargmax / np.nanargmin) giving the last of equal elements, not the first."""
    def last(data, axis=None, keepdims=False):
        data = np.asarray(data)
        if axis is None:
            return data.size - 1 - index_op(data.reshape(-1)[::-1], keepdims=keepdims)
        return data.shape[axis] - 1 - index_op(np.flip(data, axis), axis=axis, keepdims=keepdims)
    return last


def _ones_as_constants(function, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """A launch's arguments as the JIT specializes them: an integer argument equal to 1 becomes
    the constant 1 (tl.constexpr) where the JIT makes it one, so kernel code that treats it as a
    tensor (`n.to(tl.float32)`) fails here as it fails to compile on every GPU (Triton 3.6 and 3.9
    alike); the interpreter alone passed every integer as a tensor."""
    import triton.language as tl
    constant = _constant_when_one(function)

    def as_jit(name, value):
        return tl.constexpr(1) if type(value) is int and value == 1 and name in constant else value
    return (tuple(as_jit(name, value) for name, value in zip(function.arg_names, args)),
            {name: as_jit(name, value) for name, value in kwargs.items()})


@functools.cache
def _constant_when_one(function) -> frozenset:
    """The parameters the JIT compiles as the constant 1 when passed 1, by Triton's own KernelParam:
    those with no type annotation that do_not_specialize does not name."""
    from triton.runtime.jit import KernelParam
    names = function.arg_names
    kept = {names[d] if isinstance(d, int) else d for d in function.kwargs.get("do_not_specialize") or ()}
    params = [KernelParam(i, p, p.name in kept, False)
              for i, p in enumerate(inspect.signature(function.fn).parameters.values())]
    return frozenset(p.name for p in params if not (p.is_constexpr or p.do_not_specialize or p.annotation_type))


# ---- libdevice -------------------------------------------------------------------------------------
# name -> (numpy function on float64 arrays, number of arguments, kind): "float" returns the
# argument's format, "pred" returns int32 (libdevice's __nv_isnanf etc.), "ldexp" takes an int.

def _vec(fn):
    return np.vectorize(fn, otypes=[np.float64])


def _np(name):
    return getattr(np, name)


def _round_half_away(x):
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def _safe_gamma(x):
    try:
        return math.gamma(x)
    except (ValueError, OverflowError):
        return math.inf if x > 0 or (x == 0 and math.copysign(1, x) > 0) else math.nan


def _lgamma(x):
    try:
        return math.lgamma(x)
    except (ValueError, OverflowError):
        return math.inf


def _erf(x):
    return _vec(math.erf)(x)


def _erfc(x):
    return _vec(math.erfc)(x)


def _build_libdevice():
    table = {}

    def add(names, fn, nargs=1, kind="float"):
        for n in names.split():
            table[n] = (fn, nargs, kind)

    for n in ("floor ceil trunc rint sqrt exp exp2 expm1 log log2 log10 log1p sin cos tan arcsin "
              "arccos arctan sinh cosh tanh arcsinh arccosh arctanh cbrt").split():
        tl_name = n.replace("arc", "a")
        add(tl_name, _np(n))
    add("abs", _np("abs"))
    add("nearbyint", _np("rint"))
    add("round", _round_half_away)
    add("sqrt_rn", _np("sqrt"))
    add("rsqrt rsqrt_rn", lambda x: 1.0 / np.sqrt(x))
    add("rcp_rn", lambda x: 1.0 / x)
    add("rcbrt", lambda x: 1.0 / np.cbrt(x))
    add("exp10", lambda x: 10.0 ** x)
    add("sinpi", lambda x: np.sin(math.pi * x))
    add("cospi", lambda x: np.cos(math.pi * x))
    add("erf", _erf)
    add("erfc", _erfc)
    add("normcdf", lambda x: 0.5 * _erfc(-x / math.sqrt(2.0)))
    add("lgamma", _vec(_lgamma))
    add("tgamma", _vec(_safe_gamma))
    add("saturatef", lambda x: np.clip(np.nan_to_num(x, nan=0.0), 0.0, 1.0))
    # the fast_* intrinsics are approximations on the GPU (ex2.approx, ...): exact here
    add("fast_expf", _np("exp"))
    add("fast_exp10f", lambda x: 10.0 ** x)
    add("fast_logf", _np("log"))
    add("fast_log2f", _np("log2"))
    add("fast_log10f", _np("log10"))
    add("fast_sinf", _np("sin"))
    add("fast_cosf", _np("cos"))
    add("fast_tanf", _np("tan"))
    add("fast_tanhf", _np("tanh"))
    add("pow fast_powf", _np("power"), 2)
    add("atan2", _np("arctan2"), 2)
    add("hypot", _np("hypot"), 2)
    add("rhypot", lambda x, y: 1.0 / np.hypot(x, y), 2)
    add("fmod", _np("fmod"), 2)
    add("remainder", _vec(lambda x, y: math.remainder(x, y) if y != 0 and math.isfinite(x) else math.nan), 2)
    add("copysign", _np("copysign"), 2)
    add("fdim", lambda x, y: np.where(x > y, x - y, 0.0 * x), 2)
    add("div_rn fast_dividef", lambda x, y: x / y, 2)
    add("add_rn", lambda x, y: x + y, 2)
    add("sub_rn", lambda x, y: x - y, 2)
    add("mul_rn", lambda x, y: x * y, 2)
    add("nextafter", None, 2, "nextafter")
    add("fma fma_rn", None, 3, "fma")
    add("ldexp scalbn", None, 2, "ldexp")
    add("isnan", _np("isnan"), 1, "pred")
    add("isinf", _np("isinf"), 1, "pred")
    add("finitef isfinited", _np("isfinite"), 1, "pred")
    add("signbit", _np("signbit"), 1, "pred")
    return table


LIBDEVICE = _build_libdevice()


def _libdevice_fn(name, fn, kind):
    """A libdevice function for the interpreter: tensors (or Python numbers) in, a tensor out."""

    def call(*args, _semantic=None):
        import triton.language as tl
        from triton.runtime import interpreter as interp
        tensors = [a for a in args if isinstance(a, tl.tensor)]
        if not tensors:
            raise TypeError(f"libdevice.{name} needs a tensor argument on the interpreter")
        floats = [t.dtype for t in tensors if t.dtype.is_floating()]
        ty = tl.float64 if tl.float64 in floats else floats[0] if floats else tensors[0].dtype
        if ty not in (tl.float32, tl.float64):
            raise TypeError(f"libdevice.{name} takes fp32 or fp64 (as on the GPU), got {ty}")
        np_ty = np.float32 if ty == tl.float32 else np.float64
        args = [a.value if isinstance(a, tl.constexpr) else a for a in args]
        datas = [a.handle.data if isinstance(a, tl.tensor) else np.asarray(a) for a in args]
        shape = np.broadcast_shapes(*[d.shape for d in datas])
        block = any(t.type.is_block() for t in tensors)
        with np.errstate(all="ignore"):
            if kind == "ldexp":
                out = np.ldexp(datas[0].astype(np_ty), datas[1].astype(np.int32))
            elif kind == "nextafter":     # a step in the argument's own format
                out = np.nextafter(datas[0].astype(np_ty), datas[1].astype(np_ty))
            elif kind == "fma":
                x, y, z = np.broadcast_arrays(*[d.astype(np_ty) for d in datas])
                bits = 32 if np_ty == np.float32 else 64
                # Triton 3.9's exact fma, else (3.6) portcheck's, which round once as well
                once = getattr(interp._interpreter, f"fma_fp{bits}", None) or (fma_fp32 if bits == 32 else fma_fp64)
                out = once(x, y, z)
            else:
                out = fn(*[d.astype(np.float64) for d in datas])
        if kind == "pred":
            ty, out = tl.int32, np.asarray(out).astype(np.int32)
        else:
            out = np.asarray(out).astype(np.float32 if ty == tl.float32 else np.float64)
        out = np.broadcast_to(out, shape).copy()
        return tl.tensor(interp.TensorHandle(out, ty), tl.block_type(ty, list(shape)) if block else ty)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"libdevice.{name} on the Triton interpreter (portcheck's numerics layer)."
    return call
