"""Capture a kernel's launches instead of declaring them, so a user's kernel needs no signature.

    from .capture import recording
    with recording() as rec:
        my_launcher(x, y)                 # kernel[grid](...) calls are recorded, not run
    variants = rec.variants()             # CapturedVariant per distinct specialization

While recording, `JITFunction.run` (and the interpreter's `InterpretedFunction.run`) note each
launch's arguments, constexprs and options; `Autotuner.run` notes the launch once per config, so
every autotune config is cross-compiled. A launch is kept in the portable form of
portcheck.compile.plan (tensor -> dtype, 16-byte alignment, within 2 GB; integers -> a
representative with the same specialization: 1, a multiple of 16, or neither, in the same
integer width; floats and bools -> one value, as Triton never specializes them), which is
everything Triton's specialization reads; launches that specialize alike are kept once. The
compile workers then specialize it per arch with Triton's own binder, exactly as a launch on
that arch would.

By default launches are recorded and not executed, so capture works on a CPU without any GPU;
`execute=True` also runs them (on a GPU, or in the interpreter), for launchers whose later
launches depend on earlier results. A launcher that branches on the device (warp size, the arch,
`torch.version.hip`, Triton's current target) is captured once per arch, with those questions
answered as that arch would (`answering_as`), so each arch compiles the launches it would make.
`python -m portcheck.compile.capture [--archs A,B] [--cases MODULES] CASE...` captures registered
cases in a fresh interpreter-mode process and prints JSON; `for_cases()` uses it when capturing
in this process fails.
"""
from __future__ import annotations

import contextlib
import inspect
import json
import os
import subprocess
import sys
import types
from dataclasses import dataclass, field

from ..cases import Variant
from .plan import encode, kernel_ref
from .pool import worker_env

OPTION_DEFAULTS = ("num_warps", "num_stages")


@dataclass(frozen=True)
class CapturedVariant(Variant):
    """A Variant recorded from a real launch; `launch` holds its portable arguments by name."""
    dtype: str = ""
    launch: dict = field(default_factory=dict)


def _representative(v: int) -> int:
    """An int that Triton specializes exactly like v: same width, ==1, or divisible by 16."""
    if v == 1:
        return 1
    low = 16 if v % 16 == 0 else 3
    if v >= 2**63:
        return 2**63 + low
    if v >= 2**31 or v < -2**31:
        return 2**40 + low
    return low


def _is_constexpr(param: inspect.Parameter) -> bool:
    return "constexpr" in str(param.annotation)


def _display_type(enc) -> str:
    if isinstance(enc, dict) and "tensor" in enc:
        from ..dtypes import fmt
        import torch
        try:
            return "*" + fmt(getattr(torch, enc["tensor"])).triton_name
        except (KeyError, AttributeError):
            return "*" + enc["tensor"]
    if isinstance(enc, bool):
        return "i1"
    if isinstance(enc, int):
        return "i64" if not -2**31 <= enc < 2**31 else "i32"
    if isinstance(enc, float):
        return "fp32"
    return "?"


def _spec_text(args: dict, types: dict) -> str:
    """What the specialization saw, briefly: n=1, n%16 (divisible by 16), x_ptr%8 (unaligned)."""
    parts = []
    for name in types:
        v = args[name]
        if isinstance(v, dict) and "tensor" in v and not v.get("align16", True):
            parts.append(f"{name}%8")
        elif isinstance(v, int) and not isinstance(v, bool):
            if v == 1:
                parts.append(f"{name}=1")
            elif v % 16 == 0:
                parts.append(f"{name}%16")
    return f"[{' '.join(parts)}]" if parts else ""


class Recorder:
    def __init__(self, execute: bool):
        self.execute = execute
        self.dtype = ""              # the spec dtype being launched, for labels
        self.quiet = 0               # >0: do not record (the autotuner's executing launch)
        self.dry = 0                 # >0: do not execute (the autotuner's per-config records)
        self._seen: dict[str, CapturedVariant] = {}
        self.raw: list[tuple] = []   # every launch as made: (JITFunction, args, kwargs), for warm-ups
        self.grids: list[tuple] = []  # every launch's grid, resolved where it is a function of the arguments

    def add(self, kernel, args: tuple, kwargs: dict, grid=None) -> None:
        self.raw.append((kernel, args, kwargs))
        fn = kernel
        while hasattr(fn, "fn"):
            fn = fn.fn
        sig = inspect.signature(fn)
        params = [n for n in sig.parameters if n not in kwargs][:len(args)]
        bound = {**dict(zip(params, args)), **{k: v for k, v in kwargs.items() if k in sig.parameters}}
        options = {k: v for k, v in kwargs.items() if k not in sig.parameters}
        self._note_grid(grid, bound)
        by_name, consts, types = {}, {}, {}
        for name, p in sig.parameters.items():
            if name not in bound:
                continue
            value = bound[name]
            enc = encode(value)
            if _is_constexpr(p):
                consts[name] = enc
            else:   # only the specialization matters: Triton never specializes float or bool values
                if isinstance(enc, bool):
                    enc = True
                elif isinstance(enc, int):
                    enc = _representative(enc)
                elif isinstance(enc, float) or (isinstance(enc, dict) and "float" in enc):
                    enc = 1.5
                types[name] = _display_type(enc)
            by_name[name] = enc
        ref = kernel_ref(kernel)
        enc_options = {k: encode(v) for k, v in options.items() if v is not None}
        key = json.dumps([ref, by_name, enc_options], sort_keys=True, default=str)
        if key in self._seen:
            return
        warps, stages = enc_options.pop("num_warps", 4), enc_options.pop("num_stages", None)
        const_text = " ".join(f"{k}={v}" for k, v in consts.items() if not isinstance(v, dict))
        label = " ".join(filter(None, [self.dtype, fn.__name__, const_text, f"w{warps}",
                                       f"s{stages}" if stages is not None else "", _spec_text(by_name, types)]))
        self._seen[key] = CapturedVariant(
            kernel=ref, signature=types, constexprs=consts, num_warps=warps, num_stages=stages,
            options=enc_options, label=label, dtype=self.dtype, launch={"args": by_name})

    def _note_grid(self, grid, bound: dict) -> None:
        try:
            grid = grid(bound) if callable(grid) else grid
        except Exception:   # noqa: BLE001  a grid that reads a default the launch left out
            return
        if isinstance(grid, int):
            grid = (grid,)
        if isinstance(grid, (tuple, list)) and all(isinstance(n, int) for n in grid):
            self.grids.append(tuple(grid))

    def variants(self) -> list[CapturedVariant]:
        return list(self._seen.values())


@contextlib.contextmanager
def recording(execute: bool = False):
    """Record every Triton launch made inside the block (see the module docstring)."""
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction
    rec = Recorder(execute)
    classes = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction
        classes.append(InterpretedFunction)
    except ImportError:
        pass
    saved = {cls: cls.__dict__["run"] for cls in (*classes, Autotuner)}

    def hooked(orig):
        def run(self, *args, grid=None, warmup=False, **kwargs):
            if not rec.quiet:
                rec.add(self, args, kwargs, grid)
            if rec.execute and not rec.dry:
                return orig(self, *args, grid=grid, warmup=warmup, **kwargs)
            return None
        return run

    def autotuned(self, *args, **kwargs):
        rec.dry += 1
        try:
            for config in self.configs:
                self.fn.run(*args, **kwargs, **config.all_kwargs())
        finally:
            rec.dry -= 1
        if not rec.execute:
            return None
        config = self.configs[0]
        rec.quiet += 1
        try:
            if config.pre_hook is not None:
                config.pre_hook({**dict(zip(self.arg_names, args)), **kwargs, **config.all_kwargs()})
            return self.fn.run(*args, **kwargs, **config.all_kwargs())
        finally:
            rec.quiet -= 1

    try:
        for cls in classes:
            cls.run = hooked(saved[cls])
        Autotuner.run = autotuned
        yield rec
    finally:
        for cls, run in saved.items():
            cls.run = run


def default_specs(case, per_dtype: int = 3, max_elements: int = 1 << 16) -> list[dict]:
    """A few inputs per dtype from the case's own strategy, drawn deterministically."""
    from hypothesis import HealthCheck, Phase, given, settings
    specs: list[dict] = []
    for dtype in case.dtypes:
        got: list[dict] = []

        @settings(max_examples=per_dtype, derandomize=True, database=None, deadline=None,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck))
        @given(case.inputs(dtype, max_elements))
        def draw(spec):
            if len(got) < per_dtype and spec not in got:
                got.append(spec)
        draw()
        specs += got
    return specs


class _TargetOf:
    """Stands in for Triton's active driver where a launcher asks for the current target."""

    def __init__(self, arch):
        from triton.backends.compiler import GPUTarget
        self.target = GPUTarget(arch.backend, arch.triton_arch, arch.warp_size)

    def get_current_target(self):
        return self.target


def _properties(arch) -> types.SimpleNamespace:
    """What torch.cuda.get_device_properties says of a device of this arch (the fields launchers read)."""
    major, minor = divmod(arch.triton_arch, 10) if arch.backend == "cuda" else (0, 0)
    return types.SimpleNamespace(name=arch.example, major=major, minor=minor, warp_size=arch.warp_size,
                                 gcnArchName=arch.triton_arch if arch.is_amd else "")


@contextlib.contextmanager
def answering_as(arch):
    """Inside, a launcher that asks which device it runs on is told `arch`: Triton's current
    target, torch.version.hip (a version on AMD, None on NVIDIA), torch.cuda's device capability
    and properties, and portcheck.facts.device (warp_size, current_arch; interpreted() is False).
    Only for recording launches: nothing may run on the device it is told about."""
    import torch
    from triton.runtime import driver

    from ..facts import device
    props = _properties(arch)
    answers = {"get_device_capability": lambda *a, **k: (props.major, props.minor),
               "get_device_properties": lambda *a, **k: props,
               "get_device_name": lambda *a, **k: props.name}
    saved = {name: getattr(torch.cuda, name) for name in answers}
    saved_driver, saved_hip = driver._active, torch.version.hip
    saved_env = os.environ.pop("TRITON_INTERPRET", None)
    try:
        for name, answer in answers.items():
            setattr(torch.cuda, name, answer)
        driver.set_active(_TargetOf(arch))
        torch.version.hip = "6.2.0" if arch.is_amd else None
        device.warp_size.cache_clear()
        device.current_arch.cache_clear()
        yield
    finally:
        for name, old in saved.items():
            setattr(torch.cuda, name, old)
        driver._active = saved_driver
        torch.version.hip = saved_hip
        if saved_env is not None:
            os.environ["TRITON_INTERPRET"] = saved_env
        device.warp_size.cache_clear()    # answered for the arch, not for this machine
        device.current_arch.cache_clear()


def _launch_all(case, specs, device: str, rec: Recorder) -> None:
    import torch
    for spec in specs:
        rec.dtype = spec.get("dtype", "")
        args = case.make(spec, device)
        outs = {n: torch.empty(shape, dtype=dt, device=device) for n, (shape, dt) in case.outputs(args).items()}
        case.launch(args, outs)


def capture_case(case, specs=None, device: str = "cpu", execute: bool = False) -> list[CapturedVariant]:
    """Run a case's launcher on `specs` (default: a few drawn inputs per dtype) and return the
    distinct launches it made."""
    specs = default_specs(case) if specs is None else specs
    with recording(execute) as rec:
        _launch_all(case, specs, device, rec)
    return rec.variants()


def capture_per_arch(case, archs, specs=None) -> dict:
    """{arch name: [CapturedVariant] or why capture failed there}: the case's launcher recorded
    (not run) once per arch, answered as that arch (answering_as)."""
    from ..facts.archs import arch as get_arch
    specs = default_specs(case) if specs is None else specs
    out: dict = {}
    for name in archs:
        try:
            with answering_as(get_arch(name)), recording() as rec:
                _launch_all(case, specs, "cpu", rec)
            out[name] = rec.variants()
        except Exception as exc:  # noqa: BLE001 - a launcher that refuses this arch fails there only
            out[name] = f"capture failed on {name}: {type(exc).__name__}: {exc}"
    return out


def _to_json(v: CapturedVariant) -> dict:
    return {"kernel": v.kernel, "signature": v.signature, "constexprs": v.constexprs,
            "num_warps": v.num_warps, "num_stages": v.num_stages, "options": v.options,
            "label": v.label, "dtype": v.dtype, "launch": v.launch}


def _from_json(d: dict) -> CapturedVariant:
    return CapturedVariant(**d)


def for_cases(cases, archs) -> dict:
    """{case name: {arch: [CapturedVariant] or a message}, or one message for every arch} for
    cases that declare no variants: captured per arch in this process, else in a fresh process in
    interpreter mode (any CPU has it), which imports the cases' modules (`--cases`) again."""
    from ..cases import cases_flag
    out: dict = {}
    retry = []
    for case in cases:
        got = capture_per_arch(case, archs)
        if any(isinstance(v, str) for v in got.values()):
            retry.append(case.name)   # e.g. a launcher that asks the missing GPU for more than answering_as tells
        else:
            out[case.name] = got
    if retry:
        modules = sorted({m for name in retry for m in cases_flag(name)[1:]})
        argv = ["--archs", ",".join(archs)] + (["--cases", ",".join(modules)] if modules else [])
        env = {**worker_env(), "TRITON_INTERPRET": "1"}   # this process's import path, in order
        proc = subprocess.run([sys.executable, "-P", "-m", "portcheck.compile.capture", *argv, *retry],
                              capture_output=True, text=True, env=env, cwd=os.getcwd())
        try:
            data = json.loads(proc.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            why = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            data = {n: f"capture failed: {why}" for n in retry}
        for name in retry:
            got = data.get(name, f"capture failed: {name} is not registered in a fresh process "
                                  "(name its module with --cases, or register it through the "
                                  "portcheck.cases entry point)")
            out[name] = got if isinstance(got, str) else \
                {a: [_from_json(d) for d in v] if isinstance(v, list) else v for a, v in got.items()}
    return out


def _main(argv: list[str]) -> int:
    import argparse

    from .. import cases
    p = argparse.ArgumentParser(prog="python -m portcheck.compile.capture")
    p.add_argument("--archs", required=True)
    p.add_argument("--cases", default="")
    p.add_argument("names", nargs="+")
    args = p.parse_args(argv)
    cases.add_modules([m for m in args.cases.split(",") if m])
    result = {}
    for name in args.names:
        try:
            got = capture_per_arch(cases.get(name), args.archs.split(","))
            result[name] = {a: [_to_json(v) for v in vs] if isinstance(vs, list) else vs for a, vs in got.items()}
        except Exception as exc:  # noqa: BLE001 - reported to the parent per case
            result[name] = f"capture failed: {type(exc).__name__}: {exc}"
    print(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
