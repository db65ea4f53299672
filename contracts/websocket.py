"""A websocket connection as a :class:`~contracts.transport.MessageStream`: one JSON-RPC message per text frame.

What ``codex app-server --listen ws://IP:PORT`` and ``--listen unix://PATH`` speak (observed on the real binary, see
``docs/transports.md``): an HTTP/1.1 upgrade, then RFC 6455 frames, one JSON-RPC message per *text message*
(a message may come in several frames; the server reassembles them). Binary messages are dropped, pings are
answered, a close frame ends the connection. The frames are wsproto's (sans-IO, h11's sibling): this module
moves bytes between a :class:`trio.abc.Stream` (a TCP or unix socket, or a trio memory stream in process) and
a wsproto connection, and bounds what it keeps.

- :class:`WsStream` is both ends' stream once the upgrade is done. ``receive`` hands over the messages one read
  completed (a message over ``max_message`` as its ``oversized_message`` error, a binary message as its
  ``binary_frame`` error, a message cut off by the end of the stream as ``truncated_at_eof``); ``send`` writes
  one text frame per payload, and ``torn`` as the first fragment of a message never finished.
- :func:`client_handshake` upgrades a client stream (with an ``Authorization`` header when given) and raises
  :class:`UpgradeRefused` with the status and body when the server answers anything but 101.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import trio
from wsproto import ConnectionType, WSConnection
from wsproto.connection import Connection, ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Ping,
    Pong,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

from contracts.exitcodes import Finding
from contracts.transport import CONNECTION_WORDS, TransportClosed
from contracts.wire import DEFAULT_MAX_LINE, Incoming, MessageFraming, WireError, WireErrorKind
from contracts.wire import SAMPLE_BYTES as _SAMPLE

READ_CHUNK: Final = 65536
#: The biggest HTTP response head and body a client reads while upgrading (a refusal's body is a line).
MAX_UPGRADE_RESPONSE: Final = 64 * 1024
#: What the real server accepts: a frame of at most 16 MiB, a message of at most 64 MiB; past either it
#: drops the connection without a close frame.
SERVER_MAX_FRAME: Final = 16 * 1024 * 1024
SERVER_MAX_MESSAGE: Final = 64 * 1024 * 1024
#: Frames of one message at most, either side: the largest message in 1 KiB frames. Finer is overhead, not a
#: message (3,000,000 two-byte frames cost 137 s of CPU and 166 MiB when each was kept); past it the connection
#: is dropped, as past the byte caps.
MAX_MESSAGE_FRAMES: Final = 65_536
NORMAL_CLOSURE: Final = 1000
MESSAGE_TOO_BIG: Final = 1009


class UpgradeRefused(Finding):
    """The server answered the upgrade with ``status`` (not 101); ``body`` is what it said (bounded)."""

    def __init__(self, status: int, body: bytes, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
        text = body[:200].decode("utf-8", "replace")
        super().__init__(f"websocket upgrade refused: HTTP {status}" + (f": {text}" if text else ""))
        self.status = status
        self.body = body
        self.headers = list(headers)


class HandshakeFailed(Finding):
    """The upgrade did not complete (the connection ended, or the answer was not HTTP)."""


@dataclass(slots=True)
class FrameStats:
    """What crossed the connection besides messages (the record's notes; the fake's faults read them)."""

    pings_received: int = 0
    pongs_received: int = 0
    binary_messages: int = 0
    close_code: int | None = None  # the peer's close frame, when one came
    fragments: list[int] = field(default_factory=list)  # frames per multi-frame message received (bounded)


class WsStream:
    """One end of a websocket connection (a :class:`~contracts.transport.MessageStream`).

    ``conn``: a wsproto connection past its handshake. ``answer_pings``: reply to a ping with a pong (``pongs``
    of them: the real binary answers each ping twice). ``close_reply``: answer a close frame with one (RFC 6455;
    the real binary drops the connection instead). ``frame_size``: split every payload into frames of at most this
    many bytes (a fault of the fake: fragmentation). ``max_frame``: drop the connection on a frame larger than
    this (the server's limit; None: no limit). ``quiet``: sending after the peer is gone drops the messages
    instead of raising (the fake's end)."""

    words = CONNECTION_WORDS

    def __init__(
        self,
        stream: trio.abc.Stream,
        conn: Connection | WSConnection,
        leftover: bytes = b"",
        *,
        max_message: int = DEFAULT_MAX_LINE,
        max_frame: int | None = None,
        answer_pings: bool = True,
        pongs: int = 1,
        quiet: bool = False,
        close_reply: bool = True,
    ) -> None:
        self._stream = stream
        self._conn = conn
        self.framing = MessageFraming(max_message)
        self.max_frame = max_frame
        self.answer_pings = answer_pings
        self.pongs = pongs
        self.frame_size: int | None = None
        #: seconds without any byte from the peer before we ping it (None: never), and how long its pong may take
        #: before the connection counts as dead (``dead`` says why; the stream then ends)
        self.keepalive: float | None = None
        self.pong_timeout: float = 5.0
        self.dead: str | None = None
        self._ping_at: float | None = None
        self.stats = FrameStats()
        self._quiet = quiet
        self.close_reply = close_reply
        self.max_frames = MAX_MESSAGE_FRAMES
        self._buf = bytearray()  # the message being received, in one buffer (a sample only once over the cap)
        self._size = 0  # bytes of the message being received
        self._frame = 0  # bytes of the frame being received
        self._frames = 0  # frames of the message being received
        self._binary = False
        self._ended = False
        self._sent_close = False
        self.send_closed = False
        self._send_lock = trio.Lock()
        self._pending: list[Incoming] = []
        if leftover:
            conn.receive_data(leftover)

    @property
    def max_message(self) -> int:
        return self.framing.max_line

    @max_message.setter
    def max_message(self, value: int) -> None:
        self.framing = MessageFraming(value)

    # --- sending --------------------------------------------------------------------------------

    async def _write(self, data: bytes) -> None:
        if not data:
            return
        async with self._send_lock:
            try:
                await self._stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                self.send_closed = True
                raise TransportClosed(f"the connection is closed: {exc}") from None

    def _frames_of(self, payload: bytes, finished: bool = True) -> bytes:
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError:
            # A text frame must be UTF-8 (RFC 6455 §8.1: the reader fails the connection). Bytes that are not (the
            # fake's invalid_utf8 fault) go as a binary message: the reader's binary_frame error, and it goes on.
            return self._conn.send(BytesMessage(data=payload, message_finished=finished))
        size = self.frame_size
        if size is None or len(payload) <= size:
            return self._conn.send(TextMessage(data=text, message_finished=finished))
        out = bytearray()
        for start in range(0, len(text), size):
            piece = text[start : start + size]
            last = start + size >= len(text)
            out += self._conn.send(TextMessage(data=piece, message_finished=finished and last))
        return bytes(out)

    async def send(self, messages: Sequence[bytes], torn: bytes = b"") -> None:
        try:
            if self.send_closed or self._conn.state is not ConnectionState.OPEN:
                raise TransportClosed("the connection is closed")
            data = b"".join(self._frames_of(m) for m in messages)
            if torn:
                data += self._frames_of(torn, finished=False)
            await self._write(data)
        except (TransportClosed, LocalProtocolError):
            self.send_closed = True
            if not self._quiet:
                raise TransportClosed("the connection is closed") from None

    async def send_eof(self) -> None:
        """Send a close frame (once); the peer answers it or drops the connection."""
        if self._sent_close or self.send_closed:
            return
        self._sent_close = True
        try:
            if self._conn.state is ConnectionState.OPEN:
                await self._write(self._conn.send(CloseConnection(code=NORMAL_CLOSURE)))
        except (TransportClosed, LocalProtocolError):
            pass
        self.send_closed = True

    async def close_raw(self) -> None:
        """Drop the connection without a close frame (what a dying server, or the real on a close frame, does)."""
        self.send_closed = True
        self._ended = True
        try:
            await self._stream.aclose()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass

    async def close_with_frame(self, code: int = 1001) -> None:
        """Send a close frame and drop the connection without waiting for the answer (a server going away)."""
        try:
            if self._conn.state is ConnectionState.OPEN:
                await self._write(self._conn.send(CloseConnection(code=code)))
        except (TransportClosed, LocalProtocolError):
            pass
        await self.close_raw()

    async def ping(self, payload: bytes = b"") -> None:
        await self._write(self._conn.send(Ping(payload=payload)))

    def abort(self) -> None:
        self.send_closed = True
        self._ended = True
        close = getattr(self._stream, "close", None) or getattr(getattr(self._stream, "socket", None), "close", None)
        if callable(close):
            try:
                close()
            except Exception:
                pass

    async def aclose(self) -> None:
        self.send_closed = True
        self._ended = True
        try:
            await self._stream.aclose()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass

    # --- receiving ------------------------------------------------------------------------------

    async def receive(self) -> list[Incoming]:
        while True:
            if self._pending:
                out, self._pending = self._pending, []
                return out
            if self._ended:
                return self._at_end()
            data = await self._read()
            if data is None:  # a ping went out, or the peer answered none: go round
                continue
            if not data:
                self._ended = True
                continue
            self._ping_at = None  # the peer is alive
            try:
                self._conn.receive_data(data)
            except (LocalProtocolError, RemoteProtocolError):
                self._ended = True
                continue
            await self._take_events()

    async def _read(self) -> bytes | None:
        """The next bytes (``b""``: the end); None when the keepalive pinged, or declared the peer dead."""
        try:
            if self.keepalive is None:
                return bytes(await self._stream.receive_some(READ_CHUNK))
            now = trio.current_time()
            wait = self.keepalive if self._ping_at is None else self._ping_at + self.pong_timeout - now
            with trio.move_on_after(max(0.0, wait)):
                return bytes(await self._stream.receive_some(READ_CHUNK))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return b""
        if self._ping_at is None and self._conn.state is not ConnectionState.OPEN:
            return b""  # our close frame is out (no ping may follow it): a keepalive of silence ends the wait
        if self._ping_at is None:
            self._ping_at = trio.current_time()
            try:
                await self.ping(b"keepalive")
            except TransportClosed:
                return b""
            return None
        self.dead = f"no pong within {self.pong_timeout:g} s of a ping (after {self.keepalive:g} s of silence)"
        self.abort()
        return b""

    def _at_end(self) -> list[Incoming]:
        if self._buf or self._size:
            torn = bytes(self._buf)
            self._buf, self._size = bytearray(), 0
            return [self.framing.torn(torn)]
        return []

    async def _take_events(self) -> None:
        replies = bytearray()
        for event in self._conn.events():
            if isinstance(event, TextMessage | BytesMessage):
                self._piece(event)
            elif isinstance(event, Ping):
                self.stats.pings_received += 1
                if self.answer_pings and self._conn.state is ConnectionState.OPEN:
                    for _ in range(self.pongs):
                        replies += self._conn.send(event.response())
            elif isinstance(event, Pong):
                self.stats.pongs_received += 1
            elif isinstance(event, CloseConnection):
                self.stats.close_code = event.code
                if self.close_reply and self._conn.state is ConnectionState.REMOTE_CLOSING:
                    replies += self._conn.send(event.response())
                self._ended = True
                self.send_closed = True
        if replies:
            try:
                await self._write(bytes(replies))
            except TransportClosed:
                pass

    def _piece(self, event: TextMessage | BytesMessage) -> None:
        data = event.data.encode("utf-8", "surrogateescape") if isinstance(event, TextMessage) else bytes(event.data)
        if isinstance(event, BytesMessage) and not self._buf and not self._size:
            self._binary = True
        self._frame += len(data)
        self._size += len(data)
        if self.max_frame is not None and (self._frame > self.max_frame or self._size > self.framing.max_line):
            self._over_limit()  # a server's limits (the real one: 16 MiB a frame, 64 MiB a message) drop it
            return
        if self._size <= self.framing.max_line:
            self._buf += data
        elif len(self._buf) > _SAMPLE:
            del self._buf[_SAMPLE:]  # keep a sample only: bounded
        if event.frame_finished:
            self._frame = 0
            self._frames += 1
            if self._frames > self.max_frames:
                self.dead = f"a message of more than {self.max_frames} frames (dropped, as past the size caps)"
                self._over_limit()
                return
        if not event.message_finished:
            return
        buf, size, binary, frames = self._buf, self._size, self._binary, self._frames
        self._buf, self._size, self._binary, self._frames = bytearray(), 0, False, 0
        if frames > 1 and len(self.stats.fragments) < 1024:
            self.stats.fragments.append(frames)
        message = bytes(buf)
        del buf
        if binary:
            self.stats.binary_messages += 1
            detail = f"a binary websocket message of {size} bytes (messages are text frames)"
            self._pending.append(WireError(WireErrorKind.BINARY_FRAME, detail, size, message[:_SAMPLE]))
        elif size > self.framing.max_line:
            self._pending.append(self.framing.oversized_size(size, message[:_SAMPLE]))
        else:
            self._pending.append(message)

    def _over_limit(self) -> None:
        """A frame over the server's limit: the connection is dropped, no close frame (as the real binary does)."""
        self._buf, self._size, self._frames = bytearray(), 0, 0
        self._ended = True
        self.send_closed = True
        self.abort()


# --- the client's upgrade ---------------------------------------------------------------------------


async def client_handshake(
    stream: trio.abc.Stream,
    *,
    host: str = "127.0.0.1",
    target: str = "/",
    token: str | None = None,
    headers: Sequence[tuple[str, str]] = (),
    max_message: int = DEFAULT_MAX_LINE,
) -> WsStream:
    """Upgrade ``stream`` (a connected socket) to a websocket; :class:`UpgradeRefused` on a non-101 answer,
    :class:`HandshakeFailed` when the connection ends first or the answer is not HTTP. The caller bounds the
    wait with a cancel scope."""
    conn = WSConnection(ConnectionType.CLIENT)
    extra = [(k.encode(), v.encode()) for k, v in headers]
    if token is not None:
        extra.append((b"authorization", f"Bearer {token}".encode()))
    try:
        await stream.send_all(conn.send(Request(host=host, target=target, extra_headers=extra)))
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
        raise HandshakeFailed(f"cannot send the upgrade request: {exc}") from None
    refused: RejectConnection | None = None
    body = bytearray()
    seen = 0
    while True:
        try:
            data = await stream.receive_some(READ_CHUNK)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            data = b""
        seen += len(data)
        if seen > MAX_UPGRADE_RESPONSE and refused is None:
            raise HandshakeFailed(f"the upgrade answer is over {MAX_UPGRADE_RESPONSE} bytes")
        try:
            conn.receive_data(bytes(data) or None)
            events: list[Event] = list(conn.events())
        except (LocalProtocolError, RemoteProtocolError) as exc:
            raise HandshakeFailed(f"the upgrade answer is not HTTP: {exc}") from None
        for event in events:
            if isinstance(event, AcceptConnection):
                return WsStream(stream, conn, max_message=max_message)
            if isinstance(event, RejectConnection):
                refused = event
                if not event.has_body:
                    raise UpgradeRefused(event.status_code, b"", event.headers)
            elif isinstance(event, RejectData):
                if len(body) < MAX_UPGRADE_RESPONSE:
                    body += event.data[: MAX_UPGRADE_RESPONSE - len(body)]
                if event.body_finished and refused is not None:
                    raise UpgradeRefused(refused.status_code, bytes(body), refused.headers)
        if not data:
            if refused is not None:
                raise UpgradeRefused(refused.status_code, bytes(body), refused.headers)
            raise HandshakeFailed("the connection ended before the upgrade was answered")
