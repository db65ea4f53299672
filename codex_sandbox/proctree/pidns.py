"""A tree in a PID namespace of its own, whose init (:mod:`codex_sandbox.proctree.nsinit`) the harness ends.

The launcher (``bwrap --unshare-pid --as-pid-1`` or ``unshare --pid --fork --kill-child``) starts the init
as PID 1 of a new namespace with a fresh ``/proc``; the init starts the main process. No process can leave
a PID namespace (``setsid``, double forks and a scrubbed environment change nothing), and when its PID 1
ends the kernel kills every process left in it. The init answers ``alive?`` with ``kill(-1, 0)``: one
instant, exact, however fast a process changes pid. It dies with the harness too: the control socket's
EOF ends it (and unshare's ``--kill-child`` ends it with its launcher).
"""

from __future__ import annotations

import array
import contextlib
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import trio

from codex_sandbox.proctree import procfs
from codex_sandbox.proctree.base import (
    END_TIMEOUT_S,
    START_TIMEOUT_S,
    Confinement,
    ConfinementFailed,
    Member,
    ProcessTree,
    wait_bounded,
)

NSINIT = Path(__file__).with_name("nsinit.py")
_CREDS = struct.Struct("3i")  # struct ucred: pid, uid, gid
#: How long ``empty()`` waits for the init's answer before it trusts what it can see itself.
ANSWER_TIMEOUT_S = 1.0


def launchers(which: Any) -> list[tuple[str, ...]]:
    """The argv prefixes that start a command as PID 1 of a new PID namespace, best first (``which``: shutil.which)."""
    out: list[tuple[str, ...]] = []
    # util-linux unshare first: its --mount-proc mounts a plain /proc of the namespace. bwrap's --proc adds
    # read-only submounts (/proc/irq, /proc/bus, …), and a /proc that is not fully visible forbids every nested
    # user namespace below it from mounting its own: the confined real binary a client starts (codex_sandbox.confine,
    # bwrap --unshare-user --proc) could not start inside the client's tree.
    if unshare := which("unshare"):
        user = () if os.geteuid() == 0 else ("--user", "--map-current-user")
        out.append((unshare, *user, "--pid", "--fork", "--kill-child", "--mount-proc", "--"))
    if bwrap := which("bwrap"):
        # bwrap makes a user namespace by itself when it is not run as root; --as-pid-1: our init is PID 1.
        # No --die-with-parent: its PR_SET_PDEATHSIG fires when the *thread* that started bwrap ends, and
        # trio starts processes from worker threads that end after 10 s idle (the sandbox would die with
        # them). The init's control socket ends the tree when the harness dies instead.
        binds = ("--dev-bind", "/", "/", "--proc", "/proc")  # the host's files; a /proc of the namespace
        out.append((bwrap, "--unshare-pid", "--as-pid-1", *binds, "--"))
    return out


def init_argv(launcher: Sequence[str], fd: int, argv: Sequence[str]) -> list[str]:
    return [*launcher, sys.executable, "-I", "-S", str(NSINIT), str(fd), "--", *argv]


def probe(launcher: Sequence[str], timeout: float = START_TIMEOUT_S) -> str | None:
    """Start an empty program in a namespace with ``launcher``: None when it works, else why not (one line)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        proc = subprocess.Popen(
            init_argv(launcher, theirs.fileno(), [sys.executable, "-I", "-S", "-c", ""]),  # no PATH needed
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            pass_fds=(theirs.fileno(),),
            start_new_session=True,
        )
    except OSError as exc:
        ours.close()
        theirs.close()
        return f"{launcher[0]}: {exc.strerror or exc}"
    theirs.close()
    try:
        ours.settimeout(timeout)
        null = os.open(os.devnull, os.O_RDWR)
        try:
            ours.sendmsg([b"stdio"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [null] * 3))])
        finally:
            os.close(null)
        said = [ours.recv(64), ours.recv(64)]
        if not said[0].startswith(b"started ") or said[1] != b"exit 0":
            raise OSError("it exited without starting the init" if not said[0] else f"the init said {said!r}")
        ours.send(b"kill")
        proc.wait(timeout=timeout)
        return None
    except (OSError, subprocess.TimeoutExpired) as exc:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=timeout)
        lines = err.decode("utf-8", "replace").strip().splitlines()
        return f"{Path(launcher[0]).name}: {lines[-1][:200] if lines else exc}"
    finally:
        ours.close()
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=timeout)


def _stdio_fds(stdio: dict[str, Any]) -> tuple[list[int], dict[str, int]]:
    """(the three descriptors the main process gets, our ends of the pipes by name)."""
    child: list[int] = []
    ends: dict[str, int] = {}
    for target, name in enumerate(("stdin", "stdout", "stderr")):
        spec = stdio.get(name)
        if spec == subprocess.PIPE:
            read, write = os.pipe()
            child.append(read if target == 0 else write)
            ends[name] = write if target == 0 else read
        elif spec == subprocess.DEVNULL:
            child.append(os.open(os.devnull, os.O_RDWR))
        else:  # None: ours; or a descriptor of the caller's
            child.append(os.dup(target if spec is None else int(spec)))
    return child, ends


def _child_known_as(parent: int, inner: int) -> int | None:
    """The child of ``parent`` that its PID namespace numbers ``inner``, as the harness numbers it."""
    for pid in procfs.descendants(parent):
        state = procfs.stat(pid)
        if state is not None and state[1] == parent and procfs.inner_pid(pid) == inner:
            return pid
    return None  # already gone


async def _said(process: trio.Process) -> str:
    """The last line the launcher wrote on stderr (bounded), for the reason of a failed start."""
    if process.stderr is None:
        return ""
    data = b""
    with trio.move_on_after(0.5), contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        while len(data) < 8192 and (chunk := await process.stderr.receive_some(8192)):
            data += chunk
    lines = data.decode("utf-8", "replace").strip().splitlines()
    return f": {lines[-1][:200]}" if lines else ""


class PidNamespaceTree(ProcessTree):
    def __init__(self, confinement: Confinement) -> None:
        self.confinement = confinement
        self._ctl: socket.socket | None = None
        self.init_pid: int | None = None  # as the harness sees it
        self._pidfd: int | None = None
        self._main_pidfd: int | None = None
        self._gone = False  # the init closed its end: the namespace is ending or ended
        self._exited = trio.Event()

    async def start(
        self, argv: Sequence[str], *, env: Mapping[str, str], cwd: str | Path | None, stdio: dict[str, Any]
    ) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # Credentials ride with every message the init sends: the first tells its pid as the harness sees it.
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self._ctl = ours
        child_fds, ends = _stdio_fds(stdio)
        try:
            try:
                self.process = await trio.lowlevel.open_process(
                    init_argv(self.confinement.launcher, theirs.fileno(), argv),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,  # the launcher's and the init's own complaints, read if they fail
                    env=dict(env),
                    cwd=cwd,
                    pass_fds=(theirs.fileno(),),
                    start_new_session=True,
                )
            finally:
                theirs.close()
            # The main process's stdio goes to the init alone: the launcher never holds it.
            ours.sendmsg([b"stdio"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", child_fds))])
        except BaseException:
            for fd in ends.values():
                os.close(fd)
            raise
        finally:
            for fd in child_fds:
                os.close(fd)
        ours.setblocking(False)
        self.stdin, self.stdout, self.stderr = (
            trio.lowlevel.FdStream(ends[name]) if name in ends else None for name in ("stdin", "stdout", "stderr")
        )
        first, pid = b"", None
        with trio.move_on_after(START_TIMEOUT_S):
            first, pid = await self._first_message()
        if first.startswith(b"execfail "):
            code = int(first.split()[1] or 0)
            raise OSError(code, os.strerror(code), argv[0])
        if not first.startswith(b"started ") or pid is None:
            self.kill()
            await wait_bounded(self.process)
            said = await _said(self.process)
            why = "did not start in time" if not first and self.process.returncode is None else "did not start"
            raise ConfinementFailed(f"the PID namespace ({self.confinement.detail}) {why}{said}")
        self.init_pid = pid
        with contextlib.suppress(OSError, AttributeError):
            self._pidfd = os.pidfd_open(pid)
        with contextlib.suppress(ValueError, IndexError):
            self.main_pid = _child_known_as(pid, int(first.split()[1]))
        if self.main_pid is not None:
            with contextlib.suppress(OSError, AttributeError):
                self._main_pidfd = os.pidfd_open(self.main_pid)

    async def _first_message(self) -> tuple[bytes, int | None]:
        assert self._ctl is not None
        while True:
            try:
                data, ancdata, _, _ = self._ctl.recvmsg(64, socket.CMSG_SPACE(_CREDS.size))
            except BlockingIOError:
                await trio.lowlevel.wait_readable(self._ctl)
                continue
            pid = None
            for level, kind, blob in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(blob) >= _CREDS.size:
                    pid = _CREDS.unpack(blob[: _CREDS.size])[0]
            return data, pid

    def _take(self, message: bytes) -> bytes:
        """Note what a message says of the main process or the init (whoever read it: the pump or
        ``empty()``); the message itself back."""
        if message.startswith(b"exit "):
            with contextlib.suppress(ValueError):
                self.returncode = int(message.split()[1])
        elif not message:
            self._gone = True
            if self.returncode is None:
                self.returncode = -signal.SIGKILL  # the namespace ended under it
        if self.returncode is not None:
            self._exited.set()
        return message

    def _recv_now(self) -> bytes | None:
        """The next message, None when none is there yet, b"" once the init is gone."""
        if self._ctl is None or self._gone:
            return self._take(b"")
        try:
            return self._take(self._ctl.recv(64))
        except BlockingIOError:
            return None
        except OSError:
            return self._take(b"")

    async def pump(self) -> None:
        """The one task that waits on the control socket (trio lets one task wait per descriptor): it reads
        what the init says by itself (the main process's exit, its own end)."""
        with contextlib.suppress(trio.ClosedResourceError, OSError):
            while (message := self._recv_now()) != b"":
                if message is None and self._ctl is not None:
                    await trio.lowlevel.wait_readable(self._ctl)

    async def wait(self) -> int:
        await self._exited.wait()  # any number of waiters: the pump (or empty()) sets it
        assert self.returncode is not None
        return self.returncode

    def _init_ended(self) -> bool:
        """The init is dead. Its exit waits until the kernel killed and reaped the rest of the namespace."""
        if self._pidfd is not None:
            readable, _, _ = select.select([self._pidfd], [], [], 0)
            return bool(readable)
        return self.init_pid is None or not procfs.alive(self.init_pid)

    def empty(self) -> bool:
        if self._ctl is None or self._gone:
            return self._init_ended()
        try:
            self._ctl.send(b"alive?")
        except OSError:
            self._take(b"")
            return self._init_ended()
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        while (left := deadline - time.monotonic()) > 0:
            message = self._recv_now()
            if message is None:
                select.select([self._ctl], [], [], left)  # the init answers at once; bounded all the same
                continue
            if not message:
                return self._init_ended()  # PID 1 is leaving: the kernel is killing the rest
            if message.startswith(b"alive "):
                return message == b"alive 0"
        return not self.members()  # an init that does not answer: what the harness can see

    def members(self) -> list[Member]:
        if self.init_pid is None or not procfs.alive(self.init_pid):
            return []
        return [Member(p, procfs.inner_pid(p), procfs.describe(p)) for p in sorted(procfs.descendants(self.init_pid))]

    def kill(self) -> None:
        # The main process first, directly: the rest dies as the kernel tears the namespace down, a moment
        # later, and in that moment the main process must not run on (a server seeing stdin EOF would end
        # gracefully and close what a kill leaves open).
        if self._main_pidfd is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self._main_pidfd, signal.SIGKILL)
        if self._ctl is not None and not self._gone:
            with contextlib.suppress(OSError):
                self._ctl.send(b"kill")
        if self._pidfd is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
        process = getattr(self, "process", None)
        if process is not None and process.returncode is None:
            # Unreaped, the launcher's pid (= its group) is still ours: bwrap / unshare take the init with them.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)

    async def aclose(self) -> None:
        self.kill()
        if self._pidfd is not None:
            with trio.move_on_after(END_TIMEOUT_S):  # readable once the init and so the namespace are gone
                await trio.lowlevel.wait_readable(self._pidfd)
        process = getattr(self, "process", None)
        if process is not None and not await wait_bounded(process, END_TIMEOUT_S):
            with contextlib.suppress(ProcessLookupError, OSError):
                process.kill()
            await wait_bounded(process, END_TIMEOUT_S)
        if self._pidfd is not None:
            trio.lowlevel.notify_closing(self._pidfd)
            with contextlib.suppress(OSError):
                os.close(self._pidfd)
            self._pidfd = None
        if self._main_pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self._main_pidfd)
            self._main_pidfd = None
        if self._ctl is not None:
            trio.lowlevel.notify_closing(self._ctl)
            self._ctl.close()
            self._ctl = None
            self._gone = True
        # Kept open until now: a launcher writing to a closed pipe could die of SIGPIPE (and unshare's
        # --kill-child would take the tree with it).
        for stream in (self.stdin, self.stdout, self.stderr, process.stderr if process is not None else None):
            if stream is not None:
                with contextlib.suppress(trio.ClosedResourceError, OSError):
                    await stream.aclose()
