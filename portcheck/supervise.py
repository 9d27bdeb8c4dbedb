"""Run a target's worker process under supervision, so one bad kernel fails only its own case.

The worker announces each case (and each hypothesis example's spec) in an in-flight file before
running it. When the worker hangs past the per-case time limit, dies (a segfault, an illegal
address that poisons the GPU context, an out-of-memory kill) or reports that its GPU context is
lost, the supervisor appends an error record for the case in flight, with the input it was on,
and starts a fresh worker that skips every case already recorded.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from . import results

EXIT_CONTEXT_LOST = 3     # the worker recorded its case, but its GPU context is unusable
MAX_RESTARTS = 50
TIMED_OUT = "timed out"


def inflight_path(results_path: Path, target: str) -> Path:
    return Path(results_path).with_name(f".{target}.inflight.json")


def announce(path: Path, state: dict) -> None:
    """Worker side: record what is running now (atomic replace, read by the supervisor)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(state, default=str))
    os.replace(tmp, path)


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _wait(proc: subprocess.Popen, inflight: Path, case_timeout: float):
    """The worker's exit code, or TIMED_OUT when one case ran longer than the limit."""
    while True:
        code = proc.poll()
        if code is not None:
            return code
        state = _read(inflight)
        if state and time.time() - state.get("started", time.time()) > case_timeout:
            _kill(proc)
            return TIMED_OUT
        time.sleep(0.2)


def _describe_exit(code) -> str:
    if code == TIMED_OUT:
        return "timed out"
    if isinstance(code, int) and code < 0:
        try:
            return f"the worker process died of {signal.Signals(-code).name}"
        except ValueError:
            return f"the worker process died of signal {-code}"
    return f"the worker process exited with status {code}"


def fault_record(state: dict, target: str, evidence: str, why: str) -> dict:
    spec = state.get("spec")
    r = results.Result("runtime", state["case"], state.get("family", ""), state["dtype"], target,
                       state.get("arch", "-"), "error", evidence, message=why,
                       failing_input=spec, reproduce=state.get("reproduce", ""),
                       provenance=state.get("provenance", {}))
    if spec is not None and r.reproduce:
        r.reproduce += " --replay " + _shell_quote(json.dumps(spec, sort_keys=True))
    return r.to_dict()


def _shell_quote(text: str) -> str:
    import shlex
    return shlex.quote(text)


def supervise(cmd: list[str], env: dict, results_path: Path, target: str, case_timeout: float,
              restart: bool = True) -> int:
    """Run the worker until it finishes its cases; returns 0 (all passed) or 1. `restart=False`
    for a worker given one case (portcheck/sanitize.py): a fault is recorded, not retried."""
    inflight = inflight_path(results_path, target)
    evidence = "interpreter" if target == "interpreter" else "gpu"
    status = 0
    for _ in range(MAX_RESTARTS):
        inflight.unlink(missing_ok=True)
        proc = subprocess.Popen(cmd, env=env, start_new_session=True)
        try:
            code = _wait(proc, inflight, case_timeout)
        except KeyboardInterrupt:
            _kill(proc)
            inflight.unlink(missing_ok=True)
            raise
        if code in (0, 1):
            inflight.unlink(missing_ok=True)
            return max(status, code)
        status = 1
        if code == EXIT_CONTEXT_LOST:
            if not restart:
                return 1
            continue  # the worker recorded the case itself; restart with a fresh context
        state = _read(inflight)
        if not state:
            print(f"portcheck: the {target} worker stopped outside any case: {_describe_exit(code)}",
                  flush=True)
            return 1
        limit = f" after {case_timeout:g} s (the per-case limit)" if code == TIMED_OUT else ""
        why = f"{_describe_exit(code)}{limit} while running this case"
        if state.get("spec") is not None:
            why += " on the recorded input"
        results.append(results_path, fault_record(state, target, evidence, why))
        print(f"{target}/{state.get('arch', '-')} {state['case']:<24} {state['dtype']:<8} error  {why}",
              flush=True)
        if not restart:
            return 1
    print(f"portcheck: the {target} worker was restarted {MAX_RESTARTS} times; giving up", flush=True)
    return 1
