"""The same pytest integration as the built-in kernels, limited to this repository's cases:
runtime checks (`pytest --target=interpreter`, cuda, rocm) and, with `--target=compile` (or a
GPU target whose GPU is absent), every launch cross-compiled for each arch."""
from portcheck.testing import test_portcheck_case, test_portcheck_compile  # noqa: F401

PORTCHECK_CASES = ["example_*"]   # only the cases this repository owns
