"""Run a target's worker process under supervision, so one bad kernel fails only its own case.

The worker announces each case (and each hypothesis example's spec) in an in-flight file before
running it, and marks the file "finished" when it has done all its work. A worker that ends any
other way (it hangs past the per-case time limit, dies of a signal, exits with any status, 0 and 1
included, without the mark) has faulted in the case in flight: the supervisor appends an error
record for that case, with the input it was on, and starts a fresh worker that skips every case
already recorded. A worker that reports a lost GPU context (exit status 3 with no case in flight)
has recorded its case itself.

Workers run in their own session (so that a kill reaches every process they started); a signal to
the supervisor kills their process group, and a worker whose supervisor is gone (SIGKILL) stops
within a second (watch_supervisor).
"""
from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from . import results

EXIT_CONTEXT_LOST = 3     # the worker recorded its case (none in flight), but its GPU context is unusable
EXIT_ORPHANED = 4         # the worker's supervisor is gone
MAX_RESTARTS = 50
TIMED_OUT = "timed out"
SUPERVISOR_PID = "PORTCHECK_SUPERVISOR_PID"   # set in the worker's environment
PORTCHECK = [sys.executable, "-m", "portcheck"]   # in this interpreter (__main__ drops the current folder from the path)


class Stopped(Exception):
    """The supervisor was asked to stop (SIGTERM, SIGHUP): the run ends with a partial report."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


@contextmanager
def stopping_on_signals():
    """Within the block, SIGTERM and SIGHUP (timeout, CI cancellation, a closed terminal) raise
    Stopped, as SIGINT raises KeyboardInterrupt, so the supervisor kills its workers and writes
    its partial report; the previous handlers come back after it."""
    def stop(signum, frame):
        raise Stopped(signum)
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def in_flight(run_dir: Path) -> list[str]:
    """'case dtype on arch' for each worker of a run directory that was in a case when it stopped
    (its in-flight file names one)."""
    found = []
    for inflight in sorted(run_dir.glob(".*.inflight.json")):
        state = _read(inflight)
        if isinstance(state, dict) and "case" in state:
            found.append(f"{state['case']} {state.get('dtype', '')} on {state.get('arch', '?')}")
    return found


def inflight_path(results_path: Path, target: str, slot: int | None = None) -> Path:
    """The in-flight file of a target's worker (of worker `slot` of several)."""
    return Path(results_path).with_name(f".{target}{'' if slot is None else f'.{slot}'}.inflight.json")


def gpu_context_ok() -> bool:
    """Whether this process's GPU context still works after a case: a synchronize (which raises
    a sticky error such as an illegal address) and a tiny allocation and kernel."""
    import torch
    try:
        torch.cuda.synchronize()
        return torch.ones(1, device="cuda").add_(1).item() == 2.0
    except Exception:
        return False


def _orphaned() -> bool:
    """Whether the worker's supervisor is no longer among its ancestors: its parent, or further
    up where a tool wraps the worker (compute-sanitizer is the parent of a sanitized worker)."""
    supervisor = os.environ.get(SUPERVISOR_PID)
    if not supervisor:
        return False
    pid = os.getppid()
    while pid is not None and pid > 1:
        if pid == int(supervisor):
            return False
        pid = _parent_of(pid)
    return True   # init reached (or, without /proc, the parent was not it)


def _parent_of(pid: int) -> int | None:
    """The parent of a process (Linux's /proc), None where that cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])   # the name in parentheses may hold spaces


def watch_supervisor(every: float = 1.0) -> None:
    """Worker side: a daemon thread that ends the worker once its supervisor is gone (killed with
    SIGKILL, which no handler sees), so no worker writes on into a run nobody owns."""
    import threading

    def watch():
        while not _orphaned():
            time.sleep(every)
        os._exit(EXIT_ORPHANED)
    threading.Thread(target=watch, name="portcheck-supervisor-watch", daemon=True).start()


def announce(path: Path, state: dict) -> None:
    """Worker side: record what is running now (atomic replace, read by the supervisor)."""
    if _orphaned():
        os._exit(EXIT_ORPHANED)
    state = {**state, "pid": os.getpid()}
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(state, default=str))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def finish(path: Path, failed: bool) -> None:
    """Worker side: every case is done (the only normal end of a worker)."""
    announce(path, {"finished": True, "failed": failed})


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


def _wait(proc: subprocess.Popen, inflight: Path, case_timeout: float, on_finished=None):
    """The worker's exit code, or TIMED_OUT when one case ran longer than the limit;
    `on_finished()` is called once the worker says it has finished (before it has exited)."""
    while True:
        try:
            return proc.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            pass
        state = _read(inflight)
        if state and state.get("finished") and on_finished is not None:
            on_finished()
            on_finished = None
        if state and time.time() - state.get("started", time.time()) > case_timeout:
            _kill(proc)
            return TIMED_OUT


# the signals a process dies of when it writes outside its memory, or corrupts its heap
MEMORY_SIGNALS = {signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT}
INTERPRETER_CRASH_HINT = (" (the interpreter loads and stores in this process's own memory: a load or store far "
                          "outside its tensors, or into one with no elements, faults; a store past the end of a "
                          "buffer the launcher allocated itself, which has no guard band, corrupts it)")


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
    """An error record of the case in flight; a failure where the worker died in its diagnosis
    (the state's `failed`: the check's message, on the state's input)."""
    spec = state.get("spec")
    failed = state.get("failed")
    r = results.Result("runtime", state["case"], state.get("family", ""), state["dtype"], target,
                       state.get("arch", "-"), "fail" if failed else "error", evidence,
                       message=f"{failed} (then {why}: no likely causes)" if failed else why,
                       failing_input=spec, reproduce=state.get("reproduce", ""),
                       provenance=state.get("provenance", {}))
    if spec is not None and r.reproduce:
        r.reproduce += " --replay " + _shell_quote(json.dumps(spec, sort_keys=True))
    r.as_arch = dict(state.get("as_arch") or {})
    return r.to_dict()


def fault_records(state: dict, target: str, evidence: str, why: str) -> list[dict]:
    """The fault's record, once per arch that a check under --as-arch stood for (the state's
    as_arch.stands_for), each with its own --as-arch in the replay."""
    first = fault_record(state, target, evidence, why)
    archs = first["as_arch"].get("stands_for") or [first["arch"]]
    out = []
    for arch in archs:
        r = copy.deepcopy(first)
        if r["as_arch"]:
            r["arch"] = r["as_arch"]["arch"] = arch
            r["reproduce"] = r["reproduce"].replace(f"--as-arch {archs[0]}", f"--as-arch {arch}")
        out.append(r)
    return out


def _shell_quote(text: str) -> str:
    import shlex
    return shlex.quote(text)


class Unfinished(Exception):
    """The worker stopped outside any case (at start-up, say): its remaining cases never ran."""


def _spawn(cmd: list[str], env: dict, piped: bool, stdin=None) -> subprocess.Popen:
    """A worker process in a session of its own, its output piped to the supervisor (`piped`)."""
    return subprocess.Popen(cmd, env={**env, SUPERVISOR_PID: str(os.getpid())}, start_new_session=True,
                            stdin=stdin, stdout=subprocess.PIPE if piped else None, text=piped,
                            errors="replace" if piped else None, bufsize=1 if piped else -1)


class Standby:
    """A portcheck worker started before its command is known: `portcheck run --standby` makes
    the imports every worker makes (torch, Triton, hypothesis, the checking code: most of a
    worker's start), then reads its command line and environment from its stdin, one JSON line,
    and runs it in the same process. The supervisor starts standbys first thing and plans the run
    (its own imports, the cases, the GPUs) meanwhile; `stop()` (or the supervisor's end: EOF on
    stdin) ends one that gets no command, quietly."""

    def __init__(self, argv: list[str], env: dict):
        self.proc = _spawn([*PORTCHECK, *argv], env, piped=True, stdin=subprocess.PIPE)

    def start(self, cmd: list[str], env: dict) -> subprocess.Popen | None:
        """Hand it a worker's command (`cmd` as `supervise` would start it); None when it cannot
        take it (another program, or the standby has ended), and it is then stopped."""
        if cmd[:len(PORTCHECK)] == PORTCHECK and self.proc.poll() is None:
            order = {"argv": cmd[len(PORTCHECK):], "env": {**env, SUPERVISOR_PID: str(os.getpid())}}
            try:
                self.proc.stdin.write(json.dumps(order) + "\n")
                self.proc.stdin.close()
                return self.proc
            except (OSError, ValueError):   # it ended meanwhile
                pass
        self.stop()
        return None

    def stop(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        _kill(self.proc)
        self.proc.stdout.close()


def _print(line: str) -> None:
    print(line, flush=True)


def _forward(stream, output) -> threading.Thread:
    """Hand each line the worker prints to `output` (the supervisor owns the terminal)."""
    def pump():
        for line in stream:
            output(line.rstrip("\n"))
        stream.close()
    thread = threading.Thread(target=pump, name="portcheck-worker-output", daemon=True)
    thread.start()
    return thread


def supervise(cmd: list[str], env: dict, results_path: Path, target: str, case_timeout: float,
              restart: bool = True, *, inflight: Path | None = None, output=None, on_fault=None,
              stop: threading.Event | None = None, started=None, standby: Standby | None = None,
              on_finished=None) -> int:
    """Run the worker until it finishes its cases; returns 0 (all passed) or 1. `restart=False`
    for a worker given one case (portcheck/sanitize.py): a fault is recorded, not retried.
    Raises Unfinished when the worker stops outside any case, and lets KeyboardInterrupt and
    Stopped through once the worker's process group is killed.

    For one of several workers (supervise_all): `inflight` is its own file, `output(line)`
    receives what it prints, `on_fault(state, why)` records a fault (default: an error record
    in `results_path`), `started(proc)` learns each process started, and once `stop` is set
    (the run is stopping and has killed the workers) nothing more is recorded or restarted.
    A `standby` (started ahead, `Standby`) runs the first attempt where it is still alive.
    `on_finished()` is called once the worker has said it finished every case, while it may still
    be exiting (a GPU worker's exit takes its context down, which takes a while)."""
    inflight = inflight or inflight_path(results_path, target)
    evidence = "interpreter" if target == "interpreter" else "gpu"
    status = 0
    told = []   # on_finished once: when the worker says it finished, at its exit at the latest

    def finished() -> None:
        if on_finished is not None and not told:
            told.append(True)
            on_finished()
    for _ in range(MAX_RESTARTS):
        inflight.unlink(missing_ok=True)
        proc = standby.start(cmd, env) if standby is not None else None
        standby = None   # a restart is a fresh process
        if proc is None:
            proc = _spawn(cmd, env, piped=bool(output))
        pump = _forward(proc.stdout, output or _print) if proc.stdout is not None else None
        if started is not None:
            started(proc)
        if stop is not None and stop.is_set():   # started as the run was stopping
            _kill(proc)
            return 1
        try:
            code = _wait(proc, inflight, case_timeout, finished)
        finally:   # whatever ended it (Ctrl-C, SIGTERM, SIGHUP included), nothing it started lives on
            _kill(proc)
            if pump is not None:
                pump.join()
        if stop is not None and stop.is_set():
            return 1
        state = _read(inflight)
        if state and state.get("finished") and code != TIMED_OUT:
            finished()   # a worker that exited before its supervisor read its last word
            inflight.unlink(missing_ok=True)
            return max(status, 1 if state.get("failed") else 0)
        status = 1
        if code == EXIT_CONTEXT_LOST and not (state and "case" in state):
            # the worker recorded its case and cleared the in-flight file before it exited (a case
            # that exits with 3 itself leaves its file: it is that case's fault, below)
            if not restart:
                return 1
            continue  # restart with a fresh context
        if not state or "case" not in state:
            raise Unfinished(f"the {target} worker stopped outside any case: {_describe_exit(code)}")
        limit = f" after {case_timeout:g} s (the per-case limit)" if code == TIMED_OUT else ""
        if state.get("failed"):   # the check had failed: its diagnosis's re-runs of other inputs killed it
            why = f"{_describe_exit(code)}{limit} in its diagnosis"
        else:
            why = f"{_describe_exit(code)}{limit} while running this case"
        if state.get("spec") is not None and not state.get("failed"):
            why += " on the recorded input"
        if target == "interpreter" and isinstance(code, int) and -code in MEMORY_SIGNALS:
            why += INTERPRETER_CRASH_HINT
        records = fault_records(state, target, state.get("evidence", evidence), why)
        if on_fault is not None:
            on_fault(state, why)
        else:
            results.append_many(results_path, records)
        line = (f"{target}/{state.get('arch', '-')} {state['case']:<24} {state['dtype']:<8} "
                f"{records[0]['verdict'] if records else 'error':<5}  {records[0]['message'] if records else why}")
        if records and records[0].get("reproduce"):   # as a failing check prints its replay
            line += f"\n    replay: {records[0]['reproduce']}"
        output(line) if output else print(line, flush=True)
        if not restart:
            return 1
    print(f"portcheck: the {target} worker was restarted {MAX_RESTARTS} times; giving up", flush=True)
    return 1


def supervise_all(workers: list, while_waiting=None) -> tuple[int, list[str]]:
    """Several supervised workers at once, each `supervise(**worker)` in a thread of its own (a
    callable worker is called as `worker(stop=, started=)` and passes both on to the supervise
    calls it makes); `while_waiting()` is called about five times a second (a progress line).
    Returns the worst status and why each worker that stopped outside any case did (Unfinished).
    Ctrl-C, SIGTERM and SIGHUP (in the main thread) kill every worker's process group before
    they go on up."""
    stop = threading.Event()
    procs: list[subprocess.Popen] = []
    statuses: list[int] = []
    unfinished: list[str] = []

    def run(worker):
        try:
            statuses.append(worker(stop=stop, started=procs.append) if callable(worker)
                            else supervise(**worker, stop=stop, started=procs.append))
        except Unfinished as exc:
            unfinished.append(str(exc))
            statuses.append(1)
        except BaseException as exc:   # a supervisor's own fault stops the run, not just its worker
            unfinished.append(f"a worker's supervisor failed: {type(exc).__name__}: {exc}")
            statuses.append(1)

    threads = [threading.Thread(target=run, args=(w,), name=f"portcheck-supervisor-{i}", daemon=True)
               for i, w in enumerate(workers)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.2)
                if while_waiting is not None:
                    while_waiting()
    except BaseException:
        stop.set()
        for proc in list(procs):
            _kill(proc)
        for t in threads:
            t.join()
        raise
    return max(statuses, default=0), unfinished
