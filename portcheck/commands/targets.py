"""`portcheck targets`: the runtime targets of this machine and the arch table."""
from __future__ import annotations

from tabulate import tabulate

from ..facts.archs import ARCHS
from ..targets.runtime import TARGETS

NAME = "targets"
HELP = "show which targets this machine can run, and the arch table"


def add_arguments(parser) -> None:
    pass


def main(args) -> int:
    rows = []
    for t in TARGETS.values():
        a = t.availability()
        why = f"{a.reason}: {t.describe()['device']}" if a.ok and t.is_gpu else a.reason
        rows.append([t.name, "yes" if a.ok else "no", t.arch() if a.ok else "-", why])
    print(tabulate(rows, headers=["target", "available", "arch", "why"], tablefmt="github"))
    print()
    arows = [[a.name, a.vendor, a.example, a.warp_size, a.max_threads_per_block,
              f"{a.shared_per_block // 1024} KB", ",".join(a.fp8_native) or "-",
              a.dot_default, ",".join(a.dot_precisions), a.matrix_family, f"{a.peak_bw_gbs:g}",
              f"{a.peak_tflops.get('bf16', 0):g}"] for a in ARCHS.values()]
    print(tabulate(arows, headers=["arch", "vendor", "example part", "warp", "threads/block",
                                   "smem/LDS per block", "native fp8", "fp32 dot default",
                                   "dot precisions", "matrix unit", "peak GB/s", "bf16 TFLOP/s"],
                   tablefmt="github"))
    print("\nPeak figures are datasheet leads for the example part (sources in portcheck/facts/archs.py).")
    return 0
