"""portcheck.precompile: a check's kernels compiled ahead, several at a time. No GPU here, so the
warm-up cross-compiles for sm_90a (portcheck.compile.capture.answering_as) into a kernel's own cache."""
import json
import os
import subprocess
import sys

import hypothesis
import pytest

from portcheck import cases, precompile, runner
from portcheck.errors import UsageError
from portcheck.session import case_seed
from portcheck.strategies import register_profiles

register_profiles()   # portcheck's "ci" profile (12 examples), not Hypothesis's own of that name


# Compiling needs a process that never was in interpreter mode (Triton's own helpers are
# interpreted functions there): the warm-up runs in a fresh one.
WARM_UP = """
import functools, json, sys
import torch, triton, triton.language as tl
from triton.runtime import driver
from portcheck import precompile
from portcheck.compile.capture import answering_as
from portcheck.facts.archs import arch

@triton.jit
def copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

x, y = torch.ones(64), torch.zeros(64)

def launch(spec):
    if spec.get("bad"):
        raise ValueError("a launcher that fails before its launch")
    copy[(1,)](x, y, spec["n"], BLOCK=spec["block"])

specs = [{"n": 64, "block": 64}, {"n": 64, "block": 32}, {"n": 63, "block": 64},
         {"n": 64, "block": 64},                 # the same specialization as the first
         {"n": 64, "block": 64, "bad": True}]     # passed over
out = {}
with answering_as(arch("sm_90a")):   # compiled for a GPU this machine does not have, never run
    driver.active.get_current_device = lambda: 0
    driver.active.get_current_stream = lambda device=None: 0
    launches = precompile.noted_launches([functools.partial(launch, s) for s in specs])
    out["noted"], out["ran"] = len(launches), bool(y.any())
    precompile.warm_up(launches, 2)
    out["cached"] = len(copy.device_caches[0][0])
    compiled = []
    copy._do_compile = lambda *a, **k: compiled.append(a)
    precompile.warm_up(launches, 2)               # the check's launches find them there
    out["compiled_again"] = len(compiled)
print(json.dumps(out))
"""


def test_warm_up_compiles_each_distinct_launch_once_and_runs_none(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    script = tmp_path / "warm_up.py"   # in a file: triton.jit reads the kernel's source
    script.write_text(WARM_UP)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                          env={**env, "TRITON_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr[-3000:]
    # n=64 and n=63 specialize apart, and so do the two BLOCKs: three kernels, each compiled once
    assert json.loads(done.stdout.splitlines()[-1]) == {"noted": 4, "ran": False, "cached": 3,
                                                        "compiled_again": 0}


def test_the_examples_drawn_ahead_are_the_checks():
    case, dtype = cases.get("softmax"), "fp32"
    settings = hypothesis.settings.get_profile("ci")
    seed = case_seed(0, case.name, dtype)
    ran, after = [], []   # the search's own inputs; those added after it (regimes left out, strided)

    def note(spec):
        (ran if hypothesis.currently_in_test_context() else after).append(dict(spec))
    result = runner.check(case, "interpreter", "interpreter", dtype, settings=settings, max_elements=4096,
                          seed=seed, on_example=note)
    drawn = precompile.examples(case.inputs(dtype, 4096), settings, seed)
    assert result.verdict == "pass" and ran and all(spec in drawn for spec in ran)
    ran += after
    assert [spec[runner.COLUMNS_KEY] for spec in ran if runner.COLUMNS_KEY in spec] == ["x"]


@pytest.mark.parametrize("value, pole, threads", [(None, False, 0), ("", False, 0), (None, True, precompile.POLE_THREADS),
                                                  ("0", True, 0), ("4", False, 4), ("2", True, 2)])
def test_a_long_pole_warms_up_unless_the_variable_says_otherwise(monkeypatch, value, pole, threads):
    if value is None:
        monkeypatch.delenv(precompile.ENV, raising=False)
    else:
        monkeypatch.setenv(precompile.ENV, value)
    assert precompile.threads(pole) == threads


def test_a_pole_is_a_unit_of_at_least_half_a_workers_fair_share():
    # the default run on one H200: 725 s over 16 workers, a share of 45 s
    assert precompile.is_pole(58.1, 725, 16) and precompile.is_pole(22.7, 725, 16)
    assert not precompile.is_pole(21.4, 725, 16) and not precompile.is_pole(None, 725, 16)
    assert precompile.is_pole(30, 30, 1)          # a run of one unit: its warm-up has the host
    assert not precompile.is_pole(0.0, 0.0, 16)   # nothing recorded to go by


def test_the_workers_poles_come_from_the_units_last_seconds(monkeypatch):
    from portcheck import workers
    from portcheck.commands import run
    seconds = {"matmul_fp8:fp8e5": 58.1, "softmax:fp16": 2.0, "rope:bf16": 1.0, "elsewhere:fp32": 900.0}
    keys = ["matmul_fp8:fp8e5", "softmax:fp16", "rope:bf16", "never_run:fp32"]
    monkeypatch.setenv(workers.PROCESSES_VAR, "2")   # 61.1 s over 2 workers: poles from 15.3 s
    assert run._poles(seconds, keys) == {"matmul_fp8:fp8e5"}   # a unit of another run counts not
    monkeypatch.setenv(workers.PROCESSES_VAR, "40")   # 0.76 s: every unit timed is one
    assert run._poles(seconds, keys) == {"matmul_fp8:fp8e5", "softmax:fp16", "rope:bf16"}


@pytest.mark.parametrize("value", ["-2", "many", "1.5"])
def test_a_bad_thread_count_is_a_usage_error_before_the_run_starts(monkeypatch, tmp_path, value):
    monkeypatch.setenv(precompile.ENV, value)
    with pytest.raises(UsageError, match=precompile.ENV):
        precompile.threads()
    done = subprocess.run([sys.executable, "-m", "portcheck", "run", "--target", "interpreter", "--kernel", "softmax",
                           "--out", str(tmp_path / "r")], capture_output=True, text=True, env={**os.environ})
    assert done.returncode == 2 and precompile.ENV in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "r" / "results.jsonl").exists()


def test_the_checks_warm_up_notes_every_example_and_never_fails_it(monkeypatch):
    # on the interpreter nothing compiles: the warm-up notes the launches, finds no kernel to
    # warm up, and leaves the check to run as it would
    noted = []
    monkeypatch.setattr(precompile, "submit", lambda launches: noted.extend(launches))   # per 4 specs
    case, dtype = cases.get("rmsnorm"), "fp16"
    settings = hypothesis.settings.get_profile("ci")
    runner._precompile(case, "interpreter", case.inputs(dtype, 4096), settings, 7, runner.CHECKS, 2)
    assert len(noted) >= settings.max_examples   # one launch (or more) per example drawn
    monkeypatch.setattr(precompile, "submit", lambda launches: 1 / 0)
    runner._precompile(case, "interpreter", case.inputs(dtype, 4096), settings, 7, runner.CHECKS, 2)


def test_a_poles_warm_up_also_compiles_the_digests_and_the_timed_spec(monkeypatch):
    # what Session.run launches after the check (the digests' inputs, the bench spec that the
    # timing worker times) would otherwise compile one kernel after another once the search ends
    from portcheck.digests import specs_for
    from portcheck.session import Session, bench_spec
    session = Session("interpreter", profile="ci", max_elements={"gpu": 1 << 20, "interpreter": 4096},
                      seed=0, digests=2)
    session.warm_bench = True   # as on a GPU, whose run times each case
    case, dtype = cases.get("rmsnorm"), "fp16"
    after = session._after_check(case, dtype)
    assert after[:-1] == specs_for(case, dtype, 2)[0] and callable(after[-1])
    noted = []
    monkeypatch.setattr(precompile, "submit", lambda launches: noted.extend(launches))
    monkeypatch.setattr(precompile, "examples", lambda *args: [])   # only what runs after the check
    runner._precompile(case, "interpreter", case.inputs(dtype, 4096), hypothesis.settings.get_profile("ci"),
                       7, runner.CHECKS, 2, after)
    shapes = [tuple(args[0].shape) for _, args, _ in noted]
    bench = bench_spec(case, dtype)
    assert shapes == [(s["rows"], s["cols"]) for s in after[:-1]] + [(bench["rows"], bench["cols"])]




def test_a_poles_warm_up_also_compiles_the_strided_inputs_launches(monkeypatch):
    # check's strided-input step launches the largest passing input with each tensor's last
    # dimension strided: on sm_90a matmul's fp8 inputs go through its TMA kernel and strided ones
    # through its pointer kernel, which the H200's checks compiled at that launch, one after another
    case, dtype, settings = cases.get("matmul"), "fp16", hypothesis.settings.get_profile("ci")
    drawn = precompile.examples(case.inputs(dtype, 1 << 16), settings, 3)
    made, inputs = [], runner._inputs
    monkeypatch.setattr(runner, "_inputs", lambda case, device, spec, checks: made.append(spec) or
                        inputs(case, device, spec, checks))
    monkeypatch.setattr(precompile, "submit", lambda launches: None)
    monkeypatch.setattr(precompile, "examples", lambda *args: drawn)
    runner._precompile(case, "interpreter", case.inputs(dtype, 1 << 16), settings, 3, runner.CHECKS, 2)
    largest = max(drawn, key=runner.spec_size)
    assert made[:len(drawn)] == drawn
    assert made[len(drawn):] == [{**largest, runner.COLUMNS_KEY: name}
                                 for name in runner.stridable(case.make(largest, "cpu"), case.in_place)]
    assert len(made) == len(drawn) + 2   # a and b
