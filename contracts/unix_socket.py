"""The one way to open a listening unix socket at a path, as ``codex app-server --listen unix://PATH`` does.

Observed on the real binary (docs/transports.md, "Unix sockets", has the table), and done here for every
listener of the project (``fake-codex``; the real target's socket folder, :func:`private_dir`):

- the socket itself is ``/tmp/codex-daemon-<uid>/<sha256 of the path>`` (:func:`physical_path`; the path
  with its folder resolved, so a path of any length fits a socket address) and ``PATH`` is a link to it;
- that folder must be a directory of the user's own, mode 0700, never reached through a link: made so when
  it is missing, refused otherwise (``app-server socket directory must be a user-owned directory with mode
  0700``): another user's folder, a world-writable one or a link would let that user replace the socket
  and receive the client's connection;
- ``PATH``'s folder (made 0700 when it is missing, not its parent) must belong to the user or root and let
  no other user replace its entries (not group- or world-writable, unless sticky, like ``/tmp``);
- what is already at ``PATH`` is never followed nor removed unless it is the server's own: a live socket
  (``already in use``), a stale socket or a link to the socket it is about to make (replaced); anything
  else (a file, a directory, a link elsewhere) is refused and kept, a dangling link elsewhere too (``File
  exists``).

Every refusal is a :class:`SocketPathError` (``str()``: the real binary's words, after ``Error:``; exit 1),
or the ``OSError`` the real binary reports as ``Error: <strerror> (os error N)``.
"""

from __future__ import annotations

import errno
import hashlib
import os
import socket
import stat
from dataclasses import dataclass
from typing import Final

from contracts.exitcodes import InvalidInput

DIR_MODE: Final = 0o700
SOCKET_MODE: Final = 0o600
BACKLOG: Final = 64
SOCKET_DIR_REFUSED: Final = "app-server socket directory must be a user-owned directory with mode 0700"
PARENT_REFUSED: Final = (
    "socket parent must be owned by the user or root and prevent other users from replacing socket entries"
)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC


class SocketPathError(InvalidInput):
    """The socket cannot be served at this path; ``str()`` is the real binary's message (exit 1)."""


def socket_home(uid: int | None = None) -> str:
    """The folder the real binary binds its sockets in: ``/tmp/codex-daemon-<uid>`` (``$TMPDIR`` is not
    consulted)."""
    return f"/tmp/codex-daemon-{os.getuid() if uid is None else uid}"


def physical_name(path: str) -> str:
    """The socket's name in :func:`socket_home`: the SHA-256 of ``path`` with its folder resolved."""
    canonical = os.path.join(os.path.realpath(os.path.dirname(path) or "."), os.path.basename(path))
    return hashlib.sha256(os.fsencode(canonical)).hexdigest()


def physical_path(path: str, home: str | None = None) -> str:
    return os.path.join(home or socket_home(), physical_name(path))


def private_dir(path: str, *, create: bool = True) -> int:
    """A descriptor of ``path``, a directory of this user's with mode 0700, never followed through a link
    (made so when ``create`` and missing); SocketPathError otherwise."""
    made = False
    if create:
        try:
            os.mkdir(path, DIR_MODE)
            made = True
        except FileExistsError:
            pass
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # a link or not a directory
            raise SocketPathError(SOCKET_DIR_REFUSED) from None
        raise
    held = os.fstat(fd)
    if made and held.st_uid == os.geteuid():  # ours, just made: 0700 whatever the umask took away
        os.fchmod(fd, DIR_MODE)
        held = os.fstat(fd)
    if held.st_uid != os.geteuid() or stat.S_IMODE(held.st_mode) != DIR_MODE:
        os.close(fd)
        raise SocketPathError(SOCKET_DIR_REFUSED)
    return fd


def owned_parent(path: str) -> None:
    """The folder a default socket path lives in (``$CODEX_HOME/app-server-control``): made 0700 when missing,
    set to 0700 when it is the user's own directory, refused when it is anything else or a link."""
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        pass
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise SocketPathError(f"socket directory path exists and is not a directory: {path}") from None
        raise
    try:
        if os.fstat(fd).st_uid == os.geteuid():
            os.fchmod(fd, DIR_MODE)
    finally:
        os.close(fd)


def check_parent(path: str) -> None:
    """``path``'s folder, made 0700 when it is missing (not its own parent: then the ``OSError``, ``No such
    file or directory``), lets no other user replace the socket's entry: SocketPathError otherwise."""
    folder = os.path.dirname(path) or "."
    try:
        os.mkdir(folder, DIR_MODE)
    except FileExistsError:
        pass
    parent = os.stat(folder)  # its links are the user's own path to it: followed
    if not stat.S_ISDIR(parent.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
    writable_by_others = parent.st_mode & 0o022 and not parent.st_mode & stat.S_ISVTX
    if parent.st_uid not in (os.geteuid(), 0) or writable_by_others:
        raise SocketPathError(PARENT_REFUSED)


def _listening(address: str) -> bool:
    """Someone accepts connections at ``address`` (a socket path); False when it is stale or gone."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(address)
    except OSError as exc:
        if exc.errno in (errno.ECONNREFUSED, errno.ENOENT):
            return False
        raise
    finally:
        probe.close()
    return True


def _clear_path(path: str, physical: str, shown: str) -> None:
    """Remove what is at ``path`` when it is the server's own and stale; refuse anything else, and keep it."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    in_use = SocketPathError(f"app-server control socket is already in use at {shown}")
    if stat.S_ISLNK(mode):
        if os.readlink(path) != physical:
            if not os.path.exists(path):  # dangling, elsewhere: the real binary trips over it when it links
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST))
            raise SocketPathError(f"app-server control socket path exists and is not a socket: {shown}")
        if _listening(physical):
            raise in_use
    elif stat.S_ISSOCK(mode):
        if _listening(path):
            raise in_use
    else:
        raise SocketPathError(f"app-server control socket path exists and is not a socket: {shown}")
    os.unlink(path)


@dataclass(slots=True)
class Listening:
    """A socket listening at ``path`` (a link to ``physical``); :meth:`close` takes both away."""

    sock: socket.socket
    path: str
    physical: str

    def close(self) -> None:
        """The server is leaving: its socket goes, and the link at ``path`` only if it still leads there."""
        self.sock.close()
        try:
            if os.readlink(self.path) == self.physical:
                os.unlink(self.path)
        except OSError:
            pass
        try:
            home_fd = os.open(os.path.dirname(self.physical), _DIR_FLAGS)
        except OSError:
            return
        try:
            if stat.S_ISSOCK(os.lstat(os.path.basename(self.physical), dir_fd=home_fd).st_mode):
                _unlink_quietly(os.path.basename(self.physical), home_fd)
        except OSError:
            pass
        finally:
            os.close(home_fd)


def bind_listening(path: str, *, default_dir: bool = False) -> Listening:
    """A unix socket listening at ``path`` (absolute), the real binary's way (module docstring).

    ``default_dir``: ``path`` is the default ``$CODEX_HOME/app-server-control/…``, whose folder is the
    server's to make."""
    if default_dir:
        owned_parent(os.path.dirname(path))
    check_parent(path)
    home = socket_home()
    home_fd = private_dir(home)
    try:
        name = physical_name(path)
        physical = os.path.join(home, name)
        _clear_path(path, physical, path)
        try:
            os.lstat(name, dir_fd=home_fd)
        except FileNotFoundError:
            pass
        else:  # in our own 0700 folder: ours; replaced unless a server of ours still listens there
            if _listening(physical):
                raise SocketPathError(f"app-server control socket is already in use at {path}")
            os.unlink(name, dir_fd=home_fd)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(physical)
            os.chmod(name, SOCKET_MODE, dir_fd=home_fd)
            sock.listen(BACKLOG)
            os.symlink(physical, path)  # last: a client that sees the path can connect
        except OSError:
            sock.close()
            _unlink_quietly(name, home_fd)
            raise
        return Listening(sock, path, physical)
    finally:
        os.close(home_fd)


def _unlink_quietly(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass
