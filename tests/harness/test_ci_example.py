"""examples/ci/portcheck.yml, the workflow a user's repository copies: valid YAML with the jobs
README promises, and every portcheck command in it a real command with real options."""
import re
import shlex
from pathlib import Path

import pytest
import yaml

from portcheck.cli import build_parser
from portcheck.errors import UsageError

WORKFLOW = Path(__file__).resolve().parents[2] / "examples" / "ci" / "portcheck.yml"


def _workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def _portcheck_commands(script: str) -> list[list[str]]:
    """Each `portcheck ...` command of a step's shell script, as argv, with GitHub expressions
    replaced by a plain word."""
    script = re.sub(r"\$\{\{.*?\}\}", "EXPR", script.replace("\\\n", " "))
    commands = []
    for line in script.splitlines():
        for part in re.split(r"&&|\|\||;", line):
            words = shlex.split(part)
            if words and words[0] == "portcheck":
                commands.append(words[1:])
    return commands


def _steps(job: dict) -> list[dict]:
    return job["steps"]


def test_the_jobs_runners_and_the_pull_request_comment():
    wf = _workflow()
    jobs = wf["jobs"]
    assert set(jobs) == {"compile", "nvidia", "amd", "report"}
    assert jobs["compile"]["runs-on"] == "ubuntu-latest"                  # no GPU needed
    assert jobs["nvidia"]["runs-on"] == ["self-hosted", "linux", "nvidia"]
    assert jobs["amd"]["runs-on"] == ["self-hosted", "linux", "amd"]
    assert set(jobs["report"]["needs"]) == {"compile", "nvidia", "amd"} and jobs["report"]["if"] == "always()"
    assert jobs["report"]["permissions"]["pull-requests"] == "write"
    scripts = "\n".join(s.get("run", "") for s in _steps(jobs["report"]))
    assert "gh pr comment" in scripts and "--body-file reports/matrix/matrix.md" in scripts
    # every run uploads what it wrote, failing or not, and the report job downloads them all
    for name in ("compile", "nvidia", "amd"):
        upload = [s for s in _steps(jobs[name]) if s.get("uses", "").startswith("actions/upload-artifact")]
        assert upload and upload[0]["if"] == "always()" and upload[0]["with"]["name"] == f"portcheck-{name}"
    download = [s for s in _steps(jobs["report"]) if s.get("uses", "").startswith("actions/download-artifact")]
    assert download and download[0]["with"]["pattern"] == "portcheck-*"


def test_every_portcheck_command_parses():
    parser = build_parser()
    found = {}
    for job in _workflow()["jobs"].values():
        for step in _steps(job):
            for argv in _portcheck_commands(step.get("run", "")):
                try:
                    parser.parse_args(argv)
                except (UsageError, SystemExit) as exc:
                    pytest.fail(f"portcheck {shlex.join(argv)}: {exc}")
                found.setdefault(argv[0], []).append(argv)
    assert set(found) == {"compile", "run", "report", "gate"}, found
    targets = {a[a.index("--target") + 1] for a in found["run"]}
    assert targets == {"cuda", "rocm"}


def test_the_comment_posts_what_report_writes():
    jobs = _workflow()["jobs"]
    report = next(a for s in _steps(jobs["report"]) for a in _portcheck_commands(s.get("run", ""))
                  if a[0] == "report")
    out = report[report.index("--out") + 1]
    scripts = "\n".join(s.get("run", "") for s in _steps(jobs["report"]))
    assert f"--body-file {out}/matrix.md" in scripts
