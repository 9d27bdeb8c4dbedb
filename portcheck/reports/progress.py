"""A progress line on stderr for long CLI work, with no dependency.

On a terminal the line redraws in place (at most ten times a second); in a log (CI) it prints a
line at each quarter, so logs stay short. `quiet=True` prints nothing.
"""
from __future__ import annotations

import sys
import time


class Progress:
    WIDTH = 24

    def __init__(self, label: str, total: int, *, quiet: bool = False, stream=None):
        self.label, self.total, self.done = label, max(0, int(total)), 0
        self.stream = stream or sys.stderr
        self.quiet = quiet or self.total == 0
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last_draw = 0.0
        self._last_quarter = 0

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def advance(self, n: int = 1, note: str = "") -> None:
        self.done = min(self.total, self.done + n)
        if self.quiet:
            return
        if self.tty:
            now = time.monotonic()
            if now - self._last_draw >= 0.1 or self.done == self.total:
                self._last_draw = now
                filled = self.WIDTH * self.done // self.total
                bar = "#" * filled + "-" * (self.WIDTH - filled)
                tail = f" {note[:40]}" if note else ""
                self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total}{tail}\x1b[K")
                self.stream.flush()
        else:
            quarter = 4 * self.done // self.total
            if quarter > self._last_quarter:
                self._last_quarter = quarter
                self.stream.write(f"{self.label}: {25 * quarter}% ({self.done}/{self.total})\n")
                self.stream.flush()

    def close(self) -> None:
        if not self.quiet and self.tty and self.done:
            self.stream.write("\n")
            self.stream.flush()
        self.quiet = True
