"""Code a repository already has, adapted to the Case contract: a torch reference function as the
float64 oracle, and a launcher that allocates and returns its own outputs.

Both call the wrapped function with the case's arguments by name (the keys of `make`'s dict that
its signature takes), so `def softmax(x)` fits a case whose `make` returns `{"x": ...}`.
"""
from __future__ import annotations

import inspect
import warnings

import torch


class AllocatedOutputWarning(UserWarning):
    """A launcher writes outputs it allocated itself, not the harness's poisoned buffers."""


def _call(fn, args: dict):
    params = inspect.signature(fn).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return fn(**args)
    return fn(**{p.name: args[p.name] for p in params if p.name in args})


def _named(result, outputs: tuple[str, ...], what: str) -> dict:
    if isinstance(result, dict):
        return result
    got = result if isinstance(result, (tuple, list)) else (result,)
    if len(got) != len(outputs):
        raise ValueError(f"{what} returned {len(got)} value(s) for the {len(outputs)} output(s) "
                         f"{', '.join(outputs)}")
    return dict(zip(outputs, got))


def oracle_from_torch(fn, *outputs: str):
    """A Case.oracle from a torch function evaluated in float64: the runner hands the oracle its
    floating tensors in float64, and the results are kept in float64. One tensor (or a tuple, or a
    dict) is returned; `outputs` names them (default: "out")."""
    outputs = outputs or ("out",)

    def oracle(args64: dict) -> dict:
        refs = _named(_call(fn, args64), outputs, f"the reference {fn.__name__}")
        return {n: r.to(torch.float64) if r.is_floating_point() else r for n, r in refs.items()}
    return oracle


def allocating_launcher(fn, *outputs: str):
    """A Case.launch from a launcher that allocates and returns its outputs (one tensor, a tuple
    in the order of `outputs`, or a dict). Its results are copied into the harness's buffers after
    a shape and dtype check. Where the launcher allocates with torch.empty or its kin, what it
    allocates holds the harness's poison during a check and a contiguous tensor sits between guard
    bands (guards.poisoned_allocations): elements the kernel never writes, and stores past either
    end, are caught. An output made another way (torch.zeros, a torch op) is neither poisoned nor
    guarded: write into `outs` to have everything caught."""
    outputs = outputs or ("out",)
    warnings.warn(AllocatedOutputWarning(
        f"{fn.__name__} allocates its own outputs: portcheck poisons and guards them where they come from "
        "torch.empty or its kin (contiguous); an output made another way (torch.zeros, a torch op) is "
        "neither, so its unwritten elements and stores past its ends go unseen"),
        stacklevel=2)

    def launch(args: dict, outs: dict) -> None:
        for name, got in _named(_call(fn, args), outputs, fn.__name__).items():
            want = outs[name]
            if tuple(got.shape) != tuple(want.shape) or got.dtype != want.dtype:
                raise ValueError(f"{fn.__name__} returned {name} as {tuple(got.shape)} {got.dtype}; "
                                 f"the case's outputs() says {tuple(want.shape)} {want.dtype}")
            want.copy_(got)
    return launch
