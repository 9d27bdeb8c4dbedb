"""Output safety for every report: atomic file writes, and the one Markdown escaper and the one
HTML escaper that every string from a kernel, an error or a file goes through, so a kernel named
`<script>` or `[x](javascript:...)` stays inert text."""
from __future__ import annotations

import html
import os
import re
import tempfile
from contextlib import contextmanager
from pathlib import Path

from ..errors import UsageError


def _file_mode() -> int:
    """The mode a plain open() would give a new file (mkstemp's own is 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _stage(path: Path, text: str) -> str:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _file_mode())
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def atomic_write(path: Path, text: str) -> None:
    """Write through a temporary file and rename, so a reader never sees half a report."""
    write_all({Path(path): text})


def write_reserved(path: Path, text: str) -> None:
    """Replace a file atomically; when that fails (a full disk), overwrite it in place instead,
    padded with blanks to its old length, which needs no new blocks as long as the text is no
    longer than the file was: a run's manifest is first written with room to spare for this."""
    try:
        atomic_write(path, text)
        return
    except UsageError as exc:
        first = exc
    data = text.encode()
    try:
        with open(path, "r+b") as f:
            old = f.seek(0, os.SEEK_END)
            if len(data) > old:
                raise first
            f.seek(0)
            f.write(data + b" " * (old - len(data)))
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        raise first from None


def write_all(files: dict) -> None:
    """Write several files so that a failure leaves every old file as it was: all texts go to
    temporary files first, and only when every one is on disk are they renamed into place. A
    folder it had to create is removed again on failure; any failure is a UsageError."""
    paths = [Path(p) for p in files]
    for path in paths:   # checked before anything is written: a rename onto a folder would fail halfway
        if path.is_dir():
            raise UsageError(f"cannot write {path}: it is a directory")
    created = [d for d in dict.fromkeys(p.parent for p in paths) if not d.exists()]
    staged: list[tuple[str, Path]] = []
    done = False
    try:
        for d in created:
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UsageError(f"cannot create output directory {d}: {exc.strerror}") from None
        for path, text in zip(paths, files.values()):
            staged.append((_stage(path, text), path))
        for tmp, path in staged:
            os.replace(tmp, path)
        done = True
    except OSError as exc:
        raise UsageError(f"cannot write {exc.filename or paths[0].parent}: {exc.strerror or exc}") from None
    finally:
        for tmp, _ in staged:
            if os.path.exists(tmp):
                os.unlink(tmp)
        if not done:
            for d in reversed(created):
                if d.exists() and not any(d.iterdir()):
                    d.rmdir()


def own(directory: Path):
    """Take <directory>/.lock (an exclusive flock), so one process at a time writes a run
    directory; a second one gets a UsageError. Returns the open lock file: the lock lasts until
    it is closed or the process ends, however it ends, so a killed run leaves no stale lock."""
    import fcntl
    path = Path(directory) / ".lock"
    lock = open(path, "a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise UsageError(f"{directory} is in use by another portcheck process (it holds {path})") from None
    return lock


@contextmanager
def owned(directory: Path):
    """own() for the block."""
    lock = own(directory)
    try:
        yield
    finally:
        lock.close()


# underscores stay: GitHub never reads an intraword '_' as emphasis, and kernel names are full of them
_MD_SPECIAL = re.compile(r"([\\`*\[\]|~])")


def md_escape(text) -> str:
    """Inert Markdown text: HTML characters as entities, Markdown punctuation backslashed, no
    line breaks (a table cell or list item stays one line)."""
    text = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return re.sub(r"\s*[\r\n]+\s*", " ", text)


def md_code(text) -> str:
    """`text` as inline code when that is safe (no backtick, pipe, HTML or line break), else
    escaped plain text: a code span shows its content literally, entities included."""
    text = str(text)
    if not text or re.search(r"[`|<>&\r\n]", text):
        return md_escape(text)
    return f"`{text}`"


def html_escape(value) -> str:
    """Inert HTML text or attribute value (quotes included); None is empty."""
    return html.escape("" if value is None else str(value), quote=True)
