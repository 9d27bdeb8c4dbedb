"""`portcheck bench` on a machine without a GPU, the [bench] matrix table, spec planning and the
clock readers' parsers."""
import json

import pytest

from portcheck import cli, results
from portcheck.speed.runner import bench_specs, spec_label
from portcheck.cases import Case, Cost
from portcheck.speed.clocks import nvidia_selector, parse_nvidia_smi, parse_rocm_smi, rocm_selector
from portcheck.errors import UsageError
from portcheck.matrix import load
from portcheck.facts.archs import ARCHS


def test_bench_without_a_gpu_is_refused_with_a_pointer_to_the_model(tmp_path, capsys):
    assert cli.main(["bench", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "needs a GPU" in err and "--model-only" in err
    assert not (tmp_path / "r" / "results.jsonl").exists()


@pytest.mark.parametrize("argv, message", [
    (["--target", "interpreter"], "times GPUs"),
    (["--model-only", "--repeats", "1"], "--repeats"),
    (["--model-only", "--kernel", "softmax*", "--spec", "{}"], "--spec"),
    (["--model-only", "--kernel", "softmax", "--spec", "not json"], "not JSON"),
    (["--model-only", "--kernel", "no_such_kernel"], "no kernel case matches"),
    (["--model-only", "--arch", "sm_999"], "unknown arch"),
])
def test_bad_input_is_a_usage_error(tmp_path, capsys, argv, message):
    assert cli.main(["bench", "--out", str(tmp_path / "r"), *argv]) == 2
    assert message in capsys.readouterr().err


def test_model_only_writes_labelled_roofline_floors(tmp_path, capsys):
    out = tmp_path / "r"
    assert cli.main(["bench", "--model-only", "--kernel", "softmax", "--arch", "sm_90a,gfx942",
                     "--out", str(out)]) == 0
    recs = results.read(out / "results.jsonl")
    softmax = [r for r in recs if r["case"] == "softmax"]
    assert {r["arch"] for r in softmax} == {"sm_90a", "gfx942"}
    assert all(r["evidence"] == "model" and r["target"] == "model" and r["kind"] == "bench"
               and r["verdict"] == "skip" for r in recs)
    h200 = next(r for r in softmax if r["arch"] == "sm_90a")
    nbytes = 2 * 32768 * 4096 * 2
    assert h200["bench"]["bytes"] == nbytes
    assert h200["bench"]["model"]["ms"] == pytest.approx(nbytes / (4800.0 * 1e6))
    md = (out / "bench.md").read_text()
    assert "a model, not a measurement" in md and "Ceilings measured" not in md
    with pytest.raises(UsageError):   # refusing to overwrite a previous run's results
        from portcheck.commands import bench as cmd
        import argparse
        ns = argparse.Namespace(target="auto", model_only=True, matrix=None, repeats=None,
                                noise_bound=None, no_compile=False, no_repeat_check=False,
                                kernel="softmax", dtype=None, spec=None, arch=None, out=str(out))
        cmd.main(ns)


def _matrix(tmp_path, text):
    p = tmp_path / "m.toml"
    p.write_text("[run]\ntargets = [\"auto\"]\n" + text)
    return p


def test_bench_table_is_read_and_validated(tmp_path):
    m = load(_matrix(tmp_path, "[bench]\nrepeats = 30\nnoise_bound = 0.02\ncompile = false\n"
                               "[bench.shapes]\nsoftmax = [{rows = 65536}]\n"))
    assert m.bench.repeats == 30 and m.bench.noise_bound == 0.02 and m.bench.compile is False
    assert m.bench.shapes == {"softmax": [{"rows": 65536}]}
    for text, message in [
        ("[bench]\nrepeat = 3\n", "not a known [bench] key"),
        ("[bench]\nrepeats = 2\n", "at least 3"),
        ("[bench]\nrepeats = 3.5\n", "must be an int"),
        ("[bench]\ncompile = 1\n", "must be a bool"),
        ("[bench]\nnoise_bound = -0.1\n", "must not be negative"),
        ("[bench.shapes]\nsoftmax = {rows = 1}\n", "non-empty list of spec tables"),
        ("[bench.extra_shapes]\nsoftmax = []\n", "non-empty list of spec tables"),
        ("[benchmark]\nrepeats = 3\n", "unknown table"),
    ]:
        with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("]", r"\]")):
            load(_matrix(tmp_path, text))
    # the error names the line
    with pytest.raises(UsageError, match="line 4"):
        load(_matrix(tmp_path, "[bench]\nrepeats = 2\n"))


def _case(bench):
    return Case(name="k", family="k", dtypes=("fp16", "bf16"), inputs=None, make=None, outputs=None,
                launch=None, oracle=None, tolerance=None, cost=lambda a: Cost(0), bench=bench)


def test_bench_specs_override_add_and_filter(tmp_path):
    from portcheck.matrix import BenchSettings
    case = _case(({"dtype": "bf16", "rows": 4096, "cols": 4096, "layout": "contiguous"},))
    assert bench_specs(case) == [{"dtype": "bf16", "rows": 4096, "cols": 4096, "layout": "contiguous", "seed": 0}]
    s = BenchSettings(shapes={"k": [{"rows": 8192}, {"cols": 512, "dtype": "fp16"}]},
                      extra_shapes={"k": [{"rows": 1}]})
    specs = bench_specs(case, s)
    assert [(x["dtype"], x["rows"], x["cols"]) for x in specs] == [("bf16", 8192, 4096), ("fp16", 4096, 512),
                                                                   ("bf16", 1, 4096)]
    assert [x["dtype"] for x in bench_specs(case, s, dtypes=["fp16"])] == ["fp16"]
    # no spec in the asked dtype: the first spec re-typed, only to dtypes the case takes
    assert [x["dtype"] for x in bench_specs(case, dtypes=["fp16", "fp32"])] == ["fp16"]
    assert bench_specs(_case(())) == []
    with pytest.raises(UsageError, match="no dtype"):
        bench_specs(_case(({"rows": 1},)))


def test_spec_label_names_the_shape():
    assert spec_label({"dtype": "bf16", "rows": 32768, "cols": 4096, "regime": "normal",
                       "layout": "contiguous", "seed": 0}) == "bf16 rows=32768 cols=4096"
    assert spec_label({"dtype": "fp16", "shape": [8, 128], "layout": "padded"}) == "fp16 shape=8x128 layout=padded"


def test_nvidia_smi_parsing_and_device_selection():
    fields = ("clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem", "temperature.gpu", "power.draw")
    got = parse_nvidia_smi("1980, 3201, 1980, 3201, 41, 123.45\n", fields)
    assert got == {"clocks.sm": 1980, "clocks.mem": 3201, "clocks.max.sm": 1980, "clocks.max.mem": 3201,
                   "temperature.gpu": 41, "power.draw": 123.45}
    assert parse_nvidia_smi("1755, [N/A]", ("clocks.sm", "clocks.mem")) == {"clocks.sm": 1755, "clocks.mem": None}
    with pytest.raises(ValueError):
        parse_nvidia_smi("1, 2, 3", ("clocks.sm", "clocks.mem"))
    assert nvidia_selector("8f0e-aa", {}) == "GPU-8f0e-aa"
    assert nvidia_selector("GPU-8f0e", {}) == "GPU-8f0e"
    assert nvidia_selector(None, {"CUDA_VISIBLE_DEVICES": "5,6"}) == "5"
    assert nvidia_selector(None, {}) == "0"


def test_rocm_smi_parsing_and_device_selection():
    text = json.dumps({"card0": {"fclk clock speed:": "(1600Mhz)", "mclk clock speed:": "(1300Mhz)",
                                 "sclk clock level:": "1", "sclk clock speed:": "(2100Mhz)",
                                 "socclk clock speed:": "(1143Mhz)"}})
    assert parse_rocm_smi(text) == {"fclk_mhz": 1600, "mclk_mhz": 1300, "sclk_mhz": 2100, "socclk_mhz": 1143}
    with pytest.raises(ValueError):
        parse_rocm_smi(json.dumps({"system": {}}))
    assert rocm_selector({"HIP_VISIBLE_DEVICES": "3"}) == "3"
    assert rocm_selector({"HIP_VISIBLE_DEVICES": "GPU-abc", "CUDA_VISIBLE_DEVICES": "2"}) == "2"
    assert rocm_selector({}) == "0"


def test_every_arch_has_what_the_model_needs():
    for a in ARCHS.values():
        assert a.peak_bw_gbs > 0 and a.peak_tflops.get("bf16", 0) > 0 and a.source


def test_spec_takes_the_case_a_name_names_though_it_is_also_a_family(tmp_path, capsys):
    out = tmp_path / "one"
    assert cli.main(["bench", "--model-only", "--arch", "sm_90a", "--kernel", "softmax",
                     "--spec", '{"dtype": "bf16", "rows": 8, "cols": 4096}', "--out", str(out)]) == 0
    recs = results.read(out / "results.jsonl")
    assert {r["case"] for r in recs} == {"softmax"} and recs[0]["bench"]["spec"]["rows"] == 8


def test_replay_also_takes_the_case_a_name_names():
    from portcheck.commands._common import named_case
    from portcheck import cases
    family = cases.select(["family:softmax"])
    assert {c.name for c in family} == {"softmax", "softmax_long"}
    assert [c.name for c in cases.select(["softmax"])] == ["softmax"]   # a name is not its family
    assert [c.name for c in named_case(family, "softmax")] == ["softmax"]
    assert named_case(family, "softmax*") == family          # a glob keeps what it selected
    assert named_case(family, "softmax,softmax_long") == family
