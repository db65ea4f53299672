"""The fake served over a websocket: each connection upgraded as the real binary does, one engine session each.

:func:`upgrade` answers one connection's HTTP (:mod:`fake_server.ws_http`) and returns the websocket stream, or
None when it answered something else (``/readyz``, a refusal). :class:`ConnectionIo` is the engine's
:class:`~fake_server.runtime.Io` on that stream: what the engine sends goes out one text frame per message,
``CloseStdout`` drops the connection without a close frame, and the transport faults
(``fake_server.faults``' ``ws_*`` kinds) act on the frames. :func:`serve_listener` is ``fake-codex app-server
--listen ws://…|unix://…``: it listens, prints the banner, serves each connection with its own engine (and its
own recording), and leaves on SIGTERM with 0 after dropping every connection, as the real binary does; a crash
fault takes the whole process down.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

import trio
from wsproto import ConnectionType
from wsproto.connection import Connection

from contracts.unix_socket import bind_listening
from contracts.websocket import SERVER_MAX_FRAME, SERVER_MAX_MESSAGE, WsStream
from contracts.wire import Incoming
from fake_server.effects import FaultStruck, TraceEvent, TransportFault
from fake_server.faults import REGISTRY
from fake_server.ws_auth import Policy
from fake_server.ws_http import Listen, answer, bad_request, http_date, read_request

#: How long a connection may take to send its request head before it is dropped.
UPGRADE_TIMEOUT_S: Final = 10.0
#: the real binary answers each ping twice (its socket layer and the server each send a pong).
PONGS_PER_PING: Final = 2
#: Websocket sessions at once; a new one past it takes the place of the longest idle (see :class:`_Slots`).
MAX_CONNECTIONS: Final = 256
#: Connections still sending their request head at once (a health check among them is answered at once).
MAX_PENDING: Final = 256
#: A session idle this long (no byte either way) may be dropped for a new one when the sessions are full.
IDLE_DROP_S: Final = 5.0


class _Watched(trio.abc.Stream):
    """A connection's stream that remembers when a byte last went either way (``last``, trio time)."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.last = trio.current_time()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        data = await self.inner.receive_some(max_bytes)
        self.last = trio.current_time()
        return bytes(data)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)
        self.last = trio.current_time()

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Slots:
    """At most ``size`` connections in one state (awaiting their head, or in a session). A new one never waits:
    when the slots are full, the one idle longest (at least ``idle_s``; any, for ``idle_s`` 0) is dropped for it,
    else the new one is refused. 256 idle websocket connections starved a 257th client's ``/readyz``."""

    def __init__(self, size: int, idle_s: float) -> None:
        self.size, self.idle_s = size, idle_s
        self._held: dict[int, tuple[_Watched, trio.CancelScope]] = {}
        self._ids = 0

    def take(self, stream: _Watched, scope: trio.CancelScope) -> int | None:
        """A slot for ``stream`` (its id, to :meth:`give_back`), or None: refuse it."""
        if len(self._held) >= self.size:
            now = trio.current_time()
            key, (idlest, its_scope) = min(self._held.items(), key=lambda kv: kv[1][0].last)
            if now - idlest.last < self.idle_s:
                return None
            del self._held[key]
            its_scope.cancel()  # dropped, as the real binary drops a connection: no close frame
        self._ids += 1
        self._held[self._ids] = (stream, scope)
        return self._ids

    def give_back(self, key: int | None) -> None:
        if key is not None:
            self._held.pop(key, None)


@dataclass(slots=True)
class Upgrade:
    """The transport faults a scenario asks of the upgrade (a kind with an ``on_upgrade``): status and body."""

    refuse_status: int | None = None
    refuse_body: str = ""
    refused: int = 0  # upgrades refused so far
    #: the ledger's entry for the fault that refuses (struck as soon as the server serves)
    struck: FaultStruck | None = None


async def upgrade(
    stream: trio.abc.Stream,
    *,
    unix: bool,
    policy: Policy,
    clock_ms: Callable[[], int],
    refuse: Upgrade | None = None,
) -> WsStream | None:
    """Answer one connection's HTTP; the websocket on 101, else None (the caller closes the stream)."""
    head = await read_request(stream)
    now_ms = clock_ms()
    if head.request is None:
        if head.garbage and not unix:
            await _send(stream, bad_request(http_date(now_ms)))
        return None
    reply = answer(head.request, head.leftover, unix=unix, policy=policy, now_s=now_ms // 1000, date=http_date(now_ms))
    if reply.upgraded and refuse is not None and refuse.refuse_status is not None:
        body = refuse.refuse_body.encode()
        data = (
            f"HTTP/1.1 {refuse.refuse_status} Refused\r\ncontent-type: text/plain; charset=utf-8\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        ).encode() + body
        await _send(stream, data)
        refuse.refused += 1
        return None
    if not await _send(stream, reply.data) or not reply.upgraded:
        return None
    conn = Connection(ConnectionType.SERVER)
    return WsStream(
        stream,
        conn,
        reply.leftover,
        max_message=SERVER_MAX_MESSAGE,
        max_frame=SERVER_MAX_FRAME,
        pongs=PONGS_PER_PING,
        quiet=True,
        close_reply=False,  # the real binary drops the connection on a close frame, without one of its own
    )


async def _send(stream: trio.abc.Stream, data: bytes) -> bool:
    if not data:
        return False
    try:
        await stream.send_all(data)
        return True
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        return False


@dataclass
class ConnectionIo:
    """The engine's I/O on one websocket connection (a :class:`fake_server.runtime.Io`)."""

    ws: WsStream
    stderr: Callable[[str], None]
    on_trace: Callable[[TraceEvent], None] = lambda _e: None
    on_fault: Callable[[FaultStruck], None] = lambda _e: None
    stdout_closed: bool = False
    notes: list[str] = field(default_factory=list)

    async def read(self) -> list[Incoming]:
        return await self.ws.receive()

    async def write(self, messages: list[bytes], torn: bytes = b"") -> None:
        if self.stdout_closed:
            return
        await self.ws.send(messages, torn)
        if torn:  # a message begun and never finished: the connection drops under it
            await self.close_stdout()

    async def close_stdout(self) -> None:
        """The server's output ends: the connection drops without a close frame."""
        if not self.stdout_closed:
            self.stdout_closed = True
            await self.ws.close_raw()

    def write_stderr(self, text: str) -> None:
        self.stderr(text)

    async def transport_fault(self, effect: TransportFault) -> None:
        if await carry_out(self.ws, effect):
            self.stdout_closed = True

    async def spawn_grandchild(self, hold_ms: int) -> None:
        """A grandchild holding stdout has nothing to hold on a socket (the connection is the server's own)."""
        self.notes.append(f"grandchild_holds_stdout: nothing to hold on a websocket ({hold_ms} ms)")

    def trace(self, event: TraceEvent) -> None:
        self.on_trace(event)

    def fault_struck(self, effect: FaultStruck) -> None:
        self.on_fault(effect)


async def carry_out(ws: WsStream, effect: TransportFault) -> bool:
    """Do a websocket fault to ``ws`` (its kind's ``on_socket``); True when the connection is gone after it."""
    act = REGISTRY[effect.kind].on_socket
    return await act(ws, effect.params) if act is not None else False


def refusal_of(scenario: Any) -> Upgrade | None:
    """The first fault of a scenario's first turn that answers the upgrade itself (its kind's ``on_upgrade``), as
    the upgrade's answer."""
    turns = getattr(scenario, "turns", ())
    for index, fault in enumerate(turns[0].faults if turns else ()):
        refuse = REGISTRY[fault.kind].on_upgrade
        if refuse is not None:
            status, body = refuse(fault)
            return Upgrade(status, body, struck=FaultStruck(0, index, fault.kind, "initialize", 1))
    return None


def write_stderr(text: str) -> None:
    data = text.encode("utf-8", "replace")
    try:
        while data:
            data = data[os.write(2, data) :]
    except OSError:
        pass


SessionFn = Callable[[WsStream, int], Awaitable[tuple[int, bool] | None]]


async def serve_listener(
    listen: Listen,
    policy: Policy,
    session: SessionFn,
    clock_ms: Callable[[], int],
    *,
    refuse: Upgrade | None = None,
    on_refused: Callable[[int], None] | None = None,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> tuple[int, bool]:
    """Serve ``listen`` until cancelled or a session crashes the process: returns (exit code, crashed).

    ``session(ws, n)`` plays connection ``n`` (from 1) and returns (code, crashed) when its engine crashed the
    process, else None. ``on_refused(n)``: the ``n``-th upgrade the scenario's ``ws_refuse_upgrade`` refused."""
    outcome: list[tuple[int, bool]] = []
    unix = listen.scheme == "unix"
    bound = None
    if unix:  # the one way to open a socket path (contracts.unix_socket): a private folder, nothing followed
        bound = bind_listening(listen.path, default_dir=listen.default_path)
        listeners: list[trio.SocketListener] = [trio.SocketListener(trio.socket.from_stdlib_socket(bound.sock))]
        port = 0
    else:
        listeners = await trio.open_tcp_listeners(listen.port, host=listen.host)
        port = listeners[0].socket.getsockname()[1]
    count = 0
    # Bounded and never waited for: a connection awaiting its head and a session each take a slot of their own
    # kind, and a new connection takes the place of the oldest / longest idle one (so a health check is always
    # read and answered at once), never waiting behind them.
    pending, sessions = _Slots(MAX_PENDING, 0.0), _Slots(MAX_CONNECTIONS, IDLE_DROP_S)
    try:
        async with trio.open_nursery() as nursery:

            async def handle(raw: trio.abc.Stream) -> None:
                nonlocal count
                stream = _Watched(raw)
                with trio.CancelScope() as scope:
                    key = pending.take(stream, scope)
                    ws = None
                    refused_before = refuse.refused if refuse is not None else 0
                    try:
                        with trio.move_on_after(UPGRADE_TIMEOUT_S):
                            ws = await upgrade(stream, unix=unix, policy=policy, clock_ms=clock_ms, refuse=refuse)
                    finally:
                        pending.give_back(key)
                    if ws is None:
                        await trio.aclose_forcefully(stream)
                        if refuse is not None and refuse.refused > refused_before and on_refused is not None:
                            on_refused(refuse.refused)
                        return
                    key = sessions.take(stream, scope)
                    if key is None:  # every session busy: this one is dropped (no close frame, as past a cap)
                        await trio.aclose_forcefully(stream)
                        return
                    count += 1
                    crashed = None
                    try:
                        crashed = await session(ws, count)
                    finally:
                        sessions.give_back(key)
                        await trio.aclose_forcefully(stream)
                    if crashed is not None:
                        outcome.append(crashed)
                        nursery.cancel_scope.cancel()

            nursery.start_soon(trio.serve_listeners, handle, listeners)
            task_status.started(port)
    finally:
        if bound is not None:
            bound.close()
    return outcome[0] if outcome else (0, False)


def announce(listen: Listen, port: int) -> None:
    """The banner on stderr, once the listener listens (nothing for a unix socket)."""
    from fake_server.ws_http import banner

    text = banner(listen, port)
    if text:
        write_stderr(text)
