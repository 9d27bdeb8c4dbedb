"""Triton's interpreter runs every kernel through one builder object
(`triton.runtime.interpreter.interpreter_builder`); portcheck's interpreter checks replace some of
its methods for the length of a context. Each context puts back exactly what it found, so that
they nest: the memory watch around a launch, the shuffled program order inside it."""
from __future__ import annotations

import contextlib


def builder():
    from triton.runtime import interpreter
    return interpreter.interpreter_builder


@contextlib.contextmanager
def patched(**methods):
    """Inside, the builder's named methods are the given functions (plain functions: they are set
    on the instance, not bound); on exit each name holds what it held before, the class's method
    where the instance had none of its own."""
    b = builder()
    before = {name: b.__dict__[name] for name in methods if name in b.__dict__}
    for name, fn in methods.items():
        setattr(b, name, fn)
    try:
        yield b
    finally:
        for name in methods:
            if name in before:
                setattr(b, name, before[name])
            else:
                b.__dict__.pop(name, None)
