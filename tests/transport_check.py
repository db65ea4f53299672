"""``check_transport``: what every transport of the seam must do, checked the same way on each (as trio's
``testing/_check_streams.py`` checks any stream).

A transport under check is connected to an *echo peer* (:func:`serve_echo`): the far end echoes every message
it reads, as one batch per read, and obeys a few commands (a JSON object with ``cmd``). The peer runs over the
far end's own message stream, so the same peer serves a memory pipe (a task) and a process (``transport_peer.py``
over its stdio). Every wait is bounded.

What holds, whatever the framing (:mod:`contracts.transport`):

- messages arrive whole, in order, one per message, from 2 bytes to well over a read's size, both ways;
- a burst written at once can be taken in fewer reads than messages (a read hands over a list);
- a message over the reader's cap comes as an oversized error in its place, and the stream goes on;
- a message cut off by the end of the stream comes as ``truncated_at_eof``, then the end, for good;
- our end of stream reaches the peer; sending after it raises TransportClosed;
- a kill (the process) or an abort (no process) ends the stream at once; sending then raises TransportClosed;
- with a process handle: the peer's exit status, negative after a kill.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import orjson
import trio

from contracts.transport import MessageStream, ProcessHandle, Transport, TransportClosed
from contracts.wire import OVERSIZED_KINDS, Incoming, WireError, WireErrorKind

STEP_S = 20.0  # each step's bound (real time: the process peer is a real process)
BURST = 500


class PeerEnd(Protocol):
    """The far end of a connection, as the echo peer uses it."""

    async def send(self, messages: list[bytes], torn: bytes = b"") -> None: ...

    async def receive(self) -> list[Incoming]: ...

    async def send_eof(self) -> None: ...


async def serve_echo(end: PeerEnd, exit: Callable[[int], Awaitable[None]]) -> None:
    """Echo every message (a batch per read); at the end of input, end the output and exit 0. Commands:
    ``burst`` (``n`` messages in one write), ``big`` (a message of ``size`` bytes, then ``{"after": "big"}``),
    ``torn`` (the start of a message, ``text``, then the end and exit ``exit``). A framing error read is
    echoed as ``{"error": kind, "size": n}``."""
    while True:
        batch = await end.receive()
        if not batch:
            await end.send_eof()
            await exit(0)
            return
        out: list[bytes] = []
        for message in batch:
            if isinstance(message, WireError):
                out.append(orjson.dumps({"error": message.kind.value, "size": message.size}))
                continue
            command = orjson.loads(message) if message.startswith(b'{"cmd"') else {}
            match command.get("cmd"):
                case None:
                    out.append(message)
                case "burst":
                    out += [orjson.dumps({"n": i}) for i in range(command["n"])]
                case "big":
                    out += [b'{"pad":"' + b"x" * command["size"] + b'"}', b'{"after":"big"}']
                case "torn":
                    await end.send(out, command["text"].encode())
                    await end.send_eof()
                    await exit(command["exit"])
                    return
        await end.send(out)


Connect = Callable[[], AbstractAsyncContextManager[Transport]]


def command(cmd: str, **args: Any) -> bytes:
    return orjson.dumps({"cmd": cmd, **args})


async def take(stream: MessageStream, count: int) -> tuple[list[Incoming], list[int]]:
    """``count`` messages (bounded), and the size of each read that brought them."""
    got: list[Incoming] = []
    reads: list[int] = []
    with trio.fail_after(STEP_S):
        while len(got) < count:
            batch = await stream.receive()
            assert batch, f"the stream ended after {len(got)} of {count} messages"
            got += batch
            reads.append(len(batch))
    return got, reads


async def end_of(stream: MessageStream) -> list[Incoming]:
    """What comes before the end (bounded); the end stays the end."""
    got: list[Incoming] = []
    with trio.fail_after(STEP_S):
        while batch := await stream.receive():
            got += batch
        assert await stream.receive() == []
    return got


async def round_trip(transport: Transport) -> None:
    stream = transport.stream
    sizes = [0, 1, 100, 70_000, 300_000, 1_000_000]
    sent = [orjson.dumps({"i": i, "pad": "y" * size}) for i, size in enumerate(sizes)]
    sent.append(orjson.dumps({"text": "line\nbreak\u2028 \u00e9", "nul": "\u0000"}))  # escaped: still one message
    got: list[Incoming] = []

    async def write() -> None:
        for message in sent[:3]:
            await stream.send([message])
        await stream.send(sent[3:])  # several in one go

    with trio.fail_after(STEP_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(write)
            got, _ = await take(stream, len(sent))
    assert got == sent


async def burst_is_batched(transport: Transport) -> None:
    await transport.stream.send([command("burst", n=BURST)])
    got, reads = await take(transport.stream, BURST)
    assert got == [orjson.dumps({"n": i}) for i in range(BURST)]
    assert max(reads) > 1, f"{BURST} messages written at once came one per read"


async def oversized_is_reported_and_skipped(transport: Transport) -> None:
    stream = transport.stream
    stream.max_message = 1000
    await stream.send([command("big", size=5000)])
    got: list[Incoming] = []
    with trio.fail_after(STEP_S):
        while b'{"after":"big"}' not in got:
            batch = await stream.receive()
            assert batch, "the stream ended instead of going on after the oversized message"
            got += batch
    errors = [m for m in got if isinstance(m, WireError)]
    whole = [e for e in errors if not e.partial]
    assert len(whole) == 1 and whole[0].kind in OVERSIZED_KINDS and whole[0].size >= 5000, errors
    assert all(e.kind in OVERSIZED_KINDS and e.size > 1000 for e in errors), errors
    assert got[-1] == b'{"after":"big"}' and len(got) == len(errors) + 1


async def torn_then_end(transport: Transport) -> None:
    await transport.stream.send([command("torn", text='{"half":"cut', exit=3)])
    got = await end_of(transport.stream)
    assert [(m.kind, m.size) for m in got if isinstance(m, WireError)] == [(WireErrorKind.TRUNCATED_AT_EOF, 12)]
    assert len(got) == 1
    await exit_status(transport.process, 3)


async def our_end_reaches_the_peer(transport: Transport) -> None:
    stream = transport.stream
    await stream.send([b'{"last":true}'])
    with trio.fail_after(STEP_S):
        await stream.send_eof()
        await stream.send_eof()  # idempotent
    assert await end_of(stream) == [b'{"last":true}']
    try:
        await stream.send([b'{"too":"late"}'])
    except TransportClosed:
        pass
    else:
        raise AssertionError("a send after our end of stream did not raise TransportClosed")
    await exit_status(transport.process, 0)


async def kill_ends_at_once(transport: Transport) -> None:
    stream, process = transport.stream, transport.process
    await stream.send([b'{"before":"kill"}'])
    await take(stream, 1)
    if process is not None:
        process.kill()
        process.kill()  # idempotent
    else:
        stream.abort()
        stream.abort()
    assert await end_of(stream) == []
    if process is not None:
        with trio.fail_after(STEP_S):
            code = await process.wait_exit()
        assert code < 0 and process.exit_code == code
    try:
        await stream.send([b'{"after":"kill"}'])
    except TransportClosed:
        pass
    else:
        raise AssertionError("a send after the kill did not raise TransportClosed")


async def exit_status(process: ProcessHandle | None, code: int) -> None:
    if process is None:
        return
    with trio.fail_after(STEP_S):
        assert await process.wait_exit() == code
    assert process.exit_code == code
    assert isinstance(process.stderr_tail(), str)
    assert process.pid is None or process.pid > 0


STEPS: tuple[Callable[[Transport], Awaitable[None]], ...] = (
    round_trip,
    burst_is_batched,
    oversized_is_reported_and_skipped,
    torn_then_end,
    our_end_reaches_the_peer,
    kill_ends_at_once,
)


async def check_transport(connect: Connect) -> None:
    """Every step, each on a fresh connection from ``connect``."""
    for check in STEPS:
        async with connect() as transport:
            assert isinstance(transport, Transport) and isinstance(transport.stream, MessageStream)
            assert transport.process is None or isinstance(transport.process, ProcessHandle)
            try:
                await check(transport)
            except BaseException as exc:
                exc.add_note(f"check_transport step: {check.__name__}")
                raise


__all__ = ["AsyncIterator", "Connect", "check_transport", "serve_echo"]
