"""What the long-row probes of this folder share: the resource reading of a cross-compiled cubin,
and the timer of a [4096, 131072] bf16 launch against the copy bandwidth of the same run."""
import importlib.util
import json
import os
from functools import cache

_BINARY = os.path.join(os.path.dirname(__file__), *[".."] * 4, "portcheck", "compile", "binary.py")


@cache
def _binary():
    """portcheck.compile.binary, loaded from its file: it needs neither torch nor the rest of
    portcheck, so a Triton-only environment (the H200's Triton 3.6, say) can read cubins here."""
    spec = importlib.util.spec_from_file_location("portcheck_binary", _BINARY)
    binary = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(binary)
    return binary


def nvidia_resources(cubin: bytes) -> dict:
    """Registers, stack (spill) and local bytes of a cubin: portcheck.compile.binary's reading."""
    return _binary().nvidia_resources(cubin)


def row_timer(x, y, copy_gbs: float, rows: list):
    """t(name, fn, ref=None): fn's do_bench median as a fraction of the copy bandwidth (x read once,
    y written once), y's largest difference to ref, or the error; appended to rows and printed."""
    import torch
    import triton.testing
    nbytes = 2 * x.numel() * x.element_size()

    def t(name, fn, ref=None):
        try:
            fn()
            torch.cuda.synchronize()
            err = float((y.float() - ref).abs().max()) if ref is not None else None
            ms = triton.testing.do_bench(fn, warmup=10, rep=100, return_mode="median")
            rows.append({"what": name, "us": ms * 1e3, "of_copy": nbytes / (ms * 1e6) / copy_gbs,
                         "max_abs_diff_vs_main": err})
        except Exception as e:  # noqa: BLE001
            rows.append({"what": name, "error": str(e)[:300]})
        print(json.dumps(rows[-1]), flush=True)
    return t
