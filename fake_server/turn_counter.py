"""A turn count shared by processes through a file: each call takes the next 0-based index under a bounded lock.

One home for the two counters that need it: a ``CODEX_HOME``'s (every fake-codex of one home counts the same
turns, :mod:`fake_server.home_store`) and a run's (every mock Responses API of one run,
:mod:`fake_server.responses_api`). The file is opened by the caller without following a link; here a non-regular
file is refused and the lock is waited for at most :data:`LOCK_WAIT_S`: another process holds it for
microseconds, and one that holds it longer (another user's, a stuck one) must not hang this one, whose signals and
stdin EOF are only heard between requests.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time

#: How long another process may hold the lock before the count is given up (the caller counts on its own).
LOCK_WAIT_S = 2.0


def take_next(fd: int, shown: str, error: type[OSError] = OSError) -> int:
    """The index held in the open file ``fd`` (0 when empty or unreadable), written back plus one.

    Raises ``error`` (an ``OSError``) for a file that is not regular or a lock held past :data:`LOCK_WAIT_S`."""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise error(errno.EPERM, f"{shown} is not a regular file")
    _lock(fd, shown, error)
    text = os.read(fd, 32).decode("ascii", "replace").strip()
    index = int(text) if text.isdigit() else 0
    os.lseek(fd, 0, os.SEEK_SET)
    os.ftruncate(fd, 0)
    os.write(fd, str(index + 1).encode())
    return index


def _lock(fd: int, shown: str, error: type[OSError]) -> None:
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                why = f"{shown} is locked by another process for over {LOCK_WAIT_S:g} s"
                raise error(errno.EWOULDBLOCK, why) from None
            time.sleep(0.01)
