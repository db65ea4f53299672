"""A message-framed in-memory connection: one payload per message, no newline anywhere on the wire.

Each direction is a bounded trio memory channel whose items are batches (one ``send`` = one item = one
``receive`` on the other end, as a websocket peer gets one text frame per message but a reader may take a
burst at once). The framing is :class:`~contracts.wire.MessageFraming`: a message over the reader's cap comes
as its ``oversized_message`` error, and a message its writer began when it died (``torn``) comes as
``truncated_at_eof`` once the stream ends. :class:`MessagePipe` is an :class:`fake_server.inprocess.Pipe`, so
the in-process fake serves over it as it serves over its newline-framed stdio imitation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import trio

from contracts.transport import CONNECTION_WORDS, TransportClosed
from contracts.wire import DEFAULT_MAX_LINE, Incoming, MessageFraming

CHANNEL_BATCHES: Final = 256  # bounded like a pipe: a reader that never reads stalls the writer


class _Torn(bytes):
    """The start of a message its writer never finished."""


class MessageEnd:
    """One end of a :class:`MessagePipe` (a :class:`contracts.transport.MessageStream`).

    ``quiet``: sending after the peer is gone drops the messages instead of raising (the fake's end: a server
    carries on like one whose writes fail with EPIPE)."""

    words = CONNECTION_WORDS

    def __init__(
        self,
        send: trio.MemorySendChannel[list[bytes] | _Torn],
        receive: trio.MemoryReceiveChannel[list[bytes] | _Torn],
        *,
        quiet: bool = False,
    ) -> None:
        self._send = send
        self._receive = receive
        self._quiet = quiet
        self.framing = MessageFraming(DEFAULT_MAX_LINE)
        self.send_closed = False
        self._ended = False
        self._torn = b""

    @property
    def max_message(self) -> int:
        return self.framing.max_line

    @max_message.setter
    def max_message(self, value: int) -> None:
        self.framing = MessageFraming(value)

    async def send(self, messages: Sequence[bytes], torn: bytes = b"") -> None:
        try:
            if self.send_closed:
                raise trio.ClosedResourceError
            if messages:
                await self._send.send(list(messages))
            if torn:
                await self._send.send(_Torn(torn))
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            self.send_closed = True
            if not self._quiet:
                raise TransportClosed("the connection is closed") from None

    async def receive(self) -> list[Incoming]:
        while not self._ended:
            try:
                batch = await self._receive.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                self._ended = True
                break
            if type(batch) is _Torn:
                self._torn = bytes(batch)  # reported at the end: only then is it known to be cut off
                continue
            return self.framing.check(batch)  # type: ignore[arg-type]
        torn, self._torn = self._torn, b""
        return [self.framing.torn(torn)] if torn else []

    async def send_eof(self) -> None:
        self.close_send()

    def close_send(self) -> None:
        """End our output now (the peer reads the end once it has read what was sent)."""
        self.send_closed = True
        self._send.close()

    def abort(self) -> None:
        self.close_send()
        self._receive.close()


class MessagePipe:
    """Both ends, and what the fake's process does to them (:class:`fake_server.inprocess.Pipe`)."""

    def __init__(self, batches: int = CHANNEL_BATCHES) -> None:
        c2s_send, c2s_receive = trio.open_memory_channel[list[bytes] | _Torn](batches)
        s2c_send, s2c_receive = trio.open_memory_channel[list[bytes] | _Torn](batches)
        self.client = MessageEnd(c2s_send, s2c_receive)
        self.server = MessageEnd(s2c_send, c2s_receive, quiet=True)
        self._server_input = c2s_receive

    @property
    def output_closed(self) -> bool:
        return self.server.send_closed

    def close_server_input(self) -> None:
        self._server_input.close()

    def close_server_output(self) -> None:
        self.server.close_send()
