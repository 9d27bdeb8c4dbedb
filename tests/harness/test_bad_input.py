"""Bad input: a clear one-line message naming what is wrong, exit 2, no traceback, nothing written."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from portcheck import cli
from portcheck.errors import UsageError
from portcheck.matrix import load


def portcheck(*args, cwd=None):
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run([sys.executable, "-m", "portcheck", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=env)


def assert_usage_error(proc, *words):
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    for w in words:
        assert w in proc.stderr, proc.stderr


@pytest.mark.parametrize("args,words", [
    (["run", "--target", "tpu"], ["unknown target 'tpu'", "cuda, rocm, interpreter"]),
    (["run", "--kernel", "no_such_kernel"], ["no kernel case matches 'no_such_kernel'", "softmax"]),
    (["run", "--kernel", "softmax", "--dtype", "fp12"], ["unknown dtype 'fp12'", "fp32"]),
    (["run", "--kernel", "softmax", "--dtype", "int8"], ["no selected kernel takes dtype 'int8'"]),
    (["run", "--replay", "{not json"], ["--replay is not JSON"]),
    (["run", "--kernel", "softmax,softmax_long", "--replay", '{"dtype": "fp32"}'],
     ["--replay needs exactly one --kernel"]),
    *[(["run", "--target", "interpreter", "--kernel", "softmax", "--replay",
        '{"cols": %s, "dtype": "fp32", "layout": %s, "regime": %s, "rows": %s, "seed": %s}' % values], [said])
      for values, said in [
          (('4', '"contiguous"', '"weird"', '2', '1'), "'regime' must be one of equal, large, normal"),
          (('4', '"sideways"', '"normal"', '2', '1'), "'layout' must be one of contiguous, far, padded"),
          (('-3', '"contiguous"', '"normal"', '2', '1'), "'cols' must be at least 1"),
          (('4', '"contiguous"', '"normal"', '0', '1'), "'rows' must be at least 1"),
          (('4', '"contiguous"', '"normal"', '2', '-1'), "'seed' must be at least 0"),
          (('4', '"contiguous"', '"normal"', '2', '99999999999999999999'), "'seed' must be below 2**63")]],
    (["run", "--timeout", "0"], ["--timeout must be positive"]),
    (["run", "--shrink-time", "-1"], ["--shrink-time must be finite and 0 or more"]),
    (["run", "--matrix", "/no/such/matrix.toml"], ["cannot read matrix file"]),
    (["frobnicate"], ["invalid choice: 'frobnicate'"]),
])
def test_run_refuses(args, words, tmp_path):
    proc = portcheck(*args, "--out", str(tmp_path / "out")) if args[0] == "run" else portcheck(*args)
    assert_usage_error(proc, *words)
    assert not (tmp_path / "out" / "results.jsonl").exists()


@pytest.mark.parametrize("argv,words", [
    (["run", "--jobs", "abc"], ["invalid int value: 'abc'", "'portcheck run --help'"]),
    (["run", "--no-such-flag", "x"], ["unrecognized arguments: --no-such-flag x", "'portcheck run --help'"]),
    (["gate"], ["required: --baseline", "'portcheck gate --help'"]),
    (["frobnicate"], ["invalid choice", "'portcheck --help'"]),
])
def test_argument_errors_are_one_line_naming_the_commands_help(argv, words, capsys):
    """argparse's own errors read like portcheck's: one line, no usage block, and an unknown flag
    is blamed on the command it was given to, whose --help it names."""
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("portcheck: error: "), err
    for w in words:
        assert w in err, err


def test_unwritable_output_directory(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    proc = portcheck("run", "--kernel", "softmax", "--out", str(blocker / "sub"))
    assert_usage_error(proc, "cannot create output directory")


def test_existing_results_are_not_overwritten(tmp_path):
    (tmp_path / "results.jsonl").write_text("{}\n")
    proc = portcheck("run", "--kernel", "softmax", "--out", str(tmp_path))
    assert_usage_error(proc, "exists already")
    assert (tmp_path / "results.jsonl").read_text() == "{}\n"


@pytest.mark.parametrize("text,words", [
    ("", ["the matrix file is empty"]),
    ("[run\ntargets = 1", ["invalid TOML", "line 1"]),
    ("[run]\nprofile = 'dev'\nflavour = 3\n", ["line 3", "'flavour' is not a known key"]),
    ("[run]\n\ntargets = ['tpu']\n", ["line 3", "unknown target 'tpu'"]),
    ("[run]\ntargets = 'cuda'\n", ["line 2", "'targets' must be a list"]),
    ("[run]\ntimeout = -5\n", ["line 2", "'timeout' must be a positive number"]),
    ("[run.max_elements]\ngpu = 0\n", ["gpu must be a positive integer"]),
    ("[runn]\n", ["unknown table(s) runn"]),
])
def test_malformed_matrix_names_file_line_and_problem(tmp_path, text, words):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(UsageError) as err:
        load(path)
    assert str(path) in str(err.value)
    for w in words:
        assert w in str(err.value)


def test_non_utf8_matrix(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes("[run]\nprofile = 'd\xe9v'\n".encode("latin-1"))
    proc = portcheck("run", "--matrix", str(path), "--out", str(tmp_path / "out"))
    assert_usage_error(proc, "not UTF-8")


def test_expired_override_stops_the_run(tmp_path):
    (tmp_path / "overrides.toml").write_text(
        "[[override]]\ncase = '*'\naction = 'skip'\nreason = 'old'\nlink = 'x'\nexpires = 2020-01-01\n")
    (tmp_path / "m.toml").write_text("[run]\noverrides = 'overrides.toml'\n")
    proc = portcheck("run", "--matrix", str(tmp_path / "m.toml"), "--out", str(tmp_path / "out"))
    assert_usage_error(proc, "expired on 2020-01-01")


@pytest.mark.parametrize("args,words", [
    (["--target=tpu"], ["invalid choice: 'tpu'", "interpreter"]),
    (["--target=interpreter", "--arch=gfx999"], ["unknown arch 'gfx999'", "gfx942"]),
    (["--target=cuda", "--require-device"], ["--require-device", "no device here"]),
])
def test_pytest_usage_errors(tmp_path, args, words):
    if "--require-device" in args:
        import torch
        if torch.cuda.is_available():
            pytest.skip("this machine has a GPU")
    (tmp_path / "test_k.py").write_text("from portcheck.testing import test_portcheck_case\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", str(tmp_path),
                           *args, "-q"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    for w in words:
        assert w in proc.stderr + proc.stdout
