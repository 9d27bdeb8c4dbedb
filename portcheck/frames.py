"""Which frames of a stack or a traceback are a case's own code (its kernel, launcher, oracle),
and not Python's, a library's or portcheck's harness: what an error record and a false hint name
as their line."""
from __future__ import annotations

import functools
import sys
import sysconfig
import traceback
from pathlib import Path

_HERE = Path(__file__).resolve().parent


@functools.cache
def _skipped() -> tuple[tuple[str, ...], str]:
    """The libraries under a case, and Python's standard library."""
    import hypothesis
    import numpy
    import torch
    import triton
    libraries = tuple(str(Path(m.__file__).resolve().parent) for m in (hypothesis, numpy, torch, triton))
    return libraries, str(Path(sysconfig.get_paths()["stdlib"]).resolve())


@functools.lru_cache(maxsize=None)   # a few hundred files; asked at every allocation a launcher makes in a check
def case_code(filename: str) -> bool:
    """Whether a frame's file is a case's own code: not Python's standard library (a package
    installed beside it is), not a library under the case, not portcheck's harness (its kernels and
    oracles are)."""
    if filename.startswith("<") and not filename.startswith("<frozen"):   # compiled from a string
        return True
    path = str(Path(filename).resolve())
    libraries, stdlib = _skipped()
    if path.startswith(stdlib) and "-packages" not in path[len(stdlib):]:
        return False
    return not path.startswith(libraries) and (
        not path.startswith(str(_HERE)) or path.startswith((str(_HERE / "kernels"), str(_HERE / "oracles"))))


def kernel_line(exc: BaseException) -> str:
    """The innermost line of a case's own code in the exception's tracebacks, its causes'
    included: the interpreter re-raises a kernel's error from its own frames as InterpreterError,
    with the kernel's line only in the cause. "" when there is none."""
    found, seen = "", set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        for frame in traceback.extract_tb(exc.__traceback__):
            if case_code(frame.filename):
                found = f"{Path(frame.filename).name}:{frame.lineno} in {frame.name}"
        exc = exc.__cause__ or exc.__context__
    return found


def calling_line() -> str:
    """The innermost line of a case's own code on the current stack ("?" when there is none): the
    kernel line a call into Triton's interpreter came from."""
    frame = sys._getframe(1)
    while frame is not None:
        if case_code(frame.f_code.co_filename):
            return f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"
