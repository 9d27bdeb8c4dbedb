#!/usr/bin/env python3
"""Bootstrap: create or reuse .venv, install portcheck with pinned versions, then run a job.

    python3 dev.py run  [portcheck run options]   the main job: a report on this machine's targets
    python3 dev.py test [pytest options]          the test suite

Standard library only, so it works with nothing but python3 and pip.
"""
import hashlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".portcheck-installed"
INSTALL_INPUTS = ("constraints.txt", "pyproject.toml")


def _fingerprint() -> str:
    digest = hashlib.sha256()
    for name in INSTALL_INPUTS:
        digest.update((ROOT / name).read_bytes())
    return digest.hexdigest()


def _ensure_venv() -> None:
    if not (BIN / "python").exists():
        print(f"dev.py: creating {VENV}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    want = _fingerprint()
    if STAMP.exists() and STAMP.read_text() == want:
        return
    print("dev.py: installing portcheck and its pinned dependencies into .venv", flush=True)
    pip = [str(BIN / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    subprocess.run(pip + ["-c", str(ROOT / "constraints.txt"), "-e", f"{ROOT}[test]"], check=True)
    STAMP.write_text(want)


def main(argv: list[str]) -> int:
    jobs = {
        "run": [str(BIN / "portcheck"), "run"],
        # CI's defaults: both cores, the fault tests' shared run kept on one worker, the
        # interpreter on small inputs (matrices/ci.toml). Later options override these.
        "test": [str(BIN / "python"), "-m", "pytest", "-n", "2", "--dist", "loadgroup",
                 "--matrix", "matrices/ci.toml", "--portcheck-profile", "ci"],
    }
    if not argv or argv[0] not in jobs:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        _ensure_venv()
    except subprocess.CalledProcessError as exc:
        print(f"dev.py: setting up .venv failed ({exc})", file=sys.stderr)
        return 1
    return subprocess.run(jobs[argv[0]] + argv[1:], cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
