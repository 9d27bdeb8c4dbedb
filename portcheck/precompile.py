"""Compile a check's kernels before its examples run, several at a time: in `portcheck run` on a
GPU, for its long poles (`is_pole`); PORTCHECK_PRECOMPILE=N gives every check N threads, 0 none.
On the H200 one fp8 matmul check alone took 22.2 s with 4 threads against 38.4 s without
(reports/examples/speed-h200/sixteenth-session/): ptxas, 70% of its time, runs as a subprocess,
which threads overlap. A whole cold run is no faster for it (every core already compiles there),
but its long poles are: in the default run the fp8 matmul units took 41-43 s with the warm-up
against 50-65 s, and the two halves of the run 58.7 and 53.2 s against 92.0 s for the whole
(reports/examples/speed-h200/seventeenth-session/), the schedule a second GPU would run.

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

import contextlib
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import hypothesis

from .errors import UsageError

ENV = "PORTCHECK_PRECOMPILE"
# a pole's warm-up threads: the fp8 check above gained from 4; with the other workers yielding
# their CPU priority to the poles (workers.yield_to_poles), 8 ended the run's halves soonest on
# the H200 (reports/examples/speed-h200/twentieth-session/). Threads, not processes: 8 compile
# processes a pole were no faster alone and, each importing torch and Triton, made the halves
# 9 to 17 s slower (twenty-first-session/)
POLE_THREADS = 8


def threads(pole: bool = False) -> int:
    """Warm-up threads for a check: PORTCHECK_PRECOMPILE=N gives every check N (0: none); unset,
    POLE_THREADS for a long pole of its run and none for the rest. Anything but a whole number
    of threads is a usage error."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return POLE_THREADS if pole else 0
    if not value.isdigit():
        raise UsageError(f"{ENV} must be a number of threads (0: off), got {value!r}")
    return int(value)


def is_pole(seconds: float | None, run_seconds: float, workers: int) -> bool:
    """Whether a unit that took `seconds` last time is a long pole of a run whose units took
    `run_seconds` in all over `workers` workers: at least half a worker's fair share. No claim
    order hides a unit longer than the share, and the cores that the short units leave idle
    near the run's end are the ones its warm-up takes. Half, since a warm-up roughly halves a
    unit: a pole stays one after its warm-up, so the choice does not flip from run to run.
    A unit never timed is no pole."""
    return seconds is not None and seconds > 0 and seconds >= run_seconds / max(1, workers) / 2


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


def ahead(jobs: list[Callable[[], object]], n_threads: int) -> None:
    """Compile the launches that the jobs (launcher calls, each making its inputs) make, on
    `n_threads` threads. The jobs are noted a few at a time while the threads compile: a noted
    launch holds its inputs only until its compile is submitted (which needs their types and
    alignments, not their values), so they need not all live at once."""
    step = 2 * n_threads
    with compiling(n_threads):
        for start in range(0, len(jobs), step):
            submit(noted_launches(jobs[start:start + step]))


def noted(jobs: list[Callable[[], object]]):
    """The recorder (compile.capture) of every Triton launch that each job makes, noted, not run:
    its `raw` launches (JITFunction, args, kwargs) and their `grids`. A job whose launcher fails
    without results is passed over."""
    from .compile.capture import recording
    with recording(execute=False) as rec:
        for job in jobs:
            try:
                job()
            except Exception:   # noqa: BLE001  e.g. a launcher that reads back a result never computed
                continue
    return rec


def noted_launches(jobs: list[Callable[[], object]]) -> list[tuple]:
    """Every Triton launch that each job makes, noted, not run: (JITFunction, args, kwargs)."""
    return noted(jobs).raw


def warm_up(launches: list[tuple], n_threads: int) -> None:
    """Compile the noted launches' kernels on `n_threads` threads."""
    with compiling(n_threads):
        submit(launches)


@contextlib.contextmanager
def compiling(n_threads: int):
    """A block in which `submit` hands compilations to `n_threads` threads (Triton's
    AsyncCompileMode), into the kernels' own caches, where the check's launches find them; it
    ends when they are done."""
    from triton.runtime._async_compile import AsyncCompileMode
    with ThreadPoolExecutor(n_threads, thread_name_prefix="portcheck-precompile") as pool:
        with AsyncCompileMode(pool, ignore_errors=True):
            yield


def submit(launches: list[tuple]) -> None:
    """Within `compiling`: compile each noted launch's kernel. A kernel that fails to compile is
    left for its launch to report."""
    for kernel, args, kwargs in launches:
        try:
            kernel.warmup(*args, grid=(1,), **kwargs)
        except Exception:   # noqa: BLE001  its launch compiles it again and says why
            continue
