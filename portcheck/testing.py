"""The test a repository imports to check every registered case on the chosen target:

    from .testing import test_portcheck_case  # noqa: F401

and, for the cross-compilation matrix (every case x compile variant x arch, no GPU needed):

    from .testing import test_portcheck_compile  # noqa: F401
"""
import warnings

import pytest

from . import cases
from .reports.failure import failure_lines


def test_portcheck_case(portcheck_case, portcheck_session):
    name, dtype = portcheck_case
    if name == "<load>":
        pytest.fail(f"kernel module {dtype} does not import: {cases.LOAD_ERRORS[dtype]}", pytrace=False)
    r = portcheck_session.run(cases.get(name), dtype)
    detail = "\n  ".join([r.message, *failure_lines(r)])
    if r.verdict == "skip":
        pytest.skip(r.message)
    if r.verdict == "xfail":
        pytest.xfail(r.message)
    if r.verdict != "pass":
        pytest.fail(f"{name} {dtype} on {r.target}/{r.arch}: {r.verdict}: {detail}", pytrace=False)
    assert r.examples > 0, "a passing case must have checked at least one input"


class CompileLintWarning(UserWarning):
    """A warning-severity compile finding (spills, no matrix instruction, an ignored option)."""


def test_portcheck_compile(portcheck_compile, portcheck_compile_records):
    if portcheck_compile[0] == "<load>":
        module = portcheck_compile[1]
        pytest.fail(f"kernel module {module} does not import: {cases.LOAD_ERRORS[module]}", pytrace=False)
    r = portcheck_compile_records[portcheck_compile]
    where = f"{r.case} [{r.variant}] on {r.arch} (triton {r.provenance.get('triton')})"
    if r.verdict == "skip":
        pytest.skip(f"{where}: {r.message}")
    if r.verdict == "xfail":
        pytest.xfail(f"{where}: {r.message}")
    if r.verdict != "pass":
        found = "".join(f"\n  {f['severity']} {f['rule']}: {f['message']}" for f in r.lints
                        if f["severity"] == "error")
        pytest.fail(f"{where}: {r.verdict}: {r.message}{found}\n  reproduce: {r.reproduce}", pytrace=False)
    m = r.metrics
    assert m["compiled"], f"{where}: a passing compile record must say it compiled"
    assert m.get("registers") or m.get("note"), f"{where}: no register count and no reason why"
    assert m.get("num_warps", 0) * m.get("warp_size", 0) == m.get("threads"), f"{where}: inconsistent threads"
    for f in r.lints:
        if f["severity"] == "warning":
            warnings.warn(CompileLintWarning(f"{where}: {f['rule']}: {f['message']}"), stacklevel=1)
