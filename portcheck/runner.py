"""Where cases meet targets: make inputs, poison outputs, launch, compute the oracle, compare.

`check()` drives a hypothesis search over a case's input strategy on one target and dtype and
returns one Result; `replay()` runs exactly one recorded spec again.
"""
from __future__ import annotations

import json
import math
import os
import shlex
from dataclasses import dataclass, field

import hypothesis
import torch

from .cases import CASE_MODULES_ENV, Case
from .compare import Comparison, compare
from .overrides import Override
from .results import Result
from .targets.runtime import TARGETS

_INT_POISON = {torch.int8: -128, torch.int16: -(2**15), torch.int32: -(2**31), torch.int64: -(2**63),
               torch.uint8: 0xA5}


def poisoned(shape, dtype: torch.dtype, device: str) -> torch.Tensor:
    """An output buffer pre-filled so that any element the kernel never writes is caught:
    NaN for floats, a value the kernels never produce (type minimum) for integers."""
    if dtype.is_floating_point:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    if dtype == torch.bool:
        return torch.zeros(shape, dtype=dtype, device=device)
    return torch.full(shape, _INT_POISON[dtype], dtype=dtype, device=device)


def oracle_device(target_name: str) -> str:
    """float64 references run on the device when it has float64 (CUDA and ROCm GPUs do)."""
    return TARGETS[target_name].device


def upcast(args: dict, device: str) -> dict:
    """Float tensors -> float64 on `device`; everything else passes through unchanged."""
    out = {}
    for k, v in args.items():
        if isinstance(v, torch.Tensor) and v.dtype.is_floating_point:
            out[k] = v.detach().to(device=device, dtype=torch.float64)
        elif isinstance(v, torch.Tensor):
            out[k] = v.detach().to(device)
        else:
            out[k] = v
    return out


def synchronize(target_name: str) -> None:
    if TARGETS[target_name].is_gpu:
        torch.cuda.synchronize()


def evaluate(case: Case, target_name: str, spec: dict, tol_factor: float = 1.0,
             tol_reason: str = "", keep: dict | None = None) -> list[Comparison]:
    """Run one spec and compare every output; `keep`, if given, receives the output tensors
    (portcheck.digests records them for cross-vendor diffs)."""
    device = TARGETS[target_name].device
    args = case.make(spec, device)
    outs = {name: poisoned(shape, dtype, device) for name, (shape, dtype) in case.outputs(args).items()}
    case.launch(args, outs)
    synchronize(target_name)
    if keep is not None:
        keep.update(outs)
    args64 = upcast(args, oracle_device(target_name))
    refs = case.oracle(args64)
    tols = case.tolerance(args64, refs, spec["dtype"])
    comps = []
    for name, ref in refs.items():
        tol = tols[name]
        if tol_factor != 1.0 and not tol.exact:
            tol = tol.scaled(tol_factor, tol_reason)
        comp = compare(name, outs[name], ref, tol)
        comp.tolerance = tol.summary()
        comps.append(comp)
    return comps


@dataclass
class _Search:
    examples: int = 0
    current: dict | None = None
    failing: dict | None = None
    message: str = ""
    metrics: dict = field(default_factory=lambda: {"max_abs": 0.0, "max_rel": 0.0, "max_ulp": 0.0,
                                                   "worst_ratio": 0.0, "mismatches": 0})
    tolerance: dict = field(default_factory=dict)

    def observe(self, comps: list[Comparison]) -> None:
        if self.failing is None:  # report the formula in force where it failed, else the last
            self.tolerance = {c.name: c.tolerance for c in comps}
        for c in comps:
            for k, v in c.metrics().items():
                self.metrics[k] = max(self.metrics[k], v)


class CaseFailed(AssertionError):
    pass


def _first_cause(exc: BaseException) -> BaseException:
    """The original fault behind hypothesis's wrappers: when a replay of a failing example fails
    differently (a GPU context poisoned by the first failure), hypothesis raises a FlakyFailure
    group; the first exception in it is the kernel's own."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def reproduce_command(target: str, case: str, dtype: str, spec: dict | None, seed=None) -> str:
    cmd = ["portcheck", "run", "--target", target, "--kernel", case, "--dtype", dtype]
    if spec is not None:
        cmd += ["--replay", json.dumps(spec, sort_keys=True)]
    elif seed is not None:
        cmd += ["--seed", str(seed)]
    modules = os.environ.get(CASE_MODULES_ENV)  # cases from outside the registry's built-ins
    return (f"{CASE_MODULES_ENV}={shlex.quote(modules)} " if modules else "") + shlex.join(cmd)


def check(case: Case, target_name: str, arch: str, dtype: str, *, settings: hypothesis.settings,
          max_elements: int, override: Override | None = None, seed: int | None = None,
          spec: dict | None = None, on_example=None) -> Result:
    """Search (or, given `spec`, replay) one case x target x dtype; never raises for kernel faults.

    `on_example(spec)` is called before each example runs, so a supervisor that sees the process
    die or hang knows the exact input it was on.
    """
    evidence = "gpu" if TARGETS[target_name].is_gpu else "interpreter"
    result = Result("runtime", case.name, case.family, dtype, target_name, arch, "pass", evidence,
                    override=override.to_dict() if override else None)
    if override is not None and override.action == "skip":
        result.verdict, result.message = "skip", f"skipped by override: {override.reason}"
        return result
    factor = override.factor if override is not None and override.action == "tolerance" else 1.0
    reason = override.reason if override is not None else ""
    search = _Search()

    def prop(example):
        search.examples += 1
        search.current = example
        if on_example is not None:
            on_example(example)
        comps = evaluate(case, target_name, example, factor, reason)
        search.observe(comps)
        worst = max((c.worst_ratio for c in comps), default=0.0)
        if spec is None:  # steer the search toward larger errors (a replay has no search)
            hypothesis.target(worst if math.isfinite(worst) else 1e300, label="error / tolerance")
        bad = [c for c in comps if not c.ok]
        if bad:
            search.failing, search.message = example, "; ".join(c.message for c in bad)
            raise CaseFailed(search.message)

    try:
        if spec is not None:
            prop(spec)
        else:
            test = hypothesis.given(case.inputs(dtype, max_elements))(prop)
            if override is not None and override.action == "xfail":
                # an expected failure needs no minimal example: skip the costly shrink phase
                settings = hypothesis.settings(settings, phases=[p for p in settings.phases
                                                                 if p != hypothesis.Phase.shrink])
            test = settings(test)
            if seed is not None:
                test = hypothesis.seed(seed)(test)
            test()
    except CaseFailed:
        result.verdict, result.message = "fail", search.message
    except Exception as exc:  # a kernel, launcher or oracle fault fails this case only
        exc = _first_cause(exc)
        result.verdict = "error"
        result.message = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        search.failing = search.failing or search.current
    result.examples = search.examples
    result.metrics = search.metrics
    result.tolerance = search.tolerance
    result.failing_input = search.failing if result.verdict in ("fail", "error") else None
    if override is not None and override.action == "xfail":
        if result.verdict in ("fail", "error"):
            result.verdict = "xfail"
            result.message = f"expected failure ({override.reason}): {result.message}"
        else:
            result.verdict = "xpass"
            result.message = (f"strict xfail: passed although the override says '{override.reason}'; "
                              "remove the entry from the overrides manifest")
    result.reproduce = reproduce_command(target_name, case.name, dtype, result.failing_input, seed)
    return result


def time_case(case: Case, target_name: str, spec: dict) -> float:
    """Median milliseconds of one launch on a GPU target (triton.testing.do_bench, L2 flushed)."""
    import triton.testing
    device = TARGETS[target_name].device
    args = case.make(spec, device)
    outs = {n: torch.empty(shape, dtype=dt, device=device) for n, (shape, dt) in case.outputs(args).items()}
    return float(triton.testing.do_bench(lambda: case.launch(args, outs), return_mode="median"))
