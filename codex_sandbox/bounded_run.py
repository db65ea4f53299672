"""Run a short program to its end, bounded in time and in the bytes read from it.

What a binary's one-shot commands (``--version``, ``generate-json-schema``) and the launcher's self-test
go through. ``subprocess.communicate`` waits for EOF on the pipes, so a child that inherited stdout
and left the process group (``setsid``) held a 7 s ``--version`` bound open for a minute, and it reads
everything into memory, so 1.5 GB of output cost 2.9 GB. Here:

- the deadline is the program's, not its pipes': once the program has exited, its streams get
  :data:`EXIT_GRACE_S` more to reach EOF, then what was read is the answer;
- each stream is read at most up to its cap; one byte more and the program is killed and
  :class:`OutputOverflow` raised (a version line or a schema path list is small; a flood is an error);
- whatever is left of the process group is killed with ``SIGKILL`` on the way out, every time.

A child that left the group is beyond ``killpg``: only a PID namespace reaches it, which is why a
binary is started through :mod:`codex_sandbox.confine` (its namespace dies with the program).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from contracts.exitcodes import Finding

#: After the program exits, how long a grandchild may keep its stdout / stderr open before the answer is
#: taken as read (the pipes are closed then; nothing waits for their EOF).
EXIT_GRACE_S: Final = 0.5
#: Longest single wait of the read loop: the program's exit is noticed at most this late.
POLL_S: Final = 0.05
#: After SIGKILL, how long to wait for the reap (a process in uninterruptible sleep is left to the kernel).
REAP_S: Final = 5.0
CHUNK: Final = 65536


class OutputOverflow(Finding):
    """The program wrote more than its cap to one stream; it was killed."""

    def __init__(self, stream: str, limit: int) -> None:
        super().__init__(f"wrote more than {limit} bytes to {stream}")
        self.stream = stream
        self.limit = limit


@dataclass(frozen=True, slots=True)
class Finished:
    argv: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes


def run_capped(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    max_stdout: int,
    max_stderr: int,
) -> Finished:
    """Run ``argv`` (stdin ``/dev/null``, its own session) to its end within ``timeout`` seconds.

    Raises ``subprocess.TimeoutExpired`` when it has not exited by then, :class:`OutputOverflow` when a
    stream passes its cap, ``OSError`` when it cannot be started. Never waits past ``timeout`` +
    :data:`REAP_S` whatever its children do.
    """
    deadline = time.monotonic() + timeout
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env) if env is not None else None,
        cwd=Path(cwd) if cwd is not None else None,
        start_new_session=True,
    )
    try:
        out, err = _collect(proc, deadline, max_stdout, max_stderr)
        while not _exited(proc):  # both streams closed, the program still running
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(list(argv), timeout)
            time.sleep(POLL_S)
    except subprocess.TimeoutExpired:
        raise subprocess.TimeoutExpired(list(argv), timeout) from None
    finally:
        _end(proc)
    return Finished(tuple(argv), proc.returncode if proc.returncode is not None else -signal.SIGKILL, out, err)


def _exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the leader has exited, without reaping it: while it is a zombie its pid, our pgid, is not reused."""
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _collect(proc: subprocess.Popen[bytes], deadline: float, max_stdout: int, max_stderr: int) -> tuple[bytes, bytes]:
    assert proc.stdout is not None and proc.stderr is not None
    caps = {proc.stdout.fileno(): ("stdout", max_stdout), proc.stderr.fileno(): ("stderr", max_stderr)}
    chunks: dict[int, bytearray] = {fd: bytearray() for fd in caps}
    exited_at: float | None = None
    with selectors.DefaultSelector() as selector:
        for fd in caps:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            now = time.monotonic()
            if exited_at is None and _exited(proc):
                exited_at = now
            limit = deadline if exited_at is None else min(deadline, exited_at + EXIT_GRACE_S)
            if now >= limit:
                if exited_at is None:
                    raise subprocess.TimeoutExpired(proc.args, 0)
                break  # exited; a child of its still holds a stream: the answer is what was read
            for key, _ in selector.select(timeout=min(limit - now, POLL_S)):
                fd = key.fd
                data = os.read(fd, CHUNK)
                if not data:
                    selector.unregister(fd)
                    continue
                name, cap = caps[fd]
                if len(chunks[fd]) + len(data) > cap:
                    raise OutputOverflow(name, cap)
                chunks[fd] += data
    return bytes(chunks[proc.stdout.fileno()]), bytes(chunks[proc.stderr.fileno()])


def _end(proc: subprocess.Popen[bytes]) -> None:
    """Kill what is left of the group, then reap the leader (unreaped until here: the pgid is still ours)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=REAP_S)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
