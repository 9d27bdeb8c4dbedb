"""One compile task list shared by the processes of a pytest-xdist run, through a directory."""
from __future__ import annotations

import json
import os
import time


class SharedRecords:
    """One compile task list shared by several processes (pytest-xdist workers) through a
    directory: each task is claimed by exactly one process (an O_EXCL claim file holding its pid),
    compiled there in a background thread, and its record written for every process to read.
    `records[key]` waits for that record. A claimant that dies leaves an error record behind."""

    def __init__(self, directory, tasks, compile_fn):
        import threading
        self.dir = directory
        self.tasks = tasks
        self.index = {t.key: i for i, t in enumerate(tasks)}
        self.failure: BaseException | None = None

        def work():
            try:
                compile_fn(claim=self.claim, publish=self.publish)
            except BaseException as exc:  # noqa: BLE001 - surfaced to the waiting test
                self.failure = exc
        self.thread = threading.Thread(target=work, name="portcheck-compile", daemon=True)
        self.thread.start()

    def join(self) -> None:
        """Wait for this process's share of the compiles (and its writes) to finish."""
        self.thread.join()

    def _path(self, i: int, ext: str):
        return os.path.join(self.dir, f"{i}.{ext}")

    def claim(self, i: int) -> bool:
        try:
            fd = os.open(self._path(i, "claim"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        return True

    def publish(self, result) -> None:
        i = self.index[(result.case, result.variant, result.arch)]
        tmp = self._path(i, f"tmp{os.getpid()}")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(result.to_dict(), f, default=str)
        os.replace(tmp, self._path(i, "json"))

    def _claimant_alive(self, i: int) -> bool:
        try:
            with open(self._path(i, "claim"), encoding="utf-8") as f:
                pid = int(f.read() or 0)
        except (OSError, ValueError):
            return True               # not claimed yet (or being written): someone will
        if pid == os.getpid():
            return self.thread.is_alive()
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True

    def __getitem__(self, key):
        from ..results import Result
        i = self.index[key]
        path = self._path(i, "json")
        while not os.path.exists(path):
            if self.failure is not None:
                raise RuntimeError(f"the compile thread failed: {self.failure!r}") from self.failure
            if not self._claimant_alive(i) and not os.path.exists(path):
                raise RuntimeError(f"the process that claimed compile task {key} died before "
                                   "writing its record")
            time.sleep(0.1)
        with open(path, encoding="utf-8") as f:
            return Result(**json.load(f))
