"""portcheck report: schema validation on read, merging runs of two vendors and a compile-only run,
newer-wins, escaping, overrides, bad input and atomic writes."""
import dataclasses
import json
import os

import pytest

from portcheck import cli
from portcheck.reports import grid as merge
from portcheck.reports.markdown import COMMENT_LIMIT, markdown
from portcheck.reports.output import md_escape
from portcheck.results import Result
from portcheck.schema import Invalid, check_result, result_schema
from tests.support.report_records import (ARCHS10, bench_rec, compile_rec, real_run, runtime, two_vendors_and_compile,
                                          write)

XSS = "<script>alert('pwn')</script>"


def report(capsys, *args):
    code = cli.main(["report", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # no matrices/overrides.toml here unless a test writes one
    paths = {}
    for name, recs in two_vendors_and_compile().items():
        paths[name] = write(tmp_path / name / "results.jsonl", recs)
    return paths


# ---- the schema --------------------------------------------------------------------------------

def test_schema_covers_every_result_field():
    """A new Result field must be added to the schema on purpose (and a breaking one versioned)."""
    props = set(result_schema()["properties"])
    fields = {f.name for f in dataclasses.fields(Result)}
    assert props == fields, (props ^ fields)


def _keywords(schema):
    """Every keyword used in a schema (property names and $defs names are not keywords)."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key in ("properties", "$defs"):
                for sub in value.values():
                    yield from _keywords(sub)
            elif key not in ("enum", "const", "required"):
                yield key
                yield from _keywords(value)
    elif isinstance(schema, list):
        for sub in schema:
            yield from _keywords(sub)


def test_schema_uses_only_keywords_jsonschema_checks():
    """jsonschema ignores an unknown keyword (a typo like 'minimun'): none may be in the file."""
    from jsonschema import Draft202012Validator
    schema = result_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)
    annotations = {"$schema", "$id", "title", "description", "$comment"}
    with_if = {"then", "else"}   # jsonschema evaluates these under "if"
    unchecked = set(_keywords(schema)) - set(Draft202012Validator.VALIDATORS) - annotations - with_if
    assert not unchecked


@pytest.mark.parametrize("build", [
    lambda: runtime("softmax", "fp16", "cuda", "sm_90a"),
    lambda: runtime("softmax", "bf16", "interpreter", "cpu-interpreter", "xfail",
                    override={"case": "*", "target": "interpreter", "arch": "*", "dtype": "bf16",
                              "action": "xfail", "reason": "bf16 casts truncate", "link": "FACTS.md",
                              "expires": "2027-06-30", "factor": 1.0}),
    lambda: compile_rec("softmax", "fp16", "gfx942"),
])
def test_records_validate(build):
    check_result(build())


@pytest.mark.parametrize("change,words", [
    (lambda r: r.update(schema="portcheck.result/2"), ["schema version 'portcheck.result/2'", "portcheck.result/1"]),
    (lambda r: r.update(schema="something/1"), ["not a portcheck result record"]),
    (lambda r: r.pop("verdict"), ["<record>: 'verdict' is a required property"]),
    (lambda r: r.update(verdict="great"), ["verdict: 'great' is not one of"]),
    (lambda r: r.update(kind="compile"), ["evidence: 'compile' was expected"]),
    (lambda r: r["provenance"].pop("host"), ["provenance: 'host' is a required property"]),
    (lambda r: r["metrics"].update(max_ulp=-1.0), ["metrics.max_ulp: -1.0 is less than the minimum of 0"]),
    (lambda r: r.update(examples="many"), ["examples: 'many' is not of type 'integer'"]),
    (lambda r: r.update(override={"case": "x", "action": "xfail", "reason": "", "link": "", "expires": "soon"}),
     ["override.reason: '' should be non-empty", "override.expires: 'soon' does not match"]),
    (lambda r: r.update(lints=[{"rule": "spills"}]), ["lints[0]: 'message' is a required property"]),
])
def test_invalid_records_are_named(change, words):
    r = runtime("softmax", "fp16", "cuda", "sm_90a")
    change(r)
    with pytest.raises(Invalid) as exc:
        check_result(r)
    for w in words:
        assert w in str(exc.value)
    assert "\n" not in str(exc.value)


def test_a_nan_time_is_refused_a_nan_error_is_not():
    """JSON has no NaN but Python's json reads one: an error metric may be NaN (a NaN output),
    a time must be greater than zero and NaN is not."""
    r = runtime("softmax", "fp16", "cuda", "sm_90a")
    r["metrics"]["worst_ratio"] = float("nan")
    check_result(r)
    b = bench_rec("softmax", "fp16", "cuda", "sm_90a", 0.1)
    check_result(b)
    b["bench"]["kernel"]["median_ms"] = float("nan")
    with pytest.raises(Invalid, match="bench.kernel.median_ms: nan is not greater than 0"):
        check_result(b)


def test_reading_without_jsonschema_says_what_to_install(monkeypatch):
    """The GPU machine reaches no package registry: a missing jsonschema is one clear line."""
    import sys
    from portcheck import schema
    from portcheck.errors import UsageError
    monkeypatch.setitem(sys.modules, "jsonschema", None)
    schema.result_validator.cache_clear()
    try:
        with pytest.raises(UsageError, match="pip install jsonschema"):
            check_result(runtime("softmax", "fp16", "cuda", "sm_90a"))
    finally:
        schema.result_validator.cache_clear()


def test_a_real_run_validates_and_reports(tmp_path_factory):
    """Records written by `portcheck run` (interpreter) pass the schema and merge."""
    path = real_run(tmp_path_factory.getbasetemp())
    entries = merge.load([path])
    assert {e.record["case"] for e in entries} == {"softmax", "softmax_long"}
    m = merge.build(entries)
    cell = m.cell("softmax", "fp32", "cpu-interpreter")
    assert cell.evidence() == ["interpreter"] and cell.accuracy()["verdict"] == "pass"
    assert 0 <= cell.accuracy()["worst_ratio"] < 1


# ---- merging -----------------------------------------------------------------------------------

def test_two_vendors_and_a_compile_only_run_make_one_matrix(runs, tmp_path, capsys):
    code, out, _ = report(capsys, runs["nvidia"], runs["amd"], runs["compile"], "--out", tmp_path / "out", "--quiet")
    assert code == 0, out
    doc = json.loads((tmp_path / "out" / "matrix.json").read_text())
    assert doc["schema"] == "portcheck.matrix/1"
    assert [a["arch"] for a in doc["archs"]] == list(ARCHS10)
    assert {a["arch"]: a["vendor"] for a in doc["archs"]}["gfx942"] == "amd"
    assert doc["rows"] == [["layernorm", "fp16"], ["layernorm", "fp32"], ["softmax", "fp16"], ["softmax", "fp32"]]
    cells = {(c["case"], c["dtype"], c["arch"]): c for c in doc["cells"]}
    assert len(cells) == 4 * 10
    nv = cells[("softmax", "fp16", "sm_90a")]
    assert nv["evidence"] == ["gpu", "compile"] and nv["status"] == "pass"
    assert nv["accuracy"]["worst_ratio"] == pytest.approx(0.3)
    assert nv["speed"] == {"fraction": 0.91, "basis": "measured ceiling", "median_ms": 0.12, "specs": 1}
    amd = cells[("softmax", "fp16", "gfx942")]
    assert amd["status"] == "fail" and amd["accuracy"]["worst_ratio"] == pytest.approx(3.5)
    failing = [doc["records"][i]["record"] for i in amd["records"] if doc["records"][i]["record"]["kind"] == "runtime"]
    assert failing[0]["failing_input"]["seed"] == 77
    only_built = cells[("layernorm", "fp32", "gfx1201")]
    assert only_built["evidence"] == ["compile"] and only_built["accuracy"] is None
    assert only_built["compile"]["verdict"] == "pass" and only_built["compile"]["shared_cap"] == 65536
    assert doc["counts"] == {"runtime": {"fail": 1, "pass": 3}, "compile": {"pass": 40}, "bench": {"pass": 1}}
    assert all("model" not in c["evidence"] for c in doc["cells"])   # datasheet model rows are no evidence
    md = (tmp_path / "out" / "matrix.md").read_text()
    assert "| softmax   | fp16    |" in md and "FAIL 3.5 GC" in md and "ok 0.3 GC" in md and "built C" in md
    assert "built" in (tmp_path / "out" / "matrix.html").read_text()


def test_newer_result_wins_and_the_report_says_so(runs, tmp_path, capsys):
    old = runtime("softmax", "fp16", "rocm", "gfx942", "fail", 3.5, when="2026-12-01T10:00:00+00:00")
    new = runtime("softmax", "fp16", "rocm", "gfx942", "pass", 0.4, when="2026-12-03T10:00:00+00:00")
    a = write(tmp_path / "rerun" / "results.jsonl", [new])
    b = write(tmp_path / "first" / "results.jsonl", [old])
    code, _, _ = report(capsys, a, b, "--out", tmp_path / "out", "--quiet")   # the newer one comes first
    assert code == 0
    doc = json.loads((tmp_path / "out" / "matrix.json").read_text())
    (cell,) = doc["cells"]
    assert cell["status"] == "pass"
    (sup,) = doc["superseded"]
    assert sup["kept"]["source"] == str(a) and sup["dropped"]["source"] == str(b)
    assert "replaces" in sup["note"] and "2026-12-01" in sup["note"]
    md = (tmp_path / "out" / "matrix.md").read_text()
    assert "Superseded results (1)" in md and "newer results replaced 1 older one" in md
    assert "Newer result wins" in (tmp_path / "out" / "matrix.html").read_text()


def test_equal_timestamps_go_to_the_later_input(tmp_path):
    when = "2026-12-01T10:00:00+00:00"
    a = write(tmp_path / "a.jsonl", [runtime("softmax", "fp16", "cuda", "sm_90a", "fail", 2.0, when=when)])
    b = write(tmp_path / "b.jsonl", [runtime("softmax", "fp16", "cuda", "sm_90a", "pass", 0.2, when=when)])
    m = merge.build(merge.load([a, b]))
    assert m.cell("softmax", "fp16", "sm_90a").status() == "pass"
    m = merge.build(merge.load([b, a]))
    assert m.cell("softmax", "fp16", "sm_90a").status() == "fail"


def test_directories_and_reports_are_inputs(runs, tmp_path, capsys):
    report(capsys, tmp_path, "--out", tmp_path / "out", "--quiet")    # every results.jsonl below
    doc = json.loads((tmp_path / "out" / "matrix.json").read_text())
    assert len(doc["records"]) == 48      # model rows and device ceilings are kept in the records, not the cells
    code, _, _ = report(capsys, tmp_path / "out" / "matrix.json", "--out", tmp_path / "again", "--quiet")
    assert code == 0
    again = json.loads((tmp_path / "again" / "matrix.json").read_text())
    assert [c["status"] for c in again["cells"]] == [c["status"] for c in doc["cells"]]


# ---- escaping ----------------------------------------------------------------------------------

def test_strings_from_kernels_errors_and_files_are_escaped(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    evil = runtime(XSS, "fp16", "cuda", "sm_90a", "fail", 2.0,
                   message="</pre><img src=x onerror=alert(1)> [click](javascript:alert(1)) | `tick`",
                   failing={"dtype": "fp16", "note": "</script><script>alert(2)</script>", "seed": 1})
    evil["reproduce"] = "portcheck run --kernel '<script>' `rm -rf`"
    evil["provenance"]["host"] = "<b onmouseover=alert(3)>host</b>"
    evil["tolerance"]["y"]["formula"] = "<iframe src=javascript:alert(4)>"
    write(tmp_path / "evil" / "results.jsonl", [evil, compile_rec(XSS, "fp16", "gfx942", lints=[
        {"rule": "<svg onload=alert(5)>", "severity": "error", "message": "<style>body{display:none}</style>"}])])
    code, _, _ = report(capsys, tmp_path / "evil", "--out", tmp_path / "out", "--quiet", "--title", "<h1>t</h1>")
    assert code == 0
    page = (tmp_path / "out" / "matrix.html").read_text()
    md = (tmp_path / "out" / "matrix.md").read_text()
    for tag in ("<script", "<img", "<iframe", "<svg", "<b onmouseover", "<h1>t", "<style>body"):
        assert tag not in page.lower() and tag not in md.lower(), tag
    assert "&lt;script&gt;alert(&#x27;pwn&#x27;)&lt;/script&gt;" in page
    assert "&lt;script&gt;alert('pwn')&lt;/script&gt;" in md
    assert "\\[click\\](javascript:alert(1))" in md       # no Markdown link
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert md.count("<details>") == md.count("</details>")


def test_md_escape_keeps_text_inert():
    assert md_escape("a|b\nc") == "a\\|b c"
    assert md_escape("<b>*x*_y_</b>") == "&lt;b&gt;\\*x\\*_y_&lt;/b&gt;"
    assert md_escape("[a](b)") == "\\[a\\](b)"


# ---- overrides ---------------------------------------------------------------------------------

MANIFEST = """
[[override]]
case = "softmax"
target = "rocm"
dtype = "fp16"
action = "xfail"
reason = "MI300 <fp16> exp differs"
link = "https://example.invalid/issue/1"
expires = {expires}
"""


def test_report_lists_every_override_with_its_reason(runs, tmp_path, capsys):
    (tmp_path / "overrides.toml").write_text(MANIFEST.format(expires="2099-01-01"))
    code, _, _ = report(capsys, runs["amd"], "--overrides", tmp_path / "overrides.toml", "--out", tmp_path / "out",
                        "--quiet")
    assert code == 0
    md = (tmp_path / "out" / "matrix.md").read_text()
    assert "Overrides in force (1)" in md and "1 override(s) in force, 0 of them applied" in md and "MI300 &lt;fp16&gt; exp differs" in md and "2099-01-01" in md
    assert "MI300 &lt;fp16&gt; exp differs" in (tmp_path / "out" / "matrix.html").read_text()
    doc = json.loads((tmp_path / "out" / "matrix.json").read_text())
    assert doc["overrides"][0]["reason"] == "MI300 <fp16> exp differs"


def test_expired_override_fails_the_report(runs, tmp_path, capsys):
    (tmp_path / "overrides.toml").write_text(MANIFEST.format(expires="2020-01-01"))
    code, _, err = report(capsys, runs["amd"], "--overrides", tmp_path / "overrides.toml", "--out", tmp_path / "out")
    assert code == 2 and "expired on 2020-01-01" in err
    assert not (tmp_path / "out" / "matrix.md").exists()


def test_expired_override_recorded_in_results_fails(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    o = {"case": "*", "target": "interpreter", "arch": "*", "dtype": "bf16", "action": "xfail",
         "reason": "bf16 casts truncate", "link": "FACTS.md", "expires": "2021-06-30", "factor": 1.0}
    write(tmp_path / "r.jsonl", [runtime("softmax", "bf16", "interpreter", "cpu-interpreter", "xfail", override=o)])
    code, _, err = report(capsys, tmp_path / "r.jsonl", "--out", tmp_path / "out")
    assert code == 2 and "expired override" in err and "2021-06-30" in err


# ---- bad input and atomic writes ----------------------------------------------------------------

def _bad_inputs(tmp_path):
    good = json.dumps(runtime("softmax", "fp16", "cuda", "sm_90a"), sort_keys=True)
    v2 = json.loads(good)
    v2["schema"] = "portcheck.result/2"
    return {
        "truncated": (good + "\n" + good[: len(good) // 2], ["line 2 is cut off"]),
        "not-json": ("this is not json\n", ["line 1 is not JSON"]),
        "empty": ("", ["holds no result records"]),
        "version": (json.dumps(v2) + "\n", ["schema version 'portcheck.result/2'"]),
        "invalid": (good.replace('"verdict": "pass"', '"verdict": "maybe"') + "\n", ["results.jsonl, line 1: verdict: 'maybe' is not one of"]),
        "binary": (None, ["not UTF-8"]),
    }


@pytest.mark.parametrize("name", ["truncated", "not-json", "empty", "version", "invalid", "binary"])
def test_bad_results_give_a_clear_message_and_exit_2(name, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text, words = _bad_inputs(tmp_path)[name]
    path = tmp_path / "results.jsonl"
    if text is None:
        path.write_bytes(b"\xff\xfe\x00garbage")
    else:
        path.write_text(text)
    code, _, err = report(capsys, path, "--out", tmp_path / "out")
    assert code == 2
    assert err.startswith("portcheck: error: ") and err.count("\n") == 1 and "Traceback" not in err
    for w in words:
        assert w in err, err
    assert not (tmp_path / "out" / "matrix.json").exists()


def test_missing_input_and_unwritable_output(runs, tmp_path, capsys):
    code, _, err = report(capsys, tmp_path / "nope.jsonl", "--out", tmp_path / "out")
    assert code == 2 and "no such file or directory" in err
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a directory")
    code, _, err = report(capsys, runs["amd"], "--out", blocker / "sub")
    assert code == 2 and "cannot create output directory" in err


def test_a_failed_run_never_overwrites_a_report(runs, tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    assert report(capsys, runs["nvidia"], "--out", out, "--quiet")[0] == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert set(before) == {"matrix.json", "matrix.md", "matrix.html", "bench.md"}   # the run holds benchmarks
    (tmp_path / "bad.jsonl").write_text("{oops\n")
    assert report(capsys, runs["amd"], tmp_path / "bad.jsonl", "--out", out)[0] == 2
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before

    import portcheck.commands.report as cmd

    def broken(*a, **k):
        raise RuntimeError("disk on fire")
    monkeypatch.setattr(cmd, "render_html", broken)   # fails after json and md are rendered
    with pytest.raises(RuntimeError):
        cli.main(["report", str(runs["amd"]), "--out", str(out), "--quiet"])
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before   # no temporaries left either


def test_written_files_follow_the_umask(runs, tmp_path, capsys):
    report(capsys, runs["amd"], "--out", tmp_path / "out", "--quiet")
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "out" / "matrix.md").stat().st_mode & 0o777 == 0o666 & ~mask


# ---- size, progress, the run/pytest entry point --------------------------------------------------

def test_markdown_fits_a_pull_request_comment(tmp_path):
    recs = []
    for i in range(40):
        for d in ("fp32", "fp16", "bf16"):
            recs += [compile_rec(f"kernel_{i}", d, a, variant=f"v{j}") for a in ARCHS10 for j in range(3)]
            recs += [runtime(f"kernel_{i}", d, "cuda", "sm_90a", "fail", 5.0, message="x" * 300)]
    m = merge.from_records(recs)
    from portcheck.reports.markdown import render
    text = render(m)
    assert len(text) <= COMMENT_LIMIT
    assert "Left out to stay under" in text
    head = text.split("<details>")[0]
    assert "## Accuracy" in head and len(head) < 30000


def test_progress_shows_and_quiet_silences_it(runs, tmp_path, capsys):
    _, _, err = report(capsys, runs["nvidia"], runs["amd"], runs["compile"], "--out", tmp_path / "a")
    assert "reading results: 100% (3/3)" in err
    _, _, err = report(capsys, runs["nvidia"], runs["amd"], runs["compile"], "--out", tmp_path / "b", "--quiet")
    assert err == ""


def test_markdown_of_one_run_still_works():
    recs = two_vendors_and_compile()["amd"]
    text = markdown(recs, "pytest --target=rocm")
    assert text.startswith("# pytest --target=rocm") and "FAIL 3.5 G" in text
    assert "replay:" in text and "failing input:" in text


def test_progress_redraws_one_line_on_a_terminal():
    import io

    from portcheck.reports.progress import Progress

    class Tty(io.StringIO):
        def isatty(self):
            return True
    out = Tty()
    with Progress("merging", 3, stream=out) as bar:
        for _ in range(3):
            bar.advance(note="x")
            bar._last_draw = 0.0          # no rate limit in the test
    text = out.getvalue()
    assert text.count("\r") == 3 and text.endswith("\n") and "[" + "#" * Progress.WIDTH + "] 3/3" in text
    quiet = Tty()
    with Progress("merging", 3, stream=quiet, quiet=True) as bar:
        bar.advance(3)
    assert quiet.getvalue() == ""


def test_non_finite_errors_survive_a_round_trip(tmp_path, capsys, monkeypatch):
    """A NaN output's error is inf: matrix.json stays strict JSON, and reads back as inf."""
    monkeypatch.chdir(tmp_path)
    r = runtime("softmax", "fp16", "cuda", "sm_90a", "fail", float("inf"), message="nan")
    write(tmp_path / "r.jsonl", [r])
    assert report(capsys, tmp_path / "r.jsonl", "--out", tmp_path / "out", "--quiet")[0] == 0
    text = (tmp_path / "out" / "matrix.json").read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    (entry,) = merge.load([tmp_path / "out" / "matrix.json"])
    assert entry.record["metrics"]["worst_ratio"] == float("inf") and entry.record["message"] == "nan"
    assert "FAIL inf" in (tmp_path / "out" / "matrix.md").read_text()


def test_bench_records_get_a_speed_report_with_the_newest_figure(runs, tmp_path, capsys):
    out = tmp_path / "out"
    assert report(capsys, runs["nvidia"], "--out", out, "--quiet")[0] == 0
    speed = (out / "bench.md").read_text()
    assert "## Speed" in speed and "Ceilings measured in this run: copy **4,200 GB/s**" in speed


def test_batched_appends_write_every_record_even_when_the_block_fails(tmp_path):
    from portcheck.results import BatchedAppender, read
    path = tmp_path / "results.jsonl"
    with BatchedAppender(path, every_s=3600) as out:
        out.add({"i": 0})
        assert not path.exists()            # held back until a second has passed or the block ends
    assert read(path) == [{"i": 0}]
    with pytest.raises(RuntimeError):
        with BatchedAppender(path, every_s=3600) as out:
            out.add({"i": 1})
            raise RuntimeError("a compile run interrupted")
    with BatchedAppender(path, every_s=0) as out:
        out.add({"i": 2})
        assert read(path)[-1] == {"i": 2}   # past the interval: written at once
    assert [r["i"] for r in read(path)] == [0, 1, 2]


def test_a_passing_cell_with_a_note_is_listed_with_it():
    note = "x with a strided last dimension (stride 2, a view of every other element): read as if contiguous"
    md = markdown([runtime("softmax", "fp16", "interpreter", "interpreter", message=note),
                   runtime("softmax", "bf16", "interpreter", "interpreter")])
    assert "<summary>Passing cells with notes (1)</summary>" in md
    assert f"- **softmax fp16 on interpreter/interpreter**: {md_escape(note)}" in md


def test_a_failing_cell_whose_values_are_right_prints_no_ulp_figure(capsys):
    """A failure with every value within tolerance (a write past the output's end) prints the
    guard's message, not a '0 ulp' that reads as a pass."""
    from portcheck.commands.run import _print_result
    from portcheck.results import Result
    r = Result("runtime", "k", "f", "fp32", "interpreter", "cpu", "fail", "interpreter",
               message="out-of-bounds write: 4 bytes after y", metrics={"max_ulp": 0.0, "worst_ratio": 0.0})
    _print_result("interpreter", "cpu", r)
    line = capsys.readouterr().out.splitlines()[0]
    assert "ulp" not in line and line.endswith("fail    out-of-bounds write: 4 bytes after y"), line
    r.metrics = {"max_ulp": 3.0, "worst_ratio": 2.0}
    _print_result("interpreter", "cpu", r)
    assert " fail   3 ulp  out-of-bounds" in capsys.readouterr().out
