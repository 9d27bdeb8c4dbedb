"""Checks under another arch's launch configuration (`portcheck run --as-arch gfx942`).

A case is checked on the local target (cuda, rocm or the interpreter) with facts.device's
`current_arch()` and `warp_size()` answering as the forced arch, so its launchers pick that arch's
tiles, BLOCK sizes, split counts, num_warps and stages. The launch then runs on the local device:
a wave64 arch's 8 warps run as 8 warps of the local 32 lanes, and options with no local meaning
(waves_per_eu, matrix_instr_nonkdim, kpack off AMD) are dropped; both are noted in the record.
What cannot run locally (an fp8 format the device lacks, shared memory over its cap) is a
recorded skip. The verdict is evidence about the algorithm, tiling and masking under the arch's
choices, not about its arithmetic or memory model (evidence "as-arch", the reports' X).
"""
from __future__ import annotations

import contextlib

from .cases import Case
from .dtypes import fmt
from .errors import UsageError
from .facts import device
from .facts.archs import ARCHS, Arch, arch

EVIDENCE = "as-arch"
CONFIG_KEY = "config"   # the spec key of the drawn autotune configuration (Case.configs)
AMD_ONLY_OPTIONS = ("waves_per_eu", "matrix_instr_nonkdim", "kpack")


def parse(text: str) -> list[Arch]:
    """'gfx942,gfx1100' or 'all' -> arch rows; an unknown name is a usage error naming the valid ones."""
    names = list(ARCHS) if text.strip() == "all" else [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UsageError(f"--as-arch needs arch names or 'all'; known: {', '.join(ARCHS)}")
    try:
        return [arch(n) for n in dict.fromkeys(names)]
    except UsageError as exc:
        raise UsageError(f"--as-arch: {exc}") from None


def launch_key(a: Arch) -> tuple:
    """Everything a launcher reads of an arch to configure a launch: two archs with the same key
    make the same launches (sm_89 and sm_120), so one check stands for both."""
    return (a.config_family, a.warp_size, a.backend, a.matrix_family, a.shared_per_block,
            a.max_threads_per_block, a.fp8_native, a.fp8_triton, a.dot_precisions, a.dot_default)


def groups(archs: list[Arch]) -> list[list[Arch]]:
    """The archs to check, those that share their launches together, in the given order."""
    out: dict[tuple, list[Arch]] = {}
    for a in archs:
        out.setdefault(launch_key(a), []).append(a)
    return list(out.values())


def no_launch_reason(case: Case, forced: Arch, dtype: str) -> str:
    """Why the case makes no launch on the forced arch in this dtype ("" when it does): it
    declares no variants for the arch, or no configuration for the dtype."""
    if case.configs is not None and not case.configs(forced, dtype):
        return f"{case.name} declares no launch configuration for {dtype} on {forced.name}"
    if case.variants is not None and not case.variants(forced):
        return f"{case.name} declares no variants for {forced.name}"
    return ""


def local_obstacle(forced: Arch, local: Arch, dtype: str) -> str:
    """Why the local device cannot run the dtype the forced arch's launch takes ("" when it can)."""
    try:
        name = fmt(dtype).name
    except UsageError:   # a user case's own dtype name: nothing to say about it
        return ""
    if name.startswith("fp8") and name not in local.fp8_triton:
        return (f"{name} ({forced.name}'s fp8 format) does not run on the local {local.name}: "
                f"its Triton takes {', '.join(local.fp8_triton)}")
    return ""


class Notes:
    """What a forced check changed or left out to run locally, said once each, in order."""

    def __init__(self):
        self.lines: list[str] = []

    def add(self, line: str) -> None:
        if line not in self.lines:
            self.lines.append(line)


@contextlib.contextmanager
def forcing(forced: Arch, local: Arch, notes: Notes):
    """Inside: launchers configure for `forced` (facts.device.forced_arch), and every Triton launch
    drops the options with no meaning on `local` and turns a launch over a local hardware limit
    into device.NotRunnableHere (a recorded skip, not a failure)."""
    from triton.runtime.errors import OutOfResources
    from triton.runtime.jit import JITFunction
    classes = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction
        classes.append(InterpretedFunction)
    except ImportError:
        pass
    saved = {cls: cls.__dict__["run"] for cls in classes}

    def forced_run(orig):
        def run(self, *args, grid=None, warmup=False, **kwargs):
            name = getattr(self, "__name__", "kernel")
            if not local.is_amd:
                for option in AMD_ONLY_OPTIONS:
                    if option in kwargs:
                        notes.add(f"{option}={kwargs.pop(option)} dropped: no meaning on {local.name}")
            warps = kwargs.get("num_warps", 4)
            if not local.is_interpreter and warps * local.warp_size > local.max_threads_per_block:
                raise device.NotRunnableHere(f"{name}: {warps} warps of {local.warp_size} lanes are over the "
                                             f"local {local.name}'s {local.max_threads_per_block} threads")
            if forced.warp_size != local.warp_size:
                notes.add(f"wave{forced.warp_size}: {warps} warps of {forced.warp_size} lanes run "
                          f"as {warps} warps of {local.warp_size}")
            if kwargs.get("FP8_ACC", "none") not in ("none", forced.fp8_accumulation):
                notes.add(f"fp8 dots promote to fp32 as on {local.name} ({kwargs['FP8_ACC']}), not as on "
                          f"{forced.name} ({forced.fp8_accumulation}): that would sum on the local fp8 unit's "
                          "narrower accumulator")
            if "tf32" in [v for v in kwargs.values() if isinstance(v, str)] and "tf32" not in local.dot_precisions:
                notes.add(f"tf32 dots run as ieee fp32 on {local.name} (input_precision is not emulated "
                          "there); the tolerance is tf32's")
            try:
                return orig(self, *args, grid=grid, warmup=warmup, **kwargs)
            except OutOfResources as exc:
                raise device.NotRunnableHere(f"{name}: {exc} on the local {local.name}") from None
            except Exception as exc:   # a precision the local compiler refuses ("input_precision must be one of")
                if "input_precision" not in str(exc):
                    raise
                raise device.NotRunnableHere(f"{name}: {forced.name}'s dot precision does not compile "
                                             f"on the local {local.name}: {str(exc).splitlines()[0]}") from None
        return run

    try:
        for cls in classes:
            cls.run = forced_run(saved[cls])
        with device.forced_arch(forced):
            yield
    finally:
        for cls, run in saved.items():
            cls.run = run


def record(forced: Arch, group: list[Arch], local: str, notes: Notes, skipped: list[str]) -> dict:
    """The record's `as_arch` field (`local`: the arch the local target reports, as plain records
    name it); `notes` and `skipped` fill in as the check runs."""
    return {"arch": forced.name, "checked_as": group[0].name, "stands_for": [a.name for a in group],
            "local": local, "notes": notes.lines, "skipped": skipped}
