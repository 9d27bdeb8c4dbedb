"""The repository's own pytest wiring. The portcheck plugin itself comes through the pytest11
entry point (pip install -e .); the test suite also loads it explicitly, so a plain checkout
with portcheck on PYTHONPATH works the same."""
import os
import tempfile

# The suite's `portcheck run` subprocesses keep their claim-order history (portcheck.workers.History)
# in a folder of their own: the user's cache is left alone, and no earlier run's seconds reorder the
# cases a test expects in matrix order (a hang case claimed before the case it waits for).
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="portcheck-test-cache-")
