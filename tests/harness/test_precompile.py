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


# Compiling needs a process that never was in interpreter mode (Triton's own helpers are
# interpreted functions there): the warm-up runs in a fresh one.
WARM_UP = """
import json, sys
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
    launches = precompile.noted_launches(launch, specs)
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
    ran = []
    result = runner.check(case, "interpreter", "interpreter", dtype, settings=settings, max_elements=4096,
                          seed=seed, on_example=lambda spec: ran.append(dict(spec)))
    drawn = precompile.examples(case.inputs(dtype, 4096), settings, seed)
    assert result.verdict == "pass" and ran and all(spec in drawn for spec in ran)


@pytest.mark.parametrize("value, threads", [(None, 0), ("", 0), ("0", 0), ("4", 4)])
def test_the_warm_up_is_opt_in(monkeypatch, value, threads):
    if value is None:
        monkeypatch.delenv(precompile.ENV, raising=False)
    else:
        monkeypatch.setenv(precompile.ENV, value)
    assert precompile.threads() == threads


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
    monkeypatch.setattr(precompile, "warm_up", lambda launches, n: noted.extend(launches))   # per 4 specs
    monkeypatch.setenv(precompile.ENV, "2")
    case, dtype = cases.get("rmsnorm"), "fp16"
    settings = hypothesis.settings.get_profile("ci")
    runner._precompile(case, "interpreter", case.inputs(dtype, 4096), settings, 7, runner.CHECKS)
    assert len(noted) >= settings.max_examples   # one launch (or more) per example drawn
    monkeypatch.setattr(precompile, "warm_up", lambda launches, n: 1 / 0)
    runner._precompile(case, "interpreter", case.inputs(dtype, 4096), settings, 7, runner.CHECKS)
