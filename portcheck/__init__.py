"""portcheck: compile, check against float64 oracles and time Triton kernels on NVIDIA, AMD and
the CPU interpreter.

The public API is small: declare a `Case` next to a kernel and `register()` it; portcheck's
pytest plugin, `portcheck run` and the reports then treat it like the built-in kernels.
Importing portcheck imports no kernel, so the interpreter mode can still be chosen.
"""
__version__ = "0.1.0"

from .adapters import allocating_launcher, oracle_from_torch  # noqa: E402
from .cases import Case, Cost, Variant, all_cases, get, register  # noqa: E402
from .dtypes import fmt  # noqa: E402
from .tolerance import Tolerance, exact, rounding  # noqa: E402

__all__ = ["Case", "Cost", "Variant", "Tolerance", "all_cases", "allocating_launcher", "exact", "fmt", "get",
           "oracle_from_torch", "register", "rounding", "__version__"]
