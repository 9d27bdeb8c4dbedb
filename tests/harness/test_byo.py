"""Bring your own kernel: a repository outside portcheck's tree registers its cases (an installed
entry point, or `--cases` for one that is not installed) and uses `portcheck run`, pytest,
`portcheck compile` and the printed replays from its own folder, with no portcheck variable set.

The installed repository goes into a throwaway venv that sees this one's packages (a .pth file),
so this venv is left as it was.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.xdist_group("byo")

CASES = '''
import torch
import triton
import triton.language as tl

import portcheck
from portcheck import strategies as S
from portcheck import tolerance as T


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, SKIP_LAST: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n - SKIP_LAST
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


def launcher(skip_last):
    def launch(args, outs):
        n = args["x"].numel()
        block = 2048 if torch.version.hip else 1024    # a launcher that branches on the vendor
        scale_kernel[(triton.cdiv(n, block),)](args["x"], outs["y"], n, SKIP_LAST=skip_last, BLOCK=block)
    return launch


for name, skip_last in ((PREFIX + "_scale", 0), (PREFIX + "_scale_bug", 1)):   # the bug: the last element
    portcheck.register(portcheck.Case(
        name=name, family=PREFIX, dtypes=("fp32",),
        inputs=lambda dtype, max_elements: S.row_inputs(dtype, max_elements, allowed=("normal",)),
        make=lambda spec, device: {"x": S.row_tensor(spec, device).contiguous()},
        outputs=lambda args: {"y": (tuple(args["x"].shape), args["x"].dtype)},
        launch=launcher(skip_last), oracle=portcheck.oracle_from_torch(lambda x: 2 * x, "y"),
        tolerance=lambda args, refs, dtype: {"y": T.elementwise(dtype, ops=1)}))
'''

PYPROJECT = '''
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "byo-kernels"
version = "0.0.1"

[project.entry-points."portcheck.cases"]
byo = "byo_kernels.cases"

[tool.setuptools]
packages = ["byo_kernels"]
'''

TEST = '''
from portcheck.testing import test_portcheck_case  # noqa: F401

PORTCHECK_CASES = ["byo_*"]
'''


def _env(bin_dir: Path | None = None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PORTCHECK_", "TRITON_INTERPRET", "PYTHONPATH", "PYTEST_"))}
    if bin_dir is not None:
        env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


def _sh(command, cwd: Path, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          shell=isinstance(command, str))


def _replay(stdout: str, case: str) -> str:
    """The replay command a failing run printed for `case`."""
    found = [m for m in re.findall(r"replay: (portcheck .*)", stdout) if f"--kernel {case} " in m]
    assert found, stdout
    return found[0]


def _verdicts(out: Path) -> dict:
    return {(r["case"]): r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())
            if r.get("kind") == "runtime"}


@pytest.fixture(scope="module")
def installed_repo(tmp_path_factory):
    """A repository with its own pyproject and entry point, installed (editable) into a throwaway
    venv; `portcheck` on that venv's PATH. No matrices/ folder: the packaged defaults apply."""
    base = tmp_path_factory.mktemp("byo")
    repo, venv = base / "repo", base / "venv"
    (repo / "byo_kernels").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / "byo_kernels" / "__init__.py").write_text("")
    (repo / "byo_kernels" / "cases.py").write_text(f"PREFIX = 'byo'\n{CASES}")
    (repo / "conftest.py").write_text("import byo_kernels.cases  # noqa: F401  kernels imported first\n")
    (repo / "tests" / "test_kernels.py").write_text(TEST)
    (repo / "local_cases.py").write_text(f"PREFIX = 'local'\n{CASES}")     # not installed: --cases
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    parent = sysconfig.get_paths()["purelib"]     # this venv's site-packages
    (site / "_portcheck_venv.pth").write_text(f"import site; site.addsitedir({parent!r})\n")
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", str(repo)],
                   check=True, env=_env(), capture_output=True)
    (venv / "bin" / "portcheck").write_text(f"#!{python}\nimport sys\nfrom portcheck.cli import main\nsys.exit(main())\n")
    (venv / "bin" / "portcheck").chmod(0o755)
    return repo, venv / "bin"


def test_run_replay_pytest_and_compile_from_an_installed_repository(installed_repo):
    """From the repository's folder: `portcheck run` (its installed cases, and with --cases a
    module of the folder that is not installed), a printed replay pasted into a shell, pytest
    (whose conftest imports the kernels first) and `portcheck compile` (launches captured per arch)."""
    repo, bin_dir = installed_repo
    env = _env(bin_dir)
    run = _sh(["portcheck", "run", "--cases", "local_cases", "--target", "interpreter",
               "--kernel", "byo_*,local_scale_bug", "--out", "r1"], repo, env)
    assert run.returncode == 1, run.stdout + run.stderr
    got = _verdicts(repo / "r1")
    assert {c: r["verdict"] for c, r in got.items()} == \
        {"byo_scale": "pass", "byo_scale_bug": "fail", "local_scale_bug": "fail"}, run.stdout
    manifest = json.loads((repo / "r1" / "run.json").read_text())
    assert manifest["matrix"].endswith("portcheck/data/default.toml"), manifest   # no matrices/ here
    assert manifest["overrides"].endswith("portcheck/data/overrides.toml")
    assert "portcheck/data/default.toml" in run.stdout
    assert got["byo_scale"]["provenance"]["profile"] == "ci" and manifest["seed"] == 0
    assert _replay(run.stdout, "byo_scale_bug").startswith("portcheck run --target ")   # an entry point: found anywhere

    replay = _replay(run.stdout, "local_scale_bug")
    assert replay.startswith("portcheck run --cases local_cases ")
    again = _sh(f"{replay} --out r2", repo, env)       # pasted into a shell, as printed
    assert again.returncode == 1, again.stdout + again.stderr
    assert _verdicts(repo / "r2")["local_scale_bug"]["message"] == got["local_scale_bug"]["message"]

    tests = _sh([str(bin_dir / "python"), "-m", "pytest", "--target=interpreter", "-p", "no:cacheprovider",
                 "-q", "tests"], repo, env)
    assert re.search(r"\b1 failed, 1 passed\b", tests.stdout), tests.stdout + tests.stderr
    assert "0 active drivers" not in tests.stdout
    assert "test_portcheck_case[byo_scale_bug-fp32]" in tests.stdout

    built = _sh(["portcheck", "compile", "--arch", "gfx942,sm_90a", "--kernel", "byo_scale", "--out", "c1"], repo, env)
    assert built.returncode == 0, built.stdout + built.stderr
    records = [json.loads(line) for line in (repo / "c1" / "results.jsonl").read_text().splitlines()]
    assert records and all(r["verdict"] == "pass" for r in records), built.stdout
    blocks = {(r["arch"], re.search(r"BLOCK=(\d+)", r["variant"]).group(1)) for r in records}
    assert blocks == {("gfx942", "2048"), ("sm_90a", "1024")}, blocks   # captured per arch, as that vendor


# ---- the pieces, in this process ---------------------------------------------------------------

def test_the_packaged_defaults_are_the_repositorys():
    """A folder without matrices/ gets portcheck's own default matrix and overrides: the copies
    shipped in the package must be the files of matrices/ (copy them over after editing those)."""
    from portcheck.commands._common import PACKAGED_MATRIX, load_run_plan
    matrices = Path(__file__).resolve().parents[2] / "matrices"
    for name in ("default.toml", "overrides.toml"):
        assert (PACKAGED_MATRIX.parent / name).read_text() == (matrices / name).read_text(), \
            f"portcheck/data/{name} differs from matrices/{name}: cp matrices/{name} portcheck/data/"
    plan = load_run_plan(None, default=Path("no/such/matrices/default.toml"))
    assert plan.path == PACKAGED_MATRIX and plan.overrides == PACKAGED_MATRIX.parent / "overrides.toml"
    assert plan.profile == "ci" and plan.max_elements["interpreter"] == 16384


def test_case_modules_matrix_key(tmp_path):
    from portcheck.errors import UsageError
    from portcheck.matrix import load
    good = tmp_path / "good.toml"
    good.write_text('[run]\ncase_modules = ["mykernels.cases"]\n')
    assert load(good).case_modules == ["mykernels.cases"]
    bad = tmp_path / "bad.toml"
    bad.write_text('[run]\ncase_modules = [""]\n')
    with pytest.raises(UsageError, match="case_modules"):
        load(bad)


def test_kernel_names_cases_and_family_prefix_names_families():
    from portcheck import cases
    from portcheck.errors import UsageError
    assert [c.name for c in cases.select(["layernorm"])] == ["layernorm"]
    assert {c.name for c in cases.select(["family:layernorm"])} == {"layernorm", "layernorm_long"}
    assert {c.name for c in cases.select(["family:activations"])} == {"gelu_mul", "silu_mul"}
    with pytest.raises(UsageError, match="no kernel case matches 'activations'"):
        cases.select(["activations"])          # a family's name is not a case name


def test_a_pattern_that_matches_nothing_names_a_module_that_did_not_import(monkeypatch):
    from portcheck import cases
    from portcheck.errors import UsageError
    monkeypatch.setitem(cases.LOAD_ERRORS, "mykernels.cases", "SyntaxError: invalid syntax (cases.py, line 3)")
    with pytest.raises(UsageError, match=r"no kernel case matches 'ok_\*'; module mykernels.cases does not "
                                         r"import: SyntaxError: invalid syntax \(cases.py, line 3\); known: "):
        cases.select(["ok_*"])


def _user_case(**fields):
    import portcheck
    import torch
    base = dict(name="unregistered_scale", family="user", dtypes=("fp32",), inputs=None,
                make=lambda spec, device: {"x": torch.ones(3, 4), "alpha": 2.0},
                outputs=lambda args: {"y": ((3, 4), torch.float16)}, launch=None,
                oracle=portcheck.oracle_from_torch(lambda x, alpha: alpha * x, "y"), tolerance=None)
    return portcheck.Case(**{**base, **fields})


def test_cost_defaults_to_the_bytes_of_inputs_and_outputs():
    case = _user_case()
    args = case.make({}, "cpu")
    assert case.cost(args).bytes == 12 * 4 + 12 * 2 and case.cost(args).flops == 0


def test_an_oracle_from_a_torch_function_is_float64_and_takes_arguments_by_name():
    import torch
    refs = _user_case().oracle({"x": torch.ones(2, dtype=torch.float64), "alpha": 3.0, "unused": 1})
    assert refs["y"].dtype == torch.float64 and refs["y"].tolist() == [3.0, 3.0]


def test_a_launcher_that_allocates_its_output_is_copied_into_the_poisoned_buffer():
    import portcheck
    import torch
    from portcheck.adapters import AllocatedOutputWarning
    with pytest.warns(AllocatedOutputWarning, match="made another way"):
        launch = portcheck.allocating_launcher(lambda x: (2 * x).half(), "y")
    outs = {"y": torch.full((3, 4), float("nan"), dtype=torch.float16)}
    launch({"x": torch.ones(3, 4)}, outs)
    assert outs["y"].eq(2).all()
    with pytest.warns(AllocatedOutputWarning):
        wrong = portcheck.allocating_launcher(lambda x: 2 * x, "y")      # fp32, not the fp16 declared
    with pytest.raises(ValueError, match=r"returned y as \(3, 4\) torch.float32"):
        wrong({"x": torch.ones(3, 4)}, outs)


def test_tolerance_helpers_state_their_formulas():
    import torch
    from portcheck import tolerance as T
    x = torch.randn(4, 8, dtype=torch.float64)
    a, b = torch.randn(4, 16, dtype=torch.float64), torch.randn(16, 5, dtype=torch.float64)
    made = {
        "elementwise": T.elementwise("fp16", ops=2, terms=x.abs()),
        "row_reduction": T.row_reduction(x, "fp32"),
        "normalization": T.normalization(x, "bf16", eps=1e-5),
        "softmax": T.softmax(x, torch.softmax(x, dim=-1), "fp16"),
        "dot": T.dot(a, b, "fp16", "fp32"),
    }
    for name, tol in made.items():
        assert tol.formula and "u(" in tol.formula, name
    assert made["row_reduction"].atol.shape == (4,) and made["dot"].atol.shape == (4, 5)
    assert "n = 8" in made["softmax"].formula and "K = 16" in made["dot"].formula
    # products of fp16 values are exact in fp32, not in fp16
    assert "+ 0)" in T.dot(a, b, "fp16", "fp32", inputs="fp16").formula
    assert "+ u(fp16))" in T.dot(a, b, "fp16", "fp16", inputs="fp16").formula


def test_matmul_sizes_keep_every_operand_within_the_budget():
    from hypothesis import given, settings
    from portcheck import strategies as S

    @settings(max_examples=50, derandomize=True, database=None)
    @given(S.matmul_inputs("fp16", 4096, tile=32))
    def draw(spec):
        m, n, k = spec["M"], spec["N"], spec["K"]
        assert max(m * k, k * n, m * n) <= 4096
        a, b = S.matmul_tensors(spec, "cpu")
        assert a.shape == (m, k) and b.shape == (k, n)
    draw()


def test_new_case_writes_a_case_that_passes_and_refuses_to_overwrite(tmp_path, monkeypatch):
    import importlib.util

    import portcheck
    from portcheck import cli
    assert cli.main(["new-case", "my_scale", "--dir", str(tmp_path)]) == 0
    assert "import my_scale" in (tmp_path / "test_my_scale.py").read_text()
    assert cli.main(["new-case", "my_scale", "--dir", str(tmp_path)]) == 2       # nothing overwritten
    assert cli.main(["new-case", "not-a-module", "--dir", str(tmp_path)]) == 2
    for taken in ("json", "torch", "portcheck", "softmax"):   # a module Python finds, a built-in case
        assert cli.main(["new-case", taken, "--dir", str(tmp_path)]) == 2
        assert not (tmp_path / f"{taken}.py").exists()
    if os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        return      # the case below runs on the interpreter
    monkeypatch.setattr(portcheck, "register", lambda case: case)   # checked, not registered
    spec = importlib.util.spec_from_file_location("my_scale", tmp_path / "my_scale.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    import hypothesis
    from portcheck.runner import check
    settings = hypothesis.settings(max_examples=4, derandomize=True, deadline=None, database=None)
    for dtype in module.CASE.dtypes:
        r = check(module.CASE, "interpreter", "cpu-interpreter", dtype, settings=settings, max_elements=2048, seed=0)
        assert r.verdict == "pass" and "as if contiguous" not in r.message, (dtype, r.message)
    # the template keeps the spec's row layout: the same kernel ignoring the row stride fails
    text = (tmp_path / "my_scale.py").read_text()
    (tmp_path / "my_scale.py").write_text(text.replace("row * x_stride + cols", "row * n_cols + cols"))
    spec.loader.exec_module(module)
    settings = hypothesis.settings(settings, max_examples=12,   # found, not shrunk: faster
                                   phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate])
    r = check(module.CASE, "interpreter", "cpu-interpreter", "fp32", settings=settings, max_elements=2048, seed=0)
    assert r.verdict == "fail" and "out-of-bounds read" in r.message, r.message


def test_a_matrix_of_compile_settings_alone(tmp_path):
    from portcheck.matrix import load
    path = tmp_path / "compile.toml"
    path.write_text("[compile]\njobs = 3\n")
    plan = load(path)
    assert plan.compile.jobs == 3 and plan.profile == "dev"      # [run] keeps its defaults


def test_answering_as_an_arch_is_undone_after():
    import torch
    from triton.runtime import driver

    from portcheck.compile.capture import answering_as
    from portcheck.facts import device
    from portcheck.facts.archs import ARCHS
    hip, interpret, active = torch.version.hip, os.environ.get("TRITON_INTERPRET"), driver._active
    for name in ("gfx942", "sm_90a"):
        with answering_as(ARCHS[name]):
            assert (torch.version.hip is not None) == ARCHS[name].is_amd
            assert driver.active.get_current_target().arch == ARCHS[name].triton_arch
            assert device.current_arch().name == name and device.warp_size() == ARCHS[name].warp_size
            assert not device.interpreted()
    assert torch.version.hip == hip and os.environ.get("TRITON_INTERPRET") == interpret
    assert driver._active is active
