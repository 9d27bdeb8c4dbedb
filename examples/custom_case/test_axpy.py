"""The same pytest integration as the built-in kernels, limited to this repository's cases."""
from portcheck.testing import test_portcheck_case  # noqa: F401

PORTCHECK_CASES = ["example_*"]   # only the cases this repository owns
