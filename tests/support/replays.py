"""Run a record's printed replay command as a user pastes it: from the repository root, in a
fresh process, with the repository importable (its --cases modules live under tests/)."""
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def argv_of(reproduce: str) -> list[str]:
    """The printed command's arguments after `portcheck`."""
    return shlex.split(reproduce.split("portcheck ", 1)[1])


def run_replay(reproduce: str, out: Path) -> tuple[subprocess.CompletedProcess, dict]:
    """The replay's process and its one record."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, "-m", "portcheck", *argv_of(reproduce), "--out", str(out)],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    results = out / "results.jsonl"
    records = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    assert len(records) == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc, records[0]
