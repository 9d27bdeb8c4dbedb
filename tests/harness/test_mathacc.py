"""Math-function accuracy: the ULP arithmetic on hand-made cases, the sample's coverage, the
lowering fingerprints, and one real run on the interpreter with cross-compiled lowering."""
import json
import math
import os
import subprocess
import sys

import pytest
import torch

from portcheck.errors import UsageError
from portcheck.mathacc.functions import FUNCTIONS, documented_bound, select
from portcheck.mathacc.lowering import fingerprint
from portcheck.mathacc.sweep import Stats, stratified_sample, ulp_errors


def f32(*v):
    return torch.tensor(v, dtype=torch.float32)


def test_ulp_errors_hand_made():
    ref = torch.tensor([1.0, 1.0 + 2**-24, 2.0**-130, 1e39, float("nan"), float("inf"), 0.0], dtype=torch.float64)
    y = f32(1.0 + 2**-23, 1.0, 0.0, float("inf"), float("nan"), 3.0e38, 0.0)
    err = ulp_errors(y, ref).tolist()
    assert err[0] == 1.0                      # one float32 ulp above 1
    assert err[1] == 0.5                      # the exact value sits half-way
    assert err[2] == 2.0**-130 / 2.0**-149    # a flushed subnormal: 2^19 ulps of the subnormal grid
    assert err[3] == 0.0                      # 1e39 rounds to inf in float32: inf is right
    assert err[4] == 0.0                      # NaN for NaN
    assert err[5] == math.inf                 # finite where inf is due
    assert err[6] == 0.0


def test_stats_find_the_worst_input_and_flushes():
    s = Stats("t")
    x = f32(1.0, 2.0**-140, 3.0)
    ref = torch.tensor([1.0, 2.0**-140, 3.0], dtype=torch.float64)
    y = f32(1.0, 0.0, 3.0 + 2**-22)           # flushes the subnormal input; 1 ulp off at 3.0
    s.merge(ulp_errors(y, ref), x, y, ref, torch.zeros(3, dtype=torch.float64))
    assert s.worst_x == 2.0**-140 and s.max_ulp == 2.0**-140 / 2.0**-149
    assert s.max_ulp_normal == 1.0 and s.worst_x_normal == 3.0
    assert s.subnormal_inputs == 1 and s.flushed_inputs == 1
    assert s.subnormal_outputs == 1 and s.flushed_outputs == 1


def test_stratified_sample_covers_every_sign_and_exponent():
    x = stratified_sample(4)
    bits = x[:-5].view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    assert set((bits >> 23).tolist()) == set(range(512))
    assert torch.isnan(x[-1]) and x[-3].item() == float("inf")


@pytest.mark.parametrize("asm,vendor,expect", [
    ("mul.f32 %f2, %f1, 0f3FB8AA3B;\n ex2.approx.f32 %f3, %f2;", "nvidia", "ex2.approx.f32"),
    ("div.rn.f32 %f1, %f2, %f3;\n fma.rn.f32 %f4, %f1, %f1, %f1;", "nvidia", "div.rn.f32 + fma"),
    ("v_exp_f32_e32 v1, v2\n v_fma_f32 v3, v1, v1, v1", "amd", "v_exp_f32 + fma"),
    ("v_add_f32 v1, v2, v3", "amd", "plain arithmetic"),
])
def test_fingerprint(asm, vendor, expect):
    assert fingerprint(asm, vendor) == expect


def test_select_and_bounds():
    assert [f.name for f in select(["exp"])] == ["tl.exp", "libdevice.exp"]
    assert documented_bound("exp", "nvidia") == 2 and documented_bound("erf", "amd") == 4
    with pytest.raises(UsageError, match="unknown math function 'expp'; known: tl.exp"):
        select(["expp"])
    assert len(FUNCTIONS) == 25


def test_unknown_function_on_the_command_line():
    proc = subprocess.run([sys.executable, "-m", "portcheck", "math", "--function", "expp"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "known: tl.exp" in proc.stderr and "Traceback" not in proc.stderr


def test_interpreter_sample_and_lowering(tmp_path):
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, "-m", "portcheck", "math", "--target", "interpreter",
                           "--function", "tl.exp,libdevice.exp", "--arch", "sm_90a,gfx942",
                           "--per-exponent", "16", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    recs = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    measured = {r["case"]: r for r in recs if r["evidence"] == "interpreter"}
    assert measured["tl.exp"]["variant"].startswith("sample of")
    assert measured["tl.exp"]["metrics"]["max_ulp_normal"] < 4        # numpy's float32 exp
    # libdevice on the interpreter is the numerics layer's: float64 exp rounded once to fp32
    assert measured["libdevice.exp"]["metrics"]["max_ulp_normal"] <= 0.5
    lowering = {(r["case"], r["arch"]): r["message"] for r in recs if r["evidence"] == "compile"}
    assert lowering[("tl.exp", "sm_90a")] == "ex2.approx.f32"
    assert lowering[("tl.exp", "gfx942")].startswith("v_exp_f32")
    md = (tmp_path / "math.md").read_text()
    assert "stratified sample" in md and "ex2.approx.f32" in md
