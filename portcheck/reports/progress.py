"""A progress line on stderr for long CLI work, with no dependency.

On a terminal the line redraws in place (at most ten times a second); in a log (CI) it prints a
line at each quarter, so logs stay short. `quiet=True` prints nothing. `eta=True` adds the time
left, from the rate of the items done since the bar started (`done`: how many were done before),
and at 100% the time the bar took (a run's log then says what each pool of workers cost).
"""
from __future__ import annotations

import sys
import time


class Progress:
    WIDTH = 24

    def __init__(self, label: str, total: int, *, quiet: bool = False, stream=None, done: int = 0,
                 eta: bool = False):
        self.label, self.total = label, max(0, int(total))
        self.done = self._done_before = min(self.total, max(0, int(done)))
        self.stream = stream or sys.stderr
        self.quiet = quiet or self.total == 0
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.eta = eta
        self._started = time.monotonic()
        self._last_draw = 0.0
        self._last_quarter = 4 * self.done // self.total if self.total else 0

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
                self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total}{self._left()}{tail}\x1b[K")
                self.stream.flush()
        else:
            quarter = 4 * self.done // self.total
            if quarter > self._last_quarter:
                self._last_quarter = quarter
                share = 100 * self.done // self.total   # at each quarter crossed: 1 of 3 is 33%, not 25%
                self.stream.write(f"{self.label}: {share}% ({self.done}/{self.total}){self._left()}\n")
                self.stream.flush()

    def clear(self) -> None:
        """Erase the redrawn line, so that other output starts on a clean line; the next advance
        draws it again."""
        if not self.quiet and self.tty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._last_draw = 0.0

    def _left(self) -> str:
        done_here = self.done - self._done_before
        if not self.eta or done_here <= 0:
            return ""
        if self.done == self.total:
            return f" in {duration(time.monotonic() - self._started)}"
        seconds = (time.monotonic() - self._started) / done_here * (self.total - self.done)
        return f", about {duration(seconds)} left"

    def close(self) -> None:
        if not self.quiet and self.tty and self.done:
            self.stream.write("\n")
            self.stream.flush()
        self.quiet = True


def duration(seconds: float) -> str:
    """12 s, 3 min 05 s, 1 h 02 min."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
