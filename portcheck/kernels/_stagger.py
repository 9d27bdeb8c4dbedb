"""Persistent row kernels started out of phase. Their programs all start row 0 together and take
about the same time a row, so every SM runs its pass 1 (HBM reads) at once and then its pass 2
(L2 re-reads, HBM writes) at once. A program that has one row fewer than others (the grid does not
divide the rows) can idle once, before its first row, for part of a row at no cost to the
kernel's end; idling by different parts puts the SMs' passes out of phase.

The idle time is (p mod PHASES) x STEP x model_row_ns: a lower bound on one row's time from the
arch table's datasheet bandwidth, so with (PHASES - 1) x STEP <= 1 no program idles for as long as
a row takes. It is read on NVIDIA's %globaltimer (ns), inline PTX: a kernel takes it under a
constexpr its launcher sets from stagger_ok (NVIDIA only; AMD and the interpreter compile the code
they did without it).

Measured on the H200, bf16 4096 x 131072, side by side with the kernels without it
(reports/examples/long-rows-h200/fourteenth-session): LayerNorm 0.859-0.860 of copy against
0.824-0.825, RMSNorm 0.939 against 0.927-0.929. Idling after the first row for a part of that
row's measured time gained less (0.843, 0.936); the fixed waits of
thirteenth-session/stagger-rounds.json were as good, but in nanoseconds of one device."""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def globaltimer(dummy):
    """%globaltimer in ns. `dummy`: any scalar tensor (asm takes no constants), e.g. tl.program_id(0)."""
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [dummy], dtype=tl.int64,
                                     is_pure=False, pack=1)


@triton.jit
def idle_before_first_row(n_rows, row_ns, PHASES: tl.constexpr, STEP: tl.constexpr):
    """In a program with one row fewer than the first n_rows % programs: idle for
    (p mod PHASES) x STEP x row_ns (the launcher's model_row_ns)."""
    pid = tl.program_id(0)
    if pid >= n_rows % tl.num_programs(0):
        now = globaltimer(pid)
        until = now + ((pid % PHASES).to(tl.float32) * STEP * row_ns).to(tl.int64)
        while now < until:
            now = globaltimer(pid)


def stagger_ok(arch) -> bool:
    """Whether a kernel may idle on %globaltimer on `arch`: NVIDIA, not the interpreter."""
    return arch.vendor == "nvidia" and not arch.is_interpreter


def model_row_ns(arch, programs: int, hbm_bytes_per_row: int) -> float:
    """A lower bound on one row's time in ns: `programs` rows in flight share the datasheet
    bandwidth, which no device exceeds (bytes / (GB/s) = ns)."""
    return programs * hbm_bytes_per_row / arch.peak_bw_gbs


def stagger_args(arch, phases: int, step: float, programs: int, hbm_bytes_per_row: int) -> dict:
    """The launch arguments of a kernel's stagger on `arch` (off where stagger_ok says no)."""
    if not stagger_ok(arch):
        return {"STAGGER": False}
    return {"STAGGER": True, "PHASES": phases, "STEP": step,
            "row_ns": model_row_ns(arch, programs, hbm_bytes_per_row)}
