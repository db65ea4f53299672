"""The init of one process tree's PID namespace. Run by :mod:`harness.proctree.pidns`, by path, as PID 1.

``python nsinit.py FD -- CMD ARGS...``: FD is a ``SOCK_SEQPACKET`` socket to the harness. Standard library
only (it runs with ``-I -S`` before anything of the project could be imported).

- It starts CMD (the tree's main process) in a session of its own, stdio inherited, then lets go of its own
  stdio so the main process's readers see EOF when the main process and its children are done.
- It sends ``started`` (or ``execfail ERRNO``), then ``exit CODE`` when the main process ends (CODE as
  :attr:`subprocess.Popen.returncode`: negative for a signal), and reaps every orphan of the namespace.
- ``alive?`` asks whether any other process of the namespace still exists: ``kill(-1, 0)`` from PID 1
  reaches exactly the namespace's other processes, at one instant, however fast they change pid (a scan
  of ``/proc`` cannot promise that). The answer is ``alive 1`` or ``alive 0``.
- ``kill`` or EOF on FD (the harness ended or died): ``kill(-1, SIGKILL)`` and exit. PID 1 leaving makes the
  kernel kill whatever is left in the namespace, and no process can leave a PID namespace.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import sys

_RESET = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD)  # Python ignores the first two; we handle SIGCHLD


def _start(argv: list[str]) -> tuple[int, bytes]:
    """Fork and exec the main process; (pid, b"" or the errno of a failed exec)."""
    errors_r, errors_w = os.pipe()  # close-on-exec: EOF without data means the exec succeeded
    pid = os.fork()
    if pid == 0:
        try:
            os.close(errors_r)
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
    command = argv[3:]
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd hears of every exit
    signal.set_wakeup_fd(wake_w)
    main_pid, failed = _start(command)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    ctl.send(b"execfail " + failed if failed else b"started")
    while True:
        try:
            ready, _, _ = select.select([ctl, wake_r], [], [], 1.0)
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
