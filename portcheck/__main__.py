import os
import sys

# `python -m portcheck` (how the supervisor starts its workers) puts the current folder first on
# the import path, where a user's random.py or json.py would shadow the standard library in
# portcheck, torch and Triton; it leaves (an empty PYTHONPATH entry names it too), as under the
# `portcheck` script, and cases.py makes it importable for --cases modules
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != os.getcwd()]

from .cli import main  # noqa: E402  after the import path is set

sys.exit(main())
