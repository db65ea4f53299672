"""The in-process fake over a websocket: wsproto on both ends of a bounded in-memory byte stream, on trio's clock.

:class:`ByteStream` is one end of a pair of bounded memory channels of byte chunks (a
:class:`trio.abc.HalfCloseableStream`, as a socket is: a reader that never reads stalls the writer).
:class:`WsPipe` is an :class:`fake_server.inprocess.Pipe`: the server's end upgrades the connection the first
time the engine reads (answering as a ``ws://`` or ``unix://`` listener of the real binary would), the client's end is
made by :meth:`WsPipe.connect` (our client's upgrade, :func:`contracts.websocket.client_handshake`). Between
them go real websocket frames, so the in-process run is the process run's wire, byte for byte, on virtual time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import trio

from contracts.transport import CONNECTION_WORDS
from contracts.websocket import WsStream, client_handshake
from contracts.wire import DEFAULT_MAX_LINE, Incoming
from fake_server.effects import TransportFault
from fake_server.ws_auth import Policy
from fake_server.ws_serve import Upgrade, carry_out, upgrade

CHUNKS: Final = 64  # chunks in flight each way (a socket buffer's worth of 64 KiB writes)


class ByteStream(trio.abc.HalfCloseableStream):
    """One end of an in-memory byte connection."""

    def __init__(self, send: trio.MemorySendChannel[bytes], receive: trio.MemoryReceiveChannel[bytes]) -> None:
        self._send = send
        self._receive = receive
        self._chunk = b""

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            await trio.lowlevel.checkpoint()
            return
        try:
            await self._send.send(bytes(data))
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            raise trio.BrokenResourceError("the peer is gone") from None

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def send_eof(self) -> None:
        self._send.close()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if not self._chunk:
            try:
                self._chunk = await self._receive.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                return b""
        size = len(self._chunk) if max_bytes is None else max(1, max_bytes)
        piece, self._chunk = self._chunk[:size], self._chunk[size:]
        return piece

    def close(self) -> None:
        self._send.close()
        self._receive.close()

    async def aclose(self) -> None:
        self.close()
        await trio.lowlevel.checkpoint()


def byte_stream_pair(chunks: int = CHUNKS) -> tuple[ByteStream, ByteStream]:
    a_send, b_receive = trio.open_memory_channel[bytes](chunks)
    b_send, a_receive = trio.open_memory_channel[bytes](chunks)
    return ByteStream(a_send, a_receive), ByteStream(b_send, b_receive)


class _ServerEnd:
    """The engine's end: upgrades on first use, then is the server's :class:`WsStream`."""

    words = CONNECTION_WORDS

    def __init__(self, pipe: WsPipe) -> None:
        self._pipe = pipe
        self.max_message = 64 * 1024 * 1024

    async def send(self, messages: list[bytes], torn: bytes = b"") -> None:
        ws = await self._pipe.server_ws()
        if ws is not None:
            await ws.send(messages, torn)
            if torn:
                await ws.close_raw()

    async def receive(self) -> list[Incoming]:
        ws = await self._pipe.server_ws()
        return [] if ws is None else await ws.receive()

    async def send_eof(self) -> None:
        self._pipe.close_server_output()

    def abort(self) -> None:
        self._pipe.close_server_output()


class WsPipe:
    """Both ends of an in-process websocket connection, and what the fake's process does to them."""

    def __init__(
        self,
        *,
        unix: bool = False,
        policy: Policy | None = None,
        clock_ms: Callable[[], int] | None = None,
        refuse: Upgrade | None = None,
    ) -> None:
        self.unix = unix
        self.policy = policy or Policy()
        self._clock_ms = clock_ms
        self.refuse = refuse
        self._client_bytes, self._server_bytes = byte_stream_pair()
        self.server = _ServerEnd(self)
        self._client: WsStream | None = None
        self._ws: WsStream | None = None
        self._upgraded = trio.Event()
        self._upgrading = False
        self.output_closed = False

    @property
    def client(self) -> WsStream:
        if self._client is None:
            raise RuntimeError("connect() the client's end first")
        return self._client

    async def connect(self, *, token: str | None = None, max_message: int | None = None) -> WsStream:
        """Our client's upgrade (UpgradeRefused / HandshakeFailed as on a socket)."""
        limit = DEFAULT_MAX_LINE if max_message is None else max_message  # None: the handshake's own default
        self._client = await client_handshake(self._client_bytes, token=token, max_message=limit)
        return self._client

    async def server_ws(self) -> WsStream | None:
        if not self._upgrading:
            self._upgrading = True
            from fake_server.runtime import default_clock_ms

            clock = self._clock_ms or default_clock_ms()
            self._ws = await upgrade(
                self._server_bytes, unix=self.unix, policy=self.policy, clock_ms=clock, refuse=self.refuse
            )
            if self._ws is None:
                await self._server_bytes.aclose()
            self._upgraded.set()
        await self._upgraded.wait()
        return None if self.output_closed else self._ws

    async def transport_fault(self, effect: TransportFault) -> None:
        ws = await self.server_ws()
        if ws is not None and await carry_out(ws, effect):
            self.output_closed = True

    def close_server_input(self) -> None:
        """The process is gone: the connection drops (no close frame)."""
        self.close_server_output()

    def close_server_output(self) -> None:
        if not self.output_closed:
            self.output_closed = True
            self._server_bytes.close()
