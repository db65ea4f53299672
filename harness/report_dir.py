"""A ``--report DIR`` checked before anything is played: every path ``run`` will write must be writable there.

``run`` writes ``checks.json``, ``junit.xml`` and ``index.html`` in DIR and one record directory per
(target, scenario) under ``DIR/sessions/``. A path that is in the way (``sessions`` a file, ``checks.json``
a directory, a read-only DIR) is a usage error (exit 3) said at the start, not a traceback after the run.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from contracts import paths
from contracts.exitcodes import UsageError
from contracts.paths import kind_of

REPORT_FILES = ("checks.json", "junit.xml", "index.html")
#: What a session record directory holds (contracts.record.SessionRecord.save).
RECORD_FILES = ("record.json", "wire.jsonl", "model.jsonl", "stderr.txt")
RECORD_DIRS = ("client-trace", "server-trace")


def _mode(path: Path) -> int | None:
    """The mode of what ``path`` names (symlinks followed); None when nothing is there."""
    try:
        return os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"report path {path} cannot be examined: {exc.strerror}") from None


def _need_dir(path: Path) -> None:
    """``path`` is a directory after this (created when missing)."""
    mode = _mode(path)
    if mode is not None and not stat.S_ISDIR(mode):
        raise UsageError(f"report path {path} is {kind_of(mode)}, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create report directory {path}: {exc.strerror}") from None


def _need_file_slot(path: Path) -> None:
    """``path`` is absent or a regular file (it will be replaced)."""
    mode = _mode(path)
    if mode is not None and not stat.S_ISREG(mode):
        raise UsageError(f"report file {path} is {kind_of(mode)}, not a regular file: it cannot be written")


def writable_with(directory: str | Path, names: Iterable[str], what: str = "report directory") -> Path:
    """``directory`` created and writable, and each of ``names`` in it absent or a regular file (exit 3 otherwise).

    For every command that writes files after minutes of work (``latency --report``, ``validate-release
    --out``): said before the work, not after it."""
    d = paths.require_writable_dir(directory, what)
    for name in names:
        _need_file_slot(d / name)
    return d


def prepare(report_dir: Path, sessions: Iterable[tuple[str, str]] = ()) -> None:
    """Check (and create) ``report_dir`` and ``sessions/<target>/``; ``sessions``: (target, scenario) pairs."""
    writable_with(report_dir, REPORT_FILES)
    root = report_dir / "sessions"
    _need_dir(root)
    for target, scenario in sessions:
        _need_dir(root / target)
        saved = root / target / scenario
        mode = _mode(saved)
        if mode is None:
            continue
        if not stat.S_ISDIR(mode):
            raise UsageError(f"report path {saved} is {kind_of(mode)}, not a directory for the session record")
        # A record saved here before is replaced member by member: each must be what it will be again.
        for name in RECORD_FILES:
            _need_file_slot(saved / name)
        for name in RECORD_DIRS:
            member = _mode(saved / name)
            if member is not None and not stat.S_ISDIR(member):
                raise UsageError(f"report path {saved / name} is {kind_of(member)}, not a trace bundle directory")
