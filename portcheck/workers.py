"""How `portcheck run` spreads its work over worker processes: one pool per GPU, units claimed
one at a time, and the records put back in one order whatever the schedule.

A unit is one case x dtype (under --as-arch: x a group of archs), checked by one worker from its
own seed, so its record does not depend on which worker took it or when. Every worker walks the
same list of units, longest first by the seconds each took in the last run on this machine, over
the shipped figures (`History`; units never run go first, in matrix order), and takes the next one
nobody has claimed (an exclusive file create in the run's claims folder): the long units start at
once and the short ones fill the end, a slow unit never holds up a queue of others behind it, and a
worker restarted after a crash skips what is claimed, the unit it crashed in included (its
supervisor recorded that one). Once the workers are done, the records are rewritten in the
order of the units (`in_unit_order`), so a parallel run's report equals a serial run's.

Workers share the host's CPUs: each gets its share of torch's intra-op threads (`share_cpus`),
and a GPU's workers are pinned to it with the visibility variable (portcheck.pinning).
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from .errors import UsageError
from .pinning import VISIBLE_VAR, driver_gpu_count, visible_devices
from .reports.output import atomic_write

PROCESSES_VAR = "PORTCHECK_PROCESSES"   # how many worker processes share this host's CPUs
XDIST_VAR = "PYTEST_XDIST_WORKER_COUNT"   # ... and how many pytest-xdist workers do
GIB_PER_GPU_WORKER = 4                  # host and device memory one GPU worker may take, generously
MAX_JOBS_PER_GPU = 16


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # not Linux
        return os.cpu_count() or 1


def _sharing(*names: str) -> int:
    """How many processes share this host's CPUs: the first of these variables that names a
    count, else 1."""
    for name in names:
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return 1


def run_processes() -> int:
    """How many worker processes the run that started this one has (1 outside a pool)."""
    return _sharing(PROCESSES_VAR)


def share_cpus() -> None:
    """Give this process its share of the host's CPUs for torch's intra-op threads: the worker
    processes of a run (PORTCHECK_PROCESSES) or of pytest-xdist (PYTEST_XDIST_WORKER_COUNT)
    would otherwise each start one thread per CPU and contend for them."""
    processes = _sharing(PROCESSES_VAR, XDIST_VAR)
    if processes > 1:
        import torch
        torch.set_num_threads(max(1, cpu_count() // processes))


@dataclass(frozen=True)
class Slot:
    """One worker process of a run: its index and the environment that pins it to its GPU."""
    index: int
    gpu: str | None       # as the visibility variable names it; None on the interpreter
    env: dict


def gpus(vendor: str, requested: str | None) -> list[str]:
    """The GPUs a run uses: every one visible, or the indices --gpus names among them."""
    visible = visible_devices(vendor)
    if not requested:
        return visible
    chosen = []
    for item in requested.split(","):
        item = item.strip()
        if not item.isdigit() or int(item) >= len(visible):
            raise UsageError(f"--gpus: no GPU {item!r} here: {len(visible)} visible, indices 0 to "
                             f"{len(visible) - 1}" if visible else "--gpus: no GPU is visible here")
        if visible[int(item)] not in chosen:
            chosen.append(visible[int(item)])
    return chosen


def free_cpus() -> int:
    """The CPUs this process may count on: all of them, or its share when it runs inside a
    parallel pytest (pytest-xdist's workers, and what they start, share the machine)."""
    return max(1, cpu_count() // _sharing(XDIST_VAR))


def default_jobs(n_gpus: int, gpu_memory_bytes: int | None = None) -> int:
    """Workers per GPU (on the interpreter, in all): one per free CPU, as far as memory allows.
    Compiling (a CPU's work) dominates a cold GPU run, and a warm one keeps the GPU busy."""
    per_gpu = free_cpus() // max(1, n_gpus)
    if gpu_memory_bytes:
        per_gpu = min(per_gpu, gpu_memory_bytes // (GIB_PER_GPU_WORKER << 30))
    return max(1, min(per_gpu, MAX_JOBS_PER_GPU))


def standby_count(vendor: str | None, jobs: int | None) -> int:
    """How many workers `portcheck run` starts before it plans (supervise.Standby): as many as its
    first pool may have, counted without torch: the GPUs the visibility variable names, else those
    the driver lists (pinning.driver_gpu_count), else one. GPU memory is not known yet, so a pool
    on a small GPU may take fewer; the rest are stopped."""
    n = 1
    if vendor is not None:
        n = max(1, len(visible_devices(vendor, count=lambda: driver_gpu_count(vendor) or 1)))
    return (jobs or default_jobs(n)) * n


POLE_NICENESS = 5   # CPU priority a worker on a short unit gives up to the long poles' compiles


def yield_to_poles() -> None:
    """Lower this worker's CPU priority by POLE_NICENESS, once: it is about to check a short unit
    while the run's long poles, claimed first, compile their kernels on threads of their own
    (portcheck.precompile). A cold GPU run, or a half of one, ends with its fp8 matmuls, which
    compile a dozen kernels each, while the short units have slack: at nice 5 a thread weighs a
    third of one at 0 in Linux's share of the CPUs. On the H200 the halves of the default run
    ended at 42.6 / 38.7 s and 44.4 / 41.7 s with this and 8 warm-up threads a pole, against
    43.6 / 43.9 s and 54.6 / 53.4 s without in the same calls; the whole cold run took 71.3 s
    (reports/examples/speed-h200/twentieth-session/). An unprivileged process cannot raise its
    priority back, so a worker yields once its poles are taken (they come first in every
    worker's claim order) and for good; where nice is refused, nothing changes."""
    global _yielded
    if _yielded:
        return
    _yielded = True
    try:
        os.nice(POLE_NICENESS)
    except (AttributeError, OSError):   # not POSIX, or not allowed: the order only costs speed
        pass


_yielded = False


def check_jobs(jobs: int | None) -> None:
    if jobs is not None and jobs < 1:
        raise UsageError(f"--jobs must be at least 1 (worker processes per GPU), got {jobs}")


def slots(vendor: str | None, devices: list[str], jobs: int, env: dict) -> list[Slot]:
    """`jobs` workers per GPU (the interpreter: `jobs` in all), round-robin over the GPUs so that
    the first workers started spread over all of them."""
    count = jobs * max(1, len(devices))
    out = []
    for i in range(count):
        slot_env = {**env, PROCESSES_VAR: str(count)}
        gpu = devices[i % len(devices)] if devices else None
        if gpu is not None:
            slot_env[VISIBLE_VAR[vendor]] = gpu
            if vendor == "amd":   # HIP reads both variables: the one set must be the one meant
                slot_env.pop("CUDA_VISIBLE_DEVICES", None)
        out.append(Slot(i, gpu, slot_env))
    return out


def shard(units: list, spec: str | None, case_of=None) -> list:
    """The I-th of N parts of the units ('I/N', 1-based); all of them without a spec. Each case's
    units (`case_of(unit)`; without it, all one case) are dealt round-robin, each case starting one
    part after the one before it: every part gets long and short units alike, and the same dtype
    of neighbouring cases that list their dtypes alike lands in different parts, as its cost
    often does not (one round-robin over the whole list gave the default run's first half both
    fp8e5 matmul units, the heaviest two, and half 1 was the slower in every pair measured:
    reports/examples/speed-h200/twenty-first-session/)."""
    if not spec:
        return units
    try:
        i, n = (int(x) for x in spec.split("/"))
    except ValueError:
        raise UsageError(f"--shard wants I/N (e.g. 1/2), got {spec!r}") from None
    if not 1 <= i <= n:
        raise UsageError(f"--shard {spec}: I must be between 1 and N")
    start: dict = {}      # a case's first part, in the order cases come
    dealt: dict = {}      # units of a case dealt so far
    part = []
    for unit in units:
        case = case_of(unit) if case_of else None
        start.setdefault(case, len(start))
        part.append((start[case] + dealt.get(case, 0)) % n)
        dealt[case] = dealt.get(case, 0) + 1
    return [u for u, p in zip(units, part) if p == i - 1]


class Claims:
    """Worker side: which units are taken, as files in the run's claims folder (an exclusive
    create is atomic on every local file system)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    def take(self, key: str) -> bool:
        path = self.folder / key.replace("/", "_").replace(":", "_")
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            return False
        return True


def claims_folder(results_path: Path, target: str, purpose: str = "check") -> Path:
    return Path(results_path).with_name(f".claims-{target}-{purpose}")


def unit_key(case: str, dtype: str, arch: str | None = None) -> str:
    return f"{case}:{dtype}" + (f":{arch}" if arch else "")


# Seconds per unit of the built-in cases measured by portcheck's developers (an H200 with the
# Triton cache empty; the 2-core interpreter), for a machine with no history of its own: a fresh
# machine, where compiling makes the fp8 matmuls the long poles, then starts them first.
SHIPPED = Path(__file__).resolve().parent / "data" / "unit-seconds.json"


def _read(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def cache_folder() -> Path:
    """portcheck's folder of things worth keeping between runs on this machine."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "portcheck"


BYTECODE_VAR = "PYTHONPYCACHEPREFIX"


def _bytecode_beside_torch() -> bool:
    """Whether Python keeps bytecode beside torch's sources (torch is found, not imported)."""
    import importlib.util
    spec = importlib.util.find_spec("torch")
    tag = sys.implementation.cache_tag
    if spec is None or not spec.origin or tag is None:   # nothing to find, or no bytecode at all
        return True
    source = Path(spec.origin)
    return (source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc").exists()


def bytecode_cache(env: dict) -> dict:
    """`env` for worker processes, with a bytecode cache they can write where Python keeps none
    beside torch's sources (PYTHONDONTWRITEBYTECODE over a venv made without .pyc files, as on the
    lent H200, or a read-only install): there every worker compiles some 1,200 modules from source
    as it starts, 2.2 to 2.9 CPU-seconds, and 16 workers starting together took 4.4 to 5.5 s to
    import torch (reports/examples/speed-h200/eighteenth-session/). Then the workers get
    PYTHONPYCACHEPREFIX in portcheck's cache folder: the first run writes it, later runs read it.
    A prefix already set is left as it is."""
    if env.get(BYTECODE_VAR) or _bytecode_beside_torch():
        return env
    return {**{k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"},
            BYTECODE_VAR: str(cache_folder() / "bytecode")}


def keep_bytecode() -> None:
    """The bytecode cache of `bytecode_cache` for this process's own imports from here on and for
    every process it starts: `portcheck`'s command line calls it before it imports its commands
    (torch, Triton, hypothesis), which took the lent H200's supervisor 2.8 s of its 3.5 s start."""
    try:
        env = bytecode_cache(dict(os.environ))
    except Exception:   # noqa: BLE001  no home folder, say: the imports only take longer
        return
    if BYTECODE_VAR in env and env[BYTECODE_VAR] != os.environ.get(BYTECODE_VAR):
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ[BYTECODE_VAR] = sys.pycache_prefix = env[BYTECODE_VAR]
        sys.dont_write_bytecode = False


class History:
    """Seconds per unit in the last runs on this machine, per target and arch, in portcheck's
    cache folder ($XDG_CACHE_HOME/portcheck, else ~/.cache/portcheck), else the shipped figures
    of the same target: it orders the claims and names the long poles only, so a missing, stale or
    unreadable file costs speed, never a result. A unit keeps half its figure from before where
    that is more than its last run's (`record`)."""

    def __init__(self, path: Path | None = None, shipped: Path = SHIPPED):
        self.path = path or cache_folder() / "unit-seconds.json"
        self.shipped = shipped

    def load(self) -> dict:
        return _read(self.path)

    def seconds(self, scope: str) -> dict:
        """This machine's seconds for the scope over the shipped ones of its target: a unit this
        machine has not run yet (the as-arch units after a plain run) keeps its shipped figure."""
        merged = {}
        for data in (_read(self.shipped), self.load()):
            found = data.get(scope) or next((v for k, v in sorted(data.items())
                                             if k.split("/")[0] == scope.split("/")[0]), None)
            if isinstance(found, dict):
                merged.update(found)
        return merged

    def record(self, scope: str, seconds: dict[str, float]) -> None:
        """Merge a run's seconds per unit (best effort: the cache may be read-only), each at least
        half its figure from before: a run with the kernels cached takes a unit that compiles a
        dozen kernels in 2 s against 40 s cold, and the next cold run (a new Triton) must still
        start it first and warm it up (on the H200, matmul_fp8_out fp8e4nv: 41.1 s cold, 1.8 s warm)."""
        if not seconds:
            return
        data = self.load()
        before = data.get(scope) if isinstance(data.get(scope), dict) else {}

        def merged(key: str, s: float) -> float:
            old = before.get(key)
            return round(max(s, old / 2) if isinstance(old, (int, float)) else s, 2)
        data[scope] = {**before, **{k: merged(k, v) for k, v in seconds.items()}}
        try:
            atomic_write(self.path, json.dumps(data, indent=1, sort_keys=True))
        except Exception:   # noqa: BLE001  a cache that cannot be written only orders less well
            pass


def longest_first(items: list, seconds: dict, key_of) -> list:
    """`items` by their unit's recorded seconds (`key_of(item)` names the unit), longest first;
    units never recorded first, in the order given."""
    def order(indexed):
        i, item = indexed
        s = seconds.get(key_of(item))
        known = isinstance(s, (int, float))
        return (known, -s if known else 0.0, i)
    return [item for _, item in sorted(enumerate(items), key=order)]


def history_scope(target: str, arch: str) -> str:
    return f"{target}/{arch}"


def in_unit_order(records: list[dict], targets: list[str], order: list[str]) -> list[dict]:
    """Records sorted by target, then by the unit they belong to (`order`: unit keys, as-arch
    units by each arch), records of no unit (a kernel module that does not import) first; ties
    keep their order in the file."""
    position = {key: i for i, key in enumerate(order)}

    def key(indexed):
        i, r = indexed
        target = targets.index(r["target"]) if r.get("target") in targets else len(targets)
        arch = r.get("arch") if r.get("evidence") == "as-arch" else None
        return target, position.get(unit_key(r.get("case", ""), r.get("dtype", ""), arch), -1), i
    return [r for _, r in sorted(enumerate(records), key=key)]
