"""The process transport: any app-server argv in its own process group, stdin/stdout as the wire.

It is both halves of :class:`contracts.transport.Transport`: its ``stream`` is newline-delimited JSON over the
child's stdin and stdout (:class:`~contracts.transport.LineStream`), its ``process`` the child itself.

- ``start_new_session``: the child leads a new session and process group (pgid = pid), so a forced
  stop is one ``SIGKILL`` to the group and reaches grandchildren that still hold stdout. Only that
  group is ever signalled; SIGTERM / SIGINT are never used.
- stderr is drained continuously (a flood must not block the child) into a bounded, redacted tail.
- every child carries the run marker (``CODEX_HARNESS_RUN_MARKER``) in its environment, so the
  no-leak fixture (:mod:`conformance.noleak`) can find anything left alive.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Final

import trio

from codex_client.errors import single_exception
from codex_client.stderr import DEFAULT_TAIL_BYTES, StderrTail
from codex_sandbox import proctree
from contracts.transport import LineStream, TransportClosed

RUN_MARKER_ENV: Final = "CODEX_HARNESS_RUN_MARKER"
#: prefixes scrubbed from an inherited environment (credentials and codex settings of the host)
SCRUBBED_PREFIXES: Final = ("OPENAI_", "CODEX_")

_PROC: Final = Path("/proc")
_run_marker: str = uuid.uuid4().hex


def run_marker() -> str:
    """The marker every child started from now on carries."""
    return _run_marker


def set_run_marker(marker: str) -> str:
    """Use ``marker`` for children started from now on; returns the previous one."""
    global _run_marker
    previous, _run_marker = _run_marker, marker
    return previous


def child_environment(env: Mapping[str, str] | None, marker: str | None = None) -> dict[str, str]:
    """The child's environment: ``env`` as given, or ours without OPENAI_* / CODEX_*; plus the run marker."""
    if env is None:
        out = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED_PREFIXES)}
    else:
        out = dict(env)
    out[RUN_MARKER_ENV] = marker or _run_marker
    return out


class TreeProcess:
    """The main process of a :class:`codex_sandbox.proctree.ProcessTree`, as much of a ``trio.Process`` as the
    transport uses: its pipes, its exit, its pid, signals to it alone, and ``kill()`` for the whole tree."""

    def __init__(self, tree: proctree.ProcessTree) -> None:
        self.tree = tree
        self.stdin, self.stdout, self.stderr = tree.stdin, tree.stdout, tree.stderr
        self._pidfd: int | None = None
        if tree.main_pid is not None:
            with contextlib.suppress(OSError, AttributeError):
                self._pidfd = os.pidfd_open(tree.main_pid)

    @property
    def pid(self) -> int:
        return self.tree.main_pid if self.tree.main_pid is not None else self.tree.process.pid

    @property
    def returncode(self) -> int | None:
        return self.tree.returncode

    async def wait(self) -> int:
        return await self.tree.wait()

    def send_signal(self, signum: int) -> None:
        """To the main process alone (by pidfd: never to a pid reused after it was reaped)."""
        if self._pidfd is not None and self.returncode is None:
            with contextlib.suppress(ProcessLookupError, OSError):
                signal.pidfd_send_signal(self._pidfd, signum)

    def kill(self) -> None:
        self.tree.kill()

    def close(self) -> None:
        if self._pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self._pidfd)
            self._pidfd = None


class ProcessTransport:
    """:class:`contracts.transport.Transport` over a child process (and its :class:`ProcessHandle`). Build it
    with :func:`spawn_process`. ``send`` / ``receive`` / ``close_input`` are the byte pipe under ``stream``.

    ``tree``: the process runs as the main process of that tree (:func:`spawn_process` ``confine=``);
    "its group" is then the whole tree, which nothing it starts can leave."""

    def __init__(
        self,
        process: trio.Process | TreeProcess,
        tail: StderrTail,
        argv: Sequence[str],
        marker: str,
        tree: proctree.ProcessTree | None = None,
    ) -> None:
        self.child = process  # the trio process (or tree's main process) behind the handle
        self.tree = tree
        self.argv = tuple(argv)
        self.marker = marker
        self._tail = tail
        self._stdin_closed = False
        self.killed = False
        self.killed_at: float | None = None  # trio clock of the first kill: the backstop's reap bound counts from it
        #: set once stderr reached its end (or its reader was cancelled): the child can exit before its last words
        #: are read, so a caller quoting them after the exit waits for this first (bounded)
        self.stderr_ended = trio.Event()
        self.stream = LineStream(
            self.send, self.receive, self.close_input, abort=self._drop_pipes, report_overflow=True
        )

    @property
    def process(self) -> ProcessTransport:
        return self

    # --- the byte pipe under the stream ----------------------------------------------------------

    async def send(self, data: bytes) -> None:
        stdin = self.child.stdin
        if stdin is None or self._stdin_closed:
            raise TransportClosed("server stdin is closed")
        try:
            await stdin.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise TransportClosed(f"cannot write to the server: {exc}") from exc

    async def receive(self, max_bytes: int = 65536) -> bytes:
        stdout = self.child.stdout
        if stdout is None:
            return b""
        try:
            return bytes(await stdout.receive_some(max_bytes))  # a pipe's read is bytes already: no copy
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return b""

    async def close_input(self) -> None:
        if self._stdin_closed:
            return
        self._stdin_closed = True
        if self.child.stdin is not None:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await self.child.stdin.aclose()

    def _drop_pipes(self) -> None:
        """Close our ends of stdin and stdout now (the stream's abort; a pending read then ends)."""
        self._stdin_closed = True
        for pipe in (self.child.stdin, self.child.stdout):
            close = getattr(pipe, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()

    # --- the process handle ----------------------------------------------------------------------

    async def wait_exit(self) -> int:
        return await self.child.wait()

    def kill(self) -> None:
        """SIGKILL to the child's process group, falling back to the leader alone.

        While the leader is unreaped its pid (= the pgid) cannot be reused, so ``killpg`` reaches only our
        group. Once it is reaped, the pgid could in principle name someone else's new group: then only the
        members that carry our run marker are killed, one by one.
        """
        self.killed = True
        if self.killed_at is None:
            self.killed_at = trio.current_time()
        self.end_now()

    def end_now(self) -> None:
        """SIGKILL the group without touching the session's state (the signal path: :func:`proctree.end_all`)."""
        if self.tree is not None:
            self.tree.kill()
            return
        if self.child.returncode is not None and _PROC.is_dir():
            for pid in self._marked_members():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            return
        try:
            os.killpg(self.pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # the whole group is gone already
        except PermissionError:
            with contextlib.suppress(ProcessLookupError, OSError):
                self.child.kill()

    @property
    def exit_code(self) -> int | None:
        return self.child.returncode

    def stderr_tail(self) -> str:
        return self._tail.text()

    @property
    def pid(self) -> int | None:
        return self.child.pid

    # --- extras -----------------------------------------------------------------------------------

    @property
    def pgid(self) -> int:
        # start_new_session made the child a session and group leader
        return self.child.pid

    def group_alive(self) -> bool:
        """True while any process of the child's group exists (zombies included); of its tree, when it has one."""
        if self.tree is not None:
            return not self.tree.empty()
        if self.child.returncode is not None and _PROC.is_dir():
            return bool(self._marked_members())
        try:
            os.killpg(self.pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def _marked_members(self) -> list[int]:
        """Live processes of our process group that carry our run marker (Linux /proc)."""
        needle = f"{RUN_MARKER_ENV}={self.marker}".encode() + b"\0"
        found = []
        for entry in _PROC.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                fields = stat.rsplit(")", 1)[-1].split()
                if fields[0] in ("Z", "X") or int(fields[2]) != self.pgid:
                    continue
                if needle not in (entry / "environ").read_bytes() + b"\0":
                    continue
            except (OSError, ValueError, IndexError):
                continue
            found.append(int(entry.name))
        return found

    def stop_after_close(self) -> None:
        """Nothing to do: a stdio server's input is its connection, and the teardown already closed it."""

    @property
    def stderr_bytes(self) -> int:
        return self._tail.total

    @property
    def stderr_truncated(self) -> bool:
        return self._tail.truncated

    async def drain_stderr(self, scope: trio.CancelScope) -> None:
        # shielded from the caller's cancellation: a child whose stderr is not drained blocks writing it and
        # answers no interrupt; the context manager's exit cancels ``scope`` once the child is reaped
        stderr = self.child.stderr
        try:
            if stderr is None:
                return
            with scope, contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                while chunk := await stderr.receive_some(65536):
                    self._tail.feed(chunk)
        finally:
            self.stderr_ended.set()


@contextlib.asynccontextmanager
async def spawn_process(
    argv: Sequence[str | os.PathLike[str]],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    stderr_tail_bytes: int = DEFAULT_TAIL_BYTES,
    marker: str | None = None,
    reap_timeout: float = 2.0,
    confine: proctree.Confinement | None = None,
) -> AsyncIterator[ProcessTransport]:
    """Start ``argv`` in its own process group; on exit, kill the group if anything is left and reap.

    ``env`` None inherits this process's environment without ``OPENAI_*`` / ``CODEX_*``; a mapping is
    used as given. Either way the run marker is added. The session does the graceful teardown
    (close stdin, wait for EOF and exit); this exit is only the backstop: it kills what is left and waits
    for the reap at most ``reap_timeout`` after the first kill (whoever sent it), so a session teardown
    that already killed and waited is not followed by a second full wait.

    ``confine`` (e.g. :func:`codex_sandbox.proctree.confinement`): run it as the main process of a process tree
    instead (a PID namespace, a cgroup), so what it starts cannot outlive the block even if it leaves the
    group. The wire, the exit code and the stderr tail are the same as for a direct child. An unconfined
    one ("not confined") changes nothing: the process group is all there is.
    """
    if confine is not None and not confine.confined:
        confine = None
    mark = marker or run_marker()
    child_argv = [os.fspath(a) for a in argv]
    child_env = child_environment(env, mark)
    async with contextlib.AsyncExitStack() as stack:
        tree: proctree.ProcessTree | None = None
        process: trio.Process | TreeProcess
        if confine is None:
            process = await trio.lowlevel.open_process(
                child_argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=Path(cwd) if cwd is not None else None,
                env=child_env,
                start_new_session=True,
            )
        else:
            tree = await stack.enter_async_context(
                proctree.open_tree(
                    child_argv,
                    env=child_env,
                    cwd=Path(cwd) if cwd is not None else None,
                    marker=mark,
                    how=confine,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
            )
            process = TreeProcess(tree)
            stack.callback(process.close)
        transport = ProcessTransport(process, StderrTail(stderr_tail_bytes), child_argv, mark, tree)
        # SIGTERM kills the group at once, before the run unwinds to this block's backstop (codex_sandbox.interrupts).
        token = proctree.register(transport.end_now)
        try:
            async with trio.open_nursery() as nursery:
                drain = trio.CancelScope(shield=True)
                nursery.start_soon(transport.drain_stderr, drain)
                try:
                    yield transport
                finally:
                    with trio.CancelScope(shield=True):
                        await _backstop(transport, reap_timeout)
                    drain.cancel()
                    nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            raise single_exception(group) from None
        finally:
            proctree.unregister(token)


async def _backstop(transport: ProcessTransport, reap_timeout: float) -> None:
    if transport.exit_code is None or transport.group_alive():
        transport.kill()
    killed_at = transport.killed_at if transport.killed_at is not None else trio.current_time()
    with trio.move_on_at(killed_at + reap_timeout):
        await transport.child.wait()
    for stream in (transport.child.stdin, transport.child.stdout):
        if stream is not None:
            with contextlib.suppress(Exception):
                await stream.aclose()
