"""Which GPU runs which benchmark when `pytest --bench -n N` spreads a matrix over N GPUs.

A cold benchmark run is mostly one-time work inside each process: compiling, and the autotuning
of the peers and of the kernel itself, which a process keeps and reuses across the specs of one
case and dtype. On an H200, `matmul` bf16 4000x4097 needed 0.3 s of baselines right after bf16
4000x4104 in the same process, and 23.8 s (FlagGems tuning its mm again) on the worker of a
two-GPU run that had not run 4000x4104. So the specs of one case and dtype ("matmul-bf16") form
a unit that one worker runs.

Units go out one at a time to whichever GPU is free (xdist's LoadScopeScheduling, a unit per
scope), longest first by the wall time each took in the last run here (pytest's cache), so that
the short ones fill the end. Units never timed go first, in matrix order.
"""
from __future__ import annotations

TEST_NAME = "test_portcheck_bench"
CACHE_KEY = "portcheck/bench_unit_seconds"


def param_id(case_name: str, label: str) -> str:
    """A benchmark's parameter id, 'matmul-bf16-m=4000-...': its unit, then its label's rest."""
    return f"{case_name}-{label.replace(' ', '-')}"


def unit(case_name: str, spec: dict) -> str:
    return f"{case_name}-{spec['dtype']}"


def unit_of(nodeid: str) -> str | None:
    """The unit of a benchmark's node id (None for any other test)."""
    _, sep, param = nodeid.partition(f"{TEST_NAME}[")
    if not sep:
        return None
    return "-".join(param.rstrip("]").split("-")[:2])


def longest_first(work: list[tuple], seconds: dict[str, float]) -> list[tuple]:
    """(case, spec) pairs ordered by their unit's recorded seconds, longest first; units with
    no record first of all, in the order given."""
    from ..workers import longest_first as by_unit
    return by_unit(work, seconds, lambda pair: unit(pair[0].name, pair[1]))


class UnitClock:
    """Wall time per unit, summed over its benchmarks' reports (setup, call and teardown)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    def add(self, nodeid: str, duration: float) -> None:
        u = unit_of(nodeid)
        if u is not None:
            self.seconds[u] = self.seconds.get(u, 0.0) + duration

    def save(self, cache) -> None:
        """Merge this run's units into pytest's cache (units not run keep their old record)."""
        if self.seconds:
            old = cache.get(CACHE_KEY, {})
            cache.set(CACHE_KEY, {**old, **{u: round(s, 1) for u, s in self.seconds.items()}})


def make_scheduler(config, log):
    """xdist's LoadScopeScheduling with one scope per unit, in collection order."""
    from xdist.scheduler import LoadScopeScheduling

    class BenchScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid) or nodeid

    config.option.loadscopereorder = False   # the collection is already longest first
    return BenchScheduling(config, log)
