"""For launcher tests: where this process can run kernels, and a stand-in that fails any launch.

The Triton mode is fixed per process (--target): the interpreter runs kernels on CPU tensors, a
compiled mode needs a GPU; with neither (e.g. --target=compile on a CPU machine) kernel runs skip.
"""
import os

import pytest
import torch

INTERPRETER = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
DEVICE = "cpu" if INTERPRETER else ("cuda" if torch.cuda.is_available() else None)
needs_device = pytest.mark.skipif(DEVICE is None, reason="kernels run on a GPU or the interpreter only")


class NoLaunch:
    """Put in place of a @triton.jit kernel: launching it (kernel[grid]) fails the test."""

    def __getitem__(self, grid):
        raise AssertionError("the launcher launched a kernel for bad input")


def forbid_launches(monkeypatch, module, *kernel_names: str) -> None:
    for name in kernel_names:
        monkeypatch.setattr(module, name, NoLaunch())


def tma_launches(monkeypatch) -> list:
    """The TmaLayouts of the matmul launches that take matmul_tma_kernel from here on (they still
    run)."""
    from portcheck.kernels.matmul import launcher
    seen = []
    real = launcher._launch_tma

    def spy(key, layout, *rest):
        seen.append(layout)
        return real(key, layout, *rest)
    monkeypatch.setattr(launcher, "_launch_tma", spy)
    return seen
