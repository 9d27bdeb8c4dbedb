"""A checking session on one runtime target: overrides, hypothesis profile, seeds, provenance and
the results file. Shared by `portcheck run` and the pytest plugin."""
from __future__ import annotations

import copy
import time as clock
import zlib
from pathlib import Path

import hypothesis

from . import results
from .cases import Case
from .digests import collect as collect_digests
from .digests import default_count as default_digests
from .digests import specs_for
from .overrides import Override, find
from .provenance import collect
from .runner import SHRINK_SHARE, bench_launch, check, synchronize, time_case
from .strategies import register_profiles
from .targets.runtime import TARGETS


def bench_spec(case: Case, dtype: str) -> dict:
    """The bench spec a run times a case in: its first in `dtype`, else its first in that dtype."""
    return ([s for s in case.bench if s.get("dtype") == dtype] or [dict(case.bench[0], dtype=dtype)])[0]


def case_seed(session_seed: int, case: str, dtype: str) -> int:
    """Each case x dtype gets its own seed, so one case reruns alone with the same inputs."""
    return (session_seed + zlib.crc32(f"{case}:{dtype}".encode())) % (2**32)


class Session:
    def __init__(self, target_name: str, *, profile: str, max_elements: dict, seed: int,
                 overrides: list[Override] = (), results_path: Path | None = None,
                 warm_bench: bool = False, command: str | None = None, digests: int | None = None,
                 timeout: float | None = None, shrink_time: float | None = None):
        register_profiles()
        self.target = TARGETS[target_name]
        self.availability = self.target.availability()
        self.arch = self.target.arch() if self.availability.ok else "-"
        self.profile = profile
        self.settings = hypothesis.settings.get_profile(profile)
        self.max_elements = max_elements["gpu" if self.target.is_gpu else "interpreter"]
        self.seed = seed
        self.overrides = list(overrides)
        self.results_path = results_path
        self.command = command
        # fixed small inputs whose outputs are recorded for `portcheck diff` (None: the default)
        self.digests = digests if digests is not None else default_digests(self.target.is_gpu)
        self.timeout = timeout   # seconds one case x dtype may run: shrinking stops in time (runner.check)
        self.shrink_time = shrink_time   # seconds a failure's shrinking may take (None: no limit of its own)
        # a worker of `portcheck run`: compile what its timing worker will time (Session.warm)
        self.warm_bench = warm_bench and self.target.is_gpu

    def deadline(self) -> float | None:
        """When a check that started now must stop shrinking, leaving time for the rest of the case."""
        return clock.monotonic() + SHRINK_SHARE * self.timeout if self.timeout else None

    def provenance(self) -> dict:
        p = collect(self.target, self.arch, seed=self.seed, command=self.command)
        p["profile"] = self.profile
        return p

    def run(self, case: Case, dtype: str, spec: dict | None = None, on_example=None,
            pole: bool = False) -> results.Result:
        """`pole`: a long pole of its run (runner.check compiles its kernels ahead)."""
        override = find(self.overrides, case.name, self.target.name, self.arch, dtype)
        seed = case_seed(self.seed, case.name, dtype)
        result = check(case, self.target.name, self.arch, dtype, settings=self.settings,
                       max_elements=self.max_elements, override=override, seed=seed, spec=spec,
                       on_example=on_example, deadline=self.deadline(), shrink_time=self.shrink_time,
                       pole=pole, also_warm=self._after_check(case, dtype) if pole and spec is None
                       and self.target.is_gpu else ())   # a warm-up compiles on GPUs only
        if self.warm_bench and result.verdict == "pass" and case.bench:
            result.phases["timing"], message = self.warm(case, dtype)
            result.message = message or result.message
        if self.digests and spec is None and result.verdict != "skip":
            start = clock.perf_counter()
            result.digests = collect_digests(case, self.target.name, dtype, self.digests, on_example)
            result.phases["digests"] = round(clock.perf_counter() - start, 4)
        result.reproduce = result.reproduce.replace(f"--seed {seed}", f"--seed {self.seed}")
        result.provenance = self.provenance()
        if self.results_path is not None:
            results.append(self.results_path, result.to_dict())
        return result

    def _after_check(self, case: Case, dtype: str) -> list:
        """What run() launches after the check: the digests' specs, and the launch that warms up
        the bench spec; a pole's warm-up compiles their kernels with the check's."""
        after: list = []
        if self.digests:
            try:
                after += specs_for(case, dtype, self.digests)[0]
            except Exception:   # noqa: BLE001  collect_digests says why in the record
                pass
        if self.warm_bench and case.bench:
            spec = bench_spec(case, dtype)
            after.append(lambda: bench_launch(case, self.target.name, spec)())
        return after

    def measure(self, case: Case, dtype: str) -> tuple[float | None, str, float]:
        """The median milliseconds of one launch on the case's first bench spec in `dtype` (None
        without one), why it failed ("" when it did not) and the seconds it took. Timing trouble
        never hides the accuracy verdict: it is a message, not an error."""
        if not case.bench:
            return None, "", 0.0
        start = clock.perf_counter()
        try:
            ms, message = time_case(case, self.target.name, bench_spec(case, dtype)), ""
        except Exception as exc:
            ms, message = None, f"timing failed: {type(exc).__name__}: {exc}"
        return ms, message, round(clock.perf_counter() - start, 4)

    def warm(self, case: Case, dtype: str) -> tuple[float, str]:
        """Launch the case once on the spec `measure` times, so that its kernels are compiled (in
        parallel workers) before the timing worker, alone on the GPU, needs them: the seconds it
        took, and why it failed ("" when it did not), a message as timing trouble is."""
        start = clock.perf_counter()
        try:
            bench_launch(case, self.target.name, bench_spec(case, dtype))()
            synchronize(self.target.name)
            message = ""
        except Exception as exc:
            message = f"timing failed: the bench spec's launch raised {type(exc).__name__}: {exc}"
        return round(clock.perf_counter() - start, 4), message

    def run_as_arch(self, case: Case, dtype: str, group: list, spec: dict | None = None,
                    on_example=None, pole: bool = False) -> list[results.Result]:
        """Check the case under the launch configuration of `group`, archs that make the same
        launches (portcheck.as_arch.groups): checked once, one record per arch of the group, each
        replayed with its own --as-arch. Untimed, no digests: neither is about the forced arch."""
        override = find(self.overrides, case.name, self.target.name, self.arch, dtype)   # the local device's
        seed = case_seed(self.seed, case.name, dtype)
        checked = check(case, self.target.name, self.arch, dtype, settings=self.settings,
                        max_elements=self.max_elements, override=override, seed=seed, spec=spec,
                        on_example=on_example, as_arch=group, deadline=self.deadline(),
                        shrink_time=self.shrink_time, pole=pole)
        checked.reproduce = checked.reproduce.replace(f"--seed {seed}", f"--seed {self.seed}")
        checked.provenance = self.provenance()
        out = []
        for arch in group:
            r = copy.deepcopy(checked)
            r.arch = r.as_arch["arch"] = arch.name
            r.reproduce = r.reproduce.replace(f"--as-arch {group[0].name}", f"--as-arch {arch.name}")
            out.append(r)
        if self.results_path is not None:
            results.append_many(self.results_path, [r.to_dict() for r in out])
        return out


# which record of several speaks for a case x dtype checked under several archs: the worst, a
# pass over a skip (an arch with no launch here says nothing against the others)
_WORST_LAST = ("skip", "pass", "xfail", "xpass", "fail", "error")


class AsArchSession:
    """A Session whose run() checks a case x dtype under each group of --as-arch archs (the
    pytest plugin's --as-arch): every record is written, the worst is returned."""

    def __init__(self, session: Session, groups: list):
        self.session, self.groups = session, groups

    def __getattr__(self, name):
        return getattr(self.session, name)

    def run(self, case: Case, dtype: str, spec: dict | None = None, on_example=None) -> results.Result:
        found = [r for group in self.groups
                 for r in self.session.run_as_arch(case, dtype, group, spec=spec, on_example=on_example)]
        return max(found, key=lambda r: _WORST_LAST.index(r.verdict))
