"""The repository's own pytest wiring. The portcheck plugin itself comes through the pytest11
entry point (pip install -e .); the test suite also loads it explicitly, so a plain checkout
with portcheck on PYTHONPATH works the same."""
