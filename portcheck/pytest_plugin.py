"""portcheck's pytest plugin (registered through the pytest11 entry point).

    pytest --target=cuda|rocm|interpreter|auto [--arch=sm_90a,...] [--require-device]
           [--portcheck-report=DIR] [--matrix=FILE] [--portcheck-profile=ci|dev|thorough]

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


def pytest_configure(config):
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
    if state.report_dir and state.is_controller:
        state.report_dir.mkdir(parents=True, exist_ok=True)
        for name in ("results.jsonl", "matrix.md"):
            (state.report_dir / name).unlink(missing_ok=True)
    config._portcheck = state


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):  # xdist: every worker uses the controller's session seed
    node.workerinput["portcheck_seed"] = node.config._portcheck.seed


def pytest_generate_tests(metafunc):
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
