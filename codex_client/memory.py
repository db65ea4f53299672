"""An in-memory transport and the peer end that drives it: scripted servers for tests and benchmarks.

:func:`memory_pair` gives a :class:`MemoryTransport` (what the session talks to) and a
:class:`ScriptedPeer` (the server side: read the client's messages, write frames, raw bytes,
close stdout, exit). Deterministic under trio's MockClock.
"""

from __future__ import annotations

import contextlib
from typing import Any

import trio
import trio.testing

from codex_client.stderr import StderrTail
from contracts.messages import NOTSET, JsonId, Message, Notification
from contracts.transport import LineStream, NoProcess, TransportClosed
from contracts.wire import DEFAULT_MAX_LINE, LineDecoder, WireError, encode_frame


class MemoryTransport(NoProcess):
    """The client's end: stdin/stdout as one-way memory streams, newline-framed (``stream``), and a simulated
    process (``process``: itself); ``kill`` closes both and exits -9."""

    def __init__(
        self,
        to_server: trio.testing.MemorySendStream,
        from_server: trio.testing.MemoryReceiveStream,
        exited: trio.Event,
    ) -> None:
        self._to_server = to_server
        self._from_server = from_server
        self._exited = exited
        self._exit_code: int | None = None
        self._input_closed = False
        self.stderr = StderrTail()
        self.killed = False
        self.stream = LineStream(self.send, self.receive, self.close_input, abort=self._drop, report_overflow=True)

    @property
    def process(self) -> MemoryTransport:
        return self

    def _drop(self) -> None:
        self._input_closed = True
        self._to_server.close()
        self._from_server.close()

    async def send(self, data: bytes) -> None:
        if self._input_closed or self._exit_code is not None:
            raise TransportClosed("server stdin is closed")
        try:
            await self._to_server.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise TransportClosed(str(exc)) from exc

    async def receive(self, max_bytes: int = 65536) -> bytes:
        try:
            # trio's memory stream hands out a bytearray: the bytes this transport promises, as a pipe's read is
            return bytes(await self._from_server.receive_some(max_bytes))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return b""

    async def close_input(self) -> None:
        if not self._input_closed:
            self._input_closed = True
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await self._to_server.aclose()

    async def wait_exit(self) -> int:
        await self._exited.wait()
        assert self._exit_code is not None
        return self._exit_code

    def kill(self) -> None:
        self.killed = True
        self._input_closed = True
        self._to_server.close()
        self._from_server.close()
        self.set_exit(-9)

    def set_exit(self, code: int) -> None:
        if self._exit_code is None:
            self._exit_code = code
            self._exited.set()

    @property
    def exit_code(self) -> int | None:
        return self._exit_code

    def stderr_tail(self) -> str:
        return self.stderr.text()



class ScriptedPeer:
    """The server's end. Every wait is the caller's to bound (tests run under MockClock)."""

    def __init__(
        self,
        transport: MemoryTransport,
        from_client: trio.testing.MemoryReceiveStream,
        to_client: trio.testing.MemorySendStream,
    ) -> None:
        self.transport = transport
        self._from_client = from_client
        self._to_client = to_client
        self._decoder = LineDecoder(DEFAULT_MAX_LINE)
        self._pending: list[Message | WireError] = []
        self._next_request_id = 0
        self.received: list[Message] = []
        self.eof = False

    async def receive(self) -> Message | None:
        """The client's next message (wire errors skipped), or None at the client's EOF."""
        while True:
            while self._pending:
                item = self._pending.pop(0)
                if not isinstance(item, WireError):
                    self.received.append(item)
                    return item
            if self.eof:
                return None
            try:
                data = bytes(await self._from_client.receive_some(65536))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                self.eof = True
                self._pending.extend(self._decoder.feed_eof())
                continue
            self._pending.extend(self._decoder.feed(data))

    async def expect(self, method: str) -> Message:
        """Skip to the next message with ``method`` (a request or notification); fails at EOF."""
        while True:
            message = await self.receive()
            if message is None:
                raise AssertionError(f"client closed its output while {method} was expected")
            if getattr(message, "method", None) == method:
                return message

    async def send_raw(self, data: bytes) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self._to_client.send_all(data)

    async def send(self, frame: dict[str, Any]) -> None:
        await self.send_raw(encode_frame(frame))

    async def notify(self, method: str, params: Any = NOTSET, **extra: Any) -> None:
        await self.send(Notification.make(method, params, **extra).frame)

    async def respond(self, request_id: JsonId, result: Any) -> None:
        await self.send({"id": request_id, "result": result})

    async def respond_error(self, request_id: JsonId, code: int, message: str) -> None:
        await self.send({"error": {"code": code, "message": message}, "id": request_id})

    async def request(self, method: str, params: Any) -> int:
        request_id = self._next_request_id
        self._next_request_id += 1
        await self.send({"method": method, "id": request_id, "params": params})
        return request_id

    def stream(self) -> LineStream:
        """The server's end as a message stream (newline-framed, as the client's end): instead of the
        methods here, never both."""
        return LineStream(self._to_client.send_all, self._receive_from_client, self._to_client.aclose)

    async def _receive_from_client(self, max_bytes: int) -> bytes:
        return bytes(await self._from_client.receive_some(max_bytes))

    def close_output(self) -> None:
        """The server's stdout closes: the client's reader sees EOF."""
        self._to_client.close()

    def exit(self, code: int = 0) -> None:
        self.close_output()
        self.transport.set_exit(code)


def memory_pair() -> tuple[MemoryTransport, ScriptedPeer]:
    c2s_send, c2s_receive = trio.testing.memory_stream_one_way_pair()
    s2c_send, s2c_receive = trio.testing.memory_stream_one_way_pair()
    transport = MemoryTransport(c2s_send, s2c_receive, trio.Event())
    return transport, ScriptedPeer(transport, c2s_receive, s2c_send)
