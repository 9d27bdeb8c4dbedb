"""Autotune configurations pruned per arch from compile facts: the reasons in words, the committed
lists' reader and its triton.autotune hook, and the staleness check that CI runs.

CI's own check (.ci/run: `portcheck prune --check --from reports/ci-compile`) recomputes the
launches its sampled compile run holds; here the committed matmul lists are checked against the
family's declared launches (planning only, no compile) and the dropped ones are recompiled.
"""
import json

import pytest
import triton

from portcheck import cases
from portcheck.compile import prune
from portcheck.compile.plan import CompileSettings, plan
from portcheck.compile.records import compile_tasks
from portcheck.facts.archs import ARCHS, DEFAULT_ARCHS
from portcheck.kernels import _pruned
from tests.support import lint_kernels

pytestmark = pytest.mark.xdist_group("portcheck-compile")


def _entry(kept, reason="", **params):
    e = {"case": "k", "dtype": "fp16", "label": f"{params}", "kept": kept,
         "params": {"BLOCK": 256, "EVEN": True, **params}, "num_warps": 4, "num_stages": 2}
    if reason:
        e["reason"] = reason
    return e


@pytest.fixture
def lists(tmp_path):
    doc = {"family": "toy", "archs": {"gfx942": [_entry(True), _entry(False, "12 B of spills", BLOCK=1024),
                                                 {**_entry(True), "dtype": "fp32", "label": "fp32"},
                                                 {**_entry(False, "x"), "dtype": "fp8e4b8", "label": "fp8"}]}}
    (tmp_path / "toy.json").write_text(json.dumps(doc))
    _pruned.load.cache_clear()
    yield tmp_path
    _pruned.load.cache_clear()


CONFIGS = [triton.Config({"BLOCK": 256}, num_warps=4, num_stages=2),
           triton.Config({"BLOCK": 1024}, num_warps=4, num_stages=2),
           triton.Config({"BLOCK": 4096}, num_warps=4, num_stages=2)]     # in no list: never compiled


def test_configs_for_keeps_what_compiled_clean(lists):
    kept = _pruned.configs_for("toy", "gfx942", CONFIGS, "fp16", lists)
    assert kept == CONFIGS[:1]
    # a config is an entry's when its kwargs are among the entry's params, with its warps and stages
    assert not _pruned.is_entry_of(triton.Config({"BLOCK": 256}, num_warps=8, num_stages=2), _entry(True))
    # no launch for the arch or dtype in the lists (the interpreter, an unpruned arch): all kept
    assert _pruned.configs_for("toy", "sm_90a", CONFIGS, "fp16", lists) == CONFIGS
    assert _pruned.configs_for("toy", "gfx942", CONFIGS, "bf16", lists) == CONFIGS
    assert _pruned.configs_for("absent", "gfx942", CONFIGS, None, lists) == CONFIGS


def test_a_config_is_judged_by_the_launches_like_this_one(tmp_path):
    """256 spills only with the epilogue: dropped for that launch alone."""
    plain, epilogue = _entry(True, EPILOGUE=False), _entry(False, "600 B of spills", EPILOGUE=True)
    (tmp_path / "toy.json").write_text(json.dumps({"archs": {"gfx942": [plain, epilogue]}}))
    _pruned.load.cache_clear()
    assert _pruned.configs_for("toy", "gfx942", CONFIGS[:1], None, tmp_path, {"EPILOGUE": False}) == CONFIGS[:1]
    assert _pruned.configs_for("toy", "gfx942", CONFIGS[:1], None, tmp_path, {"EPILOGUE": True}) == []
    # a launch no declared one resembles is judged by all of the config's launches
    assert _pruned.configs_for("toy", "gfx942", CONFIGS[:1], None, tmp_path, {"EVEN": False}) == []
    _pruned.load.cache_clear()


def test_the_hook_prunes_inside_triton_autotune(lists, monkeypatch):
    """Triton's Autotuner calls early_config_prune(configs, named_args, **kwargs) and times what
    it returns; the hook keeps the lists' clean configs, then applies the kernel's own pruning."""
    import portcheck.facts.device as device
    monkeypatch.setattr(device, "current_arch", lambda: ARCHS["gfx942"])
    seen = []

    def own(configs, named_args, **kwargs):
        seen.append((len(configs), sorted(named_args), kwargs))
        return configs
    hook = _pruned.prune_configs_by("toy", dtype_of=lambda args: args["dtype"], then=own, directory=lists)
    tuner = triton.autotune(configs=CONFIGS, key=["n"], prune_configs_by=hook)(lint_kernels.convert)
    tuner.nargs = {"dtype": "fp16", "n": 3}
    assert tuner.prune_configs({"extra": 1}) == CONFIGS[:1]
    assert seen == [(1, ["dtype", "n"], {"extra": 1})]
    tuner.nargs = {"dtype": "fp8e4b8", "n": 3}
    with pytest.raises(ValueError, match="no toy configuration compiled clean on gfx942"):
        tuner.prune_configs({})


def _record(verdict="pass", lints=(), arch="gfx942", **metrics):
    return {"case": "k", "variant": "v", "arch": arch, "verdict": verdict, "message": "",
            "lints": list(lints), "metrics": metrics}


def test_reasons_in_words():
    assert prune.reason(_record(shared=40960)) == ""
    over = _record("fail", [{"rule": "shared-over-limit", "severity": "error", "message": "..."}], shared=81920)
    assert prune.reason(over) == "over shared memory by 16384 B (81920 B > 65536 B)"
    spills = _record(lints=[{"rule": "spills", "severity": "warning", "message": "..."}], spills=96)
    assert prune.reason(spills) == ""                               # spills alone keep a launch
    assert prune.reason(spills, max_spill_bytes=64) == "96 B of spills"
    assert prune.reason(spills, max_spill_bytes=96) == ""
    # a low occupancy is the autotuner's to weigh (a GEMM tile runs one block per SM); none resident drops
    occ = {"occupancy": 2, "occupancy_max": 8, "occupancy_unit": "waves/SIMD"}
    low = _record(lints=[{"rule": "low-occupancy", "severity": "info", "message": "..."}],
                  occupancy_effective=1, occupancy_fraction=0.125, **occ)
    assert prune.reason(low) == ""
    assert prune.reason(low, min_occupancy=0.25) == ("occupancy under the threshold (25% of the most): "
                                                     "1/8 waves/SIMD effective")
    none = _record(occupancy_effective=0, occupancy_fraction=0.0, **occ)
    assert prune.reason(none) == "occupancy under the threshold (none resident): 0/8 waves/SIMD effective"
    fp8 = _record("fail", [{"rule": "fp8-emulated", "severity": "error", "message": "lowers to v_mfma_f32_32x32x8_f16"}])
    assert prune.reason(fp8) == "fp8-emulated: lowers to v_mfma_f32_32x32x8_f16"
    info = _record(lints=[{"rule": "compiler-warning", "severity": "info", "message": "deprecated"}])
    assert prune.reason(info) == ""
    timeout = _record("error", [{"rule": "compile-timeout", "severity": "error", "message": "300 s"}])
    assert prune.reason(timeout) == "compile-timeout: 300 s"


def test_stale_names_every_disagreement():
    committed = {"archs": {"gfx942": [{**_entry(True), "label": "a"}, {**_entry(False, "96 B of spills"), "label": "b"}]}}
    fresh = {"gfx942": [{**_entry(False, "over shared memory by 4 B"), "label": "a"},
                        {**_entry(True), "label": "b"}, {**_entry(True), "label": "c"}]}
    assert prune.stale(committed, fresh) == [
        "k [a] on gfx942: kept, but no longer compiles clean (over shared memory by 4 B)",
        "k [b] on gfx942: dropped (96 B of spills), but now compiles clean",
        "k [c] on gfx942: not in the lists"]
    assert prune.stale(committed, {"gfx942": committed["archs"]["gfx942"][:1]}) == []


# ---- the committed matmul lists --------------------------------------------------------------

def _matmul_tasks():
    return plan(cases.select(["family:matmul"]), DEFAULT_ARCHS)


def test_committed_lists_hold_every_declared_launch():
    """Planning only: every launch matmul declares is in its lists, with the same configuration
    (a config added to or changed in configs/matmul.toml needs a re-prune)."""
    committed = _pruned.load("matmul")
    assert committed, f"no {_pruned.pruned_file('matmul')}: run `portcheck prune --kernel matmul --arch all`"
    listed = {(arch, e["case"], e["label"]): e for arch, es in committed["archs"].items() for e in es}
    for t in _matmul_tasks():
        if t.label == "(no variants)":
            continue
        e = listed.get((t.arch, t.case, t.label))
        assert e is not None, f"{t.case} [{t.label}] on {t.arch} is not in the lists"
        assert prune.params(t) == (e["params"], e["num_warps"], e["num_stages"]), t.key


RECOMPILED = ("sm_90a", "gfx942")   # a 32-wide NVIDIA and a 64-wide AMD arch: about 20 compiles


def test_dropped_launches_still_fail_to_compile_clean():
    """The launches the lists drop on RECOMPILED, compiled again: one that now compiles clean makes
    the lists stale (CI's sampled compile run checks the kept ones it holds, on every arch)."""
    committed = _pruned.load("matmul")
    dropped = {(e["case"], e["label"], arch) for arch in RECOMPILED for e in committed["archs"][arch]
               if not e["kept"]}
    tasks = [t for t in _matmul_tasks() if t.key in dropped]
    assert len(tasks) == len(dropped)
    if not tasks:
        pytest.skip(f"the lists drop nothing on {', '.join(RECOMPILED)}")
    records = [r.to_dict() for r in compile_tasks(tasks, CompileSettings(jobs=2))]
    assert prune.stale(committed, prune.entries(tasks, records)) == []
