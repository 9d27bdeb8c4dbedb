"""Compile a check's kernels before its examples run, several at a time (opt-in:
PORTCHECK_PRECOMPILE=N threads). On the H200 one fp8 matmul check alone took 22.2 s with 4 threads
against 38.4 s without (reports/examples/speed-h200/sixteenth-session/): ptxas, 70% of its time,
runs as a subprocess, which threads overlap. The whole default run with 16 workers was not faster
(reports/examples/speed-h200/precompile/: 88.5 s against 96.2 s, within the spread): every core
already compiles there.

A check launches each example's kernels in turn, and with a cold Triton cache each new
specialisation compiles at its first launch: a dozen fp8 wgmma kernels one after another make a
matmul unit the long pole of a GPU run. Triton releases the GIL while it compiles (MLIR, LLVM,
ptxas), and its AsyncCompileMode compiles what `JITFunction.warmup` asks for on an executor. So
the examples the check will draw (same strategy, settings and seed) are launched once with every
Triton launch noted instead of run (portcheck.compile.capture), and each noted launch is warmed
up on a pool of threads. What the warm-up misses (an example a targeted search draws elsewhere, a
launcher that reads a result back) compiles at its launch as before: nothing here can change a
result, and any trouble here only leaves the compiling to the check.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import hypothesis

from .errors import UsageError

ENV = "PORTCHECK_PRECOMPILE"


def threads() -> int:
    """Warm-up threads per check (PORTCHECK_PRECOMPILE; unset or 0: no warm-up); anything but a
    whole number of threads is a usage error."""
    value = os.environ.get(ENV, "").strip() or "0"
    if not value.isdigit():
        raise UsageError(f"{ENV} must be a number of threads (0: off), got {value!r}")
    return int(value)


def examples(strategy, settings: hypothesis.settings, seed: int | None) -> list[dict]:
    """The inputs a check with these settings and seed generates before any shrinking."""
    drawn: list[dict] = []

    def note(example):
        drawn.append(example)

    test = hypothesis.given(strategy)(note)
    test = hypothesis.settings(settings, phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate])(test)
    if seed is not None:
        test = hypothesis.seed(seed)(test)
    test()
    return drawn


def ahead(launch_each, specs: list[dict], n_threads: int) -> None:
    """Warm up the launches `launch_each(spec)` makes for every spec, a few specs at a time: the
    noted launches hold their inputs, which need not all live at once."""
    step = 2 * n_threads
    for start in range(0, len(specs), step):
        warm_up(noted_launches(launch_each, specs[start:start + step]), n_threads)


def noted_launches(launch_each, specs: list[dict]) -> list[tuple]:
    """Every Triton launch that `launch_each(spec)` makes for each spec, noted, not run:
    (JITFunction, args, kwargs). A spec whose launcher fails without results is passed over."""
    from .compile.capture import recording
    with recording(execute=False) as rec:
        for spec in specs:
            try:
                launch_each(spec)
            except Exception:   # noqa: BLE001  e.g. a launcher that reads back a result never computed
                continue
    return rec.raw


def warm_up(launches: list[tuple], n_threads: int) -> None:
    """Compile the launches' kernels on `n_threads` threads (Triton's AsyncCompileMode), into the
    kernels' own caches, where the check's launches find them. A kernel that fails to compile is
    left for its launch to report."""
    from triton.runtime._async_compile import AsyncCompileMode
    with ThreadPoolExecutor(n_threads, thread_name_prefix="portcheck-precompile") as pool:
        with AsyncCompileMode(pool, ignore_errors=True):
            for kernel, args, kwargs in launches:
                try:
                    kernel.warmup(*args, grid=(1,), **kwargs)
                except Exception:   # noqa: BLE001  its launch compiles it again and says why
                    continue
