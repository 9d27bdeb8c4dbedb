"""Timing on a GPU: repeat statistics, input rotation, do_bench with L2 flushes, CUDA-graph replay.

Written once for CUDA and ROCm: torch's `torch.cuda` API (events, graphs, streams) is HIP's too
on a ROCm build, and triton.testing.do_bench goes through Triton's active driver.

- A launch of at least `graph_below_ms` is timed with triton.testing.do_bench: the L2 cache is
  flushed before every repeat and each repeat is one event pair, so the samples are independent.
- A shorter launch is dominated by host launch overhead and event resolution, so it is captured
  `calls` times into a CUDA graph and the graph is replayed; a sample is one replay / `calls`.
- Inputs whose bytes would fit in L2 are rotated over several copies (`rotation_sets`), so graph
  replays (which do not flush) read from memory, not from the cache.
- Warm-up (compilation, autotuning, lazy library loads) runs before anything is measured.
- A kernel, its second timer (the repeat check) and its baselines are sampled in interleaved
  rounds, the order reversed every other round: a GPU whose clocks sag as it heats slows them
  all alike, so a speed-up is not the clock's doing, and each figure's spread covers the drift.

Nothing here imports torch or triton at module level: the statistics are plain Python and are
tested on machines without a GPU.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Callable, Sequence

DEFAULT_REPEATS = 100
DEFAULT_NOISE_BOUND = 0.05        # relative spread (IQR / median) above which a figure is noisy
DEFAULT_GRAPH_BELOW_US = 20.0     # launches shorter than this are timed by CUDA-graph replay
EVENT_RESOLUTION_MS = 0.0005      # CUDA/HIP event timer resolution, about half a microsecond
MAX_ROTATION_SETS = 64
HOST_CHECK_BELOW_MS = 1.0         # back-to-back launches faster than this may be host-bound...
HOST_BOUND_RATIO = 0.8            # ...and are, when graph replay takes under this share of them
GRAPH_SAMPLE_MS = 1.0             # aim for about this much GPU time per graph replay
MAX_GRAPH_CALLS = 2000
MAX_FIGURE_MS = 2000.0            # long launches get fewer repeats, down to MIN_REPEATS
MIN_REPEATS = 10
MOST_ROUNDS = 6                   # interleaved rounds a figure: even, so the two orders pair up
LEAST_ROUND_SAMPLES = 5           # ...of no fewer samples each (do_bench adds 7 launches a call)


def quantile(sorted_samples: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default) of an already sorted sequence."""
    if not sorted_samples:
        raise ValueError("no samples")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be within [0, 1], got {q}")
    pos = q * (len(sorted_samples) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_samples) - 1)
    return sorted_samples[lo] + (sorted_samples[hi] - sorted_samples[lo]) * (pos - lo)


@dataclass(frozen=True)
class Stats:
    """Summary of repeated timings of one launch, in milliseconds."""
    n: int
    median_ms: float
    q1_ms: float
    q3_ms: float
    min_ms: float
    max_ms: float
    mean_ms: float
    resolution_ms: float = EVENT_RESOLUTION_MS   # smallest difference the timer can tell apart

    @property
    def iqr_ms(self) -> float:
        return self.q3_ms - self.q1_ms

    @property
    def rel_spread(self) -> float:
        """Interquartile range over the median: the spread a report states for a figure."""
        return self.iqr_ms / self.median_ms if self.median_ms > 0 else math.inf

    def noisy(self, bound: float) -> bool:
        return self.rel_spread > bound

    def to_dict(self) -> dict:
        d = asdict(self)
        d["iqr_ms"] = self.iqr_ms
        d["rel_spread"] = self.rel_spread
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Stats":
        return cls(**{k: d[k] for k in ("n", "median_ms", "q1_ms", "q3_ms", "min_ms", "max_ms",
                                          "mean_ms", "resolution_ms") if k in d})


def summarize(samples: Sequence[float], resolution_ms: float = EVENT_RESOLUTION_MS) -> Stats:
    """Median, quartiles, extremes and mean of timing samples (ms); non-finite or negative
    samples are a timing fault, not data."""
    xs = sorted(float(s) for s in samples)
    if not xs:
        raise ValueError("no timing samples")
    if not all(math.isfinite(x) and x >= 0 for x in xs):
        raise ValueError(f"timing samples must be finite and non-negative, got {xs[:3]}...")
    return Stats(len(xs), statistics.median(xs), quantile(xs, 0.25), quantile(xs, 0.75), xs[0],
                 xs[-1], statistics.fmean(xs), resolution_ms)


def agree(a: Stats, b: Stats) -> bool:
    """Two measurements of the same launch agree when their medians differ by no more than the
    larger of their interquartile ranges (or the timer's resolution, for very steady figures)."""
    allowed = max(a.iqr_ms, b.iqr_ms, a.resolution_ms, b.resolution_ms)
    return abs(a.median_ms - b.median_ms) <= allowed


def rotation_sets(nbytes: int, l2_bytes: int, most: int = MAX_ROTATION_SETS) -> int:
    """How many copies of a launch's inputs to cycle through so that, between two uses of one
    copy, at least four L2-fulls of other data pass; 1 when the inputs are over twice the L2."""
    if l2_bytes <= 0 or nbytes >= 2 * l2_bytes:
        return 1
    return max(2, min(most, math.ceil(4 * l2_bytes / max(nbytes, 1))))


class Rotation:
    """A zero-argument callable that calls the next of several equivalent callables each time."""

    def __init__(self, fns: Sequence[Callable[[], object]]):
        if not fns:
            raise ValueError("Rotation needs at least one callable")
        self.fns = list(fns)
        self.i = 0

    def __len__(self) -> int:
        return len(self.fns)

    def __call__(self):
        fn = self.fns[self.i]
        self.i = (self.i + 1) % len(self.fns)
        return fn()

    def rewind(self) -> None:
        self.i = 0


def repeats_within(repeats: int, estimate_ms: float, budget_ms: float = MAX_FIGURE_MS,
                   least: int = MIN_REPEATS) -> int:
    """Repeats for one figure: as asked, unless that would take over `budget_ms` of GPU time."""
    if estimate_ms <= 0:
        return repeats
    return max(min(repeats, least), min(repeats, int(budget_ms / estimate_ms)))


def graph_calls(estimate_ms: float, sets: int, sample_ms: float = GRAPH_SAMPLE_MS,
                most: int = MAX_GRAPH_CALLS) -> int:
    """Launches to capture in one graph: about `sample_ms` of work, a whole number of rotations."""
    want = most if estimate_ms <= 0 else math.ceil(sample_ms / estimate_ms)
    want = max(sets, min(most, want))
    return max(sets, (want // sets) * sets)


@dataclass
class Timing:
    stats: Stats
    method: str                 # "do_bench" (L2 flushed per repeat) or "cuda_graph" (replays)
    sets: int = 1               # input copies rotated through
    calls_per_sample: int = 1   # launches averaged into one sample (graph replay)
    note: str = ""
    round_medians_ms: tuple[float, ...] = ()   # one per round, in time order

    @property
    def drift(self) -> float:
        """How far the round medians wander, over the median: the device's clocks moving while
        the figure was taken (0 for a single round)."""
        rm = self.round_medians_ms
        if len(rm) < 2 or self.stats.median_ms <= 0:
            return 0.0
        return (max(rm) - min(rm)) / self.stats.median_ms

    def to_dict(self) -> dict:
        return {**self.stats.to_dict(), "method": self.method, "sets": self.sets,
                "calls_per_sample": self.calls_per_sample, "note": self.note,
                "rounds": max(1, len(self.round_medians_ms)),
                "round_medians_ms": list(self.round_medians_ms), "drift": self.drift}


def round_sizes(repeats: int, rounds: int) -> list[int]:
    """Split `repeats` samples over at most `rounds` rounds, as evenly as whole samples allow."""
    rounds = max(1, min(rounds, repeats))
    return [repeats // rounds + (1 if r < repeats % rounds else 0) for r in range(rounds)]


def figure_rounds(repeats: Sequence[int], most: int = MOST_ROUNDS,
                  least_samples: int = LEAST_ROUND_SAMPLES) -> int:
    """Rounds for the timers of one figure: as many as the timer with the fewest repeats can fill
    with `least_samples` each, at most `most`, and an even number when more than one."""
    fill = min(repeats, default=1) // least_samples
    return 1 if fill < 2 else min(most, fill) // 2 * 2


def round_order(names: Sequence[str], r: int) -> list[str]:
    """Round r's order: forwards, then backwards, and so on, so that drift within a round favours
    no one."""
    return list(names) if r % 2 == 0 else list(reversed(names))


# ---- the GPU side ----------------------------------------------------------------------------

def _torch():
    import torch
    return torch


def warm_up(fn: Callable, calls: int) -> None:
    torch = _torch()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()


def estimate_ms(fn: Callable, calls: int = 5) -> float:
    """Mean time of back-to-back launches (no flush): picks the method and the repeat count."""
    torch = _torch()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / calls


def capture_graph(fn: Callable, calls: int):
    """`calls` launches captured in one CUDA/HIP graph, replayed once (libraries set up their
    handles on a side stream first, outside the capture)."""
    torch = _torch()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    return graph


def replay_samples(graph, repeats: int, calls: int) -> list[float]:
    """Per-launch times (ms) of `repeats` replays, one event pair each."""
    torch = _torch()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(repeats)]
    for start, end in events:
        start.record()
        graph.replay()
        end.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) / calls for s, e in events]


def graph_estimate_ms(fn: Callable, calls: int = 5) -> float | None:
    """GPU time of one launch from a replayed graph of `calls` launches (no host in the loop),
    or None when the launch cannot be captured."""
    try:
        return statistics.median(replay_samples(capture_graph(fn, calls), 3, calls))
    except Exception:   # not capturable: the caller keeps its event-timed estimate
        _torch().cuda.synchronize()
        return None


def flushed_estimate_ms(fn: Callable, calls: int = 5) -> float:
    """Mean time of (L2 flush + launch), as do_bench measures it to turn `rep` into a count."""
    import triton
    torch = _torch()
    driver = triton.runtime.driver.active
    cache = driver.get_empty_cache_for_benchmark()
    clear = getattr(driver, "clear_cache", None) or (lambda c: c.zero_())
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(calls):
        clear(cache)
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / calls


def do_bench_samples(fn: Callable, repeats: int, per_repeat_ms: float) -> list[float]:
    """About `repeats` samples from triton.testing.do_bench, L2 flushed before each. do_bench
    turns a time budget into a count with its own flush-included estimate, so the budget is
    `repeats` times that same estimate; it adds one warm-up launch of its own."""
    import triton.testing
    try:
        return list(triton.testing.do_bench(fn, warmup=0, rep=repeats * per_repeat_ms,
                                            return_mode="all"))
    except (AssertionError, TypeError) as exc:
        raise RuntimeError("triton.testing.do_bench has no return_mode='all' here; portcheck "
                           "needs the raw samples (Triton 3.0 or later)") from exc


class Timer:
    """One launch made ready to time: warmed up, its method chosen, its graph captured. Timers
    are sampled in rounds (`interleave`), so that a kernel and its baselines share the same
    stretch of the device's time.

    `fns` are equivalent launches, one per rotated input copy. `method` forces "do_bench" or
    "cuda_graph" (a baseline follows its kernel's method, so their ratio compares like with
    like); None picks graph replay below `graph_below_ms`.
    """

    def __init__(self, fns: Sequence[Callable], *, repeats: int = DEFAULT_REPEATS,
                 graph_below_ms: float = DEFAULT_GRAPH_BELOW_US / 1e3, warmup_calls: int = 3,
                 method: str | None = None):
        rot = self.fn = Rotation(fns)
        self.sets, self.calls, self.graph, self.note = len(rot), 1, None, ""
        warm_up(rot, max(warmup_calls, len(rot)))
        est = estimate_ms(rot, max(5, len(rot)))
        if method is None:
            # events around back-to-back launches time the host when it cannot keep the GPU fed
            # (a Python launcher's overhead): then the GPU time comes from graph replay too
            gpu = graph_estimate_ms(rot, max(5, len(rot))) if est < HOST_CHECK_BELOW_MS else None
            rot.rewind()
            if gpu is not None and gpu < HOST_BOUND_RATIO * est:
                self.note = (f"host-bound launches: {est * 1e3:.1f} us each back to back, "
                             f"{gpu * 1e3:.1f} us on the GPU")
                est = gpu
            method = "cuda_graph" if est < graph_below_ms or self.note else "do_bench"
        self.method = method
        self.repeats = repeats_within(repeats, est)
        self.resolution_ms = EVENT_RESOLUTION_MS
        if method == "cuda_graph":
            calls = graph_calls(est, len(rot))
            rot.rewind()
            try:
                self.graph = capture_graph(rot, calls)
                self.calls, self.resolution_ms = calls, EVENT_RESOLUTION_MS / calls
            except Exception as exc:  # not capturable (a host sync, an allocation it can't replay)
                _torch().cuda.synchronize()
                first = str(exc).splitlines()[0][:120] if str(exc) else ""
                self.note = (self.note + "; " if self.note else "") + \
                    f"graph capture failed ({type(exc).__name__}: {first}); timed with do_bench"
                self.method = "do_bench"
        if self.method == "do_bench":
            rot.rewind()
            try:
                self.per_repeat_ms = flushed_estimate_ms(rot)
            except Exception:  # a driver that spells the flush differently: the launch only
                self.per_repeat_ms = est

    def sample(self, repeats: int) -> list[float]:
        if self.graph is not None:
            return replay_samples(self.graph, repeats, self.calls)
        return do_bench_samples(self.fn, repeats, self.per_repeat_ms)

    def close(self) -> None:
        self.graph = None


def interleave(timers: dict[str, Timer],
               rounds: int | None = None) -> dict[str, Timing | Exception]:
    """Sample every timer in the same rounds (`figure_rounds` when not given), the order
    reversed every other round. A clock that drifts over the figure (a GPU slowing as it heats)
    then lands on the kernel and on its baselines alike, their ratios compare like with like,
    and each spread covers the drift. A timer that fails gets its exception instead of a Timing;
    the others go on."""
    if rounds is None:
        rounds = figure_rounds([t.repeats for t in timers.values()])
    plans = {name: round_sizes(t.repeats, rounds) for name, t in timers.items()}
    samples: dict[str, list[float]] = {name: [] for name in timers}
    medians: dict[str, list[float]] = {name: [] for name in timers}
    failed: dict[str, Exception] = {}
    for r in range(max((len(p) for p in plans.values()), default=0)):
        for name in round_order(list(timers), r):
            if name in failed or r >= len(plans[name]):
                continue
            try:
                got = timers[name].sample(plans[name][r])
            except Exception as exc:
                failed[name] = exc
                try:
                    _torch().cuda.synchronize()
                except Exception:   # a sticky device fault: the kernel's own sample will say so
                    pass
                continue
            samples[name] += got
            medians[name].append(statistics.median(got))
    out: dict[str, Timing | Exception] = {}
    for name, t in timers.items():
        t.close()
        out[name] = failed[name] if name in failed else Timing(
            summarize(samples[name], t.resolution_ms), t.method, t.sets, t.calls, t.note,
            tuple(medians[name]) if len(medians[name]) > 1 else ())
    return out


def time_callables(fns: Sequence[Callable], *, repeats: int = DEFAULT_REPEATS,
                   graph_below_ms: float = DEFAULT_GRAPH_BELOW_US / 1e3, warmup_calls: int = 3,
                   method: str | None = None) -> Timing:
    """One launch timed on its own, in a single round (the ceilings, the sweep tools)."""
    timing = interleave({"": Timer(fns, repeats=repeats, graph_below_ms=graph_below_ms,
                                   warmup_calls=warmup_calls, method=method)}, rounds=1)[""]
    if isinstance(timing, Exception):
        raise timing
    return timing
