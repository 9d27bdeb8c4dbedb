"""The compile matrix: every registered case x compile variant x arch, cross-compiled with no GPU.

Runs with --target=compile, with --target=cuda|rocm when that GPU is absent, and with
--target=auto on a machine with no GPU (CI). Each item fails on an error-severity finding
(shared memory / LDS over the arch's limit, too many threads, a dtype or precision the compiler
rejects, a compiler error, timeout or crash).
"""
import pytest

from portcheck import cases
from portcheck.pytest_plugin import compile_archs
from portcheck.testing import test_portcheck_compile  # noqa: F401


def test_compile_matrix_covers_every_case_on_every_arch(request):
    state = request.config._portcheck
    archs, why = compile_archs(state)
    if not archs:
        pytest.skip("this run does not cross-compile")
    # cases that declare their launches (every built-in one); a user's case without declared
    # variants is cross-compiled through capture (portcheck/compile/capture.py) instead
    chosen = [c for c in cases.select(state.matrix.kernels or None) if c.variants is not None]
    assert any(c.family == "softmax" for c in chosen)
    tasks = [t for t in state.compile_tasks.values() if t.case in {c.name for c in chosen}]
    for case in chosen:
        on = {t.arch for t in tasks if t.case == case.name}
        assert on == set(archs), f"{case.name}: no compile task on {sorted(set(archs) - on)}"
        built = {t.arch for t in tasks if t.case == case.name and "skip" not in t.payload}
        assert built, f"{case.name} builds on none of {', '.join(archs)}"
