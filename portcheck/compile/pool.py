"""Worker processes for cross-compilation: parallel, each compile under a time limit, and a
compiler that hangs or crashes costs only its own record.

Each worker is `python -m portcheck.compile.worker`: a fresh interpreter with
TRITON_INTERPRET unset (kernels must be compiled, not interpreted, whatever mode the parent is
in), in its own process group so that a kill also takes ptxas and other children. Jobs and
results are JSON lines on its stdin and stdout; its stderr (MLIR diagnostics, crash output) goes
to a log file the parent reads when a compile fails or the worker dies. Triton's on-disk cache is
shared by all workers and runs, so a second run is mostly cache hits.
"""
from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque

STARTUP_LIMIT = 180.0        # seconds a worker may take to import torch and triton
# started by name, not imported: the pool stays free of Triton and of the compile code
WORKER_MODULE = "portcheck.compile.worker"


def worker_env() -> dict:
    from ..workers import bytecode_cache   # light: no Triton, no compile code
    env = bytecode_cache(dict(os.environ))
    env.pop("TRITON_INTERPRET", None)
    # the parent's import path, so that kernels in test directories or user trees resolve; the
    # current folder last, where a user's random.py or json.py cannot shadow the standard library
    cwd = os.getcwd()
    paths = [os.path.abspath(p or os.curdir) for p in sys.path if os.path.isdir(p or os.curdir)]
    paths = [p for p in paths if p != cwd] + [cwd] * (cwd in paths)
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


def _log_tail(path: str, limit: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _crash_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if any(k in ln for k in ("LLVM ERROR", "Assertion", "error:", "Error", "Segmentation")):
            return ln[:300]
    return lines[-1][:300] if lines else ""


class _Worker:
    def __init__(self, env: dict):
        self.log = tempfile.NamedTemporaryFile(prefix="portcheck-compile-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-m", WORKER_MODULE],   # -P: no current folder first (PYTHONPATH has the path)
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
            env={**env, "PORTCHECK_WORKER_LOG": self.log.name}, start_new_session=True)
        self.fd = self.proc.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.born = time.monotonic()
        self.ready = False
        self.job: int | None = None
        self.deadline = 0.0
        self.buf = b""

    def send(self, index: int, payload: dict, arch: str, timeout: float) -> None:
        self.job = index
        self.deadline = time.monotonic() + timeout
        self.proc.stdin.write((json.dumps({"i": index, "payload": payload, "arch": arch}) + "\n").encode())
        self.proc.stdin.flush()

    def lines(self) -> list[bytes] | None:
        """Complete lines read so far; None at end of file (the worker is gone)."""
        try:
            data = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return []
        if not data:
            return None
        self.buf += data
        *done, self.buf = self.buf.split(b"\n")
        return [ln for ln in done if ln.strip()]

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self.close()

    def close(self) -> None:
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        self.log.close()
        try:
            os.unlink(self.log.name)
        except OSError:
            pass

    def death(self) -> str:
        code = self.proc.wait()
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        line = _crash_line(_log_tail(self.log.name))
        return f"the compiler process died ({how}){': ' + line if line else ''}"


class Pool:
    """`with Pool(jobs, timeout) as p: p.run([(key, payload, arch), ...], done)`; done(key, raw)
    is called once per job, in completion order, with the worker's raw facts or a timeout/crash."""

    def __init__(self, jobs: int, timeout: float):
        if jobs < 1:
            raise ValueError("jobs must be at least 1")
        self.jobs, self.timeout = jobs, timeout
        self.env = worker_env()
        self.workers: list[_Worker] = []

    def __enter__(self):
        return self

    def start(self) -> "Pool":
        """Start the worker processes now (they take seconds to import torch and Triton), so
        that they get ready while the caller is still planning."""
        while len(self.workers) < self.jobs:
            self.workers.append(_Worker(self.env))
        return self

    def __exit__(self, *exc):
        # workers hold nothing worth a clean exit: Triton writes each cache entry atomically
        # before the result comes back, so killing them is safe and saves their teardown
        for w in self.workers:
            w.kill()
        self.workers = []

    def run(self, jobs, done) -> None:
        """Compile `jobs`, an iterable of (key, payload, arch) taken lazily, one when a worker is
        free (so that several processes can share one task list by claiming as they go); call
        done(key, raw) once per job, in completion order."""
        source = iter(jobs)
        waiting: deque = deque()          # jobs taken from the source, not yet sent
        exhausted = False
        arch_of: dict = {}
        sel = selectors.DefaultSelector()

        def take():
            nonlocal exhausted
            if not waiting and not exhausted:
                job = next(source, None)
                if job is None:
                    exhausted = True
                else:
                    waiting.append(job)
            return waiting[0] if waiting else None

        def spawn():
            w = _Worker(self.env)
            sel.register(w.fd, selectors.EVENT_READ, w)
            self.workers.append(w)

        def retire(w):
            sel.unregister(w.fd)
            self.workers.remove(w)

        for w in self.workers:              # started earlier by start()
            sel.register(w.fd, selectors.EVENT_READ, w)

        def fail_all(reason: str):
            nonlocal exhausted
            while take() is not None:
                key, _, arch = waiting.popleft()
                done(key, {"status": "crash", "arch": arch, "error": reason})

        while True:
            for w in self.workers:
                if w.ready and w.job is None and take() is not None:
                    key, payload, arch = waiting.popleft()
                    arch_of[key] = arch
                    w.send(key, payload, arch, self.timeout)
            idle = sum(not w.ready or w.job is None for w in self.workers)
            if len(self.workers) < self.jobs and idle == 0 and take() is not None:
                spawn()                   # work is waiting and no worker is free or on its way
            if not self.workers and take() is None:
                break
            busy = [w for w in self.workers if w.job is not None or not w.ready]
            if not busy and take() is None:
                break
            now = time.monotonic()
            deadlines = [w.deadline if w.ready else w.born + STARTUP_LIMIT for w in busy]
            wait = max(0.0, min(deadlines) - now) if deadlines else 0.0
            for sk, _ in sel.select(timeout=min(wait, 5.0)):
                w = sk.data
                got = w.lines()
                if got is None:            # the worker died
                    retire(w)
                    reason = w.death()
                    w.close()
                    if w.job is not None:
                        done(w.job, {"status": "crash", "error": reason, "arch": arch_of[w.job]})
                    elif not w.ready:      # it could not even start: fail everything left
                        fail_all(f"a compile worker could not start: {reason}")
                    continue
                for line in got:
                    msg = json.loads(line)
                    if msg.get("ready"):
                        w.ready = True
                    elif w.job is not None and msg.get("i") == w.job:
                        w.job = None
                        done(msg["i"], msg["raw"])
            now = time.monotonic()
            for w in list(self.workers):
                late = (w.job is not None and w.ready and now > w.deadline) or \
                       (not w.ready and now > w.born + STARTUP_LIMIT)
                if not late:
                    continue
                retire(w)
                w.kill()
                if w.job is not None:
                    done(w.job, {"status": "timeout", "arch": arch_of[w.job],
                                 "error": f"the compile did not finish within {self.timeout:g} s and was killed"})
                else:
                    fail_all(f"a compile worker did not start within {STARTUP_LIMIT:g} s")
        sel.close()

