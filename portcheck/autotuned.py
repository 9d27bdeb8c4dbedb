"""Kernels under @triton.autotune, in a check: one configuration launched per example, chosen
by the example and never timed, and every configuration on some example.

An autotuner times its configurations at the first launch of each key and keeps the fastest, so
a configuration with a bug (a mask only BLOCK=256 gets wrong) is checked only where it happens
to be the fastest: on another GPU or another shape it ships; and on the interpreter an autotuner
cannot time at all (Triton finds no driver). Inside `choosing(spec)` (runner.evaluate, the
diagnosis's re-runs) Triton's `Autotuner.run` launches configuration `index % n` of the n that
the kernel's own pruning leaves, as its first launch of a key launches the one it chose (the
reset_to_zero / restore_value hook with reset_only, then the configuration's pre_hook), after one
run as its timing makes it where the pruning leaves more than one (what timing runs leave in the
tensors, an accumulation no reset_to_zero undoes, stays for the launch, as it does there). The index
is the spec's KEY when it has one, else a hash of the spec, so a replay launches the same
configuration; runner.check then runs each index no example reached on its largest passing input.
Under the spec's CACHED ({kernel: index among all its configurations}) the kernel launches that
configuration whatever its pruning says, as Triton's cache hands a key's choice to every later
launch with the key (runner.check's autotune_cache: inputs that share a key, pruned differently).
"""
from __future__ import annotations

import contextlib
import json
import zlib
from dataclasses import dataclass

KEY = "autotune"     # the spec key of an explicitly chosen configuration index
CACHED = "autotune_cached"   # the spec key of a configuration Triton's cache hands over:
                             # {kernel name: its index among all the kernel's configurations}

_INDEX: list = []    # (index, CACHED mapping) of the example being evaluated, innermost last
_LAUNCHED: list = []  # the autotuned launches of the outermost choosing() block, in order


@dataclass(frozen=True)
class Launched:
    kernel: str      # the autotuned function's name
    index: int       # which of its configurations ran (0-based, after its pruning)
    count: int       # how many its pruning left
    config: str      # the configuration, as Triton prints it
    timed: bool = False   # a timing run of it came first, as Triton's at a key's first launch
    key: tuple = ()       # Triton's cache key of the launch (the key arguments, the tensors' dtypes)
    pruned: tuple = ()    # the configurations the pruning left, as indices among all of them
    cached: bool = False  # the configuration came from another input's key (CACHED), not the pruning

    def describe(self) -> str:
        if self.cached:
            return (f"autotune config {self.index + 1} of {self.count} of {self.kernel} ({self.config}), "
                    f"which Triton's cache hands every launch with key {self.key} once another input with "
                    "that key chose it; this input's pruning leaves it out: the key misses an argument "
                    "the configurations depend on")
        return (f"autotune config {self.index + 1} of {self.count} of {self.kernel} ({self.config}"
                f"{', after a timing run' if self.timed else ''})")


def spec_index(spec: dict) -> int:
    """The configuration index an example asks for: its KEY, else a hash of the whole spec."""
    if KEY in spec:
        return int(spec[KEY])
    return zlib.crc32(json.dumps(spec, sort_keys=True, default=str).encode())


def launched() -> list[Launched]:
    """The autotuned launches of the last (or current) outermost choosing() block."""
    return list(_LAUNCHED)


def _timing_run(self, config, full: dict, args: tuple, kwargs: dict) -> None:
    """One run of `config` as the autotuner's timing makes it (Autotuner._bench's kernel_call): its
    pre_hook, the reset_to_zero / restore_value hook, the launch, the restoring hook. What the runs
    leave in the launch's tensors stays, as it does there: an output the kernel accumulates into
    (atomics) and the autotuner does not reset (reset_to_zero) holds a second result."""
    if config.pre_hook:
        config.pre_hook(full)
    self.pre_hook(full)
    try:
        self.fn.run(*args, **kwargs, **config.all_kwargs())
    except Exception as exc:
        self.post_hook(full, exception=exc)
        raise
    self.post_hook(full, exception=None)


def _cache_key(self, kwargs: dict) -> tuple:
    """Triton's Autotuner.run key: the key arguments' values, then the dtypes of the tensors."""
    given = {k: v for k, v in {**self.nargs, **kwargs}.items() if k in self.arg_names}
    return tuple([given[k] for k in self.keys if k in given]
                 + [str(v.dtype) for v in given.values() if hasattr(v, "dtype")])


def _run_one(self, *args, **kwargs):
    """Autotuner.run, with the configuration chosen by the example instead of by timing (or, under
    CACHED, the one Triton's cache would hand over, whatever this launch's pruning says)."""
    self.nargs = dict(zip(self.arg_names, args))
    try:
        name = getattr(self.base_fn, "__name__", None) or getattr(self.fn, "__name__", "kernel")
        every = list(self.configs)
        configs = self.prune_configs(kwargs) if len(self.configs) > 1 else self.configs
        pruned = tuple(i for i, c in enumerate(every) if any(c is p for p in configs))
        handed = _INDEX[-1][1].get(name)
        cached = handed is not None and 0 <= handed < len(every)
        if cached:
            index, count, config = handed, len(every), every[handed]
        else:
            index, count = _INDEX[-1][0] % len(configs), len(configs)
            config = configs[index]
        self.best_config = config
        full = {**self.nargs, **kwargs, **config.all_kwargs()}
        timed = len(configs) > 1 and not cached   # a cached key is not timed again
        if timed:   # Triton times them at a key's first launch, on the launch's own tensors
            _timing_run(self, config, full, args, kwargs)
        if not cached:
            self.pre_hook(full, reset_only=True)      # reset_to_zero, as before a first launch's run
        if config.pre_hook is not None:
            config.pre_hook(full)
        _LAUNCHED.append(Launched(name, index, count, str(config), timed=timed, key=_cache_key(self, kwargs),
                                  pruned=pruned, cached=cached))
        return self.fn.run(*args, **kwargs, **config.all_kwargs())
    finally:
        self.nargs = None


@contextlib.contextmanager
def choosing(spec: dict):
    """Autotuned launches inside the block run the configuration `spec` asks for (spec_index)."""
    from triton.runtime.autotuner import Autotuner
    outermost = not _INDEX
    if outermost:
        _LAUNCHED.clear()
    saved = Autotuner.__dict__["run"]
    _INDEX.append((spec_index(spec), dict(spec.get(CACHED) or {})))
    Autotuner.run = _run_one
    try:
        yield
    finally:
        Autotuner.run = saved
        _INDEX.pop()
