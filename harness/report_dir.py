"""The ``--report DIR`` of one run: checked before anything is played, then held and locked until the end.

``run`` writes ``checks.json``, ``junit.xml`` and ``index.html`` in DIR and one record directory per
(target, scenario) under ``DIR/sessions/``. Before anything is played (:func:`prepare`):

- a path in the way (``sessions`` a file, ``checks.json`` a directory, a link anywhere the run writes, a
  read-only DIR) is a usage error (exit 3), not a traceback after the run;
- DIR is locked (``flock`` on ``DIR/.codex-harness.lock``): a second run into the same DIR exits 3 at once
  instead of interleaving its records with ours; the kernel drops the lock when the run ends, however it
  ends, so a killed run leaves no stale lock (the file stays; it is not the lock).

From then on everything is written through the held directory descriptors (:mod:`contracts.safe_dir`): the
client runs in the harness's directory and can predict every path, but a link it plants where a record or a
report file goes is replaced, never followed, and a record is swapped in whole.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from contracts import paths
from contracts.exitcodes import UsageError
from contracts.paths import kind_of
from contracts.safe_dir import SafeDir, Slot, write_error

REPORT_FILES = ("checks.json", "junit.xml", "index.html")
#: In each session's record directory: the checks ``run`` gave it, which ``show DIR`` repeats as its verdict.
SESSION_VERDICT = "checks.json"
LOCK_NAME = ".codex-harness.lock"
_PROBE = ".codex-harness.probe"
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC


class ReportDir:
    """The report directory of one run: held by descriptor, locked, and the one writer of everything in it."""

    def __init__(self, root: SafeDir, lock_fd: int, sessions: SafeDir) -> None:
        self.root = root
        self.sessions = sessions
        self._lock_fd = lock_fd
        self._targets: dict[str, SafeDir] = {}

    @property
    def path(self) -> Path:
        return self.root.path

    def target_dir(self, target: str) -> SafeDir:
        """``sessions/<target>/``, held from its first use to the end of the run."""
        if target not in self._targets:
            self._targets[target] = _need_dir(self.sessions, target)
        return self._targets[target]

    def slot(self, target: str, scenario: str) -> Slot:
        """Where the record of (target, scenario) is swapped in whole."""
        return Slot(self.target_dir(target), scenario)

    def write(self, name: str, data: bytes) -> Path:
        return self.root.write(name, data)

    def write_verdict(self, target: str, scenario: str, data: bytes) -> Path | None:
        """The checks ``run`` gave a session, as ``checks.json`` in its record directory (``show`` repeats them);
        None when the session saved no record."""
        try:
            held = self.target_dir(target).child(scenario, create=False)
        except (FileNotFoundError, NotADirectoryError, UsageError):
            return None
        with held:
            return held.write(SESSION_VERDICT, data)

    def close(self) -> None:
        for held in self._targets.values():
            held.close()
        self.sessions.close()
        self.root.close()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # the lock goes with its last descriptor
            self._lock_fd = -1

    def __enter__(self) -> ReportDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _lock(root: SafeDir) -> int:
    """An exclusive ``flock`` on DIR's lock file, or a usage error naming the run that holds it."""
    where = root.path / LOCK_NAME
    try:
        fd = os.open(LOCK_NAME, _LOCK_FLAGS, 0o644, dir_fd=root.fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UsageError(f"report lock {where} is a symbolic link (never followed): remove it") from None
        raise write_error(exc, where) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UsageError(f"report lock {where} is {kind_of(mode)}, not a regular file: remove it")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            who = f" (pid {holder})" if holder.isdigit() else ""
            raise UsageError(
                f"report directory {root.path} is in use by another codex-harness run{who}: "
                "wait for it to end or give another --report"
            ) from None
        try:  # who holds it, for the message of the run that finds it taken
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # a full disk still locks
        return fd
    except BaseException:
        os.close(fd)
        raise


def _need_file_slot(d: SafeDir, name: str) -> None:
    """``name`` in ``d`` is absent or a regular file (it will be replaced)."""
    mode = d.lstat_mode(name)
    if mode is None or stat.S_ISREG(mode):
        return
    if stat.S_ISLNK(mode):
        raise UsageError(f"report file {d.path / name} is a symbolic link: the report is never written through one")
    raise UsageError(f"report file {d.path / name} is {kind_of(mode)}, not a regular file: it cannot be written")


def _need_dir(d: SafeDir, name: str) -> SafeDir:
    """``name`` in ``d`` held as a directory (created when missing); a link or anything else there: exit 3."""
    mode = d.lstat_mode(name)
    if mode is not None and stat.S_ISLNK(mode):
        raise UsageError(f"report path {d.path / name} is a symbolic link: the report is never written through one")
    if mode is not None and not stat.S_ISDIR(mode):
        raise UsageError(f"report path {d.path / name} is {kind_of(mode)}, not a directory")
    return d.child(name)


def _need_record_slot(d: SafeDir, name: str) -> None:
    """A record is swapped in whole, whatever directory holds its place; a file or a link there is the user's.
    A name that is not one file name is never saved (the runner fails its ``scenario / name`` check)."""
    if not name or "/" in name or name in (".", ".."):
        return
    mode = d.lstat_mode(name)
    if mode is None or stat.S_ISDIR(mode):
        return
    what = "a symbolic link" if stat.S_ISLNK(mode) else kind_of(mode)
    raise UsageError(f"report path {d.path / name} is {what}, not a directory for the session record")


def _open_root(report_dir: Path) -> SafeDir:
    trouble = paths.problem(report_dir, want_dir=True)
    if trouble is not None and trouble != "does not exist":
        raise UsageError(f"report path {report_dir} {trouble}")
    try:
        report_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create report directory {report_dir}: {exc.strerror}") from None
    return SafeDir.open(report_dir, create=False)


def prepare(report_dir: Path, sessions: Iterable[tuple[str, str]] = ()) -> ReportDir:
    """Check, create, lock and hold ``report_dir`` and ``sessions/<target>/``; ``sessions``: (target, scenario)
    pairs. Close the result (or use it as a context manager) when the run has written its report."""
    root = _open_root(Path(report_dir))
    try:
        lock = _lock(root)
    except BaseException:
        root.close()
        raise
    report = None
    try:
        root.sweep_temps()  # what a killed run left half-written; no other run writes here now
        for name in REPORT_FILES:
            _need_file_slot(root, name)
        report = ReportDir(root, lock, _need_dir(root, "sessions"))
        for target, scenario in sessions:
            held = report.target_dir(target)
            _need_record_slot(held, scenario)
        for held in report._targets.values():
            held.sweep_temps()
        root.write(_PROBE, b"")  # writable, said now rather than after the run
        root.remove(_PROBE)
    except BaseException:
        if report is not None:
            report.close()
        else:
            root.close()
            os.close(lock)
        raise
    return report


def writable_with(directory: str | Path, names: Iterable[str], what: str = "report directory") -> Path:
    """``directory`` created and writable, and each of ``names`` in it absent or a regular file (exit 3 otherwise).

    For every command that writes files after minutes of work (``latency --report``, ``validate-release
    --out``): said before the work, not after it."""
    d = paths.require_writable_dir(directory, what)
    with SafeDir.open(d, create=False) as held:
        for name in names:
            _need_file_slot(held, name)
    return d
