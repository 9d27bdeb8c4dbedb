"""portcheck diff and the output digests it reads: identical inputs across runs, bitwise and ULP
comparison, and errors against float64 recomputed from regenerated inputs."""
import base64
import hashlib
import json

import pytest
import torch

from portcheck import cases, cli, digests
from portcheck.digests import BUDGETS, describe_output, draw_specs, specs_for
from tests.support.report_records import real_run, runtime, write


def run_cli(capsys, *args):
    code = cli.main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def run_a(tmp_path_factory):
    return real_run(tmp_path_factory.getbasetemp())


def as_other_vendor(path, target="rocm", arch="gfx942", host="amd-box"):
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    for r in recs:
        r.update(target=target, arch=arch, evidence="gpu")
        r["provenance"].update(host=host, target=target, arch=arch)
    return recs


def nudge(output: dict, index: int, ulps: int) -> None:
    """Move one kept element by `ulps` representable values, as another vendor's rounding would."""
    raw = bytearray(base64.b64decode(output["data"]))
    t = torch.frombuffer(raw, dtype=torch.int32)   # fp32 outputs: step the bit pattern
    t[index] += ulps
    data = bytes(raw)
    output["data"] = base64.b64encode(data).decode()
    output["sha256"] = hashlib.sha256(data).hexdigest()


def test_digest_specs_are_fixed_and_small():
    case = cases.get("softmax")
    (a, budget), (b, _) = draw_specs(case, "fp16", 4), draw_specs(case, "fp16", 4)
    assert a == b and len(a) == 4 and budget == BUDGETS[0]
    assert draw_specs(case, "fp16", 2)[0] == a[:2]     # the interpreter's specs are the GPU's first ones
    assert all(s["rows"] * s["cols"] <= budget for s in a)
    assert len({json.dumps(s, sort_keys=True) for s in a}) == 4


def test_a_case_that_needs_more_elements_gets_the_next_budget():
    """A strategy whose smallest input is over the first budget draws under the next one."""
    from hypothesis import strategies as st

    from portcheck.cases import Case

    def inputs(dtype, max_elements):
        if max_elements < 1000:
            return st.sampled_from([])          # what a real strategy does with too small a budget
        return st.fixed_dictionaries({"dtype": st.just(dtype), "n": st.integers(1000, max_elements),
                                      "seed": st.integers(0, 9)})
    case = Case("big_only", "test", ("fp32",), inputs, None, None, None, None, None, None)
    specs, budget = draw_specs(case, "fp32", 3)
    assert budget == 1024 and len(specs) == 3 and all(1000 <= s["n"] <= 1024 for s in specs)


def test_small_outputs_are_kept_large_ones_only_hashed():
    small, large = torch.arange(16, dtype=torch.float16), torch.zeros(4096, dtype=torch.float32)
    s, big = describe_output(small, None), describe_output(large, None)
    assert s["sha256"] == hashlib.sha256(small.numpy().tobytes()).hexdigest()
    assert base64.b64decode(s["data"]) == small.numpy().tobytes()
    assert "data" not in big and len(big["sha256"]) == 64


def test_runs_record_digests_of_every_case(run_a):
    recs = [json.loads(line) for line in run_a.read_text().splitlines()]
    for r in recs:
        entries = r["digests"]["entries"]
        assert len(entries) == digests.INTERPRETER_DIGESTS, r["case"]
        for e in entries:
            assert set(e["outputs"]) == {"y"} and e["outputs"]["y"]["dtype"] == "float32"
            assert "data" in e["outputs"]["y"] and e["outputs"]["y"]["worst_ratio"] < 1
    assert len(run_a.read_text()) < 16000        # results.jsonl stays small


def test_identical_outputs_are_bitwise_equal(run_a, tmp_path, capsys):
    b = write(tmp_path / "b.jsonl", as_other_vendor(run_a))
    code, out, _ = run_cli(capsys, "diff", run_a, b, "--quiet")
    assert code == 0, out
    assert "interpreter/cpu-interpreter" in out and "rocm/gfx942 (amd-box)" in out
    n = 2 * digests.INTERPRETER_DIGESTS
    assert f"{n} output(s) of identical inputs compared: {n} bitwise equal, 0 differ" in out


def test_disagreement_is_counted_in_ulp_beside_each_error(run_a, tmp_path, capsys):
    recs = as_other_vendor(run_a)
    entry = next(r for r in recs if r["case"] == "softmax")["digests"]["entries"][1]
    y = entry["outputs"]["y"]
    assert int(torch.tensor(y["shape"]).prod()) >= 2
    nudge(y, 0, 3)
    nudge(y, 1, -1)
    b = write(tmp_path / "b.jsonl", recs)
    code, out, _ = run_cli(capsys, "diff", run_a, b, "--quiet", "--out", tmp_path / "diff.md")
    assert code == 0
    assert (tmp_path / "diff.md").read_text() == out
    rows = [line for line in out.splitlines() if line.startswith("| softmax ") and "differ" in line]
    assert len(rows) == 1, out
    assert f"2 of {int(torch.tensor(y['shape']).prod())} differ, max 3 ULP" in rows[0]
    cells = [c.strip() for c in rows[0].split("|")]
    a_err, b_err = cells[6], cells[7]
    assert "ULP" in a_err and "of tol" in a_err and a_err != b_err     # B's error recomputed from its bits
    assert "Inputs that did not regenerate" in out                     # B's recorded error no longer matches


def test_a_run_is_chosen_by_arch_when_it_holds_several(run_a, tmp_path, capsys):
    both = [json.loads(line) for line in run_a.read_text().splitlines()] + as_other_vendor(run_a)
    ab = write(tmp_path / "both.jsonl", both)
    code, _, err = run_cli(capsys, "diff", ab, ab)
    assert code == 2 and "choose one with --arch-a" in err
    code, out, _ = run_cli(capsys, "diff", ab, ab, "--arch-a", "cpu-interpreter", "--arch-b", "gfx942", "--quiet")
    assert code == 0 and "bitwise equal" in out
    code, _, err = run_cli(capsys, "diff", ab, ab, "--arch-a", "sm_100a", "--arch-b", "gfx942")
    assert code == 2 and "no runtime results for arch 'sm_100a'" in err


def test_runs_without_digests_or_common_inputs(run_a, tmp_path, capsys):
    plain = write(tmp_path / "plain.jsonl", [runtime("softmax", "fp32", "cuda", "sm_90a")])
    code, _, err = run_cli(capsys, "diff", run_a, plain)
    assert code == 2 and "hold no output digests" in err
    forced = runtime("softmax", "fp32", "interpreter", "gfx942")
    forced.update(evidence="as-arch", as_arch={"arch": "gfx942", "local": "cpu-interpreter", "stands_for": ["gfx942"]})
    code, _, err = run_cli(capsys, "diff", run_a, write(tmp_path / "forced.jsonl", [forced]))
    assert code == 2 and "come from --as-arch, which records no output digests" in err, err
    recs = as_other_vendor(run_a)
    for r in recs:
        for e in r["digests"]["entries"]:
            e["spec"]["seed"] += 1
        r["digests"]["drawn_by"] = "hypothesis 9.9.9, derandomized"
    other = write(tmp_path / "other.jsonl", recs)
    code, out, _ = run_cli(capsys, "diff", run_a, other, "--quiet")
    assert code == 0 and "### Not comparable" in out and "PORTCHECK_DIGEST_SPECS" in out
    assert "hypothesis 9.9.9" in out


def test_specs_can_be_taken_from_another_run(run_a, monkeypatch):
    monkeypatch.setenv(digests.SPECS_ENV, str(run_a))
    specs, how = specs_for(cases.get("softmax"), "fp32", 4)
    recorded = [json.loads(line) for line in run_a.read_text().splitlines()]
    want = [e["spec"] for r in recorded if r["case"] == "softmax" for e in r["digests"]["entries"]]
    assert specs == want and str(run_a) in how


def test_digest_count_is_configurable(monkeypatch):
    from portcheck.errors import UsageError
    assert digests.default_count(True) == digests.DIGEST_EXAMPLES
    assert digests.default_count(False) == digests.INTERPRETER_DIGESTS
    monkeypatch.setenv(digests.COUNT_ENV, "0")
    assert digests.default_count(True) == 0
    monkeypatch.setenv(digests.COUNT_ENV, "many")
    with pytest.raises(UsageError, match="PORTCHECK_DIGESTS"):
        digests.default_count(True)
