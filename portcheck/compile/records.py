"""From compile tasks to Result records: compile them in the worker pool, derive spills and
occupancy, run the lints and apply the overrides manifest.

Each record has kind='compile', evidence='compile' and target 'compile': nothing ran on a GPU.
"""
from __future__ import annotations

import shlex

from .lints import DEFAULT as DEFAULT_LINTS
from .lints import LintConfig, failing, findings, verdict
from .occupancy import occupancy
from .plan import CompileSettings, Task
from .pool import Pool
from .worker import compile_payload
from ..cases import cases_flag
from ..facts.archs import arch as get_arch


_METRIC_KEYS = ("compile_s", "num_warps", "num_stages", "warp_size", "shared", "registers", "vgpr",
                "arch_vgpr", "agpr", "sgpr", "vgpr_spill_count", "sgpr_spill_count", "scratch_bytes",
                "stack_bytes", "local_bytes", "static_shared", "group_segment_fixed_size",
                "occupancy", "occupancy_effective", "occupancy_max", "occupancy_unit",
                "occupancy_fraction", "matrix_family", "matrix_instructions", "matrix_operands", "dots", "code_bytes",
                "async_copy_sizes", "spill_bytes", "spill_count", "threads", "note", "cached")


def to_result(task: Task, raw: dict, lints: LintConfig = DEFAULT_LINTS, command: str = "",
              fail_on: str = "error"):
    """The Result record of one compile (kind='compile', evidence='compile'); findings at or
    above `fail_on` fail it."""
    from ..provenance import collect
    from ..results import Result
    arch = get_arch(task.arch)
    status = raw.get("status", "error")
    if status == "ok":
        if arch.is_amd:
            # VGPR spills go to scratch memory; SGPR spills go to VGPR lanes first (cheap), so
            # they stay in the metrics (sgpr_spill_count) and are not counted as spills
            raw["spill_bytes"] = raw.get("scratch_bytes", 0)
            raw["spill_count"] = raw.get("vgpr_spill_count", 0)
        else:
            raw["spill_bytes"] = max(raw.get("stack_bytes") or 0, raw.get("local_bytes") or 0)
        raw["threads"] = (raw.get("num_warps") or 0) * (raw.get("warp_size") or arch.warp_size)
        raw.update(occupancy(arch, raw))
    found = findings(raw, arch, task.options, lints)
    v = verdict(found, status, fail_on)
    metrics = {"compiled": status == "ok", **{k: raw[k] for k in _METRIC_KEYS if k in raw}}
    if status == "ok":   # the names the merged report and the gate read
        metrics.update(regs=raw.get("registers"), spills=raw.get("spill_bytes"))
    if status == "ok":
        message = "; ".join(f"{f['rule']}: {f['message']}" for f in failing(found, fail_on))
    else:
        message = raw.get("error", status)
    prov = collect(None, task.arch, command=command)
    prov.update(triton=raw.get("triton", prov.get("triton")), target="compile", compile_status=status)
    return Result(kind="compile", case=task.case, family=task.family, dtype=task.dtype, target="compile",
                  arch=task.arch, verdict=v, evidence="compile", message=message, metrics=metrics,
                  variant=task.label, lints=found, time_ms=None,
                  reproduce=shlex.join(["portcheck", "compile", *cases_flag(task.case), "--kernel", task.case,
                                        "--arch", task.arch]),
                  provenance=prov)


def compile_tasks(tasks: list[Task], settings: CompileSettings | None = None, on_result=None,
                  command: str = "", overrides=None, claim=lambda i: True, pool=None) -> list:
    """Compile every task in worker processes; Results in task order (a timeout or a crash fails
    only its own record). `on_result(result)` is called in task order as results complete.
    `claim(i)` is asked just before task i is sent to a worker: False leaves it to another
    process sharing the task list (its result here stays None). `pool`: a Pool
    started earlier (it is closed here); by default one is made with the settings' jobs."""
    settings = settings or CompileSettings()
    results: list = [None] * len(tasks)
    next_out = 0

    finished = [False] * len(tasks)

    def advance(i: int):
        nonlocal next_out
        finished[i] = True
        while next_out < len(tasks) and finished[next_out]:
            if on_result and results[next_out] is not None:
                on_result(results[next_out])
            next_out += 1

    def done(i: int, raw: dict):
        results[i] = apply_overrides(to_result(tasks[i], raw, settings.lints, command, settings.fail_on),
                                     overrides)
        advance(i)

    def claimed(indices):
        for i in indices:
            if claim(i):
                yield i, tasks[i].payload, tasks[i].arch
            else:           # another process took it: keep the order moving here
                advance(i)

    real = [i for i, t in enumerate(tasks) if not {"skip", "error"} & set(t.payload)]
    for i, payload, arch in claimed(sorted(set(range(len(tasks))) - set(real))):
        done(i, compile_payload(payload, arch))        # nothing to compile: decided here
    with pool or Pool(settings.jobs, settings.timeout) as workers:
        workers.run(claimed(real), done)
    return results


def apply_overrides(result, overrides):
    """A manifest entry for target 'compile' turns a failure into a strict xfail (a pass under
    it becomes xpass, which fails) or skips the record; the entry travels in the record."""
    from ..overrides import find
    o = find(overrides, result.case, "compile", result.arch, result.dtype) if overrides else None
    if o is None or o.action == "tolerance":
        return result
    result.override = o.to_dict()
    if o.action == "skip":
        result.verdict = "skip"
    elif result.verdict in ("fail", "error"):
        result.verdict = "xfail"
    elif result.verdict == "pass":
        result.verdict = "xpass"
        result.message = f"passes although an xfail override covers it: {o.reason}"
    return result
