"""The one bounded reader of files another program wrote: never through a link, never a non-regular file.

A client, a binary or a fake wrote them (a result file, a recording's ``start.json``, a trace bundle, what
``generate-json-schema`` wrote), so each may be a symlink to ``/etc/shadow``, a FIFO that never ends, a link
to ``/dev/zero`` or a sparse file of gigabytes. Every read here:

- opens with ``O_NOFOLLOW | O_NONBLOCK`` (a link in the last component is refused, a FIFO never blocks),
  after an ``lstat`` that says regular (a device is never even opened), and checks ``fstat`` again on the
  descriptor (the name may have changed between the two);
- reads at most ``limit`` bytes: a file larger than that, or one still growing past it while it is read, is
  :class:`TooLarge`, never read whole.

``dir_fd``: the path is resolved in that directory, and each of its components is opened without following
a link, so a tree another program wrote is read from a descriptor opened once, below which nothing is
followed. Without ``dir_fd`` the parent directories are the caller's (a path a user named, or one the
harness made) and only the last component is never followed. ``follow=True`` is for a file the user named
on the command line: their link is theirs to follow; it is still never a FIFO or a device, and bounded.

A refusal is a :class:`Refused` (an ``OSError``, so ``except OSError`` handlers keep working) whose
``reason`` reads after the path: ``wire.jsonl is a symbolic link (not followed)``.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from typing import Any, BinaryIO

from contracts import bounded_parse
from contracts.exitcodes import InvalidInput

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOCTTY = getattr(os, "O_NOCTTY", 0)
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC | _NOCTTY
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_CHUNK = 1024 * 1024

_KINDS: tuple[tuple[int, str], ...] = (
    (stat.S_IFDIR, "a directory"),
    (stat.S_IFIFO, "a FIFO (named pipe)"),
    (stat.S_IFCHR, "a character device"),
    (stat.S_IFBLK, "a block device"),
    (stat.S_IFSOCK, "a socket"),
    (stat.S_IFLNK, "a symbolic link"),
)

PathArg = str | os.PathLike[str]


def kind_of(mode: int) -> str:
    """``a directory``, ``a FIFO (named pipe)``, ``a symbolic link``…; ``a regular file`` otherwise."""
    fmt = stat.S_IFMT(mode)
    return next((text for kind, text in _KINDS if fmt == kind), "a regular file")


class Refused(InvalidInput, OSError):
    """A file not read: a link, not a regular file, or larger than its bound; ``reason`` says which."""

    def __init__(self, path: PathArg, reason: str, code: int = errno.EPERM) -> None:
        super().__init__(code, reason, os.fspath(path))
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.filename} {self.reason}"


class TooLarge(Refused):
    """Larger than the bound of its read (or grew past it while it was read)."""

    def __init__(self, path: PathArg, reason: str, limit: int) -> None:
        super().__init__(path, reason, errno.EFBIG)
        self.limit = limit


def _not_followed(path: PathArg) -> Refused:
    return Refused(path, "is a symbolic link (not followed)", errno.ELOOP)


def _parts(path: PathArg) -> list[str]:
    parts = [p for p in os.fspath(path).split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ValueError(f"{os.fspath(path)!r}: expected a path below the directory, without '..'")
    return parts


def _parent_fd(path: PathArg, dir_fd: int | None) -> tuple[int | None, str, bool]:
    """(directory fd to resolve the last name in, that name, whether the fd is ours to close).

    With ``dir_fd`` every directory component is opened without following a link."""
    if dir_fd is None:
        return None, os.fspath(path), False
    parts = _parts(path)
    if len(parts) == 1:
        return dir_fd, parts[0], False
    fd = open_dir("/".join(parts[:-1]), dir_fd=dir_fd)
    return fd, parts[-1], True


def open_dir(path: PathArg, *, dir_fd: int | None = None, follow: bool = False) -> int:
    """A descriptor of the directory ``path`` (close it); a link or anything else there is :class:`Refused`.

    With ``dir_fd``, each component of ``path`` is opened in turn, none followed."""
    if dir_fd is not None:
        fd = dir_fd
        for n, part in enumerate(_parts(path)):
            try:
                nxt = _open_one_dir(part, fd, path, follow=False)
            finally:
                if n:
                    os.close(fd)
            fd = nxt
        return fd
    return _open_one_dir(os.fspath(path), None, path, follow=follow)


def _open_one_dir(name: str, dir_fd: int | None, shown: PathArg, *, follow: bool) -> int:
    flags = _DIR_FLAGS & ~os.O_NOFOLLOW if follow else _DIR_FLAGS
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
    mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    if stat.S_ISLNK(mode):
        raise _not_followed(shown)
    raise Refused(shown, f"is {kind_of(mode)}, not a directory", errno.ENOTDIR)


def open_regular(
    path: PathArg, *, dir_fd: int | None = None, follow: bool = False, shown: PathArg | None = None
) -> int:
    """A read-only descriptor of the regular file ``path`` (close it); never blocks, never opens a device.

    FileNotFoundError when nothing is there; :class:`Refused` for a link (unless ``follow``) or anything
    that is not a regular file. ``shown``: the path the messages name (default ``path``)."""
    parent, name, ours = _parent_fd(path, dir_fd)
    path = path if shown is None else shown
    try:
        mode = os.stat(name, dir_fd=parent, follow_symlinks=follow).st_mode
        if stat.S_ISLNK(mode):
            raise _not_followed(path)
        if not stat.S_ISREG(mode):
            raise Refused(path, f"is {kind_of(mode)}, not a regular file")
        flags = _READ_FLAGS & ~os.O_NOFOLLOW if follow else _READ_FLAGS
        try:
            fd = os.open(name, flags, dir_fd=parent)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # swapped for a link after the stat
                raise _not_followed(path) from None
            raise
    finally:
        if ours and parent is not None:
            os.close(parent)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):  # swapped after the stat
            raise Refused(path, f"is {kind_of(mode)}, not a regular file")
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _too_large(path: PathArg, size: int, limit: int) -> TooLarge:
    return TooLarge(path, f"is {size} bytes, more than the {limit} read of it", limit)


def read_bounded(
    path: PathArg, limit: int, *, dir_fd: int | None = None, follow: bool = False, shown: PathArg | None = None
) -> bytes:
    """The whole of a regular file of at most ``limit`` bytes; :class:`TooLarge` for more (never read whole)."""
    fd = open_regular(path, dir_fd=dir_fd, follow=follow, shown=shown)
    try:
        return read_fd(fd, limit, path if shown is None else shown)
    finally:
        os.close(fd)


def read_prefix(path: PathArg, limit: int, *, dir_fd: int | None = None, shown: PathArg | None = None) -> bytes:
    """The first ``limit`` bytes of a regular file, however long it is (a log whose tail is not wanted)."""
    fd = open_regular(path, dir_fd=dir_fd, shown=shown)
    try:
        chunks: list[bytes] = []
        total = 0
        while total < limit and (chunk := os.read(fd, min(_CHUNK, limit - total))):
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_fd(fd: int, limit: int, shown: PathArg) -> bytes:
    """At most ``limit`` bytes of an open regular file, whole, else :class:`TooLarge`."""
    size = os.fstat(fd).st_size
    if size > limit:
        raise _too_large(shown, size, limit)
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise TooLarge(shown, f"grew past {limit} bytes while it was read", limit)


def read_json(
    path: PathArg, limit: int, *, dir_fd: int | None = None, follow: bool = False, shown: PathArg | None = None
) -> Any:
    """:func:`read_bounded` then JSON (``orjson.JSONDecodeError``, a ValueError, when it is not JSON)."""
    return bounded_parse.loads_json(read_bounded(path, limit, dir_fd=dir_fd, follow=follow, shown=shown))


class _BoundedRaw(io.RawIOBase):
    """A raw descriptor stream that refuses to give more than ``limit`` bytes in all (a file still growing)."""

    def __init__(self, fd: int, limit: int, shown: PathArg) -> None:
        super().__init__()
        self._fd, self._limit, self._shown, self._total = fd, limit, shown, 0

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        want = min(len(view), self._limit + 1 - self._total)
        if want <= 0:
            raise TooLarge(self._shown, f"grew past {self._limit} bytes while it was read", self._limit)
        data = os.read(self._fd, want)
        self._total += len(data)
        if self._total > self._limit:
            raise TooLarge(self._shown, f"grew past {self._limit} bytes while it was read", self._limit)
        view[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            try:
                os.close(self._fd)
            finally:
                super().close()


def open_bounded(
    path: PathArg,
    limit: int,
    *,
    dir_fd: int | None = None,
    follow: bool = False,
    shown: PathArg | None = None,
    buffering: int = _CHUNK,
) -> BinaryIO:
    """A buffered reader of a regular file of at most ``limit`` bytes, for reading line by line: a larger file
    is :class:`TooLarge` at once, one that grows past ``limit`` while it is read raises it from a read."""
    fd = open_regular(path, dir_fd=dir_fd, follow=follow, shown=shown)
    path = path if shown is None else shown
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise _too_large(path, size, limit)
    except BaseException:
        os.close(fd)
        raise
    return io.BufferedReader(_BoundedRaw(fd, limit, path), buffer_size=buffering)


def entries(
    path: PathArg, *, dir_fd: int | None = None, follow: bool = False, limit: int = 100_000
) -> list[tuple[str, int]]:
    """(name, ``lstat`` mode) of each entry of a directory, sorted, links not followed; at most ``limit`` of
    them (a directory of millions is refused, not listed): :class:`TooLarge` past it."""
    fd = open_dir(path, dir_fd=dir_fd, follow=follow and dir_fd is None)
    try:
        return entries_of(fd, path, limit=limit)
    finally:
        os.close(fd)


def entries_of(fd: int, shown: PathArg, *, limit: int = 100_000) -> list[tuple[str, int]]:
    """:func:`entries` of a directory already held by ``fd``."""
    names = os.listdir(fd)
    if len(names) > limit:
        raise TooLarge(shown, f"holds {len(names)} entries, more than {limit}", limit)
    out = []
    for name in sorted(names):
        try:
            out.append((name, os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode))
        except FileNotFoundError:
            continue  # removed since the listing
    return out


def exists(path: PathArg, *, dir_fd: int | None = None) -> bool:
    """Something is there (a link counts, whatever it points to)."""
    return _lstat_mode(path, dir_fd) is not None


def _lstat_mode(path: PathArg, dir_fd: int | None) -> int | None:
    try:
        parent, name, ours = _parent_fd(path, dir_fd)
    except (OSError, ValueError):
        return None
    try:
        return os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    except OSError:
        return None
    finally:
        if ours and parent is not None:
            os.close(parent)


def is_regular(path: PathArg, *, dir_fd: int | None = None) -> bool:
    """A regular file is there (a link to one is not)."""
    mode = _lstat_mode(path, dir_fd)
    return mode is not None and stat.S_ISREG(mode)


def is_dir(path: PathArg, *, dir_fd: int | None = None) -> bool:
    """A directory is there (a link to one is not)."""
    mode = _lstat_mode(path, dir_fd)
    return mode is not None and stat.S_ISDIR(mode)


def explain(path: PathArg, exc: OSError) -> str:
    """``PATH is a FIFO (named pipe), not a regular file`` for a refusal, ``cannot read PATH: why`` otherwise."""
    if isinstance(exc, Refused):
        return f"{os.fspath(path)} {exc.reason}"
    return f"cannot read {os.fspath(path)}: {exc.strerror or exc}"


def describe(exc: OSError) -> str:
    """What went wrong, for a message after a file's name: the refusal's reason, else the OS's words."""
    if isinstance(exc, Refused):
        return exc.reason
    return exc.strerror or str(exc)
