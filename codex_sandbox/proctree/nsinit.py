"""The init of one process tree's PID namespace. Run by :mod:`codex_sandbox.proctree.pidns`, by path, as PID 1.

``python nsinit.py FD -- CMD ARGS...``: FD is a ``SOCK_SEQPACKET`` socket to the harness. Standard library
only (it runs with ``-I -S`` before anything of the project could be imported).

- It first receives the main process's stdin, stdout and stderr over FD (``SCM_RIGHTS``): the launcher
  never held them, so only the main process and what it starts do, and its readers see EOF exactly when
  those are done (as if the harness had started it directly).
- It starts CMD (the tree's main process) in a session of its own with that stdio.
- It sends ``started PID`` (the main process's pid in the namespace; or ``execfail ERRNO``), then
  ``exit CODE`` when the main process ends (CODE as :attr:`subprocess.Popen.returncode`: negative for a
  signal), and reaps every orphan of the namespace.
- ``alive?`` asks whether any other process of the namespace still exists: ``kill(-1, 0)`` from PID 1
  reaches exactly the namespace's other processes, at one instant, however fast they change pid (a scan
  of ``/proc`` cannot promise that). The answer is ``alive 1`` or ``alive 0``.
- ``kill`` or EOF on FD (the harness ended or died): ``kill(-1, SIGKILL)`` and exit. PID 1 leaving makes the
  kernel kill whatever is left in the namespace, and no process can leave a PID namespace.
"""

from __future__ import annotations

import array
import contextlib
import os
import select
import signal
import socket
import sys

_RESET = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD)  # Python ignores the first two; we handle SIGCHLD


def _receive_stdio(ctl: socket.socket) -> list[int]:
    """The three descriptors the harness sends first (``stdio`` with SCM_RIGHTS)."""
    fds = array.array("i")
    message, ancillary, _, _ = ctl.recvmsg(16, socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    if message != b"stdio" or len(fds) != 3:
        os._exit(125)  # not our harness: nothing was started
    return list(fds)


def _start(argv: list[str], stdio: list[int]) -> tuple[int, bytes]:
    """Fork and exec the main process on ``stdio``; (pid, b"" or the errno of a failed exec)."""
    errors_r, errors_w = os.pipe()  # close-on-exec: EOF without data means the exec succeeded
    pid = os.fork()
    if pid == 0:
        try:
            os.close(errors_r)
            for target, fd in enumerate(stdio):
                os.dup2(fd, target)  # dup2 clears close-on-exec on the copy
            for fd in set(stdio) - {0, 1, 2}:
                os.close(fd)
            os.setsid()
            for signum in _RESET:
                signal.signal(signum, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(errors_w, str(exc.errno or 0).encode())
        finally:
            os._exit(127)
    os.close(errors_w)
    for fd in stdio:
        os.close(fd)  # the main process's now, and only its
    with os.fdopen(errors_r, "rb") as errors:
        return pid, errors.read(32)


def _reap(main: int, ctl: socket.socket) -> bool:
    """Collect every exited child; True once the main process was among them (and ``exit`` was sent)."""
    ended = False
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        if pid == main:
            ended = True
            with contextlib.suppress(OSError):
                ctl.send(f"exit {os.waitstatus_to_exitcode(status)}".encode())


def _others_alive() -> bool:
    try:
        os.kill(-1, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _end() -> None:
    with contextlib.suppress(OSError):
        os.kill(-1, signal.SIGKILL)
    os._exit(0)


def main(argv: list[str]) -> None:
    ctl = socket.socket(fileno=int(argv[1]))
    ctl.set_inheritable(False)  # the main process must not talk to the harness in the init's name
    command = argv[3:]
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd hears of every exit
    signal.set_wakeup_fd(wake_w)
    stdio = _receive_stdio(ctl)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)  # the launcher's stdio: nothing of the tree's
    main_pid, failed = _start(command, stdio)
    ctl.send(b"execfail " + failed if failed else f"started {main_pid}".encode())
    watched: list[socket.socket | int] = [ctl, wake_r]
    while True:
        try:
            ready, _, _ = select.select(watched, [], [], 1.0)
        except InterruptedError:
            continue
        if wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 512)
        _reap(main_pid, ctl)
        if ctl not in ready:
            continue
        try:
            message = ctl.recv(64)
        except OSError:
            message = b""
        if message == b"alive?":
            with contextlib.suppress(OSError):
                ctl.send(b"alive 1" if _others_alive() else b"alive 0")
        elif message in (b"", b"kill"):
            _end()


if __name__ == "__main__":
    main(sys.argv)
