"""What a path a user named really is, said plainly, and reading it without ever blocking.

``--scenario``, ``show`` and the other commands that read a file take a regular file. A FIFO, a directory
or a device (``/dev/zero``) is named as what it is, not as a missing file, and is never opened in a way
that blocks: a FIFO is refused from ``stat`` alone and a file is opened ``O_NONBLOCK`` and checked again
on its descriptor (the name may have changed between the two).
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

from contracts import safe_read
from contracts.exitcodes import UsageError
from contracts.safe_read import kind_of


def problem(path: str | Path, *, want_dir: bool = False) -> str | None:
    """None when ``path`` is an existing regular file (a directory with ``want_dir``), else what it is."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "does not exist"
    except NotADirectoryError:
        return "does not exist (a parent is not a directory)"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if want_dir:
        return None if stat.S_ISDIR(mode) else f"is {kind_of(mode)}, not a directory"
    return None if stat.S_ISREG(mode) else f"is {kind_of(mode)}, not a regular file"


def require_file(path: str | Path, what: str = "file") -> Path:
    """``path`` when it is a regular file this process may read; else a :class:`UsageError` saying what it is."""
    trouble = problem(path)
    if trouble is None and not os.access(path, os.R_OK):
        trouble = "is not readable (permission denied)"
    if trouble is not None:
        raise UsageError(f"{what} {path} {trouble}")
    return Path(path)


def require_dir(path: str | Path, what: str = "directory") -> Path:
    trouble = problem(path, want_dir=True)
    if trouble is not None:
        raise UsageError(f"{what} {path} {trouble}")
    return Path(path)


def open_file(path: str | Path, what: str = "file") -> BinaryIO:
    """Open a regular file the user named for reading in binary (their links followed); never blocks (a FIFO
    swapped in after ``stat`` is refused on its descriptor, by the bounded reader's open)."""
    require_file(path, what)
    try:
        fd = safe_read.open_regular(path, follow=True)
    except safe_read.Refused as exc:
        raise UsageError(f"{what} {path} {exc.reason}") from None
    except OSError as exc:
        denied = exc.errno == errno.EACCES
        reason = "is not readable (permission denied)" if denied else f"cannot be read: {exc.strerror}"
        raise UsageError(f"{what} {path} {reason}") from None
    return os.fdopen(fd, "rb")


def require_writable_dir(path: str | Path, what: str = "directory") -> Path:
    """``path`` as a directory this process can create files in (created when missing); else a UsageError."""
    p = Path(path)
    trouble = problem(p, want_dir=True)
    if trouble is not None and trouble != "does not exist":
        raise UsageError(f"{what} {p} {trouble}")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{what} {p} cannot be created: {exc.strerror or exc}") from None
    try:
        with tempfile.NamedTemporaryFile(dir=p, prefix=".codex-harness-probe-"):
            pass
    except OSError as exc:
        raise UsageError(f"{what} {p} is not writable: {exc.strerror or exc}") from None
    return p


def require_output_file(path: str | Path, what: str = "output file") -> Path:
    """``path`` absent or a regular file, so writing it neither fails late nor blocks (a FIFO would wait
    for a reader forever); its directory must exist."""
    p = Path(path)
    trouble = problem(p)
    if trouble is None or trouble == "does not exist":
        parent = problem(p.parent, want_dir=True)
        if parent is not None:
            raise UsageError(f"cannot write {what} {p}: its directory {p.parent} {parent}")
        return p
    raise UsageError(f"cannot write {what} {p}: it {trouble}")
