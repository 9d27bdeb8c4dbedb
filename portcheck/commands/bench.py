"""`portcheck bench`: time every selected case's bench specs on this machine's GPU.

Ceilings (copy bandwidth, vendor matmul rates) are measured first, on the same device; each spec
is then timed with its baselines (torch eager, torch.compile of it, the vendor library and peer
libraries where the case provides them), and the roofline floor of every other arch in the arch
table is added as a model. Writes results.jsonl and bench.md into --out.
"""
from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

from .. import cases as registry
from .. import results
from ..errors import UsageError
from ..matrix import RunPlan
from ..overrides import load as load_overrides
from ..reports.output import atomic_write
from ..facts.archs import ARCHS, parse_archs
from ..targets.runtime import RUNTIME_TARGETS, resolve, select_mode
from ._common import (DEFAULT_MATRIX, add_cases_argument, check_dtypes, csv, json_spec, load_cases, load_run_plan,
                      named_case, timestamped, writable_dir)

NAME = "bench"
HELP = "time kernels on this GPU against measured ceilings, baselines and the roofline"


def add_arguments(p) -> None:
    p.add_argument("--kernel", help="comma list of case names or globs, or family:NAME (default: the "
                                    "matrix's, else all)")
    add_cases_argument(p)
    p.add_argument("--dtype", help="comma list of dtypes to keep among the bench specs")
    p.add_argument("--matrix", help=f"matrix file for [run] kernels and [bench] settings "
                                    f"(default: {DEFAULT_MATRIX} if present)")
    p.add_argument("--target", default="auto", help="cuda, rocm or auto (default: this machine's GPU)")
    p.add_argument("--out", help="report directory (default: reports/<timestamp>)")
    p.add_argument("--repeats", type=int, help="timed repeats per figure (default: the matrix's, 100)")
    p.add_argument("--noise-bound", type=float, help="relative spread above which a figure is "
                                                     "flagged noisy (default: the matrix's, 0.05)")
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    p.add_argument("--no-repeat-check", action="store_true",
                   help="do not time each kernel with a second timer (the repeat check)")
    p.add_argument("--spec", metavar="JSON", help="time exactly this spec (needs one --kernel)")
    p.add_argument("--model-only", action="store_true",
                   help="no device: write only the roofline model of the arch table")
    p.add_argument("--arch", help="archs for the model rows (default: every arch in the table "
                                  "except the measured one)")
    p.add_argument("--time-limit", type=float, metavar="SECONDS",
                   help="start no new spec after this long; the rest are recorded as not timed "
                        "(specs run in --kernel order, so list the important ones first)")


def _settings(args, matrix: RunPlan):
    s = matrix.bench
    if args.repeats is not None:
        if args.repeats < 3:
            raise UsageError(f"--repeats must be at least 3, got {args.repeats}")
        s.repeats = args.repeats
    if args.noise_bound is not None:
        if not 0 <= args.noise_bound < float("inf"):   # NaN included: it would flag nothing noisy
            raise UsageError(f"--noise-bound must be a finite number, not negative, got {args.noise_bound}")
        s.noise_bound = args.noise_bound
    if args.no_compile:
        s.compile = False
    if args.no_repeat_check:
        s.repeat_check = False
    return s


def _plan(args, matrix: RunPlan, settings):
    from ..speed.runner import plan
    load_cases(args, matrix)
    selected = registry.select(csv(args.kernel) or matrix.kernels)
    dtypes = csv(args.dtype) or None
    check_dtypes(selected, dtypes)
    if args.spec:
        spec = json_spec("--spec", args.spec, "a JSON object with at least 'dtype' (a bench spec)")
        selected = named_case(selected, args.kernel)
        if len(selected) != 1:
            raise UsageError("--spec needs exactly one --kernel (a case name)")
        case = selected[0]
        base = case.bench[0] if case.bench else {}
        full = {"seed": 0, **base, **spec}
        if base:   # typed like the case's own first bench spec, no unknown keys
            from ..validation import replay_spec
            replay_spec(full, [{"seed": 0, **base}], None, f"--spec for {case.name}")
        return [(case, full)]
    work = plan(selected, settings, dtypes)
    if not work:
        raise UsageError("no bench spec to time: the selected cases declare none for these dtypes")
    return work


def main(args) -> int:
    target, resolved = args.target, None
    if target not in ("cuda", "rocm", "auto"):
        known = ", ".join(t for t in RUNTIME_TARGETS if t != "interpreter")
        raise UsageError(f"portcheck bench times GPUs; --target must be {known} or auto, got {target!r}")
    if not args.model_only:
        resolved = resolve(target)
        if resolved == "interpreter":
            from ..targets.runtime import TARGETS
            why = "; ".join(f"{n}: {TARGETS[n].availability().reason}" for n in ("cuda", "rocm"))
            raise UsageError(f"portcheck bench needs a GPU and this machine has none ({why}); "
                             "--model-only writes the roofline model without one")
        select_mode(resolved)   # before any kernel module is imported
    matrix = load_run_plan(args.matrix)
    settings = _settings(args, matrix)
    archs = [ARCHS[a] for a in parse_archs(args.arch)] if args.arch else None
    work = _plan(args, matrix, settings)
    out = Path(args.out) if args.out else timestamped("reports")
    results_path = out / "results.jsonl"
    if results_path.exists():
        raise UsageError(f"{results_path} exists already; choose a new --out")
    if args.time_limit is not None and not 0 < args.time_limit < float("inf"):   # before --out is made
        raise UsageError(f"--time-limit must be a positive number of seconds, got {args.time_limit}")
    out = writable_dir(out)
    command = shlex.join(["portcheck", *sys.argv[1:]]) if sys.argv[1:2] == ["bench"] else "portcheck bench"
    if args.model_only:
        status = _model_only(work, archs, results_path, command)
    else:
        overrides = load_overrides(matrix.overrides) if matrix.overrides else []
        status = _measure(work, resolved, settings, archs, results_path, command, args.time_limit,
                          lambda: _write_report(out, results_path), overrides)
    _write_report(out, results_path)
    print(f"\nreport: {out / 'bench.md'}\nresults: {results_path}")
    return status


def _write_report(out: Path, results_path: Path) -> None:
    """bench.md from what results.jsonl holds now (rewritten after every spec: a run cut short
    still leaves a report of what it finished)."""
    from ..speed.report import bench_matrix
    records = results.read(results_path) if results_path.exists() else []
    atomic_write(out / "bench.md", f"# portcheck bench\n\n{bench_matrix(records)}")


def _model_only(work, archs, results_path: Path, command: str) -> int:
    from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException

    from ..speed.runner import cost_without_device, model_records
    archs = archs or list(ARCHS.values())
    status = 0
    for case, spec in work:
        try:
            cost = cost_without_device(case, spec)
        except (DataDependentOutputException, DynamicOutputShapeException) as exc:
            print(f"{case.name}: no cost model without a device (its inputs depend on data: "
                  f"{type(exc).__name__}: {str(exc)[:120]}); a GPU run adds its model rows",
                  file=sys.stderr)
            continue
        except Exception as exc:
            print(f"{case.name}: its cost model failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            status = 1
            continue
        for r in model_records(case, spec, cost, archs, command):
            results.append(results_path, r.to_dict())
        print(f"model {case.name:<22} {cost.bytes / 1e6:10,.0f} MB {cost.flops / 1e9:10,.3g} GFLOP", flush=True)
    return status


def _line(r) -> str:
    b = r.bench
    if r.verdict in ("error", "skip"):
        return f"{r.case:<22} {r.variant:<36} {r.verdict.upper()} {r.message}"
    base = ", ".join(f"{n} {v['speedup']:.2f}x" if "speedup" in v else f"{n} error"
                     for n, v in b["baselines"].items())
    return (f"{r.case:<22} {r.variant:<36} {b['kernel']['median_ms'] * 1e3:9.2f} us "
            f"±{b['kernel']['rel_spread']:.1%} {b['gbs']:8,.0f} GB/s {b['tflops']:7,.1f} TFLOP/s "
            f"{b['fraction_of_ceiling']:5.0%} of ceiling  [{base}]"
            + (f"  ({r.message})" if r.message else ""))


def _measure(work, target: str, settings, archs, results_path: Path, command: str,
             time_limit: float | None, progress, overrides=()) -> int:
    from ..speed.runner import BenchRunner
    t0 = time.perf_counter()
    runner = BenchRunner(target, settings, results_path, command, model_archs=archs, overrides=overrides)
    ceil = runner.ceilings()
    cp = ceil["copy"]
    mm = ", ".join(f"{k} {v['tflops']:.0f}" if "tflops" in v else f"{k} n/a" for k, v in ceil["matmul"].items())
    print(f"{runner.device['name']} ({target}/{runner.arch_name}): copy {cp['gbs']:,.0f} GB/s "
          f"(torch copy_ {cp['torch_copy']['gbs']:,.0f}, Triton {cp['triton_copy']['gbs']:,.0f}); "
          f"matmul TFLOP/s {mm}  [{time.perf_counter() - t0:.1f} s]", flush=True)
    status = 0 if cp["agrees_with_torch_copy"] else 1
    for i, (case, spec) in enumerate(work):
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            for c, s in work[i:]:
                runner.not_timed(c, s, f"not timed: --time-limit {time_limit:g} s reached")
            print(f"--time-limit {time_limit:g} s reached: {len(work) - i} spec(s) not timed "
                  "(recorded as such)", flush=True)
            status = max(status, 1)
            break
        t = time.perf_counter()
        r = runner.bench(case, spec)
        print(f"{_line(r)}  [{time.perf_counter() - t:.1f} s]", flush=True)
        progress()
        if r.verdict == "error":
            status = 1
    return status
