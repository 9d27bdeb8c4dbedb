"""The benchmark runner: each case's bench specs timed on this machine's GPU against the ceilings
measured in the same run, the datasheet roofline and the case's baselines; and, for archs with no
device here, the roofline floor of the cost model alone (labelled a model).

Shared by `portcheck bench` and `pytest --bench`. Records are portcheck.results.Result with
kind="bench": evidence "gpu" for measured figures, "model" for roofline floors (target "model",
verdict "skip": nothing ran), and one "ceilings" record per device and run.
"""
from __future__ import annotations

import gc
import json
import os
import shlex
import time
import traceback
from pathlib import Path

from . import clocks, peers, roofline
from .. import results
from .timing import Stats, Timer, agree, interleave, rotation_sets, warm_up
from ..cases import Case, Cost, cases_flag
from ..errors import UsageError
from ..matrix import BenchSettings
from ..overrides import find
from ..provenance import collect
from ..results import Result
from ..strategies import drawn_on
from ..facts.archs import ARCHS
from ..targets.runtime import TARGETS

MEMORY_GOAL = 0.95                 # memory-bound kernels: this fraction of the copy ceiling
MEMORY_GOAL_MIN_BYTES = 256 * 10**6
COMPILE_BASELINE = "torch.compile"
KERNEL, REPEAT = "<kernel>", "<repeat>"   # the timers of a figure that are not baselines
DEFAULT_L2_BYTES = 64 << 20        # when the device does not report its L2 size


# ---- what to time ----------------------------------------------------------------------------

def spec_label(spec: dict) -> str:
    """'bf16 rows=32768 cols=4096': the dtype then the shape-like fields of a spec."""
    skip = {"dtype", "seed", "regime"}
    parts = [str(spec.get("dtype", "?"))]
    for k, v in spec.items():
        if k in skip or (k == "layout" and v == "contiguous"):
            continue
        parts.append(f"{k}={'x'.join(map(str, v)) if isinstance(v, (list, tuple)) else v}")
    return " ".join(parts)


def bench_specs(case: Case, settings: BenchSettings | None = None, dtypes=None) -> list[dict]:
    """The specs to time for a case: its own bench specs, or the matrix's [bench.shapes] entry
    for it (each merged over the case's first spec, so an entry may give only the shape), plus
    [bench.extra_shapes]; kept to `dtypes` when given (a case whose specs have none of them gets
    its first spec in each requested dtype it supports)."""
    settings = settings or BenchSettings()
    base = [dict(s) for s in case.bench]
    first = base[0] if base else {}
    specs = ([{**first, **s} for s in settings.shapes[case.name]] if case.name in settings.shapes
             else base)
    specs += [{**first, **s} for s in settings.extra_shapes.get(case.name, [])]
    for s in specs:
        if "dtype" not in s:
            raise UsageError(f"bench spec for {case.name} has no dtype: {s}")
        s.setdefault("seed", 0)
    if dtypes:
        kept = [s for s in specs if s["dtype"] in dtypes]
        if not kept and specs:
            kept = [dict(specs[0], dtype=d) for d in dtypes if d in case.dtypes]
        specs = kept
    return specs


def plan(cases, settings: BenchSettings | None = None, dtypes=None) -> list[tuple[Case, dict]]:
    return [(c, s) for c in cases for s in bench_specs(c, settings, dtypes)]


def cost_without_device(case: Case, spec: dict) -> Cost:
    """A spec's Cost with no device: the case's make() under FakeTensorMode (no memory, no
    arithmetic). A make() whose shapes depend on data (nonzero, item) cannot run fake, and real
    bench-sized inputs on a CPU take too long: such a case gets its model rows from a GPU run."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode(allow_non_fake_inputs=True):
        return case.cost(case.make(spec, "cpu"))


# ---- model rows ------------------------------------------------------------------------------

def model_records(case: Case, spec: dict, cost: Cost, archs, command: str = "") -> list[Result]:
    """Roofline floors from the cost model and each arch's datasheet peaks: a model, no device."""
    out = []
    label = spec_label(spec)
    for a in archs:
        f = roofline.model_floor(cost.bytes, cost.flops, a, spec["dtype"])
        r = Result("bench", case.name, case.family, spec["dtype"], "model", a.name, "skip", "model",
                   message="roofline floor from datasheet peaks and the cost model; not measured",
                   variant=label, time_ms=None)
        r.bench = {"spec": spec, "label": label, "bytes": cost.bytes, "flops": cost.flops,
                   "model": f.to_dict(), "example": a.example, "source": a.source}
        r.provenance = collect(None, a.name, seed=spec.get("seed"), command=command)
        out.append(r)
    return out


# ---- measuring -------------------------------------------------------------------------------

def ceiling_summary(ceilings: dict) -> dict:
    """The two numbers a figure is divided by: copy GB/s and matmul TFLOP/s per rate key."""
    return {"copy_gbs": ceilings["copy"]["gbs"],
            "matmul_tflops": {k: v["tflops"] for k, v in ceilings["matmul"].items() if "tflops" in v}}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300] if text else ''}"


def speed_goals(bench: dict) -> list[dict]:
    """The kernel speed goals a measured record is held to (reported, never hidden)."""
    goals = []
    ceiling = bench.get("ceiling", {})
    if ceiling.get("bound") == "memory" and bench["bytes"] >= MEMORY_GOAL_MIN_BYTES and ceiling.get("copy_gbs"):
        value = bench["gbs"] / ceiling["copy_gbs"]
        goals.append({"goal": f"≥ {MEMORY_GOAL:.0%} of the copy bandwidth measured in this run",
                      "value": value, "met": value >= MEMORY_GOAL})
    kernel = Stats.from_dict(bench["kernel"])
    for name, b in bench.get("baselines", {}).items():
        if peers.is_peer(name) and "median_ms" in b:
            other = Stats.from_dict(b)
            slower_by = kernel.median_ms - other.median_ms
            goals.append({"goal": f"no slower than {name}", "value": b["speedup"],
                          "met": slower_by <= max(kernel.iqr_ms, other.iqr_ms, kernel.resolution_ms)})
    return goals


class PhaseClock:
    """Host wall time of each phase of one figure (where a benchmark run spends its time)."""

    def __init__(self):
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.laps[phase] = round(self.laps.get(phase, 0.0) + now - self._last, 3)
        self._last = now


class BenchRunner:
    """Times cases on this process's GPU (torch device 0); measures ceilings once, first."""

    def __init__(self, target_name: str, settings: BenchSettings | None = None,
                 results_path: Path | None = None, command: str | None = None,
                 model_archs=None, overrides=()):
        self.target = TARGETS[target_name]
        self.overrides = list(overrides)   # "skip" entries name combinations this target cannot run
        if not self.target.is_gpu:
            raise UsageError(f"benchmarks need a GPU target; {target_name!r} has no device "
                             "(use `portcheck bench --model-only` for the roofline model)")
        avail = self.target.availability()
        if not avail.ok:
            raise UsageError(f"benchmarks need a GPU and target {target_name!r} has none here: "
                             f"{avail.reason} (use `portcheck bench --model-only` for the roofline model)")
        import torch
        self.torch = torch
        self.settings = settings or BenchSettings()
        self.results_path = results_path
        self.command = command or "portcheck bench"
        self.arch_name = self.target.arch()
        self.arch = ARCHS.get(self.arch_name)
        props = torch.cuda.get_device_properties(0)
        self.device = {"name": props.name, "uuid": str(getattr(props, "uuid", "") or "") or None,
                       "l2_bytes": int(getattr(props, "L2_cache_size", 0) or 0) or None,
                       "memory_bytes": int(props.total_memory)}
        self.l2_bytes = self.device["l2_bytes"] or DEFAULT_L2_BYTES
        self.model_archs = ([a for a in ARCHS.values() if a.name != self.arch_name]
                            if model_archs is None else list(model_archs))
        self._ceilings: dict | None = None

    # -- bookkeeping
    def _provenance(self, spec_seed=None, clocks_read=None) -> dict:
        p = collect(self.target, self.arch_name, seed=spec_seed, command=self.command)
        p["gpu_uuid"] = self.device["uuid"]
        for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
            if os.environ.get(var) is not None:
                p[var] = os.environ[var]
        if clocks_read is not None:
            p["clocks"] = clocks_read
        return p

    def _emit(self, r: Result) -> Result:
        if self.results_path is not None:
            results.append(self.results_path, r.to_dict())
        return r

    def _clocks(self) -> dict:
        return clocks.read(self.target.vendor, self.device["uuid"])

    # -- ceilings
    def ceilings(self) -> dict:
        if self._ceilings is None:
            from . import ceilings
            before = self._clocks()
            full = ceilings.measure(self.arch)
            after = self._clocks()
            self._ceilings = full
            copy = full["copy"]
            ok = copy["agrees_with_torch_copy"]
            r = Result("bench", "ceilings", "ceilings", "-", self.target.name, self.arch_name,
                       "pass" if ok else "fail", "gpu", variant="device ceilings",
                       time_ms=copy["torch_copy"]["median_ms"],
                       message="" if ok else (f"the copy ceiling ({copy['method']}) is "
                                              f"{copy['vs_torch_copy']:.3f}x torch's copy_, outside "
                                              f"{ceilings.COPY_AGREEMENT:.0%}"))
            r.bench = {"ceilings": full, "device": self.device, "clocks": {"before": before, "after": after}}
            r.provenance = self._provenance(clocks_read={"before": before, "after": after})
            self._emit(r)
        return self._ceilings

    # -- one spec
    def bench(self, case: Case, spec: dict) -> Result:
        """Time one spec of one case; returns (and appends) its record. Never raises for a
        kernel, baseline or timing fault: those become an error record or a baseline error."""
        ceil = self.ceilings()
        label = spec_label(spec)
        skip = find(self.overrides, case.name, self.target.name, self.arch_name, spec["dtype"])
        if skip is not None and skip.action == "skip":
            return self.not_timed(case, spec, f"skipped by override: {skip.reason}")
        r = Result("bench", case.name, case.family, spec["dtype"], self.target.name, self.arch_name,
                   "pass", "gpu", variant=label)
        r.reproduce = shlex.join(["portcheck", "bench", *cases_flag(case.name), "--kernel", case.name,
                                  "--spec", json.dumps(spec, sort_keys=True)])
        clocks_read = {}
        try:
            r.bench = self._measure(case, spec, ceil, clocks_read)
            r.time_ms = r.bench["kernel"]["median_ms"]
            notes = []
            if r.bench["noisy"]:
                notes.append(f"noisy: spread {r.bench['kernel']['rel_spread']:.1%} > "
                             f"{self.settings.noise_bound:.0%}")
            if r.bench.get("repeat_agrees") is False:
                notes.append("the repeat measurement disagrees beyond the spread")
            if r.bench["kernel"]["drift"] > self.settings.noise_bound:
                notes.append("the device drifted: round medians span "
                             f"{r.bench['kernel']['drift']:.1%}")
            unmet = [g["goal"] for g in r.bench["goals"] if not g["met"]]
            if unmet:
                notes.append("goal not met: " + "; ".join(unmet))
            r.message = "; ".join(notes)
        except Exception as exc:
            r.verdict = "error"
            r.message = _first_line(exc)
            r.bench = {"spec": spec, "label": label,
                       "traceback": traceback.format_exc(limit=6)[-2000:]}
        finally:
            self._release()
        r.provenance = self._provenance(spec.get("seed"), clocks_read or None)
        self._emit(r)
        if "bytes" in r.bench:
            for m in model_records(case, spec, Cost(r.bench["bytes"], r.bench["flops"]),
                                   self.model_archs, self.command):
                self._emit(m)
        return r

    def not_timed(self, case: Case, spec: dict, why: str) -> Result:
        """A record that a planned spec was not measured (a time limit), so the report says so."""
        label = spec_label(spec)
        r = Result("bench", case.name, case.family, spec["dtype"], self.target.name, self.arch_name,
                   "skip", "gpu", message=why, variant=label)
        r.bench = {"spec": spec, "label": label}
        r.provenance = self._provenance(spec.get("seed"))
        return self._emit(r)

    def _release(self) -> None:
        gc.collect()
        try:
            self.torch.cuda.synchronize()
            self.torch.cuda.empty_cache()
        except Exception:   # a sticky device fault: the next case's record will say so
            pass

    def _measure(self, case: Case, spec: dict, ceil: dict, clocks_read: dict) -> dict:
        torch, s = self.torch, self.settings
        wall = PhaseClock()
        with drawn_on(self.target.device):   # a 1 GB input drawn on the host costs seconds
            args0 = case.make(spec, self.target.device)
            cost = case.cost(args0)
            sets = rotation_sets(cost.bytes, self.l2_bytes)
            arg_sets = [args0] + [case.make(spec, self.target.device) for _ in range(sets - 1)]
        out_sets = [{n: torch.empty(shape, dtype=dt, device=self.target.device)
                     for n, (shape, dt) in case.outputs(a).items()} for a in arg_sets]
        kernel_fns = [(lambda a=a, o=o: case.launch(a, o)) for a, o in zip(arg_sets, out_sets)]
        wall.lap("inputs")
        warm_up(kernel_fns[0], 3)
        wall.lap("warm_up")
        clocks_read["before"] = self._clocks()
        timers = {KERNEL: Timer(kernel_fns, repeats=s.repeats,
                                graph_below_ms=s.graph_below_us / 1e3)}
        method = timers[KERNEL].method
        if s.repeat_check:   # a second timer of the same launches, prepared on its own
            timers[REPEAT] = Timer(kernel_fns, repeats=s.repeats, method=method)
        wall.lap("kernel")

        baselines: dict[str, dict] = {}   # name -> figure or error, in the case's order
        try:
            base_sets = [case.baselines(a) for a in arg_sets] if case.baselines else []
        except Exception as exc:   # the case's baselines() itself failed: say so, keep the figure
            baselines["baselines()"] = {"error": _first_line(exc)}
            base_sets = []
        compile_s = None
        for name in list(base_sets[0]) if base_sets else []:
            fns = [b[name] for b in base_sets]
            baselines[name] = self._baseline_timer(timers, name, fns, method)
            wall.lap("baselines")
            if name == "torch" and s.compile:
                try:
                    compiled, compile_s = self._compiled(fns)
                except Exception as exc:
                    baselines[COMPILE_BASELINE] = {"error": _first_line(exc)}
                else:
                    baselines[COMPILE_BASELINE] = self._baseline_timer(timers, COMPILE_BASELINE,
                                                                       compiled, method)
                wall.lap("torch.compile")
        try:
            timed = interleave(timers)
        finally:
            if COMPILE_BASELINE in baselines:
                torch._dynamo.reset()   # drop the compiled graphs and their memory
        wall.lap("timing")
        clocks_read["after"] = self._clocks()
        kernel = timed.pop(KERNEL)
        if isinstance(kernel, Exception):
            raise kernel
        repeat = timed.pop(REPEAT, None)
        if isinstance(repeat, Exception):
            raise repeat
        for name, t in timed.items():
            baselines[name] = self._baseline_figure(t, kernel)
        if compile_s is not None and "error" not in baselines[COMPILE_BASELINE]:
            baselines[COMPILE_BASELINE]["compile_s"] = compile_s

        # figures
        ks = kernel.stats
        rates = roofline.achieved(cost.bytes, cost.flops, ks.median_ms)
        summ = ceiling_summary(ceil)
        fc = roofline.floor(cost.bytes, cost.flops, summ["copy_gbs"], summ["matmul_tflops"], spec["dtype"])
        bench = {"spec": spec, "label": spec_label(spec), "bytes": cost.bytes, "flops": cost.flops,
                 "kernel": kernel.to_dict(), **rates, "noise_bound": s.noise_bound,
                 "noisy": ks.noisy(s.noise_bound), "rotation_sets": len(kernel_fns),
                 "l2_bytes": self.l2_bytes, "device": self.device, "ceilings": summ,
                 "ceiling": {**fc.to_dict(), "copy_gbs": summ["copy_gbs"]},
                 "fraction_of_ceiling": roofline.fraction(fc.ms, ks.median_ms),
                 "baselines": baselines, "clocks": dict(clocks_read),
                 "inputs": "normal values drawn on the device (not the CPU stream checks use)",
                 "wall_s": wall.laps}
        if self.arch is not None:
            fd = roofline.model_floor(cost.bytes, cost.flops, self.arch, spec["dtype"])
            bench["datasheet"] = {**fd.to_dict(), "arch": self.arch.name, "example": self.arch.example,
                                  "source": self.arch.source}
            bench["fraction_of_datasheet"] = roofline.fraction(fd.ms, ks.median_ms)
        if repeat is not None:
            bench["repeat"] = repeat.to_dict()
            bench["repeat_agrees"] = agree(ks, repeat.stats)
        if peers.unavailable():
            bench["peers_unavailable"] = peers.unavailable()
        bench["peer_versions"] = {n: peers.version(n) for n in baselines if peers.is_peer(n)}
        bench["goals"] = speed_goals(bench)
        return bench

    def _baseline_timer(self, timers: dict, name: str, fns, method: str) -> dict:
        """Prepare a baseline's timer (its warm-up is where a peer autotunes); an error record
        when it cannot run."""
        try:
            timers[name] = Timer(fns, repeats=self.settings.repeats, method=method)
            return {}
        except Exception as exc:
            self.torch.cuda.synchronize()
            return {"error": _first_line(exc)}

    def _baseline_figure(self, t, kernel) -> dict:
        if isinstance(t, Exception):
            return {"error": _first_line(t)}
        out = {**t.to_dict(), "speedup": t.stats.median_ms / kernel.stats.median_ms,
               "noisy": t.stats.noisy(self.settings.noise_bound)}
        if t.method != kernel.method:
            out["note"] = (out.get("note") or "") + f" (kernel timed with {kernel.method})"
        return out

    def _compiled(self, fns):
        """torch.compile of the eager baseline, compiled once here: (callables, seconds the
        compile took)."""
        torch = self.torch
        import torch._dynamo
        torch._dynamo.reset()
        compiled = [torch.compile(f, dynamic=False) for f in fns]
        t0 = time.perf_counter()
        compiled[0]()
        torch.cuda.synchronize()
        return compiled, time.perf_counter() - t0
