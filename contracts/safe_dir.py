"""A directory held by its descriptor: the one safe writer of the report, and the one safe copy into it.

The report directory is the harness's alone, but the client runs in the harness's directory and can predict
every path in it. So nothing is written *through* a path: a :class:`SafeDir` holds a directory descriptor and
every name is made in it ``openat``-style (``dir_fd=``), never following a link:

- a file is written to a new ``O_EXCL | O_NOFOLLOW`` temporary name and renamed over its place: a link planted
  there is replaced (its target untouched), a reader never sees half a file;
- a directory is opened ``O_DIRECTORY | O_NOFOLLOW``; a link planted in its place is removed and a real
  directory made;
- :meth:`SafeDir.replacing` builds a directory under a temporary name and swaps it in whole: a record is
  never half old, half new, and whatever was planted in its place goes;
- :meth:`SafeDir.copy_in` copies a file or a tree another program wrote without following a link or reading
  anything but a regular file, within a :class:`CopyBudget` of bytes and entries; what it refused or cut is
  named in the budget's ``not_copied`` (the record keeps it).

Every failure to write is a :class:`WriteError` (a usage error, exit 3) naming the path; a full disk is a
:class:`DiskFull` naming the disk.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from contracts.exitcodes import UsageError
from contracts.safe_read import PathArg, Refused, describe, kind_of, open_dir, open_regular
from contracts.text import escape

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
_CHUNK = 1024 * 1024
_FULL = (errno.ENOSPC, errno.EDQUOT)
_IN_THE_WAY = (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR)
#: How often a swap retries when something keeps being put in the way.
_ATTEMPTS = 5
#: Temporary names, ``.NAME.<kind>-<8 hex>``: never a name the harness writes for good.
TEMP_KINDS = ("tmp", "new", "old")


class WriteError(UsageError):
    """Something could not be written where the harness writes (exit 3)."""


class DiskFull(WriteError):
    """The disk (or the quota) is full."""


def _mount_point(path: Path) -> Path:
    p = Path(os.path.realpath(path))
    while not os.path.ismount(p) and p != p.parent:
        p = p.parent
    return p


def write_error(exc: OSError, path: Path, root: Path | None = None) -> WriteError:
    """The error to raise for ``exc`` while writing ``path`` (``root``: the directory the writing is in)."""
    if exc.errno in _FULL:
        where = root or path.parent
        return DiskFull(
            f"the disk holding {where} is full (mount point {_mount_point(where)}: {exc.strerror}); "
            f"{path} could not be written"
        )
    return WriteError(f"cannot write {path}: {describe(exc)}")


@dataclass(slots=True)
class CopyBudget:
    """What one record may take of files another program wrote, and what it left out (``not_copied``)."""

    bytes_left: int
    entries_left: int = 10_000
    max_depth: int = 16
    not_copied: list[str] = field(default_factory=list)
    max_notes: int = 100
    _dropped: int = 0

    def note(self, what: str) -> None:
        if len(self.not_copied) < self.max_notes:
            self.not_copied.append(what)
        else:
            self._dropped += 1
            self.not_copied[-1] = f"... and {self._dropped} more"


def _shown(name: str) -> str:
    """A name another program chose, as it goes into a note (the record, the HTML report, the terminal): the
    one escaper's, so no control or bidi character is left raw."""
    return escape(name)


def _check_name(name: str) -> str:
    if not name or "/" in name or name in (".", "..") or "\0" in name:
        raise ValueError(f"{name!r} is not a single file name")
    return name


class SafeDir:
    """A directory held by its descriptor; every name below it is made without following a link."""

    __slots__ = ("fd", "path", "root")

    def __init__(self, fd: int, path: Path, root: Path | None = None) -> None:
        self.fd = fd
        self.path = path
        self.root = root or path  # the directory the user named: the disk a full-disk message names

    @classmethod
    def open(cls, path: PathArg, *, create: bool = True) -> SafeDir:
        """Hold the directory ``path`` (made with its parents when missing). Its own path is the caller's (a
        user named it, links in it included); nothing below it is followed."""
        p = Path(path)
        try:
            if create:
                p.mkdir(parents=True, exist_ok=True)
            return cls(open_dir(p, follow=True), p)
        except OSError as exc:
            raise write_error(exc, p) from None

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> SafeDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _error(self, exc: OSError, name: str) -> WriteError:
        return write_error(exc, self.path / name, self.root)

    def _temp_name(self, name: str, kind: str) -> str:
        return f".{name[:100]}.{kind}-{secrets.token_hex(4)}"

    def lstat_mode(self, name: str) -> int | None:
        """The mode of what is at ``name`` (a link is a link); None when nothing is."""
        try:
            return os.stat(_check_name(name), dir_fd=self.fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return None

    # --- directories --------------------------------------------------------------------------

    def child(self, name: str, *, create: bool = True) -> SafeDir:
        """Hold the directory ``name`` here (made when missing); a link in its place is replaced by a directory,
        anything else there is a :class:`WriteError`."""
        _check_name(name)
        try:
            for _ in range(_ATTEMPTS):
                try:
                    return SafeDir(os.open(name, _DIR_FLAGS, dir_fd=self.fd), self.path / name, self.root)
                except FileNotFoundError:
                    if not create:
                        raise
                    try:
                        os.mkdir(name, dir_fd=self.fd)
                    except FileExistsError:
                        pass
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    mode = self.lstat_mode(name)
                    if mode is not None and not stat.S_ISLNK(mode):
                        raise WriteError(f"{self.path / name} is {kind_of(mode)}, not a directory") from None
                    if mode is not None:
                        os.unlink(name, dir_fd=self.fd)  # planted: a link is never followed
            raise WriteError(f"{self.path / name} keeps being replaced while it is written")
        except OSError as exc:
            if not create and isinstance(exc, FileNotFoundError):
                raise
            raise self._error(exc, name) from None

    def remove(self, name: str) -> None:
        """Remove what is at ``name`` (a tree, a file, a link: never anything it points to); nothing is fine."""
        mode = self.lstat_mode(name)
        try:
            if mode is None:
                return
            if stat.S_ISDIR(mode):
                shutil.rmtree(name, dir_fd=self.fd)  # fd-based: never follows a link (avoids_symlink_attacks)
            else:
                os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise self._error(exc, name) from None

    def _remove_quietly(self, name: str) -> None:
        try:
            self.remove(name)
        except (OSError, WriteError):
            pass  # a temporary left behind is removed by the next run that holds the directory (sweep_temps)

    def sweep_temps(self) -> None:
        """Remove the temporaries a killed writer left here (only while no other writer can be at work)."""
        try:
            names = os.listdir(self.fd)
        except OSError as exc:
            raise self._error(exc, ".") from None
        for name in names:
            stem, _, tail = name.rpartition(".")
            kind, _, token = tail.partition("-")
            if name.startswith(".") and stem and kind in TEMP_KINDS and len(token) == 8:
                self._remove_quietly(name)

    @contextmanager
    def replacing(self, name: str) -> Iterator[SafeDir]:
        """A new, empty directory to fill; on success it takes ``name``'s place whole (what was there goes)."""
        _check_name(name)
        tmp = self._temp_name(name, "new")
        try:
            os.mkdir(tmp, dir_fd=self.fd)
        except OSError as exc:
            raise self._error(exc, name) from None
        try:
            try:
                fresh = self.child(tmp, create=False)
            except FileNotFoundError as exc:  # removed under us
                raise self._error(exc, name) from None
            with fresh:
                fresh.path = self.path / name  # what the messages and the caller see
                yield fresh
            self._swap(tmp, name)
        except BaseException:
            self._remove_quietly(tmp)
            raise

    def _swap(self, tmp: str, name: str) -> None:
        try:
            for _ in range(_ATTEMPTS):
                try:
                    os.rename(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
                    return
                except OSError as exc:
                    if exc.errno not in _IN_THE_WAY:
                        raise
                self._move_away(name)
        except OSError as exc:
            raise self._error(exc, name) from None
        raise WriteError(f"{self.path / name} keeps being replaced while it is written")

    def _move_away(self, name: str) -> None:
        """What is at ``name`` renamed to a temporary, then removed (a link goes, never what it points to)."""
        old = self._temp_name(name, "old")
        try:
            os.rename(name, old, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except FileNotFoundError:
            return
        self.remove(old)

    # --- files --------------------------------------------------------------------------------

    def write(self, name: str, data: bytes | Iterable[bytes]) -> Path:
        """Write the file ``name`` here whole (a temporary renamed over it); returns its path."""
        _check_name(name)
        tmp = self._temp_name(name, "tmp")
        try:
            fd = os.open(tmp, _NEW_FILE, 0o666, dir_fd=self.fd)
            try:
                _write_all(fd, [data] if isinstance(data, bytes | bytearray | memoryview) else data)
            finally:
                os.close(fd)
            self._put(tmp, name)
        except OSError as exc:
            self._remove_quietly(tmp)
            raise self._error(exc, name) from None
        except BaseException:
            self._remove_quietly(tmp)
            raise
        return self.path / name

    def write_text(self, name: str, text: str) -> Path:
        return self.write(name, text.encode("utf-8", "replace"))

    def _put(self, tmp: str, name: str) -> None:
        for _ in range(_ATTEMPTS):
            try:
                os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
                return
            except OSError as exc:
                if exc.errno not in _IN_THE_WAY:
                    raise
            self._move_away(name)  # a directory planted in the file's place
        raise WriteError(f"{self.path / name} keeps being replaced while it is written")

    # --- copies -------------------------------------------------------------------------------

    def copy_in(self, source: PathArg, name: str, budget: CopyBudget, *, source_dir_fd: int | None = None) -> bool:
        """Copy the regular file or directory tree ``source`` (another program wrote it) to ``name`` here.

        Links are not followed and anything but a regular file or a directory is not read: each is named in
        ``budget.not_copied``, as is a file cut at the budget's bytes. ``source_dir_fd``: ``source`` is
        relative to it, no component followed. False when nothing was copied (no such source, or refused)."""
        shown = _shown(os.fspath(source))
        try:
            try:
                fd = open_dir(source, dir_fd=source_dir_fd)
            except Refused as exc:
                if exc.errno != errno.ENOTDIR:
                    raise
                fd = open_regular(source, dir_fd=source_dir_fd)
                try:
                    self._copy_file(fd, name, budget, shown)
                finally:
                    os.close(fd)
                return True
        except FileNotFoundError:
            return False
        except OSError as exc:  # reading the source: refused or unreadable, named in the record
            budget.note(f"{shown}: {describe(exc)}")
            return False
        try:
            with self.child(name) as dest:
                dest._copy_tree(fd, budget, shown, 0)
        finally:
            os.close(fd)
        return True

    def fill_from(self, source: PathArg, budget: CopyBudget) -> bool:
        """Copy the entries of the directory ``source`` into this directory (as :meth:`copy_in` copies a tree).
        False when ``source`` is not a directory that can be read (said in ``budget.not_copied``)."""
        shown = _shown(os.fspath(source))
        try:
            fd = open_dir(source)
        except OSError as exc:
            budget.note(f"{shown}: {describe(exc)}")
            return False
        try:
            self._copy_tree(fd, budget, shown, 0)
        finally:
            os.close(fd)
        return True

    def _copy_tree(self, src: int, budget: CopyBudget, shown: str, depth: int) -> None:
        try:
            names = sorted(os.listdir(src))
        except OSError as exc:
            budget.note(f"{shown}: {describe(exc)}")
            return
        for entry in names:
            where = f"{shown}/{_shown(entry)}"
            if budget.entries_left <= 0:
                budget.note(f"{shown}: more entries than the record keeps; the rest not copied")
                return
            budget.entries_left -= 1
            try:
                mode = os.stat(entry, dir_fd=src, follow_symlinks=False).st_mode
                if stat.S_ISDIR(mode):
                    if depth + 1 >= budget.max_depth:
                        budget.note(f"{where}: nested deeper than {budget.max_depth}; not copied")
                        continue
                    fd = open_dir(entry, dir_fd=src)
                    try:
                        with self.child(entry) as dest:
                            dest._copy_tree(fd, budget, where, depth + 1)
                    finally:
                        os.close(fd)
                elif stat.S_ISREG(mode):
                    fd = open_regular(entry, dir_fd=src)
                    try:
                        self._copy_file(fd, entry, budget, where)
                    finally:
                        os.close(fd)
                else:
                    reason = "is a symbolic link (not followed)" if stat.S_ISLNK(mode) else f"is {kind_of(mode)}"
                    budget.note(f"{where}: {reason}; not copied")
            except FileNotFoundError:
                continue  # gone since the listing
            except WriteError:
                raise
            except OSError as exc:  # reading the source
                budget.note(f"{where}: {describe(exc)}; not copied")

    def _copy_file(self, src: int, name: str, budget: CopyBudget, shown: str) -> None:
        """Up to ``budget.bytes_left`` bytes of ``src`` into ``name``; a file cut there (or by a read error of
        the source, which is not the report's to fail on) is named."""
        size = os.fstat(src).st_size
        allowed = max(budget.bytes_left, 0)
        if allowed == 0 and size:
            budget.note(f"{shown}: {size} bytes, not copied (the record's copy budget is spent)")
            return
        copied = 0
        more = False
        broken: OSError | None = None

        def chunks() -> Iterator[bytes]:
            nonlocal copied, more, broken
            try:
                while copied < allowed:
                    data = os.read(src, min(_CHUNK, allowed - copied))
                    if not data:
                        return
                    copied += len(data)
                    yield data
                more = bool(os.read(src, 1))
            except OSError as exc:
                broken = exc

        self.write(name, chunks())
        budget.bytes_left -= copied
        if broken is not None:
            budget.note(f"{shown}: {describe(broken)}; cut at {copied} bytes")
        elif more:
            budget.note(f"{shown}: {size} bytes, cut at {copied} (the record's copy budget)")


def _write_all(fd: int, chunks: Iterable[bytes | bytearray | memoryview]) -> None:
    pending: list[bytes | bytearray | memoryview] = []
    held = 0
    for chunk in chunks:
        pending.append(chunk)
        held += len(chunk)
        if held >= _CHUNK:
            _write_fd(fd, b"".join(pending))
            pending, held = [], 0
    if pending:
        _write_fd(fd, b"".join(pending))


def _write_fd(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


@dataclass(frozen=True, slots=True)
class Slot:
    """Where one directory (a session record) is written whole: a name in a held directory."""

    parent: SafeDir
    name: str

    @property
    def path(self) -> Path:
        return self.parent.path / self.name


def write_file(path: PathArg, data: bytes | Iterable[bytes]) -> Path:
    """Write ``path`` whole, never through a link at its name (its directory is the caller's, made if missing)."""
    p = Path(path)
    with SafeDir.open(p.parent) as parent:
        parent.write(p.name, data)
    return p
