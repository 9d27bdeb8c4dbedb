"""The test a repository imports to check every registered case on the chosen target:

    from portcheck.testing import test_portcheck_case  # noqa: F401
"""
import pytest

from . import cases


def test_portcheck_case(portcheck_case, portcheck_session):
    name, dtype = portcheck_case
    if name == "<load>":
        pytest.fail(f"kernel module {dtype} does not import: {cases.LOAD_ERRORS[dtype]}", pytrace=False)
    r = portcheck_session.run(cases.get(name), dtype)
    detail = f"{r.message}\n  replay: {r.reproduce}"
    if r.verdict == "skip":
        pytest.skip(r.message)
    if r.verdict == "xfail":
        pytest.xfail(r.message)
    if r.verdict != "pass":
        pytest.fail(f"{name} {dtype} on {r.target}/{r.arch}: {r.verdict}: {detail}", pytrace=False)
    assert r.examples > 0, "a passing case must have checked at least one input"
