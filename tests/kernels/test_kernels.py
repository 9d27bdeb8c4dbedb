"""The kernel suite: every registered case x dtype on the target chosen with --target."""
from portcheck.testing import test_portcheck_case  # noqa: F401
