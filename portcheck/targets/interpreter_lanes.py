"""The masked-off lanes of a `tl.load` that gives no `other=` (and a block pointer's padding
without `padding_option`), poisoned on the interpreter.

Triton's language leaves those lanes undefined. The NVIDIA, AMD and Intel backends fill them with
0 today, and so does Triton's interpreter (pytorch/pytorch#127311 records both, and why Inductor
gives `other=` anyway); a backend that does not (Triton-Ascend's `care_padding=False`) or a
compiler that exploits the undefined value breaks a kernel that sums them. Once installed, such
lanes hold the format's NaN (floats), -1 (signed integers), 1 (unsigned) or True, so a result
that depends on them is wrong here. The integers are the smallest that change a sum: a lane used
as an index then reads next to its tensor, in the check's guard band, which the check reports,
where an integer extreme sent the interpreter to an unmapped address and the process died.
Pointers keep Triton's 0 for the same reason. `zero_filled()` gives Triton's 0 back for a block
and notes the source lines whose loads left lanes undefined: diagnose.undefined re-runs a failure
so.
"""
from __future__ import annotations

import contextlib
import functools

import numpy as np

from ..frames import calling_line

_saved = None                  # Triton's create_masked_load while installed
_zeros: list | None = None     # inside zero_filled(): lanes stay 0, their lines noted here


def installed() -> bool:
    return _saved is not None


def describe() -> str:
    """For provenance: what masked-off lanes of a load without other= hold."""
    return "poisoned" if installed() else "0 (Triton's)"


# NaN bit patterns of the formats the interpreter stores as integers (fp8e4b15 has no NaN: its
# largest code)
_NAN_BITS = {"bf16": 0x7FC0, "fp8e5": 0x7F, "fp8e4nv": 0x7F, "fp8e4b15": 0x7F, "fp8e5b16": 0x80,
             "fp8e4b8": 0x80}


@functools.cache
def poison(tl_name: str, np_dtype: np.dtype):
    """The value undefined lanes hold: a NaN, -1 or 1 (module docstring), True; None for a
    pointer (0 stays)."""
    if tl_name in _NAN_BITS:
        return _NAN_BITS[tl_name]
    if np_dtype.kind == "f":
        return np.nan
    if np_dtype.kind == "b":
        return True
    if tl_name.startswith("pointer") or "*" in tl_name:
        return None
    return -1 if np_dtype.kind == "i" else 1


def install() -> None:
    """Poison the lanes (idempotent)."""
    global _saved
    if _saved is not None:
        return
    from triton.runtime import interpreter
    builder_class = interpreter.InterpreterBuilder
    original = builder_class.__dict__["create_masked_load"]

    @functools.wraps(original)   # its signature, which the memory watch reads
    def create_masked_load(self, ptrs, mask, other, *rest, **kwargs):
        if other is None and mask is not None and not np.all(mask.data):
            if _zeros is not None:
                where = calling_line()
                if where not in _zeros:
                    _zeros.append(where)
            else:
                element = ptrs.get_element_ty()
                dtype = interpreter._get_np_dtype(element)
                value = poison(str(element), dtype)
                if value is not None:
                    other = interpreter.TensorHandle(np.full(np.shape(ptrs.data), value, dtype=dtype), element)
        return original(self, ptrs, mask, other, *rest, **kwargs)

    builder_class.create_masked_load = create_masked_load
    _saved = original


def uninstall() -> None:
    """Triton's own 0 in those lanes (idempotent)."""
    global _saved
    if _saved is not None:
        from triton.runtime import interpreter
        interpreter.InterpreterBuilder.create_masked_load = _saved
        _saved = None


@contextlib.contextmanager
def zero_filled():
    """Inside, undefined lanes hold Triton's 0; yields the source lines of the loads that left
    lanes undefined (each once, in the order first met)."""
    global _zeros
    before, _zeros = _zeros, []
    try:
        yield _zeros
    finally:
        _zeros = before
