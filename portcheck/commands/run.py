"""`portcheck run`: check every selected case on every selected target and write a report.

Each runtime target runs in its own worker process, because the Triton interpreter is a
process-wide mode, under a supervisor (portcheck/supervise.py): a case that hangs, crashes its
process or loses the GPU context fails alone, and the worker restarts for the remaining cases.
Records are appended as they are produced; an interrupted run still leaves a valid, partial report.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import shlex
import shutil
import sys
import threading
import time
import warnings
from concurrent import futures
from pathlib import Path

from .. import cases as registry
from .. import precompile, results, workers
from ..errors import UsageError
from ..matrix import PROFILES, RunPlan
from ..overrides import load as load_overrides
from ..reports.failure import failure_lines
from ..reports.markdown import markdown
from ..reports.output import atomic_write, owned, write_reserved
from ..reports.progress import Progress
from ..sanitize import TIME_SCALE, TOOLS, for_target, run_each
from ..supervise import (EXIT_CONTEXT_LOST, PORTCHECK, Stopped, Unfinished, announce, finish, gpu_context_ok,
                         in_flight, inflight_path, stopping_on_signals, supervise, supervise_all)
from ..targets.runtime import RUNTIME_TARGETS, resolve, select_mode, target_env
from ..targets.runtime import target as runtime_target
from ._common import (DEFAULT_MATRIX, add_cases_argument, check_dtypes, csv, json_spec, load_cases, load_run_plan,
                      named_case, plan_sources, timestamped, writable_dir)

NAME = "run"
HELP = "check kernels against float64 oracles on this machine's targets and write a report"
RUN_MANIFEST = "run.json"
MANIFEST_RESERVE = 4096   # bytes of trailing blanks the first run.json holds for its final state
REPLAY_EXAMPLES = 30   # drawn from a case's strategy to check a --replay spec against
TIMING_SLOTS = 1000   # the first timing worker's slot: in-flight files apart from the checking workers'
STOP_WAIT_S = 30      # how long a stopping run waits for its timing worker to read "stop" (it may be importing)


def add_arguments(p) -> None:
    p.add_argument("--matrix", help=f"matrix file (default: {DEFAULT_MATRIX} if present)")
    p.add_argument("--target", help="comma list of cuda, rocm, interpreter, auto (default: the matrix's)")
    p.add_argument("--kernel", help="comma list of case names or globs, or family:NAME (default: the "
                                    "matrix's, else all)")
    add_cases_argument(p)
    p.add_argument("--dtype", help="comma list of dtypes (default: each case's own)")
    p.add_argument("--out", help="report directory, new or empty (default: reports/<timestamp>)")
    p.add_argument("--profile", choices=PROFILES, help="hypothesis profile (default: the matrix's)")
    p.add_argument("--seed", type=int, help="session seed (default: 0 under a derandomized profile "
                                            "such as ci, else random; recorded in the report)")
    p.add_argument("--replay", metavar="JSON", help="rerun exactly this input spec (from a failure)")
    p.add_argument("--timeout", type=float, help="seconds one case may run (default: the matrix's)")
    p.add_argument("--shrink-time", type=float, metavar="S",
                   help="seconds a failure may spend looking for a smaller failing input; then the "
                        "smallest so far is reported (default: the matrix's shrink_time, 60)")
    p.add_argument("--no-time", action="store_true", help="skip the median-time column on GPUs")
    p.add_argument("--launches", type=int, default=2, metavar="N",
                   help="launch each example N times on the same inputs; the outputs must match bit "
                        "for bit unless the case is declared nondeterministic (default: 2)")
    p.add_argument("--no-guards", action="store_true",
                   help="no guard bands around outputs and inputs: to diagnose the guards only")
    p.add_argument("--sanitize", choices=TOOLS, metavar="TOOL",
                   help="run each case x dtype in its own worker under a GPU checker: cuda: memcheck, "
                        "racecheck, initcheck, synccheck (compute-sanitizer); rocm: address (Triton's "
                        "ASan build); the per-case time limit is scaled by "
                        + ", ".join(f"{t} x{k}" for t, k in TIME_SCALE.items()))
    p.add_argument("--as-arch", metavar="ARCHS",
                   help="comma list of archs, or all: check each case with its launches configured as on "
                        "that arch (tiles, warps, stages, every autotune config), run on the local target; "
                        "evidence X in the reports")
    p.add_argument("--raw-interpreter", action="store_true",
                   help="run the interpreter without portcheck's bf16/fp8/libdevice numerics layer")
    p.add_argument("--jobs", type=int, metavar="N",
                   help="worker processes per GPU (on the interpreter: in all) that check cases in "
                        "parallel (default: one per CPU core, as far as GPU memory allows, at most "
                        f"{workers.MAX_JOBS_PER_GPU}); the records equal a serial run's")
    p.add_argument("--gpus", metavar="LIST",
                   help="comma list of GPU indices, among those visible (CUDA_VISIBLE_DEVICES, "
                        "HIP_VISIBLE_DEVICES), to use: one pool of workers each (default: all)")
    p.add_argument("--shard", metavar="I/N",
                   help="check only the I-th of N parts of the cases x dtypes (each case's dealt "
                        "round-robin, each case starting one part further), to split a run over "
                        "machines; `portcheck report` merges the parts")
    p.add_argument("--worker", metavar="RESULTS", help=argparse.SUPPRESS)
    p.add_argument("--worker-slot", type=int, help=argparse.SUPPRESS)
    p.add_argument("--time-only", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--wait-for", metavar="GO_FILE", help=argparse.SUPPRESS)
    p.add_argument("--standby", action="store_true", help=argparse.SUPPRESS)


def _settings(args) -> tuple[RunPlan, list[str], dict | None]:
    """The matrix with the command line's limits, the targets as named and the --replay spec:
    what needs neither torch nor the cases, checked before any worker starts."""
    matrix = load_run_plan(args.matrix)
    if args.timeout is not None:
        if not 0 < args.timeout < float("inf"):   # NaN included: it would turn the hang guard off
            raise UsageError(f"--timeout must be positive and finite (seconds), got {args.timeout:g}")
        matrix.timeout = args.timeout
    precompile.threads()   # a bad PORTCHECK_PRECOMPILE stops the run here, not in every check
    if args.shrink_time is not None:
        if not 0 <= args.shrink_time < float("inf"):
            raise UsageError(f"--shrink-time must be finite and 0 or more (seconds), got {args.shrink_time:g}")
        matrix.shrink_time = args.shrink_time
    targets = csv(args.target) or matrix.targets
    for t in targets:
        if t not in (*RUNTIME_TARGETS, "auto"):
            raise UsageError(f"unknown target {t!r}; known: {', '.join(RUNTIME_TARGETS)}, auto")
    spec = json_spec("--replay", args.replay, "the JSON spec printed by a failure (an object with 'dtype')") \
        if args.replay else None
    return matrix, targets, spec


def _plan(args, matrix: RunPlan, named: list[str], spec: dict | None) -> tuple[RunPlan, list[str], list,
                                                                             list[str] | None]:
    targets = list(dict.fromkeys(resolve(t) for t in named))
    load_cases(args, matrix)
    if args.as_arch:   # an unknown arch stops the run before it starts
        from ..as_arch import groups, parse
        args.as_arch_groups = groups(parse(args.as_arch))
    selected = registry.select(csv(args.kernel) or matrix.kernels)
    dtypes = csv(args.dtype) or matrix.dtypes or None
    check_dtypes(selected, dtypes)
    if matrix.overrides:
        load_overrides(matrix.overrides)  # an invalid or expired entry stops the run before it starts
    if args.replay:
        selected = named_case(selected, args.kernel)
        if len(selected) != 1 or len(targets) != 1:
            raise UsageError("--replay needs exactly one --kernel and one --target")
        from ..runner import replay_budget
        _check_replay(selected[0], spec, dtypes, replay_budget(
            targets[0], matrix.max_elements["interpreter" if targets[0] == "interpreter" else "gpu"]))
        args.replay_spec = spec
    return matrix, targets, selected, dtypes


def _check_replay(case, spec: dict, dtypes, budget: int) -> None:
    """The spec must be in the case's input domain (validation.replay_spec), checked against
    examples the case's own strategy draws, before anything runs."""
    import hypothesis

    from ..runner import COLUMNS_KEY, harness_keys, stridable
    from ..validation import replay_spec
    dtype = spec["dtype"]
    if dtype not in case.dtypes or (dtypes and dtype not in dtypes):
        raise UsageError(f"--replay: dtype {dtype!r} is not one this run checks {case.name} in "
                         f"({', '.join(d for d in case.dtypes if not dtypes or d in dtypes)})")
    examples: list[dict] = []

    def enough(example) -> bool:
        examples.append(example)
        return len(examples) >= REPLAY_EXAMPLES
    draw = hypothesis.settings(database=None, max_examples=REPLAY_EXAMPLES, phases=[hypothesis.Phase.generate],
                               suppress_health_check=list(hypothesis.HealthCheck))
    from .. import strategies as S
    strategy, drawable = S.with_regimes(lambda: case.inputs(dtype, budget))
    try:
        hypothesis.find(strategy, enough, settings=draw)
    except hypothesis.errors.NoSuchExample:   # fewer distinct inputs than asked for: all were seen
        pass
    where = f"--replay for {case.name}"
    own = harness_keys(spec, set().union(*examples), where)
    replay_spec(own, examples, budget, where)
    # the values portcheck's own strategies draw from (a failure's replay may hold "far" rows)
    for key, known in (("regime", S.drawn_with_variants(drawable)), ("layout", {*S.LAYOUTS, "far"})):
        if known and key in own and all(key in e for e in examples) and own[key] not in known:
            raise UsageError(f"{where}: '{key}' must be one of {', '.join(sorted(known))}, got {own[key]!r}")
    if COLUMNS_KEY in spec and COLUMNS_KEY not in own:   # a tensor the case makes, and one that can be so
        try:
            can = stridable(case.make(own, "cpu"), case.in_place)
        except Exception:   # noqa: BLE001  a case whose make() needs its GPU: the check says it
            return
        if spec[COLUMNS_KEY] not in can:
            raise UsageError(f"{where}: '{COLUMNS_KEY}' must name one of the tensors whose last dimension it can "
                             f"stride ({', '.join(can) or 'none'}), got {spec[COLUMNS_KEY]!r}")


def main(args) -> int:
    if args.standby:
        return _standby(args)
    if args.worker:  # fix the Triton mode before _plan imports any kernel module
        select_mode(args.target, raw_interpreter=args.raw_interpreter)
        from ..adapters import AllocatedOutputWarning
        warnings.simplefilter("ignore", AllocatedOutputWarning)   # the supervisor has said it once
    workers.check_jobs(args.jobs)
    workers.shard([], args.shard)
    matrix, named, spec = _settings(args)
    standbys = _Standbys()
    try:
        if not args.worker:
            standbys.start(args, named)
        return _main(args, standbys, matrix, named, spec)
    finally:
        standbys.stop()   # those no pool took: the run stopped early, or needed fewer


def _main(args, standbys: _Standbys, matrix: RunPlan, named: list[str], spec: dict | None) -> int:
    from ..runner import configure
    configure(_checks(args), _replay_flags(args))    # a bad --launches stops the run before it starts
    matrix, targets, selected, dtypes = _plan(args, matrix, named, spec)
    if args.worker:
        try:
            return _work(args, matrix, targets[0], selected, dtypes)
        except OSError as exc:   # a full disk: one line; the supervisor records the case in flight
            raise UsageError(f"cannot write {exc.filename or args.worker}: {exc.strerror or exc}") from None
    sanitizers = {t: for_target(t, args.sanitize) for t in targets} if args.sanitize else {}
    for t in targets:   # before anything is written: an unavailable target is a usage error
        available = runtime_target(t).availability()
        if not available.ok:
            raise UsageError(f"target {t} is not available: {available.reason}")
    args.devices = {t: workers.gpus(runtime_target(t).vendor, args.gpus) for t in targets
                    if runtime_target(t).is_gpu}   # --gpus naming a GPU not here stops the run here
    if args.gpus and not args.devices:
        raise UsageError(f"--gpus chooses GPUs, and this run's targets ({', '.join(targets)}) use none")
    out = Path(args.out) if args.out else timestamped("reports")
    if (out / "results.jsonl").exists():
        raise UsageError(f"{out / 'results.jsonl'} exists already; choose a new --out")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"--out {out} is not an empty directory; a run writes into a new or empty one")
    out = writable_dir(out)
    with owned(out):   # one process per run directory: a second run into it gets exit status 2
        return _supervise_run(args, matrix, targets, selected, dtypes, sanitizers, out, standbys)


class _Standbys:
    """Check workers started before the run is planned (supervise.Standby), for its first
    target: they import while the supervisor imports, plans and checks its arguments, and its
    first pool takes them. On the lent H200 the first records came 0.3 to 1.5 s sooner and a
    two-unit run took 6.9 to 7.7 s against 8.0 to 8.3 s (the supervisor, importing beside them,
    reaches its pool about 1 s later than alone; reports/examples/speed-h200/twenty-third-session/)."""

    def __init__(self):
        self.target, self.waiting = None, []

    def start(self, args, named: list[str]) -> None:
        """Standbys for the first of the targets as named (`_settings`)."""
        from ..pinning import driver_gpu_count
        from ..supervise import Standby
        target = (named or [""])[0]
        if target == "auto":   # torch resolves it later; a wrong guess only stops its standbys
            target = next((t for t in ("cuda", "rocm") if driver_gpu_count(runtime_target(t).vendor)), "interpreter")
        if target not in RUNTIME_TARGETS or args.sanitize:
            return
        device = runtime_target(target)
        count = 1 if args.replay else workers.standby_count(device.vendor if device.is_gpu else None, args.jobs)
        argv = ["run", "--standby", "--target", target] + (["--raw-interpreter"] if args.raw_interpreter else [])
        env = target_env(target)
        self.target = target
        for _ in range(count):
            self.waiting.append(Standby(argv, env))

    def take(self, target: str):
        """A standby for a check worker of `target`, or None."""
        return self.waiting.pop(0) if target == self.target and self.waiting else None

    def stop(self) -> None:
        while self.waiting:
            self.waiting.pop().stop()


def _standby(args) -> int:
    """A worker started before its command is known (supervise.Standby): the imports every
    worker makes, then the command its supervisor writes on stdin, run in this process; without
    one (EOF), it ends quietly."""
    try:
        select_mode(args.target, raw_interpreter=args.raw_interpreter)
        import triton  # noqa: F401
        from .. import runner, session  # noqa: F401  torch, hypothesis and the checking code
    except Exception:   # noqa: BLE001  the command meets the same fault and reports it
        pass
    line = sys.stdin.readline()
    if not line:
        return 0
    order = json.loads(line)
    os.environ.clear()
    os.environ.update(order["env"])
    argv = order["argv"]
    sys.argv[1:] = argv
    parser = argparse.ArgumentParser(prog=f"portcheck {NAME}")
    add_arguments(parser)
    return main(parser.parse_args(argv[1:]))   # argv[0] is "run"


def _supervise_run(args, matrix, targets, selected, dtypes, sanitizers, out: Path, standbys: _Standbys) -> int:
    results_path = out / "results.jsonl"
    from ..strategies import session_seed
    seed = args.seed if args.seed is not None else session_seed(args.profile or matrix.profile)
    manifest = {"command": shlex.join(["portcheck", *sys.argv[1:]]), "targets": targets,
                "seed": seed, "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "status": "running", "matrix": str(matrix.path),
                "overrides": str(matrix.overrides) if matrix.overrides else None}
    print(f"portcheck run: {plan_sources(matrix)}", flush=True)
    # written with room to spare: on a full disk its final state still fits in its own blocks
    atomic_write(out / RUN_MANIFEST, json.dumps(manifest, indent=2) + "\n" + " " * MANIFEST_RESERVE)
    results_path.touch()   # there from the start: a run stopped before its first record still has one
    status, stopped, unfinished = 0, "", []
    try:
        with stopping_on_signals():
            status = _supervise_targets(args, matrix, targets, selected, dtypes, sanitizers, results_path, seed,
                                        unfinished, standbys)
    except (KeyboardInterrupt, Stopped) as exc:
        stopped = "interrupted" if isinstance(exc, KeyboardInterrupt) else str(exc)
        stopped += "".join(f"; in flight: {case}" for case in in_flight(out))
        status = 130 if isinstance(exc, KeyboardInterrupt) else 128 + exc.signum
        print(f"\nportcheck: {stopped}; writing the partial report", file=sys.stderr, flush=True)
    except OSError as exc:   # a full disk, say: say so in one line and keep what was written
        stopped, status = f"cannot write {exc.filename or results_path}: {exc.strerror or exc}", 1
        print(f"portcheck: error: {stopped}", file=sys.stderr, flush=True)
    failed_writes = []
    try:
        records = _in_unit_order(results_path, targets, args, selected, dtypes)
    except UsageError as exc:   # a full disk: the records stay as the workers appended them
        failed_writes.append(str(exc))
        records = results.read(results_path) if results_path.exists() else []
    _remember(records, targets)
    title = f"portcheck run ({', '.join(targets)})"
    why = "; ".join(filter(None, [stopped, *unfinished]))
    try:
        atomic_write(out / "matrix.md", markdown(records, title + (f" - PARTIAL: {why}" if why else "")))
    except UsageError as exc:
        failed_writes.append(str(exc))
    if failed_writes:
        status = max(status, 1)
        print(f"portcheck: error: {'; '.join(failed_writes)}", file=sys.stderr, flush=True)
    why = "; ".join(filter(None, [why, *failed_writes]))
    manifest.update(status="interrupted" if stopped else "partial" if unfinished or failed_writes else "complete",
                    finished=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    if why:
        manifest["why"] = why
    write_reserved(out / RUN_MANIFEST, json.dumps(manifest, indent=2))
    totals = results.phase_totals(records)
    if totals:
        print("\ntime per phase: " + ", ".join(f"{phase} {seconds:.1f} s" for phase, seconds in totals.items()))
    print(f"\nreport: {out / 'matrix.md'}\nresults: {results_path}")
    return status


def _supervise_targets(args, matrix, targets, selected, dtypes, sanitizers, results_path: Path, seed: int,
                       unfinished: list, standbys: _Standbys) -> int:
    """Each target's workers under supervision; a worker that stopped outside any case is
    listed in `unfinished` (the run is then partial) and the next target still runs."""
    status = 0
    for target in targets:
        env = target_env(target)
        if target in sanitizers:   # one worker per case x dtype, so a finding names its case
            jobs = args.jobs or workers.default_jobs(1, _gpu_memory(target))
            print(f"== {target}: {jobs} worker(s) at a time, each one case x dtype under {args.sanitize}: "
                  f"portcheck {shlex.join(_child_argv(args, target, seed, results_path))}", flush=True)
            try:
                seconds = workers.History().seconds(workers.history_scope(target, runtime_target(target).arch()))
                units = workers.longest_first(   # the long poles first, as a pool claims
                    _units(args, selected, dtypes), seconds, lambda u: workers.unit_key(*u))
                status = max(status, run_each(sanitizers[target], units,
                                              _one_unit_command(args, target, seed), env, results_path,
                                              target, matrix.timeout, jobs))
            except Unfinished as exc:   # its remaining cases never ran: the run is partial
                unfinished.append(str(exc))
                status = max(status, 1)
                print(f"portcheck: {exc}", file=sys.stderr, flush=True)
            continue
        go = _Go(results_path, target) if _timed(args, matrix, target) else None
        # the timing pool starts with the checks: its workers import and make their GPU context
        # meanwhile (about 5 s a run on the H200), then wait for the checks to end
        timing = _background(lambda: _pool(args, matrix, target, selected, dtypes, env, results_path,
                                           seed, unfinished, timing=True, go=go)) if go else None

        def checked() -> None:   # every check worker has finished: time while they exit
            if not unfinished:
                go.release(True)
        try:
            status = max(status, _pool(args, matrix, target, selected, dtypes, env, results_path, seed, unfinished,
                                       standbys=standbys, on_all_finished=checked if go else None))
        except BaseException:   # stopped (Ctrl-C, SIGTERM) or failed: the timing worker ends too
            if go:
                waiting = not go.released()   # else it times already, and ends with this run (watch_supervisor)
                go.release(False)
                if waiting:
                    with contextlib.suppress(futures.TimeoutError):   # it reads "stop" before the report's clean-up
                        timing.exception(timeout=STOP_WAIT_S)
            raise
        if go:
            go.release(not unfinished)   # a partial run is not timed
            status = max(status, timing.result())
    return status


class _Go:
    """The file that lets a run's timing workers, started with its checks, begin: "go" once every
    check worker has ended (each then times alone on its GPU), "stop" when the checks did not finish."""

    def __init__(self, results_path: Path, target: str):
        self.path = results_path.with_name(f".go-{target}-time")
        self.path.unlink(missing_ok=True)

    def release(self, go: bool) -> None:
        atomic_write(self.path, "go" if go else "stop")

    def released(self) -> bool | None:
        """True: go, False: stop, None: not yet."""
        try:
            return self.path.read_text() == "go"
        except FileNotFoundError:
            return None


def _background(fn) -> futures.Future:
    """fn() on a daemon thread; .result() waits for it and raises what it raised. A daemon, so
    that a run that stops never waits at exit for the timing pool, whose worker may still wait
    for its go file (it ends once its supervisor has: supervise.watch_supervisor)."""
    future: futures.Future = futures.Future()

    def run() -> None:
        try:
            future.set_result(fn())
        except BaseException as exc:
            future.set_exception(exc)
    threading.Thread(target=run, name="portcheck-timing-pool", daemon=True).start()
    return future


def _wait_for_go(path: Path) -> bool:
    """A timing worker started with the checks: whether to time, once the supervisor says."""
    while not path.exists():
        time.sleep(0.05)
    return path.read_text() == "go"


def _timed(args, matrix, target: str) -> bool:
    """Whether the run takes the median-time column on this target (GPUs only, not --as-arch)."""
    return matrix.time and not args.no_time and runtime_target(target).is_gpu and not args.as_arch


def _pool(args, matrix, target: str, selected, dtypes, env: dict, results_path: Path, seed: int,
          unfinished: list, timing: bool = False, go: _Go | None = None, standbys: _Standbys | None = None,
          on_all_finished=None) -> int:
    """A pool of supervised workers per GPU (on the interpreter, one pool) that claim the run's
    units one at a time, in `standbys` where there are some; with `timing`, one worker per GPU
    that times the passed cases, alone on its GPU (a time taken beside other workers would
    measure them too), started with the checks: it times once `go` is released.
    `on_all_finished()`: called once every worker has said it finished, before they have all exited."""
    units = None if timing else _keys(args, selected, dtypes)
    vendor = runtime_target(target).vendor
    devices = getattr(args, "devices", {}).get(target, [])
    if timing:
        jobs = 1
        # the autotuner's choice, timed alone on the GPU, is kept in Triton's cache: the next run's
        # timing worker reuses it instead of timing every configuration again
        env = {**env, "TRITON_CACHE_AUTOTUNING": "1"}
    else:
        jobs = args.jobs or workers.default_jobs(len(devices), _gpu_memory(target))
        jobs = max(1, min(jobs, -(-len(units) // max(1, len(devices)))))   # no more workers than units
    slots = workers.slots(vendor if devices else None, devices, jobs, env)
    argv = (_child_argv(args, target, seed, results_path) + (["--time-only"] if timing else [])
            + (["--wait-for", str(go.path)] if go else []))
    where = f" on GPU {', '.join(devices)}" if devices else ""
    what = "timing" if timing else "checking"
    # timing slots are numbered apart from checking ones: their in-flight files never meet
    first_slot = TIMING_SLOTS if timing else 0
    bar: dict = {}   # the progress line, once there is something to count
    lock = threading.Lock()

    def start() -> None:
        todo = len(_passed_units(results_path, target, selected)) if timing else len(units)
        print(f"== {target}: {what} with {len(slots)} worker(s){where}"
              f"{', started with the checks' if go else ''}: portcheck {shlex.join(argv)}", flush=True)
        bar["todo"] = todo
        bar["progress"] = Progress(f"{target}: {'timed' if timing else 'cases'}", todo, eta=True)
        bar["progress"].advance(0)

    def output(line: str) -> None:
        with lock:
            progress = bar.get("progress")
            if progress is not None:
                progress.clear()   # the line starts on a clean line; the bar follows it
            print(line, flush=True)
            if progress is not None:
                progress.advance(0)

    seen = _Follow(_timings_path(results_path, target) if timing else results_path, target, units)

    def tick() -> None:
        with lock:
            if "progress" not in bar:
                if go is None or not go.released():
                    return
                start()
            bar["progress"].advance(seen.new())

    finished: set = set()

    def worker(slot) -> dict:
        on_fault = (lambda state, why: results.append(_timings_path(results_path, target), {
            "case": state["case"], "dtype": state["dtype"], "target": target, "time_ms": None,
            "seconds": 0.0, "message": f"timing failed: {why}"})) if timing else None
        index = first_slot + slot.index

        def on_finished() -> None:
            with lock:
                finished.add(index)
                if len(finished) == len(slots):
                    if "progress" in bar:   # its 100% line before the next pool's first
                        bar["progress"].advance(seen.new())
                    on_all_finished()
        return dict(cmd=[*PORTCHECK, *argv, "--worker-slot", str(index)],
                    env=slot.env, results_path=results_path, target=target, case_timeout=matrix.timeout,
                    inflight=inflight_path(results_path, target, index), output=output, on_fault=on_fault,
                    standby=standbys.take(target) if standbys else None,
                    on_finished=on_finished if on_all_finished else None)

    pool = [worker(slot) for slot in slots]
    if standbys:
        standbys.stop()   # more than the pool takes
    if go is None:   # the checks: counted from the start
        start()
    try:
        status, stopped = supervise_all(pool, while_waiting=tick)
    finally:
        if "progress" in bar:
            bar["progress"].close()
    seen.new()
    complete = len(seen.seen) >= bar.get("todo", 0)   # the other workers took every unit: nothing is missing
    for why in dict.fromkeys(stopped):
        if not complete:
            unfinished.append(why)
        print(f"portcheck: {why}" + ("; the other workers checked every case" if complete else ""),
              file=sys.stderr, flush=True)
    return status


def _gpu_memory(target: str) -> int | None:
    if not runtime_target(target).is_gpu:
        return None
    import torch
    return torch.cuda.get_device_properties(0).total_memory


class _Follow:
    """The units newly recorded in a results (or timings) file since the last look: the
    supervisor's progress line, read from what the workers append."""

    def __init__(self, path: Path, target: str, units: list[str] | None):
        self.path, self.target = path, target
        self.units = set(units) if units is not None else None
        self.offset, self.seen = 0, set()

    def new(self) -> int:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:
            return 0
        complete = chunk[:chunk.rfind(b"\n") + 1]
        self.offset += len(complete)
        before = len(self.seen)
        for line in complete.splitlines():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            if r.get("target") != self.target or r.get("kind", "runtime") != "runtime":
                continue
            case, dtype = r.get("case", ""), r.get("dtype", "")
            if self.units is None:   # timings: one per case x dtype
                self.seen.add(workers.unit_key(case, dtype))
            else:                    # a unit's record, or (--as-arch) its first arch's
                keys = (workers.unit_key(case, dtype), workers.unit_key(case, dtype, r.get("arch")))
                self.seen.update(k for k in keys if k in self.units)
        return len(self.seen) - before


def _child_argv(args, target: str, seed: int, results_path: Path) -> list[str]:
    argv = ["run", "--target", target, "--seed", str(seed), "--worker", str(results_path)]
    for flag in ("matrix", "cases", "kernel", "dtype", "profile", "replay", "as_arch", "shard"):
        value = getattr(args, flag)
        if value:
            argv += [f"--{flag.replace('_', '-')}", value]
    if args.timeout is not None:   # the worker stops shrinking before the supervisor's limit
        argv += ["--timeout", repr(args.timeout)]
    if args.shrink_time is not None:
        argv += ["--shrink-time", repr(args.shrink_time)]
    if args.no_time:
        argv.append("--no-time")
    if args.raw_interpreter:
        argv.append("--raw-interpreter")
    return argv + _checks(args).flags()


def _replay_flags(args) -> list[str]:
    """What a printed replay repeats of this command line beyond the checks (a worker's one target)."""
    from ..runner import replay_flags
    return replay_flags(args.target, args.raw_interpreter, args.matrix, args.profile)


def _checks(args):
    from ..runner import Checks
    return Checks(guards=not args.no_guards, launches=args.launches, sanitize=args.sanitize)


def _work_list(args, selected, dtypes) -> list[tuple]:
    """The run's units in order: (case, dtype, group of archs or None), each checked by one
    worker; under --as-arch, each group of archs that make the same launches (as_arch.groups)
    in turn; a replay: its spec's dtype only; --shard: its part (workers.shard)."""
    spec = getattr(args, "replay_spec", None)
    pairs = [(c, d) for c in selected for d in c.dtypes
             if (dtypes is None or d in dtypes) and (spec is None or spec.get("dtype") == d)]
    groups = getattr(args, "as_arch_groups", None) or [None]
    return workers.shard([(c, d, g) for g in groups for c, d in pairs], args.shard,
                         lambda u: (u[0].name, u[2] and tuple(a.name for a in u[2])))


def _key(case, dtype: str, group) -> str:
    return workers.unit_key(case.name, dtype, group[0].name if group else None)


def _keys(args, selected, dtypes) -> list[str]:
    return [_key(c, d, g) for c, d, g in _work_list(args, selected, dtypes)]


def _units(args, selected, dtypes) -> list[tuple[str, str]]:
    """Every case x dtype the run checks, by name (a sanitizer's workers take one each)."""
    return [(c.name, d) for c, d, _ in _work_list(args, selected, dtypes)]


def _one_unit_command(args, target: str, seed: int):
    """The worker command that checks one case x dtype (untimed: timing under a sanitizer means
    nothing) into a given results file."""
    def command(case: str, dtype: str, results_path: Path, slot: int) -> list[str]:
        one = argparse.Namespace(**{**vars(args), "kernel": case, "dtype": dtype, "no_time": True, "shard": None})
        return [*PORTCHECK, *_child_argv(one, target, seed, results_path),
                "--worker-slot", str(slot)]
    return command


def _timings_path(results_path: Path, target: str) -> Path:
    return Path(results_path).with_name(f".{target}.timings.jsonl")


def _passed_units(results_path: Path, target: str, selected) -> list[tuple[str, str]]:
    """The cases x dtypes that passed on the target and have a bench spec to time."""
    benched = {c.name for c in selected if c.bench}
    return [(r["case"], r["dtype"]) for r in (results.read(results_path) if results_path.exists() else [])
            if r.get("kind") == "runtime" and r.get("target") == target and r.get("verdict") == "pass"
            and r.get("evidence") != "as-arch" and r["case"] in benched]


def _in_unit_order(results_path: Path, targets: list[str], args, selected, dtypes) -> list[dict]:
    """The run's records with each target's times folded in, rewritten in the order of the units
    (whichever worker made them, whenever): what the report shows and the file holds."""
    if not results_path.exists():
        return []
    records = results.read(results_path)
    for target in targets:
        timings = _timings_path(results_path, target)
        if not timings.exists():
            continue
        times = {(t["case"], t["dtype"]): t for t in results.read(timings)}
        for r in records:
            t = times.get((r.get("case"), r.get("dtype")))
            if t is not None and r.get("target") == target and r.get("evidence") != "as-arch":
                r["time_ms"] = t["time_ms"]
                phases = r.setdefault("phases", {})   # the check's warm-up, then the timing
                phases["timing"] = round(phases.get("timing", 0.0) + t["seconds"], 4)
                r["message"] = t["message"] or r.get("message", "")
        timings.unlink()
    ordered = workers.in_unit_order(records, targets, _record_order(args, selected, dtypes))
    results.rewrite(results_path, ordered)
    for claims in results_path.parent.glob(".claims-*"):
        shutil.rmtree(claims, ignore_errors=True)
    for go in results_path.parent.glob(".go-*"):
        go.unlink(missing_ok=True)
    return ordered


def _remember(records: list[dict], targets: list[str]) -> None:
    """Each unit's seconds, for the next run's claim order on this machine (workers.History)."""
    for target in targets:
        if not runtime_target(target).availability().ok:
            continue
        seconds = {}
        for r in records:
            if r.get("target") == target and r.get("kind") == "runtime" and r.get("phases"):
                arch = r.get("arch") if r.get("evidence") == "as-arch" else None
                seconds[workers.unit_key(r["case"], r["dtype"], arch)] = sum(r["phases"].values())
        workers.History().record(workers.history_scope(target, runtime_target(target).arch()), seconds)


def _record_order(args, selected, dtypes) -> list[str]:
    """Unit keys in run order, an as-arch unit once per arch of its group."""
    return [workers.unit_key(c.name, d, a.name if g else None)
            for c, d, g in _work_list(args, selected, dtypes) for a in (g or [None])]


def _work(args, matrix: RunPlan, target: str, selected, dtypes) -> int:
    """Worker process: fixed to one target's Triton mode; claims units one at a time (another
    worker of the run may take any of them) and appends one record per unit (per arch under
    --as-arch); with --time-only, times the cases that passed instead."""
    from ..runner import reproduce_command
    from ..session import Session
    from ..supervise import watch_supervisor
    watch_supervisor()
    results_path = Path(args.worker)
    command = shlex.join(["portcheck", "run", "--target", target, "--seed", str(args.seed)]
                         + (["--cases", args.cases] if getattr(args, "cases", None) else [])
                         + (["--kernel", args.kernel] if args.kernel else [])
                         + (["--dtype", args.dtype] if args.dtype else [])
                         + (["--as-arch", args.as_arch] if args.as_arch else [])
                         + _replay_flags(args) + _checks(args).flags())
    overrides = load_overrides(matrix.overrides) if matrix.overrides else []
    scale = TIME_SCALE[args.sanitize] if args.sanitize else 1   # as the supervisor's limit (sanitize.run_each)
    # a check never times: the supervisor's --time-only workers do, each alone on its GPU
    session = Session(target, profile=args.profile or matrix.profile, max_elements=matrix.max_elements,
                      seed=args.seed, overrides=overrides, results_path=results_path,
                      warm_bench=_timed(args, matrix, target), command=command, timeout=matrix.timeout * scale,
                      shrink_time=matrix.shrink_time * scale)
    inflight = inflight_path(results_path, target, args.worker_slot)
    if not session.availability.ok:   # the supervisor checked it; a worker says it stopped early
        raise UsageError(f"{target}: not available: {session.availability.reason}")
    if args.time_only:
        _time_work(session, results_path, target, selected, inflight,
                   Path(args.wait_for) if args.wait_for else None)
        finish(inflight, False)
        return 0
    if target == "interpreter" and args.launches > 1:
        from ..targets.interpreter_order import check_supported
        check_supported()   # launches after the first shuffle the programs' order
    claims = workers.Claims(workers.claims_folder(results_path, target))
    provenance = session.provenance()
    failed = False
    for module, why in registry.LOAD_ERRORS.items():   # a module that does not import fails alone
        failed = True
        if claims.take(f"module:{module}"):
            results.append(results_path, results.Result(
                "runtime", module, module.rsplit(".", 1)[-1], "-", target, session.arch, "error",
                "gpu" if session.target.is_gpu else "interpreter",
                message=f"kernel module does not import: {why}", provenance=provenance).to_dict())
            print(f"{target}/{session.arch} {module}: does not import: {why}", flush=True)
    spec = getattr(args, "replay_spec", None)
    seconds = workers.History().seconds(workers.history_scope(target, session.arch))
    units = workers.longest_first(_work_list(args, selected, dtypes), seconds, lambda u: _key(*u))
    poles = _poles(seconds, [_key(*u) for u in units])
    for case, dtype, group in units:
        if not claims.take(_key(case, dtype, group)):
            continue
        arch = group[0].name if group else session.arch
        state = {"case": case.name, "family": case.family, "dtype": dtype, "arch": arch,
                 "started": time.time(), "provenance": provenance,
                 **({"evidence": "as-arch", "as_arch": _as_arch_field(group, session.arch)} if group else {}),
                 "reproduce": reproduce_command(target, case.name, dtype, None,
                                                as_arch=group[0].name if group else None)}
        announce(inflight, state)

        def on_example(example, failed=None, state=state):
            announce(inflight, {**state, "spec": example, **({"failed": failed} if failed else {})})

        pole = _key(case, dtype, group) in poles
        if poles and not pole and session.target.is_gpu:
            workers.yield_to_poles()   # the poles' warm-up threads get the CPUs first
        found = (session.run_as_arch(case, dtype, group, spec=spec, on_example=on_example, pole=pole) if group
                 else [session.run(case, dtype, spec=spec, on_example=on_example, pole=pole)])
        inflight.unlink(missing_ok=True)
        for r in found:
            failed |= not r.passed
            _print_result(target, session.arch, r)
        # after every unit (a synchronize and a tiny kernel): an error, or a bench launch that
        # broke the context after the check passed, must not fail the next unit in this process
        if session.target.is_gpu and not gpu_context_ok():
            print(f"{target}: the GPU context is unusable after this case; restarting the worker", flush=True)
            sys.exit(EXIT_CONTEXT_LOST)
    finish(inflight, failed)   # the only normal end: any other exit is a fault of the case in flight
    return 1 if failed else 0


def _poles(seconds: dict, keys: list[str]) -> set[str]:
    """The run's long poles (portcheck.precompile.is_pole) by the seconds its units took last
    time, shared among the run's workers (all of them, on every GPU)."""
    known = {k: s for k in keys if isinstance(s := seconds.get(k), (int, float))}
    total, processes = sum(known.values()), workers.run_processes()
    return {k for k, s in known.items() if precompile.is_pole(s, total, processes)}


def _as_arch_field(group: list, local: str) -> dict:
    """A record's as_arch field before the check has run (what a fault record carries)."""
    from ..as_arch import Notes, record
    return record(group[0], group, local, Notes(), [])


def _print_result(target: str, local_arch: str, r) -> None:
    forced = f" as {r.arch:<8}" if r.evidence == "as-arch" else ""
    extra = f" {r.metrics['max_ulp']:.3g} ulp" if r.verdict != "error" and r.metrics and not forced else ""
    if r.verdict == "pass" and extra and math.isfinite(r.metrics.get("worst_ratio", math.inf)):
        # ULPs near a cancelled (near-zero) output run large while within its tolerance: the ratio says so
        extra += f", {r.metrics['worst_ratio']:.2g} of tolerance"
    if (r.verdict == "fail" and extra and r.metrics.get("worst_ratio") == math.inf
            and math.isfinite(r.metrics["max_ulp"]) and "differ bitwise" in r.message):
        extra = " bitwise"   # an exact output (codes, integers) differs: its ULPs would be another output's
    if r.verdict == "fail" and extra and r.metrics.get("max_ulp") == 0:
        extra = ""   # every value right (a write out of bounds, a NaN where none belongs): the message says what
    print(f"{target}/{local_arch}{forced} {r.case:<24} {r.dtype:<8} {r.verdict:<6}{extra}"
          f"{'  ' + r.message if r.verdict != 'pass' else ''}", flush=True)
    if r.verdict == "pass" and r.message:   # a check that did not run as it does elsewhere
        print(f"    note: {r.message}", flush=True)
    for line in failure_lines(r):
        print(f"    {line}", flush=True)


def _time_work(session, results_path: Path, target: str, selected, inflight: Path, go: Path | None) -> None:
    """A --time-only worker: the median time of each passed case x dtype that no other timing
    worker claimed, appended to the target's timings file (folded into the records at the end);
    started with the checks (`go`: its --wait-for file), once the supervisor lets it."""
    if go is not None and not _wait_for_go(go):
        return
    claims = workers.Claims(workers.claims_folder(results_path, target, "time"))
    by_name = {c.name: c for c in selected}
    timings = _timings_path(results_path, target)
    for name, dtype in _passed_units(results_path, target, selected):
        if not claims.take(workers.unit_key(name, dtype)):
            continue
        announce(inflight, {"case": name, "dtype": dtype, "arch": session.arch, "started": time.time(),
                            "timing": True})
        ms, message, seconds = session.measure(by_name[name], dtype)
        results.append(timings, {"case": name, "dtype": dtype, "target": target, "time_ms": ms,
                                 "seconds": seconds, "message": message})
        inflight.unlink(missing_ok=True)
        if session.target.is_gpu and not gpu_context_ok():   # the next case gets a fresh context
            sys.exit(EXIT_CONTEXT_LOST)
