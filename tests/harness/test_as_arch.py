"""--as-arch: each arch's launch configuration run on the local target (portcheck/as_arch.py).

Bugs that only one arch's configuration shows (tests/support/arch_bugs.py) pass a plain run and
fail under --as-arch for that arch, with a replay naming the arch; the forced launch is the
variant the arch declares; what cannot run is a recorded skip; archs with the same launches are
checked once.
"""
from __future__ import annotations

import dataclasses
import json
import shlex

import hypothesis
import pytest

from portcheck import as_arch, cases
from portcheck.compile.capture import recording
from portcheck.errors import UsageError
from portcheck.facts import device
from portcheck.facts.archs import ARCHS, INTERPRETER
from portcheck.runner import check

# no shrink phase: the first failing input is the one reported (shrinking costs minutes here)
SEARCH = hypothesis.settings(max_examples=12, derandomize=True, deadline=None, database=None,
                             phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
                             suppress_health_check=list(hypothesis.HealthCheck))
BUGS = {"arch_tail_mask": "gfx942", "arch_split_drop": "gfx1100", "arch_warp_lanes": "gfx942"}


def _case(name):
    import tests.support.arch_bugs  # noqa: F401  (registers the cases with arch-only bugs)
    return cases.get(name)


def _check(session, case, forced: list | None = None, spec=None, dtype="fp32"):
    return check(case, session.target.name, session.arch, dtype, settings=SEARCH,
                 max_elements=session.max_elements, seed=0, spec=spec, as_arch=forced)


def test_an_unknown_arch_is_a_usage_error_naming_the_valid_ones():
    with pytest.raises(UsageError, match="gfx999.*known: sm_80.*gfx942.*gfx1100"):
        as_arch.parse("gfx942,gfx999")
    assert [a.name for a in as_arch.parse("all")] == list(ARCHS)


def test_archs_with_the_same_launches_are_checked_together():
    found = as_arch.groups(as_arch.parse("sm_89,gfx942,sm_120,gfx1100"))
    assert [[a.name for a in g] for g in found] == [["sm_89", "sm_120"], ["gfx942"], ["gfx1100"]]


def test_the_forced_arch_answers_for_the_device_and_is_restored():
    local = device.current_arch()
    with device.forced_arch(ARCHS["gfx942"]):
        assert device.current_arch().name == "gfx942" and device.warp_size() == 64
        assert device.local_arch() is local
        with device.drawing(1):
            assert device.drawn_config(["a", "b"]) == "b"
    assert device.current_arch() is local and device.drawn_config(["a", "b"]) is None


def test_fp8_dots_promote_as_the_local_matrix_unit_needs(monkeypatch):
    # found on the H200: sm_100a's in-place fp8 accumulation (tcgen05 sums in fp32) run on Hopper's
    # 13-fraction-bit wgmma accumulator failed matmul_fp8's tolerance; the tiling is sm_100a's, the
    # promotion the local unit's
    assert (ARCHS["sm_100a"].fp8_accumulation, ARCHS["sm_90a"].fp8_accumulation) == ("fused", "partial")
    monkeypatch.setattr(device, "local_arch", lambda: ARCHS["sm_90a"])
    with device.forced_arch(ARCHS["sm_100a"]):
        assert device.fp8_accumulation(ARCHS["sm_100a"]) == "partial"
    assert device.fp8_accumulation(ARCHS["sm_100a"]) == "fused"   # cross-compiling: the arch's own
    monkeypatch.setattr(device, "local_arch", lambda: INTERPRETER)   # sums in fp32: the forced arch's
    with device.forced_arch(ARCHS["sm_90a"]):
        assert device.fp8_accumulation(ARCHS["sm_90a"]) == "partial"


@pytest.mark.parametrize("name", sorted(BUGS))
def test_a_bug_of_one_archs_configuration_fails_only_under_that_arch(name, portcheck_session):
    case, arch = _case(name), ARCHS[BUGS[name]]
    plain = _check(portcheck_session, case)
    assert plain.verdict == "pass" and plain.evidence != "as-arch", plain.message
    forced = _check(portcheck_session, case, [arch])
    assert (forced.verdict, forced.arch, forced.evidence) == ("fail", arch.name, "as-arch"), forced.message
    assert forced.as_arch["local"] == portcheck_session.arch and forced.as_arch["stands_for"] == [arch.name]
    argv = shlex.split(forced.reproduce)
    assert argv[argv.index("--as-arch") + 1] == arch.name
    assert json.loads(argv[argv.index("--replay") + 1]) == forced.failing_input
    again = _check(portcheck_session, case, [arch], spec=forced.failing_input)
    assert (again.verdict, again.message) == ("fail", forced.message)
    other = ARCHS["gfx1100" if arch.name == "gfx942" else "gfx942"]
    assert _check(portcheck_session, case, [other]).verdict == "pass"


def test_a_wave64_launch_says_how_its_warps_ran(portcheck_session):
    forced = _check(portcheck_session, _case("arch_warp_lanes"), [ARCHS["gfx942"]])
    assert f"wave64: 4 warps of 64 lanes run as 4 warps of {device.local_arch().warp_size}" \
        in forced.as_arch["notes"]


def test_the_printed_replay_names_the_arch_and_reproduces_the_failure(portcheck_session, tmp_path):
    from tests.support.replays import argv_of, run_replay
    forced = _check(portcheck_session, _case("arch_tail_mask"), [ARCHS["gfx942"]])
    argv = argv_of(forced.reproduce)
    assert argv[argv.index("--cases") + 1] == "tests.support.arch_bugs"
    proc, record = run_replay(forced.reproduce, tmp_path / "replay")
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (record["verdict"], record["arch"], record["evidence"]) == ("fail", "gfx942", "as-arch")
    assert (record["message"], record["failing_input"]) == (forced.message, forced.failing_input)


def test_an_arch_without_variants_or_configurations_is_a_recorded_skip(portcheck_session):
    none_declared = dataclasses.replace(cases.get("softmax"), variants=lambda arch: [])
    r = _check(portcheck_session, none_declared, [ARCHS["gfx1100"]])
    assert (r.verdict, r.message) == ("skip", "softmax declares no variants for gfx1100")
    r = _check(portcheck_session, cases.get("matmul_fp8"), [ARCHS["gfx1100"]], dtype="fp8e4b8")
    assert (r.verdict, r.message) == ("skip", "matmul_fp8 declares no launch configuration for fp8e4b8 on gfx1100")


def test_a_dtype_the_local_device_lacks_is_a_recorded_skip():
    assert "fp8e4b8" in as_arch.local_obstacle(ARCHS["gfx942"], ARCHS["sm_90a"], "fp8e4b8")
    assert as_arch.local_obstacle(ARCHS["gfx942"], INTERPRETER, "fp8e4b8") == ""
    assert as_arch.local_obstacle(ARCHS["gfx942"], ARCHS["sm_90a"], "fp16") == ""


def test_every_autotune_config_the_arch_declares_is_checked(portcheck_session):
    case, arch = cases.get("matmul"), ARCHS["gfx942"]
    tried = []
    r = check(case, portcheck_session.target.name, portcheck_session.arch, "fp16",
              settings=hypothesis.settings(SEARCH, max_examples=2), max_elements=portcheck_session.max_elements,
              seed=0, as_arch=[arch], on_example=lambda spec: tried.append(spec["config"]))
    assert r.verdict == "pass", r.message
    assert sorted(set(tried)) == list(range(len(case.configs(arch, "fp16"))))


def test_archs_that_share_their_launches_are_checked_once_and_recorded_for_each(portcheck_session):
    group = as_arch.groups([ARCHS["sm_89"], ARCHS["sm_120"]])[0]
    records = portcheck_session.run_as_arch(cases.get("softmax"), "fp32", group)
    assert [r.arch for r in records] == ["sm_89", "sm_120"]
    assert all(r.as_arch["stands_for"] == ["sm_89", "sm_120"] and r.verdict == "pass" for r in records)
    assert "--as-arch sm_120" in records[1].reproduce


# ---- the forced launch is the variant the arch declares -----------------------------------------

# (case, the declared variant its bench spec launches), as in test_compile.py's DECLARED
DECLARED = [("softmax", "bf16 n=4096"), ("rmsnorm", "bf16 n=4096"), ("layernorm", "bf16 n=4096"),
            ("silu_mul", "bf16 silu d=14336"), ("quant_int8_per_token", "bf16 n=8192"),
            ("dequant_int8", "bf16 per-token"), ("rope", "bf16 head=128 rot=128 neox"),
            ("bias_gelu_dropout", "bf16 n=4096"), ("kv_cache_write", "bf16 heads=8 d=128"),
            ("moe_topk_softmax", "bf16 E=256 k=8 renorm")]


def _launched_as(session, case, arch, spec, config=None):
    """The launches a case makes on the session's device with `arch` forced (they run)."""
    import torch
    where = session.target.device
    with as_arch.forcing(arch, device.local_arch(), as_arch.Notes()), device.drawing(config):
        args = case.make(spec, where)     # a case may pick its configuration here (matmul does)
        outs = {n: torch.empty(shape, dtype=dt, device=where) for n, (shape, dt) in case.outputs(args).items()}
        with recording(execute=True) as rec:
            case.launch(args, outs)
    return rec.variants()


def _compiled_as(v) -> tuple:
    return v.kernel if isinstance(v.kernel, str) else v.kernel.__name__, v.constexprs, v.num_warps, v.num_stages


@pytest.mark.parametrize("arch", ["gfx942", "gfx1100"])
@pytest.mark.parametrize("name,label", DECLARED)
def test_the_forced_launch_is_the_variant_the_arch_declares(name, label, arch, portcheck_session):
    case = cases.get(name)
    spec = dict(case.bench[0])
    # the row count, left general by the variants: past every per-program row tile, yet quick to run
    spec["tokens" if "tokens" in spec else "rows"] = 17
    (launched,) = _launched_as(portcheck_session, case, ARCHS[arch], spec)
    (declared,) = [v for v in case.variants(ARCHS[arch]) if v.label == label]
    assert (launched.constexprs, launched.num_warps, launched.num_stages) == \
        (declared.constexprs, declared.num_warps, declared.num_stages)


@pytest.mark.parametrize("arch", ["gfx942", "gfx1100"])
def test_each_drawn_matmul_config_launches_as_the_arch_declares_it(arch, portcheck_session):
    case = cases.get("matmul")
    # K a multiple of every BLOCK_K (EVEN_K), M and N at least every BLOCK_M and BLOCK_N (M_FITS,
    # N_FITS), as in the declared variants
    spec = {"dtype": "fp16", "m": 256, "n": 256, "k": 256, "a_layout": "row", "b_layout": "row",
            "regime": "normal", "bias": False, "activation": "none", "seed": 0}
    declared = case.variants(ARCHS[arch])
    for index in range(len(case.configs(ARCHS[arch], "fp16"))):
        (launched,) = _launched_as(portcheck_session, case, ARCHS[arch], {**spec, "config": index})
        want = declared[index]   # fp16's configurations come first, in the list's order
        assert (launched.num_warps, launched.num_stages) == (want.num_warps, want.num_stages)
        shared = {k: want.constexprs[k] for k in launched.constexprs if k in want.constexprs}
        assert {k: launched.constexprs[k] for k in shared} == shared, (index, launched.label, want.label)
        assert {"BLOCK_M", "BLOCK_N", "BLOCK_K"} <= set(shared)


# ---- the X letter in every report, and the gate ----------------------------------------------------

def _as_arch_records(portcheck_session):
    """An X pass and an X failure (gfx942), each valid against the schema, as a run writes them."""
    passed = portcheck_session.run_as_arch(cases.get("softmax"), "fp32", [ARCHS["gfx942"]])[0]
    failed = portcheck_session.run_as_arch(_case("arch_tail_mask"), "fp32", [ARCHS["gfx942"]])[0]
    return [passed.to_dict(), failed.to_dict()]


def test_reports_show_x_beside_c_and_the_gate_fails_an_x_failure(portcheck_session):
    from portcheck.reports import gate, grid, html, markdown
    from portcheck.schema import check_result
    passed, failed = _as_arch_records(portcheck_session)
    for r in (passed, failed):
        check_result(r)
    compiled = dict(passed, kind="compile", target="hip", evidence="compile", verdict="pass", as_arch={},
                    examples=0, metrics={}, tolerance={}, variant="fp32 n=1024", reproduce="")
    m = grid.from_records([passed, compiled, failed])
    assert m.cell("softmax", "fp32", "gfx942").evidence() == ["as-arch", "compile"]
    text = markdown.markdown([passed, compiled, failed], "as-arch")
    assert "| ok 0" in text and " XC |" in text and "**X** ran this arch's launch configuration" in text
    assert f"evidence as-arch on {portcheck_session.arch}" in text
    page = html.render(m, "as-arch")
    assert "ev-as-arch" in page and f"gfx942's launch configuration ran on {portcheck_session.arch}" in page
    baseline = [grid.Entry(dict(passed), "baseline", 1)]
    outcome = gate.compare(baseline, [grid.Entry(r, "current", i) for i, r in enumerate([passed, failed], 1)])
    assert outcome.failed and [f.record["case"] for f in outcome.regressions] == ["arch_tail_mask"]


def test_an_override_skip_under_as_arch_is_a_valid_record(portcheck_session):
    # found on the H200: FNUZ cases skipped by override had an as_arch field with only "arch",
    # which the schema (rightly) refused when `portcheck report` merged the run
    import datetime as dt

    from portcheck.overrides import Override
    from portcheck.schema import check_result
    skip = Override("softmax", "*", "*", "fp32", "skip", "no such format here", "here", dt.date(2099, 1, 1))
    r = check(cases.get("softmax"), "interpreter", "cpu-interpreter", "fp32",
              settings=hypothesis.settings(max_examples=1), max_elements=64, override=skip,
              as_arch=[ARCHS["gfx942"]])
    assert r.verdict == "skip" and r.as_arch["local"] == "cpu-interpreter"
    r.provenance = portcheck_session.provenance()   # as Session.run_as_arch fills it in
    check_result(r.to_dict())


def test_an_arch_checked_on_itself_and_as_arch_shows_both(portcheck_session):
    # found merging the H200's plain run with its --as-arch all: the X records of sm_90a replaced
    # the G ones of the same cells ("newer results replaced 79 older ones")
    from portcheck.reports import grid
    passed, _ = _as_arch_records(portcheck_session)
    own = dict(passed, evidence="gpu", as_arch={})
    m = grid.from_records([own, passed])
    assert sorted(m.cell("softmax", "fp32", "gfx942").evidence()) == ["as-arch", "gpu"]
