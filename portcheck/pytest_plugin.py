"""portcheck's pytest plugin (registered through the pytest11 entry point).

    pytest --target=cuda|rocm|interpreter|auto [--arch=sm_90a,...] [--require-device]
           [--portcheck-report=DIR] [--matrix=FILE] [--portcheck-profile=ci|dev|thorough]
           [--bench]

With pytest-xdist (-n N) on a GPU target every worker owns one GPU (portcheck/pinning.py);
`--bench` times each case's bench specs (tests that take `portcheck_bench_spec`, see
tests/test_bench_kernels.py) and writes bench.md next to the results.

Any test that takes the `portcheck_case` argument is run once per registered case x dtype;
`from portcheck.testing import test_portcheck_case` in a test module is all a repository needs.
"""
from __future__ import annotations

import os
import random
import shlex
import sys
from pathlib import Path

import pytest

from .errors import UsageError
from .matrix import PROFILES, Matrix
from .targets.archs import ARCHS
from .targets.runtime import INTERPRETER_ARCH, RUNTIME_TARGETS, resolve, select_mode

TARGET_CHOICES = (*RUNTIME_TARGETS, "auto")


def pytest_addoption(parser):
    g = parser.getgroup("portcheck", "portcheck: Triton kernels against float64 oracles")
    g.addoption("--target", default="auto", choices=TARGET_CHOICES,
                help="where kernels run: cuda, rocm, interpreter, or auto (the GPU if present, "
                     "else the interpreter)")
    g.addoption("--arch", default=None, help="comma list of archs to keep (e.g. sm_90a,gfx942)")
    g.addoption("--require-device", action="store_true",
                help="an absent device is an error, not a skip")
    g.addoption("--portcheck-report", default=None, metavar="DIR",
                help="write results.jsonl and matrix.md for the run into DIR")
    g.addoption("--matrix", default=None, help="matrix file (default: matrices/default.toml if present)")
    g.addoption("--portcheck-profile", default=None, choices=PROFILES,
                help="hypothesis profile (default: ci when CI is set, else dev)")
    g.addoption("--portcheck-seed", default=None, type=int, help="session seed (default: random)")
    g.addoption("--bench", action="store_true",
                help="benchmark each case's bench specs on the GPU target (ceilings, baselines, "
                     "roofline); with -n N each xdist worker owns one GPU")


class _State:
    """What the plugin decided at configure time, shared by the fixture and the hooks."""

    def __init__(self, config):
        from . import matrix as matrix_mod
        from .overrides import load as load_overrides
        opt = config.getoption
        self.requested = opt("--target")
        self.target = resolve(self.requested)
        root = Path(str(config.rootpath))
        path = opt("--matrix") or (root / "matrices/default.toml")
        self.matrix = matrix_mod.load(path) if Path(path).exists() or opt("--matrix") else Matrix(Path("-"))
        self.overrides = load_overrides(self.matrix.overrides) if self.matrix.overrides else []
        self.archs = None
        if opt("--arch"):
            self.archs = [a.strip() for a in opt("--arch").split(",") if a.strip()]
            for a in self.archs:
                if a not in ARCHS and a != INTERPRETER_ARCH:
                    raise UsageError(f"--arch: unknown arch {a!r}; known: {', '.join(ARCHS)}, "
                                     f"{INTERPRETER_ARCH}")
        self.profile = opt("--portcheck-profile") or ("ci" if os.environ.get("CI") else self.matrix.profile)
        workerinput = getattr(config, "workerinput", None)
        self.seed = (workerinput or {}).get("portcheck_seed", opt("--portcheck-seed"))
        if self.seed is None:
            self.seed = random.randrange(2**31)
        report = opt("--portcheck-report")
        self.report_dir = Path(report) if report else None
        self.is_controller = workerinput is None
        self.session = None

    def get_session(self):
        if self.session is None:
            from .session import Session
            self.session = Session(
                self.target, profile=self.profile, max_elements=self.matrix.max_elements,
                seed=self.seed, overrides=self.overrides,
                results_path=self.report_dir / "results.jsonl" if self.report_dir else None,
                command=shlex.join(["pytest", *sys.argv[1:]]))
        return self.session


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
    if config.getoption("--require-device"):
        avail = TARGETS[state.target].availability()
        if not avail.ok or not TARGETS[state.target].is_gpu:
            why = avail.reason if not avail.ok else "the interpreter is not a device"
            raise pytest.UsageError(f"--require-device: target {state.requested!r} resolved to "
                                    f"{state.target}, which has no device here: {why}")
    select_mode(state.target)
    try:
        _configure_gpus(config, state)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    if state.report_dir and state.is_controller:
        state.report_dir.mkdir(parents=True, exist_ok=True)
        for name in ("results.jsonl", "matrix.md", "bench.md"):
            (state.report_dir / name).unlink(missing_ok=True)
    config._portcheck = state


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


def pytest_generate_tests(metafunc):
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
    from .benchrun import plan, spec_label
    state = metafunc.config._portcheck
    chosen = cases.select(state.matrix.kernels or None)
    work = plan(chosen, state.matrix.bench, state.matrix.dtypes or None)
    metafunc.parametrize("portcheck_bench_spec", [
        pytest.param((c.name, spec), id=f"{c.name}-{spec_label(spec).replace(' ', '-')}") for c, spec in work])


@pytest.fixture(scope="session")
def portcheck_bench(request):
    """This process's benchmark runner (its GPU's ceilings are measured on first use)."""
    state = request.config._portcheck
    if state.archs is not None:
        from .targets.runtime import TARGETS
        arch = TARGETS[state.target].arch()
        if arch not in state.archs:
            pytest.skip(f"this machine's arch {arch} is not in --arch={','.join(state.archs)}")
    from .benchrun import BenchRunner
    return BenchRunner(state.target, state.matrix.bench,
                       results_path=state.report_dir / "results.jsonl" if state.report_dir else None,
                       command=shlex.join(["pytest", *sys.argv[1:]]))


@pytest.fixture(scope="session")
def portcheck_session(request):
    """The Session for this run's target; skips (or errors, with --require-device) without one."""
    state = request.config._portcheck
    session = state.get_session()
    if not session.availability.ok:
        pytest.skip(f"target {state.target} not available: {session.availability.reason}")
    if state.archs is not None and session.arch not in state.archs:
        pytest.skip(f"this machine's arch {session.arch} is not in --arch={','.join(state.archs)}")
    return session


def pytest_sessionfinish(session, exitstatus):
    state = getattr(session.config, "_portcheck", None)
    if state is None or not state.is_controller or state.report_dir is None:
        return
    path = state.report_dir / "results.jsonl"
    if path.exists():
        from .report import atomic_write, markdown
        from .results import read
        atomic_write(state.report_dir / "matrix.md", markdown(read(path), f"pytest --target={state.target}"))
        records = read(path)
        if any(r.get("kind") == "bench" for r in records):
            from .bench_report import bench_matrix
            atomic_write(state.report_dir / "bench.md", f"# pytest --bench\n\n{bench_matrix(records)}")
