"""Our client over ``ws://`` and ``unix://``: connect, upgrade, and a transport for the session.

A server started with ``--listen ws://127.0.0.1:0`` says where it listens on stderr (``listening on:
ws://127.0.0.1:PORT``, :func:`wait_for_port`); one started with ``--listen unix://PATH`` makes ``PATH``
(:func:`wait_for_path`). :func:`connect_ws` / :func:`connect_unix` open the socket and upgrade it
(:func:`contracts.websocket.client_handshake`: an ``Authorization: Bearer`` header when a token is given).

:class:`SocketTransport` is a :class:`contracts.transport.Transport`: the websocket is its stream, and the process
that listens, when we started it, its process, wrapped in :class:`Listener`: a listening server does not exit
when its connection ends (it serves the next one), so after the session's connection is closed the listener is
asked to stop (SIGTERM, as a user stops the real binary; it exits 0) before the session waits for its exit.
"""

from __future__ import annotations

import os
import re
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import trio

from contracts import transport as transports
from contracts.exitcodes import Finding
from contracts.transport import CONNECTION_WORDS, ProcessHandle, TransportClosed
from contracts.unix_socket import physical_name
from contracts.websocket import HandshakeFailed, UpgradeRefused, WsStream, client_handshake
from contracts.wire import DEFAULT_MAX_LINE

#: What a ``ws://`` listener prints once it listens (the real binary and fake-codex alike).
LISTENING: Final = re.compile(r"listening on: ws://(\[[0-9a-fA-F:.]+\]|[0-9.]+):(\d+)")
POLL_S: Final = 0.02
START_TIMEOUT_S: Final = 30.0
CONNECT_TIMEOUT_S: Final = 10.0
TRANSPORTS: Final = transports.WIRE
MAX_SOCKET_PATH: Final = 107
#: Our client pings a server silent this long, and counts it gone when the pong does not come within as long
#: (the real binary answers pings at once, even mid-turn; docs/transports.md).
KEEPALIVE_S: Final = 5.0


class ConnectFailed(Finding):
    """The server could not be reached or refused the upgrade; ``str()`` says why."""


@dataclass
class Listener:
    """The :class:`~contracts.transport.ProcessHandle` of a listening server: the process's, plus
    :meth:`stop_after_close` (the session's teardown calls it once the connection is closed)."""

    inner: ProcessHandle  # the process transport's handle

    async def wait_exit(self) -> int:
        return int(await self.inner.wait_exit())

    def kill(self) -> None:
        self.inner.kill()

    @property
    def exit_code(self) -> int | None:
        code = self.inner.exit_code
        return None if code is None else int(code)

    def stderr_tail(self) -> str:
        return str(self.inner.stderr_tail())

    @property
    def pid(self) -> int | None:
        return self.inner.pid

    def group_alive(self) -> bool:
        return self.inner.group_alive()

    @property
    def stderr_bytes(self) -> int | None:
        return self.inner.stderr_bytes

    @property
    def stderr_truncated(self) -> bool | None:
        return self.inner.stderr_truncated

    def stop_after_close(self) -> None:
        """SIGTERM the listener (the real binary drops its connections and exits 0)."""
        if self.exit_code is not None:
            return
        pid = self.pid
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class NoConnection:
    """The stream of a connection that never opened (the server refused the upgrade, never listened, or could not
    be reached): nothing to read, every send fails with ``reason``. The session then fails its start-up as it does
    on a server that exits at once, and the record says why (``TargetRun.meta["connect_failure"]``)."""

    words = CONNECTION_WORDS
    max_message = DEFAULT_MAX_LINE

    def __init__(self, reason: str) -> None:
        self.reason = reason

    async def send(self, messages: Any, torn: bytes = b"") -> None:
        await trio.lowlevel.checkpoint()
        raise TransportClosed(self.reason)

    async def receive(self) -> list[Any]:
        await trio.lowlevel.checkpoint()
        return []

    async def send_eof(self) -> None:
        await trio.lowlevel.checkpoint()

    def abort(self) -> None:
        pass


@dataclass
class SocketTransport:
    """A websocket to a server: ``stream`` the connection, ``process`` the listener we started (or None)."""

    stream: WsStream | NoConnection
    process: Any = None
    url: str = ""
    failure: str | None = None  # why no connection opened (the stream is then a NoConnection)


async def wait_for_port(process: Any, timeout: float = START_TIMEOUT_S) -> tuple[str, int]:
    """The host and port a ``ws://`` listener printed on stderr; ConnectFailed when it exits or says nothing in
    ``timeout`` seconds."""
    with trio.move_on_after(timeout):
        while True:
            found = LISTENING.search(process.stderr_tail())
            if found:
                return found.group(1).strip("[]"), int(found.group(2))
            if process.exit_code is not None:
                raise ConnectFailed(f"the server exited ({process.exit_code}) before it listened")
            await trio.sleep(POLL_S)
    raise ConnectFailed(f"the server did not say where it listens within {timeout:g} s")


async def wait_for_path(process: Any, path: Path, timeout: float = START_TIMEOUT_S) -> None:
    with trio.move_on_after(timeout):
        while not os.path.lexists(path):
            if process.exit_code is not None:
                raise ConnectFailed(f"the server exited ({process.exit_code}) before it made {path}")
            await trio.sleep(POLL_S)
        return
    raise ConnectFailed(f"the server did not make its socket {path} within {timeout:g} s")


async def _upgrade(stream: trio.abc.Stream, what: str, token: str | None, max_message: int | None) -> WsStream:
    limit = DEFAULT_MAX_LINE if max_message is None else max_message  # None: the handshake's own default
    try:
        with trio.fail_after(CONNECT_TIMEOUT_S):
            return keepalive(await client_handshake(stream, token=token, max_message=limit))
    except UpgradeRefused as exc:
        await trio.aclose_forcefully(stream)
        raise ConnectFailed(f"{what}: {exc}") from exc
    except (HandshakeFailed, trio.TooSlowError) as exc:
        await trio.aclose_forcefully(stream)
        raise ConnectFailed(f"{what}: the websocket upgrade failed: {exc or 'timed out'}") from exc


async def connect_ws(host: str, port: int, *, token: str | None = None, max_message: int | None = None) -> WsStream:
    try:
        with trio.fail_after(CONNECT_TIMEOUT_S):
            stream = await trio.open_tcp_stream(host, port)
    except (OSError, trio.TooSlowError) as exc:
        raise ConnectFailed(f"cannot connect to ws://{host}:{port}: {exc}") from exc
    return await _upgrade(stream, f"ws://{host}:{port}", token, max_message)


async def connect_unix(
    path: Path, *, token: str | None = None, max_message: int | None = None, physical_dir: Path | None = None
) -> WsStream:
    name = os.fspath(path)
    last: OSError | None = None
    if physical_dir is not None:
        name = os.path.join(physical_dir, physical_name(name))
    elif len(os.fsencode(name)) > MAX_SOCKET_PATH:  # a socket address holds 107 bytes: reach it through its link
        name = os.path.realpath(name)
    if len(os.fsencode(name)) > MAX_SOCKET_PATH:  # through the folder's descriptor: /proc/self/fd/N/NAME
        return await _connect_in_folder(path, name, token, max_message)
    try:
        with trio.fail_after(CONNECT_TIMEOUT_S):
            while True:
                try:
                    stream = await trio.open_unix_socket(name)
                    break
                except (ConnectionRefusedError, FileNotFoundError) as exc:
                    # the path can appear a moment before the socket listens: retried, within the bound
                    last = exc
                    await trio.sleep(POLL_S)
    except trio.TooSlowError:
        raise ConnectFailed(f"cannot connect to unix://{path}: {last}") from None
    except OSError as exc:
        raise ConnectFailed(f"cannot connect to unix://{path}: {exc}") from exc
    return await _upgrade(stream, f"unix://{path}", token, max_message)


async def _connect_in_folder(path: Path, name: str, token: str | None, max_message: int | None) -> WsStream:
    """A socket whose own path is too long for a socket address, reached through its folder's descriptor."""
    try:
        folder = os.open(os.path.dirname(name), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise ConnectFailed(f"cannot connect to unix://{path}: {exc}") from exc
    try:
        return await connect_unix(Path(f"/proc/self/fd/{folder}/{os.path.basename(name)}"), token=token,
                                  max_message=max_message)  # fmt: skip
    finally:
        os.close(folder)


def keepalive(ws: WsStream) -> WsStream:
    """Our client's pings (:data:`KEEPALIVE_S`)."""
    ws.keepalive = KEEPALIVE_S
    ws.pong_timeout = KEEPALIVE_S
    return ws


def listen_arg(transport: str, run_dir: Path) -> str:
    """The ``--listen`` value a server we start is given for ``transport`` (loopback, port 0; a socket in the
    run's own folder)."""
    if transport == "ws":
        return "ws://127.0.0.1:0"
    if transport == "unix":
        return f"unix://{socket_path(run_dir)}"
    return "stdio://"


def socket_path(run_dir: Path) -> Path:
    return run_dir / "app-server.sock"


async def open_socket_transport(
    transport: str, process: Any, run_dir: Path, socket_dir: Path | None = None
) -> SocketTransport:
    """Connect to the listener ``process`` was started as (:func:`listen_arg` of ``run_dir``). A connection that
    does not open is a transport too (:class:`NoConnection`): the session judges it as a server that failed.

    ``socket_dir``: where a confined server's socket really is on this side (its link names the path inside
    its confinement, :func:`harness.targets.real.socket_folder`): once the link is there, the socket named
    for the path in that folder is connected to."""
    url = f"{transport}://"
    try:
        if transport == "ws":
            host, port = await wait_for_port(process)
            url = f"ws://{host}:{port}"
            ws = await connect_ws(host, port)
        else:
            path = socket_path(run_dir)
            url = f"unix://{path}"
            await wait_for_path(process, path)
            ws = await connect_unix(path, physical_dir=socket_dir)
    except ConnectFailed as exc:
        return SocketTransport(NoConnection(str(exc)), Listener(process), url, failure=str(exc))
    return SocketTransport(ws, Listener(process), url)
