"""The repository's own pytest wiring. The portcheck plugin itself comes through the pytest11
entry point (pip install -e .); the test suite also loads it explicitly, so a plain checkout
with portcheck on PYTHONPATH works the same."""
import os
import tempfile

# The suite's `portcheck run` subprocesses keep their claim-order history (portcheck.workers.History)
# in a folder of their own: the user's cache is left alone, and no earlier run's seconds reorder the
# cases a test expects in matrix order (a hang case claimed before the case it waits for).
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="portcheck-test-cache-")

# A failure's replay in a fresh process (portcheck.diagnose.fresh) costs a process start, about 2 s
# on the interpreter, after every failure: the suite's failures are its checks of other things, so
# it runs only where a test asks for it (tests/harness/test_diagnose.py).
os.environ.setdefault("PORTCHECK_FRESH_REPLAY", "0")
