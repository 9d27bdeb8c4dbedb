"""Kernels under @triton.autotune in a check (portcheck/autotuned.py): one configuration per
example, chosen by the example and never timed, every configuration on some example, and a
failure that names its configuration and replays it. On the interpreter, where Triton's own
autotuner cannot time at all."""
import dataclasses
import os

import hypothesis
import pytest
import triton
import triton.language as tl

import portcheck
from portcheck import autotuned, runner
from portcheck import strategies as S
from portcheck import tolerance as T
from portcheck.cases import Case
from portcheck.targets.runtime import INTERPRETER_ARCH

INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
on_the_interpreter = pytest.mark.skipif(not INTERPRETED, reason="kernels run on the interpreter here (--target=interpreter)")

BLOCKS = (16, 32, 64, 128, 256)
WRONG = {"block": 0}   # the BLOCK whose configuration has the bug (0: none)


def _configs():
    return [triton.Config({"BLOCK": b, "WRONG": b == WRONG["block"]}) for b in BLOCKS]


def _scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, WRONG: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    x = tl.load(x_ptr + offs, mask=ok)
    y = x * 2
    if WRONG:   # BUG in one configuration only: the first element of each tile is dropped
        y = tl.where(tl.arange(0, BLOCK) == 0, 0.0, y)
    tl.store(y_ptr + offs, y, mask=ok)


def _case(kernel, name="autotuned_scale", **extra) -> Case:
    def launch(args, outs):
        x, y = args["x"], outs["y"]
        kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, x.numel(), **extra)
    return Case(name=name, family="autotuned", dtypes=("fp32",),
                inputs=lambda dtype, most: S.row_inputs(dtype, most, tile=16, max_rows=1, allowed=("normal",)),
                make=lambda spec, device: {"x": S.row_tensor(spec, device).contiguous()},
                outputs=lambda args: {"y": (tuple(args["x"].shape), args["x"].dtype)},
                launch=launch, oracle=portcheck.oracle_from_torch(lambda x: x * 2, "y"),
                tolerance=lambda args, refs, dtype: {"y": T.elementwise(dtype)})


def _autotuned(**kwargs):
    return triton.autotune(configs=_configs(), key=["n"], **kwargs)(triton.jit(_scale_kernel))


def _check(case, examples=6, spec=None):
    search = hypothesis.settings(max_examples=examples, derandomize=True, deadline=None, database=None,
                                 phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
                                 suppress_health_check=list(hypothesis.HealthCheck))
    return runner.check(case, "interpreter", INTERPRETER_ARCH, "fp32", settings=search, max_elements=2048,
                        spec=spec)


@pytest.fixture
def wrong(monkeypatch):
    def choose(block):
        monkeypatch.setitem(WRONG, "block", block)
    return choose


@on_the_interpreter
def test_every_configuration_runs_and_a_correct_kernel_passes(monkeypatch):
    seen = []
    real = autotuned.launched
    monkeypatch.setattr(autotuned, "launched", lambda: (seen.extend(real()), real())[1])
    result = _check(_case(_autotuned()), examples=2)   # two examples: the rest run after the search
    assert result.verdict == "pass", result.message
    assert {run.index for run in seen} == set(range(len(BLOCKS))) and {run.count for run in seen} == {len(BLOCKS)}


@on_the_interpreter
@pytest.mark.parametrize("block", [16, 256])
def test_a_bug_in_one_configuration_fails_named_and_replays(wrong, block):
    wrong(block)
    index = BLOCKS.index(block)
    result = _check(_case(_autotuned()), examples=3)
    assert result.verdict == "fail", result.message
    assert result.message.startswith(f"autotune config {index + 1} of {len(BLOCKS)} of _scale_kernel (BLOCK: {block},"), \
        result.message
    again = _check(_case(_autotuned()), spec=result.failing_input)
    assert again.verdict == "fail" and again.message == result.message


@on_the_interpreter
def test_the_kernels_own_pruning_decides_what_runs(wrong):
    wrong(256)   # pruned away: never launched, so never wrong
    kernel = _autotuned(prune_configs_by={"early_config_prune": lambda configs, named, **kw:
                                          [c for c in configs if c.kwargs["BLOCK"] <= 128]})
    result = _check(_case(kernel), examples=2)
    assert result.verdict == "pass", result.message


@triton.jit
def _sum_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(y_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))


def _sum_case(name: str, reset: bool, zero_first: bool) -> Case:
    """An autotuned row sum whose kernel adds into y with an atomic; `reset`: the autotuner's
    reset_to_zero names y; `zero_first`: the launcher zeroes y itself."""
    kernel = triton.autotune(configs=[triton.Config({"BLOCK": b}) for b in (16, 64)], key=["n"],
                             reset_to_zero=["y_ptr"] if reset else None)(_sum_kernel)

    def launch(args, outs):
        x = args["x"]
        if zero_first:
            outs["y"].zero_()
        kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, outs["y"], x.numel())
    return Case(name=name, family="autotuned", dtypes=("fp32",),
                inputs=lambda dtype, most: S.row_inputs(dtype, most, tile=16, max_rows=1, allowed=("normal",)),
                make=lambda spec, device: {"x": S.row_tensor(spec, device).contiguous()},
                outputs=lambda args: {"y": ((1,), args["x"].dtype)},
                launch=launch, nondeterministic=True,
                oracle=portcheck.oracle_from_torch(lambda x: x.sum().reshape(1), "y"),
                tolerance=lambda args, refs, dtype: {"y": T.row_reduction(args["x"].reshape(1, -1), dtype)})


@on_the_interpreter
def test_reset_to_zero_runs_before_the_launch():
    """The harness's output starts as NaN poison: the autotuner's reset_to_zero clears it first,
    as Triton's own first launch of a key does."""
    result = _check(_sum_case("autotuned_sum", reset=True, zero_first=False), examples=3)
    assert result.verdict == "pass", result.message


@on_the_interpreter
@pytest.mark.parametrize("reset", [True, False])
def test_an_accumulation_the_autotuner_does_not_reset_fails_after_its_timing_run(reset):
    """The launcher zeroes the output and the kernel adds into it: Triton's timing runs at a key's
    first launch add too, and only reset_to_zero clears what they left."""
    result = _check(_sum_case("autotuned_sum_zeroed", reset=reset, zero_first=True), examples=3)
    assert result.verdict == ("pass" if reset else "fail"), result.message
    if not reset:
        assert result.message.startswith("autotune config ") and ", after a timing run): y: " in result.message


@triton.jit
def _unmasked_scale_kernel(x_ptr, y_ptr, n, one, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs) * 2)   # no mask: the pruning keeps BLOCKs dividing n


def _divisors(configs, named_args, **kwargs):
    return [c for c in configs if named_args["n"] % c.kwargs["BLOCK"] == 0]


@on_the_interpreter
@pytest.mark.parametrize("key", ["n", "one"])
def test_a_key_that_misses_an_argument_the_pruning_reads_fails_as_the_cache_would_make_it(key):
    kernel = triton.autotune(configs=[triton.Config({"BLOCK": b}) for b in (1, 2, 4, 8, 16)], key=[key],
                             prune_configs_by={"early_config_prune": _divisors})(_unmasked_scale_kernel)

    def launch(args, outs):
        x = args["x"]
        kernel[lambda meta: (x.numel() // meta["BLOCK"],)](x, outs["y"], x.numel(), 1)
    result = _check(dataclasses.replace(_case(_autotuned()), name="autotuned_keyed", launch=launch), examples=8)
    if key == "n":
        assert result.verdict == "pass", result.message
    else:   # every input shares the key (1, dtypes): one input's choice reaches another input's length
        assert result.verdict == "fail", result.message
        assert "which Triton's cache hands every launch with key (1, " in result.message
        assert "the key misses an argument the configurations depend on" in result.message
        assert autotuned.CACHED in result.failing_input
        # the diagnosis swaps the cached configuration for one of the input's own: it passes then
        assert result.diagnosis[0]["cause"].startswith("an autotune key that misses an argument"), result.diagnosis
        again = _check(dataclasses.replace(_case(_autotuned()), name="autotuned_keyed", launch=launch),
                       spec=result.failing_input)
        assert again.verdict == "fail" and again.message == result.message


@on_the_interpreter
def test_the_index_is_the_specs_key_or_a_hash_of_the_spec():
    spec = {"dtype": "fp32", "rows": 1, "cols": 7, "seed": 3}
    assert autotuned.spec_index({**spec, autotuned.KEY: 4}) == 4
    assert autotuned.spec_index(spec) == autotuned.spec_index(dict(reversed(spec.items())))
    assert autotuned.spec_index(spec) != autotuned.spec_index({**spec, "seed": 4})


@on_the_interpreter
def test_outside_a_check_the_autotuner_is_triton_s():
    from triton.runtime.autotuner import Autotuner
    before = Autotuner.__dict__["run"]
    with autotuned.choosing({"a": 1}):
        with autotuned.choosing({"a": 2}):
            assert Autotuner.__dict__["run"] is not before
        assert Autotuner.__dict__["run"] is not before
    assert Autotuner.__dict__["run"] is before


PLANTED = '''
import torch
import triton
import triton.language as tl

import portcheck
from portcheck import strategies as S
from portcheck import tolerance as T


def configs(wrong):
    return [triton.Config({"BLOCK": b, "WRONG": b == wrong}, num_warps=w) for b, w in ((64, 2), (256, 4), (1024, 8))]


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, WRONG: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    y = tl.load(x_ptr + offs, mask=ok) * 2
    if WRONG:   # BUG in one configuration only: the first element of each tile is dropped
        y = tl.where(tl.arange(0, BLOCK) == 0, 0.0, y)
    tl.store(y_ptr + offs, y, mask=ok)


for name, wrong in (("autotuned_planted", 1024), ("autotuned_right", 0)):
    kernel = triton.autotune(configs=configs(wrong), key=["n"])(scale_kernel)

    def launch(args, outs, kernel=kernel):
        x = args["x"]
        kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, outs["y"], x.numel())

    portcheck.register(portcheck.Case(
        name=name, family="autotuned", dtypes=("fp32",),
        inputs=lambda dtype, most: S.row_inputs(dtype, most, tile=64, max_rows=1, allowed=("normal",)),
        make=lambda spec, device: {"x": S.row_tensor(spec, device).contiguous()},
        outputs=lambda args: {"y": (tuple(args["x"].shape), args["x"].dtype)},
        launch=launch, oracle=portcheck.oracle_from_torch(lambda x: x * 2, "y"),
        tolerance=lambda args, refs, dtype: {"y": T.elementwise(dtype)}))
'''


@pytest.mark.skipif(INTERPRETED or not __import__("torch").cuda.is_available(), reason="a GPU's autotuner")
def test_on_a_gpu_a_configuration_the_autotuner_would_not_pick_fails(tmp_path):
    """Through `portcheck run --target cuda`: the planted case's bug is in one of its three
    configurations (1024-element tiles); it fails, named, whichever the autotuner would have
    picked on this GPU, and the same kernel without the bug passes."""
    import json
    import subprocess
    import sys
    import textwrap
    (tmp_path / "planted_autotuned.py").write_text(textwrap.dedent(PLANTED))
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "portcheck", "run", "--target", "cuda", "--cases",
                           "planted_autotuned", "--kernel", "autotuned_*", "--profile", "ci", "--no-time",
                           "--out", str(out)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    records = {r["case"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    planted, right = records["autotuned_planted"], records["autotuned_right"]
    assert planted["verdict"] == "fail" and planted["message"].startswith("autotune config 3 of 3 of scale_kernel"), planted
    assert right["verdict"] == "pass", right
