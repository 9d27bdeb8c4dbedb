"""`portcheck new-case NAME`: write a case module (a kernel, its launcher and the Case) and its
pytest module into the current repository, ready to run and to edit into the user's own kernel.

    portcheck new-case my_gelu [--dir kernels]
    -> kernels/my_gelu.py, kernels/test_my_gelu.py
"""
from __future__ import annotations

import importlib.util
import keyword
import string
import sys
from pathlib import Path

from ..errors import UsageError

NAME = "new-case"
HELP = "write a starting case module and its test for your own kernel into this repository"

CASE_MODULE = string.Template('''"""$name: a Triton kernel checked by portcheck (written by `portcheck new-case`; edit freely).

    portcheck run --cases $name --kernel $name --target interpreter
    pytest test_$name.py --target=interpreter
    portcheck compile --cases $name --kernel $name --arch gfx942,sm_90a
"""
import torch
import triton
import triton.language as tl

import portcheck
from portcheck import strategies as S
from portcheck import tolerance as T


@triton.jit
def ${name}_kernel(x_ptr, y_ptr, n_cols, x_stride, x_col_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)   # int64: row * stride passes 2**31 on large inputs
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * x_stride + cols * x_col_stride, mask=cols < n_cols).to(tl.float32)
    tl.store(y_ptr + row * y_stride + cols, (x * 2.0).to(y_ptr.dtype.element_ty), mask=cols < n_cols)


def launch(args, outs):
    """Write into `outs`, the buffers portcheck poisoned, so unwritten elements are caught (a
    launcher that returns its own output can be wrapped: portcheck.allocating_launcher). Both
    strides of x go to the kernel: portcheck also checks an x whose columns lie 2 apart (a
    launcher may instead refuse such input with a ValueError)."""
    x, y = args["x"], outs["y"]
    rows, cols = x.shape
    ${name}_kernel[(rows, triton.cdiv(cols, 1024))](x, y, cols, x.stride(0), x.stride(1), y.stride(0), BLOCK=1024)


CASE = portcheck.register(portcheck.Case(
    name="$name", family="$name", dtypes=("fp32", "fp16", "bf16"),
    inputs=lambda dtype, max_elements: S.row_inputs(dtype, max_elements),
    # in the spec's layout, contiguous or padded rows (NaN past each row's end), so a kernel
    # that ignores the row stride fails; keep it when you adapt this to your kernel
    make=lambda spec, device: {"x": S.row_tensor(spec, device)},
    outputs=lambda args: {"y": (tuple(args["x"].shape), args["x"].dtype)},
    launch=launch,
    oracle=portcheck.oracle_from_torch(lambda x: 2 * x, "y"),      # evaluated in float64
    # one rounding in fp32, then the output format's; see portcheck.tolerance for reductions,
    # normalisations, softmax and dot products
    tolerance=lambda args, refs, dtype: {"y": T.elementwise(dtype, "fp32", ops=1)},
))
''')

TEST_MODULE = string.Template('''"""portcheck's checks of $name as pytest items (written by `portcheck new-case`).

    pytest test_$name.py --target=interpreter       # or cuda, rocm, auto
    pytest test_$name.py --target=compile --arch gfx942,sm_90a
"""
import $name  # noqa: F401  registers the case

from portcheck.testing import test_portcheck_case, test_portcheck_compile  # noqa: F401

PORTCHECK_CASES = ["$name"]
''')


def add_arguments(p) -> None:
    p.add_argument("name", help="the case name, also the module name (a Python identifier)")
    p.add_argument("--dir", default=".", help="folder to write the two files into (default: here)")


def main(args) -> int:
    name = args.name
    if not name.isidentifier() or keyword.iskeyword(name):
        raise UsageError(f"{name!r} is not a Python identifier; the case name is also its module's name")
    # the module must import as itself, and the case name must be free: a json.py or a second
    # softmax would shadow, or be shadowed by, what is there already
    if name in sys.stdlib_module_names or importlib.util.find_spec(name) is not None:
        raise UsageError(f"{name!r} is the name of a module Python already finds (import {name}); "
                         "choose another name")
    from ..cases import all_cases
    if name in {c.name for c in all_cases()}:
        raise UsageError(f"{name!r} is the name of a case portcheck has already (portcheck run --kernel {name}); "
                         "choose another name")
    folder = Path(args.dir)
    files = {folder / f"{name}.py": CASE_MODULE, folder / f"test_{name}.py": TEST_MODULE}
    for path in files:
        if path.exists():
            raise UsageError(f"{path} exists already; nothing was written")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for path, template in files.items():
            path.write_text(template.substitute(name=name))
    except OSError as exc:
        raise UsageError(f"cannot write into {folder}: {exc.strerror}") from None
    print("wrote " + " and ".join(str(p) for p in files))
    where = f"cd {folder} && " if folder != Path(".") else ""
    print(f"next: {where}portcheck run --cases {name} --kernel {name} --target interpreter\n"
          f"      {where}pytest test_{name}.py --target=interpreter")
    return 0
