"""The failing example run once more and kept whole: per output, the kernel's values, the
reference and every element's error over its tolerance (the comparison keeps only the worst);
and the tile sizes the launch used, captured without running it.

Inputs sit inside guard bands holding poison, as in the check, so an unmasked read shows up in
the output here too; all tensors stay on the case's device until the maps are made.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from .. import guards
from ..cases import Case, float64_args, launched_in_place
from ..tolerance import Tolerance
from ..targets.interpreter_grid import limited
from ..targets.runtime import TARGETS


@dataclass
class OutputMap:
    name: str
    out: torch.Tensor         # the kernel's output, on the CPU, in its own dtype
    ref: torch.Tensor         # the reference, on the CPU (float64, or the exact output's dtype)
    tol: Tolerance
    bound: torch.Tensor | None   # atol + rtol |ref| per element (float64); None: judged bit for bit
    ratio: torch.Tensor       # error / bound per element; inf where NaN/Inf is misplaced or bits differ
    unwritten: torch.Tensor   # still the harness's output poison

    @property
    def exact(self) -> bool:
        return self.bound is None

    @property
    def bad(self) -> torch.Tensor:
        return self.ratio > 1

    @property
    def failing(self) -> bool:
        return bool(self.bad.any())

    @property
    def worst(self) -> float:
        return float(self.ratio.max()) if self.ratio.numel() else 0.0


@dataclass
class Run:
    spec: dict
    args: dict                # the kernel's arguments, on the case's device
    args64: dict              # the same with float tensors in float64 (the oracle's view)
    maps: dict                # output name -> OutputMap


def bound_of(tol: Tolerance, ref: torch.Tensor) -> torch.Tensor:
    """atol + rtol |ref| per element, float64 on the CPU."""
    def cpu(x):
        return x.detach().to("cpu", torch.float64) if isinstance(x, torch.Tensor) else float(x)
    return (cpu(tol.atol) + cpu(tol.rtol) * ref.abs()).expand(ref.shape)


def float_ratio(out: torch.Tensor, ref: torch.Tensor, bound: torch.Tensor) -> torch.Tensor:
    """|out - ref| / bound per element (float64); NaN against NaN and equal infinities count 0,
    any other non-finite pair inf."""
    o, r = out.to(torch.float64), ref.to(torch.float64)
    finite = torch.isfinite(o) & torch.isfinite(r)
    agree = (torch.isnan(o) & torch.isnan(r)) | (torch.isinf(r) & (o == r))
    ratio = torch.where(finite, (o - r).abs() / bound, torch.zeros_like(o))
    return torch.where(finite | agree, ratio, torch.full_like(o, float("inf")))


def _exact_ratio(out: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    differ = guards.bits(out) != guards.bits(ref.to(out.dtype))
    if out.dtype.is_floating_point:   # a NaN matches a NaN, whatever its payload
        differ &= ~(torch.isnan(out.to(torch.float32)) & torch.isnan(ref.to(torch.float32)))
    return torch.where(differ, float("inf"), 0.0).to(torch.float64)


def output_map(name: str, out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> OutputMap:
    out, ref = out.detach().cpu(), ref.detach().cpu()
    unwritten = guards.is_output_poison(out)
    if tol.exact:
        return OutputMap(name, out, ref, tol, None, _exact_ratio(out, ref), unwritten)
    ref = ref.to(torch.float64)
    bound = bound_of(tol, ref)
    return OutputMap(name, out, ref, tol, bound, float_ratio(out, ref, bound), unwritten)


def _fresh_outputs(case: Case, args: dict, device: str) -> dict:
    """Poisoned outputs inside guard bands: an out-of-bounds store lands in a band, not elsewhere."""
    return {name: guards.guarded_output(name, shape, dtype, device).tensor
            for name, (shape, dtype) in case.outputs(args).items()}


def launch_once(case: Case, target_name: str, spec: dict) -> tuple[dict, dict]:
    """The spec's inputs, made anew in poisoned guards, and the outputs of one launch on them."""
    target = TARGETS[target_name]
    args, _ = guards.rehome_inputs(case.make(spec, target.device), case.in_place)
    outs = _fresh_outputs(case, args, target.device)
    with launched_in_place(case, args, outs), guards.poisoned_allocations(), \
            (contextlib.nullcontext() if target.is_gpu else limited()):
        case.launch(args, outs)   # the interpreter refuses a grid no GPU launches, as the check did
    if target.is_gpu:
        torch.cuda.synchronize()
    return args, outs


def run(case: Case, target_name: str, spec: dict) -> Run:
    """Launch the spec once (inputs in poisoned guards) and map every output's error."""
    args, outs = launch_once(case, target_name, spec)
    args64 = float64_args(args)
    refs = case.oracle(args64)
    tols = case.tolerance(args64, refs, spec["dtype"])
    maps = {name: output_map(name, outs[name], refs[name], tols[name]) for name in refs   # a wrong shape:
            if name in outs and outs[name].shape == refs[name].shape}                     # the check said so
    return Run(spec, args, args64, maps)


def captured(case: Case, args: dict):
    """The recorder (compile.capture) of the case's launches on `args`, noted without running
    them; None when the launcher needs its kernel's results."""
    from ..compile.capture import recording
    outs = {name: torch.empty(shape, dtype=dtype, device=next(
        (v.device for v in args.values() if isinstance(v, torch.Tensor)), "cpu"))
        for name, (shape, dtype) in case.outputs(args).items()}
    try:
        with recording() as rec:
            case.launch(args, outs)
    except Exception:
        return None
    return rec


def launch_tiles(rec) -> dict[str, int]:
    """The power-of-two constexprs (BLOCK, BLOCK_M, ...) of the captured launches (`captured`);
    {} when the launch could not be captured (the tile sizes are inferred instead)."""
    tiles = {}
    for variant in (rec.variants() if rec is not None else ()):
        for name, value in variant.constexprs.items():
            if type(value) is int and value >= 2 and value & (value - 1) == 0:
                tiles[name] = value
    return tiles
