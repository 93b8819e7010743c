"""Crash-safe file writes: whole files by temp + fsync + rename, records by one ``O_APPEND`` write.

The one home for crash-safe writes in the kit: text (:func:`write_text`), files made by another
library's writer (:func:`write_with`) and JSON-lines records (:func:`append_line`).

Both functions either leave the previous state or the complete new state on disk; an interrupted
process never leaves half a file or half a line behind a complete one.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def current_umask() -> int:
    """The process umask (read from /proc where possible: setting it to read it is not thread-safe)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _file_mode(path: Path) -> int:
    """The mode a rewritten ``path`` gets: its current mode if it exists, else 0666 minus the umask
    (what ``open(path, "w")`` would create; a temporary file alone would be 0600)."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return 0o666 & ~current_umask()


def write_with(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Replace ``path`` atomically with whatever ``write(tmp)`` puts in a temporary file ``tmp``.

    For writers that want a file name (e.g. ``safetensors.numpy.save_file``): ``tmp`` sits in the same
    directory as ``path``; after ``write`` returns it is fsynced and renamed over ``path`` and the directory
    is fsynced.  If ``write`` raises, ``tmp`` is removed and ``path`` is left as it was.  The new file
    keeps the mode of the one it replaces, or gets 0666 minus the umask like any newly created file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = _file_mode(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, mode)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return path


def write_text(path: str | Path, text: str) -> Path:
    """Replace ``path`` with ``text`` atomically (temp file in the same directory, fsync, rename)."""

    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)

    return write_with(path, write)


def append_line(path: str | Path, line: str) -> Path:
    """Append one line (no newline inside it) with a single ``O_APPEND`` write, then fsync.

    If the file does not end in a newline (a previous writer died mid-line), the new record starts on
    a fresh line so that it stays readable; the damaged line is left for readers to report.
    """
    if "\n" in line:
        raise ValueError("append_line writes exactly one line; the text contains a newline")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        prefix = ""
        size = os.fstat(fd).st_size
        if size:
            with open(path, "rb") as f:
                f.seek(size - 1)
                if f.read(1) != b"\n":
                    prefix = "\n"
        data = (prefix + line + "\n").encode("utf-8")
        written = os.write(fd, data)
        if written != len(data):  # a regular file only short-writes when the disk is full
            raise OSError(f"{path}: short write ({written} of {len(data)} bytes); the record is incomplete")
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        _fsync_dir(path.parent)
    return path
