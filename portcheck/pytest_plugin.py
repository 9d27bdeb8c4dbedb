"""portcheck's pytest plugin (registered through the pytest11 entry point).

    pytest --target=cuda|rocm|interpreter|auto|compile [--arch=sm_90a,...] [--require-device]
           [--portcheck-report=DIR] [--matrix=FILE] [--portcheck-profile=ci|dev|thorough]
           [--bench]

With pytest-xdist (-n N) on a GPU target every worker owns one GPU (portcheck/pinning.py);
`--bench` times each case's bench specs (tests that take `portcheck_bench_spec`, see
tests/kernels/test_bench_kernels.py) and writes bench.md next to the results.

Any test that takes the `portcheck_case` argument is run once per registered case x dtype;
`from portcheck.testing import test_portcheck_case` in a test module is all a repository needs.

Any test that takes `portcheck_compile` is run once per case x compile variant x arch when this
run cross-compiles: with --target=compile (all archs, or --arch), with --target=cuda or rocm on a
machine without that vendor's GPU (that vendor's archs: the run says plainly that nothing ran on
its hardware), and with --target=auto on a machine with no GPU at all. The whole compile matrix
is built once per session in worker processes; `test_portcheck_compile` reads its records.
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

import pytest

from .speed.schedule import UnitClock
from .errors import UsageError
from .matrix import PROFILES
from .sanitize import TOOLS
from .facts.archs import ARCHS
from .targets.runtime import INTERPRETER_ARCH, RUNTIME_TARGETS, resolve, select_mode

TARGET_CHOICES = (*RUNTIME_TARGETS, "auto", "compile")


_STATE: dict = {}


def pytest_addoption(parser):
    g = parser.getgroup("portcheck", "portcheck: Triton kernels against float64 oracles")
    g.addoption("--target", default="auto", choices=TARGET_CHOICES,
                help="where kernels run: cuda, rocm, interpreter, or auto (the GPU if present, "
                     "else the interpreter); compile: cross-compile for every arch, run nothing")
    g.addoption("--arch", default=None, help="comma list of archs to keep (e.g. sm_90a,gfx942)")
    g.addoption("--require-device", action="store_true",
                help="an absent device is an error, not a skip")
    g.addoption("--portcheck-report", default=None, metavar="DIR",
                help="write results.jsonl and matrix.md for the run into DIR")
    g.addoption("--matrix", default=None, help="matrix file (default: matrices/default.toml if present, "
                                               "else the one shipped with portcheck)")
    g.addoption("--cases", default=None, metavar="MODULES",
                help="comma list of modules that register cases, besides the matrix's case_modules")
    g.addoption("--portcheck-profile", default=None, choices=PROFILES,
                help="hypothesis profile (default: ci when CI is set, else dev)")
    g.addoption("--portcheck-seed", default=None, type=int,
                help="session seed (default: 0 under a derandomized profile such as ci, else random)")
    g.addoption("--as-arch", default=None, metavar="ARCHS",
                help="comma list of archs, or all: check each case with its launches configured as on "
                     "that arch, run on --target (evidence X); a test fails with the worst arch's record")
    g.addoption("--raw-interpreter", action="store_true",
                help="run the interpreter without portcheck's bf16/fp8/libdevice numerics layer")
    g.addoption("--portcheck-launches", default=2, type=int, metavar="N",
                help="launch each example N times on the same inputs; the outputs must match bit for "
                     "bit unless the case is declared nondeterministic (default: 2)")
    g.addoption("--portcheck-no-guards", action="store_true",
                help="no guard bands around outputs and inputs: to diagnose the guards only")
    g.addoption("--portcheck-sanitize", default=None, choices=TOOLS, metavar="TOOL",
                help="run each case x dtype in its own process under a GPU checker (cuda: memcheck, "
                     "racecheck, initcheck, synccheck; rocm: address), as `portcheck run --sanitize` does")
    g.addoption("--portcheck-fail-on", default=None, choices=("error", "warning"),
                help="cross-compiling: the least lint severity that fails a compile item "
                     "(default: the matrix's [compile] fail_on, else error)")
    g.addoption("--bench", action="store_true",
                help="benchmark each case's bench specs on the GPU target (ceilings, baselines, "
                     "roofline); with -n N each xdist worker owns one GPU")


class _State:
    """What the plugin decided at configure time, shared by the fixture and the hooks."""

    def __init__(self, config):
        from .commands._common import DEFAULT_MATRIX, load_cases, load_run_plan
        from .overrides import load as load_overrides
        opt = config.getoption
        self.requested = opt("--target")
        self.target = "compile" if self.requested == "compile" else resolve(self.requested)
        root = Path(str(config.rootpath))
        self.matrix = load_run_plan(opt("--matrix"), default=root / DEFAULT_MATRIX)
        load_cases(argparse.Namespace(cases=opt("--cases")), self.matrix)
        self.overrides = load_overrides(self.matrix.overrides) if self.matrix.overrides else []
        self.archs = None
        if opt("--arch"):
            self.archs = [a.strip() for a in opt("--arch").split(",") if a.strip()]
            for a in self.archs:
                if a not in ARCHS and a != INTERPRETER_ARCH:
                    raise UsageError(f"--arch: unknown arch {a!r}; known: {', '.join(ARCHS)}, "
                                     f"{INTERPRETER_ARCH}")
        self.as_arch = None   # groups of archs that make the same launches (portcheck.as_arch)
        if opt("--as-arch"):
            from .as_arch import groups, parse
            self.as_arch = groups(parse(opt("--as-arch")))
        self.profile = opt("--portcheck-profile") or ("ci" if os.environ.get("CI") else self.matrix.profile)
        workerinput = getattr(config, "workerinput", None)
        self.seed = (workerinput or {}).get("portcheck_seed", opt("--portcheck-seed"))
        if self.seed is None:
            from .strategies import session_seed
            self.seed = session_seed(self.profile)
        report = opt("--portcheck-report")
        self.report_dir = Path(report) if report else None
        self.is_controller = workerinput is None
        self.bench = bool(opt("--bench"))
        self.sanitize = opt("--portcheck-sanitize")
        self.fail_on = opt("--portcheck-fail-on")   # None: the matrix's [compile] fail_on
        self.unit_clock = UnitClock()        # wall time per benchmark unit: the next run's order
        self.session = None
        # after each runtime case on a GPU: does its context still work? (tests put a fake here)
        from .supervise import gpu_context_ok
        self.context_check = gpu_context_ok if self.target in ("cuda", "rocm") else None
        self.context_lost_after = None       # the test whose kernel left the context unusable
        self.compile_tasks: dict = {}        # task key -> Task, filled at collection
        self._compile_plans: dict = {}
        self._compile_archs = None

    def get_session(self):
        if self.session is None:
            from .session import Session
            self.session = Session(
                self.target, profile=self.profile, max_elements=self.matrix.max_elements,
                seed=self.seed, overrides=self.overrides,
                results_path=self.report_dir / "results.jsonl" if self.report_dir else None,
                command=shlex.join(["pytest", *sys.argv[1:]]), timeout=self.matrix.timeout,
                shrink_time=self.matrix.shrink_time)
            if self.as_arch:
                from .session import AsArchSession
                self.session = AsArchSession(self.session, self.as_arch)
            if self.sanitize:
                from .runner import CHECKS
                from .sanitize import SanitizedSession
                matrix = ["--matrix", str(self.matrix.path)] if Path(self.matrix.path).is_file() else []
                self.session = SanitizedSession(self.session, self.sanitize, [*matrix, *CHECKS.flags()])
            if self.context_check is not None:
                self.session = _Remembering(self.session)
        return self.session


class _Remembering:
    """A session that keeps the case, dtype and input its last check was on: the failure of a
    case whose kernel leaves the GPU context unusable names them, with its replay."""

    def __init__(self, session):
        self._session = session
        self.last: dict | None = None

    def __getattr__(self, name):
        return getattr(self._session, name)

    def run(self, case, dtype: str, spec: dict | None = None, on_example=None):
        self.last = {"case": case.name, "family": case.family, "dtype": dtype, "spec": spec}

        def seen(example, failed=None):
            self.last["spec"] = example
            if on_example is not None:
                on_example(example, failed=failed)
        return self._session.run(case, dtype, spec=spec, on_example=seen)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    """Fix the Triton mode before any conftest is imported: a conftest that imports kernels
    decorates them at import time, in whichever mode is set then."""
    known = early_config.known_args_namespace
    requested = getattr(known, "target", "auto")
    try:
        target = "compile" if requested == "compile" else resolve(requested)
        select_mode(target, raw_interpreter=bool(getattr(known, "raw_interpreter", False)))
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    # first, before anything here can initialise the GPU runtime: an xdist worker takes its GPU
    from .pinning import pin_worker
    try:
        pin_worker(getattr(config, "workerinput", None))
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.addinivalue_line("markers", "portcheck: a kernel case checked by portcheck")
    try:
        state = _State(config)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    from .targets.runtime import TARGETS
    if state.target == "compile" and (config.getoption("--require-device")
                                      or getattr(config.option, "bench", False)):
        raise pytest.UsageError("--target=compile cross-compiles and runs nothing: it takes neither "
                                "--require-device nor --bench")
    if config.getoption("--require-device"):
        avail = TARGETS[state.target].availability()
        if not avail.ok or not TARGETS[state.target].is_gpu:
            why = avail.reason if not avail.ok else "the interpreter is not a device"
            raise pytest.UsageError(f"--require-device: target {state.requested!r} resolved to "
                                    f"{state.target}, which has no device here: {why}")
    try:
        select_mode(state.target, raw_interpreter=config.getoption("--raw-interpreter"))
        from .runner import Checks, configure, replay_flags
        replay = replay_flags(state.target, config.getoption("--raw-interpreter"), config.getoption("--matrix"),
                              config.getoption("--portcheck-profile"))
        configure(Checks(guards=not config.getoption("--portcheck-no-guards"),
                         launches=config.getoption("--portcheck-launches"), sanitize=state.sanitize), replay)
        if state.sanitize and state.target != "compile":
            from .sanitize import for_target
            for_target(state.target, state.sanitize)   # no tool, or not a GPU: stop before collecting
        if state.target != "compile":
            _configure_gpus(config, state)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    if state.report_dir and state.is_controller:
        if state.report_dir.exists() and not state.report_dir.is_dir():
            raise pytest.UsageError(f"--portcheck-report={state.report_dir} is a file; it takes a directory")
        if (state.report_dir / "run.json").exists():   # a `portcheck run` directory: not ours to replace
            raise pytest.UsageError(f"--portcheck-report={state.report_dir} is a `portcheck run` directory; "
                                    "choose a new directory for this session's report")
        try:
            state.report_dir.mkdir(parents=True, exist_ok=True)
            # this session's report only: a report made there before from other results goes too
            for name in ("results.jsonl", "matrix.md", "matrix.html", "matrix.json", "bench.md"):
                (state.report_dir / name).unlink(missing_ok=True)
        except OSError as exc:
            raise pytest.UsageError(f"--portcheck-report={state.report_dir}: cannot write there: "
                                    f"{exc.strerror or exc}") from None
    config._portcheck = state
    _STATE["state"] = state     # for hooks that are not handed the config


def _configure_gpus(config, state) -> None:
    """--bench needs a device; the xdist controller lists the GPUs its workers will own."""
    from .pinning import check_worker_count, visible_devices, workerinput_entry
    from .targets.runtime import TARGETS
    bench = config.getoption("--bench")
    target = TARGETS[state.target]
    if bench:
        avail = target.availability()
        if not target.is_gpu or not avail.ok:
            why = avail.reason if not avail.ok else "the interpreter is not a device"
            raise UsageError(f"--bench: target {state.requested!r} resolved to {state.target}, "
                             f"which has no device to time kernels on: {why}")
        workerinput = getattr(config, "workerinput", None) or {}
        if workerinput.get("portcheck_report_dir"):
            state.report_dir = Path(workerinput["portcheck_report_dir"])
        elif state.report_dir is None and state.is_controller:
            from .commands._common import timestamped
            state.report_dir = timestamped("reports")
    state.gpu_handout = None
    workers = len(config.getoption("tx", None) or []) if config.getoption("dist", "no") != "no" else 0
    if state.is_controller and workers and target.is_gpu:
        devices = visible_devices(target.vendor)
        if bench:
            check_worker_count(workers, devices)
        if devices:
            state.gpu_handout = workerinput_entry(target.vendor, devices, exclusive=bench)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):  # xdist: every worker uses the controller's session seed
    node.workerinput["portcheck_seed"] = node.config._portcheck.seed
    state = node.config._portcheck
    if getattr(state, "gpu_handout", None):     # and owns the GPU picked by its worker id
        from .pinning import WORKERINPUT_KEY
        node.workerinput[WORKERINPUT_KEY] = state.gpu_handout
    if node.config.getoption("--bench") and state.report_dir is not None:
        node.workerinput["portcheck_report_dir"] = str(state.report_dir)


def dist_given(config) -> bool:
    """Whether the user chose an xdist scheduling (--dist / -d on the command line, in
    PYTEST_ADDOPTS or in the ini's addopts)."""
    args = [*config.invocation_params.args, *shlex.split(os.environ.get("PYTEST_ADDOPTS", "")),
            *config.getini("addopts")]
    return any(a in ("--dist", "-d") or a.startswith("--dist=") for a in map(str, args))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Benchmarks over GPUs go out by unit, longest first, unless --dist says otherwise
    (portcheck/speed/schedule.py)."""
    if not config.getoption("--bench") or dist_given(config):
        return None
    from .speed.schedule import make_scheduler
    return make_scheduler(config, log)


def pytest_generate_tests(metafunc):
    if "portcheck_compile" in metafunc.fixturenames:
        _parametrize_compile(metafunc)
    if "portcheck_bench_spec" in metafunc.fixturenames:
        _parametrize_bench(metafunc)
    if "portcheck_case" not in metafunc.fixturenames:
        return
    from . import cases
    state = metafunc.config._portcheck
    # a test module may name the cases it owns (PORTCHECK_CASES = ["mine_*"]); else the matrix's
    chosen = cases.select(getattr(metafunc.module, "PORTCHECK_CASES", None) or state.matrix.kernels or None)
    params = [pytest.param((c.name, d), id=f"{c.name}-{d}", marks=pytest.mark.portcheck)
              for c in chosen for d in c.dtypes if not state.matrix.dtypes or d in state.matrix.dtypes]
    # a kernel module that does not import is one failing test, not a broken collection
    params += [pytest.param(("<load>", module), id=f"load-{module}") for module in cases.LOAD_ERRORS]
    metafunc.parametrize("portcheck_case", params)


def _parametrize_bench(metafunc) -> None:
    """One benchmark per (case, bench spec) of the matrix; a single skipped item without --bench."""
    if not metafunc.config.getoption("--bench"):
        metafunc.parametrize("portcheck_bench_spec", [pytest.param(
            None, id="needs-bench", marks=pytest.mark.skip(reason="benchmarks run with --bench on a GPU target"))])
        return
    from . import cases
    from .speed.schedule import CACHE_KEY, longest_first, param_id
    from .speed.runner import plan, spec_label
    state = metafunc.config._portcheck
    chosen = cases.select(state.matrix.kernels or None)
    work = plan(chosen, state.matrix.bench, state.matrix.dtypes or None)
    cache = getattr(metafunc.config, "cache", None)   # absent under -p no:cacheprovider
    work = longest_first(work, cache.get(CACHE_KEY, {}) if cache is not None else {})
    metafunc.parametrize("portcheck_bench_spec", [
        pytest.param((c.name, spec), id=param_id(c.name, spec_label(spec))) for c, spec in work])


@pytest.fixture(scope="session")
def portcheck_bench(request):
    """This process's benchmark runner (its GPU's ceilings are measured on first use)."""
    state = request.config._portcheck
    if state.archs is not None:
        from .targets.runtime import TARGETS
        arch = TARGETS[state.target].arch()
        if arch not in state.archs:
            pytest.skip(f"this machine's arch {arch} is not in --arch={','.join(state.archs)}")
    from .speed.runner import BenchRunner
    return BenchRunner(state.target, state.matrix.bench,
                       results_path=state.report_dir / "results.jsonl" if state.report_dir else None,
                       command=shlex.join(["pytest", *sys.argv[1:]]), overrides=state.overrides)


@pytest.fixture(scope="session")
def portcheck_session(request):
    """The Session for this run's target; skips (or errors, with --require-device) without one."""
    state = request.config._portcheck
    if state.target == "compile":
        pytest.skip("--target=compile cross-compiles only; runtime checks need cuda, rocm or interpreter")
    session = state.get_session()
    if not session.availability.ok:
        pytest.skip(f"target {state.target} not available: {session.availability.reason}")
    if state.archs is not None and session.arch not in state.archs:
        pytest.skip(f"this machine's arch {session.arch} is not in --arch={','.join(state.archs)}")
    return session


# ---- a case that leaves the GPU context unusable fails alone --------------------------------------

def _runs_kernels(item) -> bool:
    return bool({"portcheck_case", "portcheck_bench_spec"} & set(getattr(item, "fixturenames", ())))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """After each case that ran kernels, check the GPU context; when it is lost, this case fails
    with its input and replay (an error the kernel left behind surfaces here, not in the next
    case), and no later case runs in this process (pytest_runtest_protocol, pytest_pyfunc_call)."""
    outcome = yield
    state = _STATE.get("state")
    if (call.when != "call" or state is None or state.context_check is None or state.context_lost_after
            or not _runs_kernels(item) or state.context_check()):
        return
    state.context_lost_after = item.nodeid
    why = _context_lost(state, item)
    report = outcome.get_result()
    if report.passed:
        report.outcome, report.longrepr = "failed", why
    else:
        report.sections.append(("portcheck: GPU context", why))


def _context_lost(state, item) -> str:
    """The failure of the case after which the context is unusable; recorded in the report's
    results.jsonl as an error of that case with its input."""
    from .runner import reproduce_command
    from .supervise import fault_record
    last = getattr(state.session, "last", None) or {}
    why = "the GPU context is unusable after this case (its kernel left a sticky error)"
    if not last:
        return f"{item.nodeid}: {why}"
    record = fault_record({**last, "arch": state.session.arch,
                           "reproduce": reproduce_command(state.target, last["case"], last["dtype"], None),
                           "provenance": state.session.provenance()},
                          state.target, "gpu", why + (" on the recorded input" if last.get("spec") else ""))
    if state.report_dir is not None:
        from .results import append
        append(state.report_dir / "results.jsonl", record)
    return (f"{last['case']} {last['dtype']}: {record['message']}\n  input: {last.get('spec')}\n"
            f"  replay: {record['reproduce']}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Under pytest-xdist, the worker whose context a case lost ends once that case's reports are
    sent: xdist replaces it and hands the remaining cases to a healthy one (the crash it reports
    names this same case: the controller still counts it as running)."""
    yield
    state = _STATE.get("state")
    if state is not None and state.context_lost_after == item.nodeid and hasattr(item.config, "workerinput"):
        from .supervise import EXIT_CONTEXT_LOST
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_CONTEXT_LOST)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Without xdist the process cannot be replaced: every later case that runs kernels fails
    with the reason, rather than with the error the lost context would give it."""
    state = _STATE.get("state")
    if state is not None and state.context_lost_after and _runs_kernels(pyfuncitem):
        pytest.fail(f"GPU context lost after {state.context_lost_after}; not run here: rerun with -n N "
                    "(pytest-xdist) so that a fresh worker process takes the remaining cases", pytrace=False)


def _write_bench_report(report_dir, records) -> None:
    if any(r.get("kind") == "bench" for r in records):
        from .speed.report import bench_matrix
        from .reports.output import atomic_write
        atomic_write(report_dir / "bench.md", f"# pytest --bench\n\n{bench_matrix(records)}")


def pytest_runtest_logreport(report):
    """A benchmark run rewrites bench.md after every figure, so one cut short keeps its report;
    the controller also sums each unit's wall time for the next run's order."""
    state = _STATE.get("state")
    if (state is None or not state.is_controller or not state.bench
            or "test_portcheck_bench" not in report.nodeid):
        return
    state.unit_clock.add(report.nodeid, report.duration)
    if report.when != "call" or state.report_dir is None:
        return
    path = state.report_dir / "results.jsonl"
    if path.exists():
        from .results import read
        _write_bench_report(state.report_dir, read(path))


def pytest_sessionfinish(session, exitstatus):
    state = getattr(session.config, "_portcheck", None)
    if state is None or not state.is_controller:
        return
    if getattr(session.config, "cache", None) is not None:
        state.unit_clock.save(session.config.cache)
    if state.report_dir is None:
        return
    path = state.report_dir / "results.jsonl"
    if path.exists():
        from .reports.markdown import markdown
        from .reports.output import atomic_write
        from .results import read
        records = read(path)
        atomic_write(state.report_dir / "matrix.md", markdown(records, f"pytest --target={state.target}"))
        compiled = [r for r in records if r.get("kind") == "compile"]
        if compiled:
            from .compile.report import compile_matrix
            atomic_write(state.report_dir / "compile.md",
                         f"# pytest --target={state.target}: compile matrix\n\n" + compile_matrix(compiled))
        _write_bench_report(state.report_dir, records)


# ---- cross-compilation checks ------------------------------------------------------------------

def compile_archs(state) -> tuple[list[str], str]:
    """The archs this run cross-compiles for, and a plain sentence saying why (none: [], "")."""
    from .facts.archs import DEFAULT_ARCHS
    from .targets.runtime import TARGETS
    if state._compile_archs is not None:
        return state._compile_archs
    base = list(state.matrix.compile.archs if getattr(state.matrix, "compile", None) else DEFAULT_ARCHS)
    keep = [a for a in base if state.archs is None or a in state.archs]
    found: tuple[list[str], str] = ([], "")
    if state.target == "compile":
        found = (keep, "--target=compile: every arch checked by cross-compilation; nothing ran on a GPU")
    elif state.requested in ("cuda", "rocm") and not TARGETS[state.target].availability().ok:
        vendor, name = ("nvidia", "NVIDIA") if state.target == "cuda" else ("amd", "AMD")
        mine = [a for a in keep if ARCHS[a].vendor == vendor]
        found = (mine, f"--target={state.target}: no {name} GPU here "
                       f"({TARGETS[state.target].availability().reason}), so NOTHING RAN ON {name} "
                       f"HARDWARE; the {name} archs {', '.join(mine)} were checked by cross-compilation only")
    elif state.requested == "auto" and state.target == "interpreter":
        found = (keep, "--target=auto found no GPU: kernels ran in the CPU interpreter and every arch "
                       "was checked by cross-compilation only; nothing ran on GPU hardware")
    state._compile_archs = found
    return found


def _compile_plan(state, patterns):
    """The session's compile tasks (case x variant x arch), built once per case selection."""
    key = tuple(patterns or ())
    if key not in state._compile_plans:
        from dataclasses import replace
        from . import cases
        from .compile.capture import for_cases
        from .compile.plan import CompileSettings, plan
        settings = getattr(state.matrix, "compile", None) or CompileSettings()
        archs = compile_archs(state)[0]
        chosen = cases.select(list(patterns) if patterns else (state.matrix.kernels or None))
        need = [c for c in chosen if c.variants is None]
        tasks = plan(chosen, archs, for_cases(need, archs) if need else {}, settings.max_variants)
        state._compile_plans[key] = tasks
        state.compile_tasks.update({t.key: t for t in tasks})
        state.compile_settings = replace(settings, archs=tuple(archs),
                                         fail_on=state.fail_on or settings.fail_on)
    return state._compile_plans[key]


def _compile_id(task) -> str:
    label = "".join(ch if ch.isalnum() or ch in "._=>+" else "_" for ch in task.label)
    return f"{task.case}-{task.arch}-{label}"


def _parametrize_compile(metafunc) -> None:
    state = metafunc.config._portcheck
    if not compile_archs(state)[0]:
        metafunc.parametrize("portcheck_compile", [pytest.param(None, id="not-cross-compiling", marks=pytest.mark.skip(
            reason="cross-compiling runs with --target=compile, with --target=cuda|rocm when that GPU "
                   "is absent, or with --target=auto on a machine with no GPU"))])
        return
    tasks = _compile_plan(state, getattr(metafunc.module, "PORTCHECK_CASES", None))
    # one xdist group: the worker that gets it compiles the whole matrix in one pool
    marks = [pytest.mark.portcheck, pytest.mark.xdist_group("portcheck-compile")]
    from . import cases
    params = [pytest.param(t.key, id=_compile_id(t), marks=marks) for t in tasks]
    # a kernel module that does not import is one failing test, not a broken collection
    params += [pytest.param(("<load>", module, ""), id=f"load-{module}") for module in cases.LOAD_ERRORS]
    metafunc.parametrize("portcheck_compile", params)


@pytest.fixture(scope="session")
def portcheck_compile_records(request, tmp_path_factory):
    """task key -> Result for the compile items this session runs. The tasks are compiled once,
    in worker processes, in a background thread; under pytest-xdist the workers share the task
    list (each task claimed by one of them) and read each other's records."""
    from .compile.records import compile_tasks
    from .compile.shared import SharedRecords
    config = request.config
    state = config._portcheck
    keys = []
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        key = callspec.params.get("portcheck_compile") if callspec else None
        if key is not None and key in state.compile_tasks and key not in keys:
            keys.append(key)
    tasks = [state.compile_tasks[k] for k in keys]
    workerinput = getattr(config, "workerinput", None)
    if workerinput:     # the controller's basetemp: one directory per run, shared by its workers
        share = tmp_path_factory.getbasetemp().parent / "portcheck-compile"
        share.mkdir(exist_ok=True)
        workers = int(workerinput.get("workercount", 1))
    else:
        share, workers = tmp_path_factory.mktemp("portcheck-compile"), 1
    from dataclasses import replace
    settings = replace(state.compile_settings, jobs=max(1, state.compile_settings.jobs // workers))
    results_path = state.report_dir / "results.jsonl" if state.report_dir else None
    command = shlex.join(["pytest", *sys.argv[1:]])

    def run(claim, publish):
        from contextlib import nullcontext

        from .results import BatchedAppender
        with BatchedAppender(results_path) if results_path else nullcontext() as written:
            def keep(r):
                publish(r)
                if written is not None:
                    written.add(r.to_dict())

            compile_tasks(tasks, settings, on_result=keep, command=command, overrides=state.overrides,
                          claim=claim)
    shared = SharedRecords(str(share), tasks, run)
    request.addfinalizer(shared.join)     # every record written before the report is
    return shared


def pytest_report_header(config):
    state = getattr(config, "_portcheck", None)
    if state is None:
        return None
    from .commands._common import plan_sources
    archs, why = compile_archs(state)
    return [f"portcheck: {plan_sources(state.matrix)}"] + ([f"portcheck: {why}"] if archs else [])


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    state = getattr(config, "_portcheck", None)
    if state is None or not state.is_controller:
        return
    archs, why = compile_archs(state)
    if archs:      # (under xdist the controller collects nothing, so no test of compile_tasks)
        terminalreporter.write_sep("-", "portcheck compile")
        terminalreporter.write_line(why)
        if state.report_dir:
            terminalreporter.write_line(f"compile matrix: {state.report_dir / 'compile.md'}")
