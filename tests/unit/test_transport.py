"""Every transport of the seam passes the same check (``tests/transport_check.py``): the stdio process
transport, the in-process fake's newline-framed memory pipe, the message-framed memory pipe (no newline on
its wire), and the scripted peer's memory transport of the client's tests."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio
import trio.testing
from support import paths
from transport_check import Connect, check_transport, serve_echo

from codex_client.errors import LineTooLong, MessageTooLarge
from codex_client.memory import memory_pair
from codex_client.process import spawn_process
from codex_client.session import SessionOptions, open_session
from contracts.checks import run_all
from contracts.checks import scenario as scenario_check
from contracts.record import SessionRecord
from contracts.scenario import Fault, Scenario, TurnScript
from contracts.transport import MessageStream, ProcessHandle, Transport, TransportClosed
from fake_server.catalogue import resolve
from fake_server.inprocess import LinePipe, Pipe, serve_in_process
from fake_server.message_pipe import MessageEnd, MessagePipe
from harness.runner import play

PEER = paths.TESTS / "transport_peer.py"


@dataclass
class Connection:
    """A transport made of a stream alone (no process: as a socket to a server someone else runs)."""

    stream: MessageStream
    process: ProcessHandle | None = None


@asynccontextmanager
async def process_transport() -> AsyncIterator[Transport]:
    async with spawn_process([sys.executable, str(PEER)], cwd=PEER.parent, reap_timeout=10.0) as transport:
        yield transport


def pipe_transport(make: type[LinePipe] | type[MessagePipe]) -> Connect:
    @asynccontextmanager
    async def connect() -> AsyncIterator[Transport]:
        pipe: Pipe = make()

        async def exit(code: int) -> None:  # the peer "process" ends: both ways closed on its side
            pipe.close_server_output()
            pipe.close_server_input()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_echo, pipe.server, exit)
            yield Connection(pipe.client)
            nursery.cancel_scope.cancel()

    return connect


@asynccontextmanager
async def scripted_memory_transport() -> AsyncIterator[Transport]:
    transport, peer = memory_pair()
    far = peer.stream()

    async def exit(code: int) -> None:
        peer.exit(code)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_echo, far, exit)
        yield transport
        transport.kill()
        nursery.cancel_scope.cancel()


async def test_the_stdio_process_transport() -> None:
    await check_transport(process_transport)


async def test_the_in_process_fakes_newline_framed_pipe() -> None:
    await check_transport(pipe_transport(LinePipe))


async def test_the_message_framed_pipe() -> None:
    await check_transport(pipe_transport(MessagePipe))


async def test_the_scripted_peers_memory_transport() -> None:
    await check_transport(scripted_memory_transport)


# --- the message-framed transport carries whole sessions -------------------------------------------------


@pytest.mark.parametrize("name", ["plain", "long_stream", "interrupt_ignored"])
def test_a_message_framed_session_is_judged_as_a_stdio_one(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The in-process fake and our client over the message pipe: every check passes, the wire is the stdio
    run's frame for frame, and no payload on it holds a newline (nothing relies on one)."""
    sent: list[bytes] = []
    real_send = MessageEnd.send

    async def spy(self: MessageEnd, messages: Sequence[bytes], torn: bytes = b"") -> None:
        sent.extend(messages)
        await real_send(self, messages, torn)

    monkeypatch.setattr(MessageEnd, "send", spy)
    scenario = resolve(name)
    records = {t: play(scenario, "fake", work_dir=tmp_path / t, transport=t) for t in ("stdio", "messages")}
    checks = run_all(records["messages"]) + scenario_check.check(records["messages"])
    assert checks and [c for c in checks if c.status == "fail"] == []
    assert {(c.contract, c.name, c.status) for c in checks} == {
        (c.contract, c.name, c.status) for c in run_all(records["stdio"]) + scenario_check.check(records["stdio"])
    }

    def frames(record: SessionRecord) -> list[tuple[str, object]]:
        return [(e.dir, e.frame) for e in record.wire if e.dir != "note"]

    assert frames(records["messages"]) == frames(records["stdio"])
    assert len(sent) >= len(frames(records["messages"])) > 0
    assert not any(b"\n" in payload for payload in sent)
    steps = [s.name for s in records["messages"].teardown]
    assert steps == ["close_connection", "wait_connection_eof", "wait_exit", "kill"]


# --- a transport with no process: the session ends the connection, never a process ---------------------


def _hung_at_start() -> Scenario:
    return Scenario("hung", "test", (TurnScript(faults=(Fault("hang", "start"),)),))


async def test_without_a_process_the_teardown_ends_the_connection(autojump_clock: trio.testing.MockClock) -> None:
    """A session over a stream alone (a socket to a server someone else runs): its end of stream, the
    server's, no exit to wait for, nothing to kill; the failure words say the connection closed."""
    pipe = MessagePipe()
    async with serve_in_process(resolve("plain"), pipe=pipe) as server:
        async with open_session(Connection(pipe.client), SessionOptions()) as session:
            await session.start_thread(cwd="/RUN/workdir")
            async with session.turn("hi") as turn:
                await turn.wait()
        assert turn.result is not None and turn.result.status == "completed"
        steps = {s.name: s.outcome for s in session.teardown}
        assert steps == {"close_connection": "done", "wait_connection_eof": "done", "kill": "skipped"}
        assert not session.killed and session.exit_code is None and session.stderr_tail() == ""
        assert ("note", "connection closed") in [(e.dir, e.note) for e in session.wire]
        assert await server.wait_exit() == 0  # the server saw our end and left on its own


async def test_without_a_process_a_kill_drops_the_connection(autojump_clock: trio.testing.MockClock) -> None:
    """A server that never answers the interrupt: the session gives up on the turn and drops the connection
    (there is no process to kill); the server itself is not ours to end."""
    pipe = MessagePipe()
    options = SessionOptions(interrupt_budget=1.0, teardown_timeout=4.0, turn_timeout=10.0)
    async with serve_in_process(_hung_at_start(), pipe=pipe) as server:
        async with open_session(Connection(pipe.client), options) as session:
            await session.start_thread(cwd="/RUN/workdir")
            async with session.turn("hi") as turn:
                await turn.wait()
        assert turn.result is not None and turn.result.killed
        assert session.killed and "wait_exit" not in [s.name for s in session.teardown]
        assert session.reader_done.is_set() and server.exit_code is None  # only the connection was dropped
        with pytest.raises(TransportClosed):
            await pipe.client.send([b"{}"])


async def test_a_message_over_the_cap_is_a_typed_error_of_the_message_framing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The message framing's MessageTooLarge (not the stdio LineTooLong): the session fails with it, the wire
    keeps the message's size under ``oversized_message``."""
    pipe = MessagePipe()
    big = Fault("oversized_line", "delta", 1, {"size": 5000})
    scenario = Scenario("big", "test", (TurnScript(faults=(big,)),))
    async with serve_in_process(scenario, pipe=pipe) as server:
        async with open_session(server, SessionOptions(max_line=3000)) as session:
            await session.start_thread(cwd="/RUN/workdir")
            async with session.turn("hi") as turn:
                await turn.wait()
    assert isinstance(session.failure, MessageTooLarge) and not isinstance(session.failure, LineTooLong)
    assert str(session.failure) == "server message of 5000 bytes exceeds the cap of 3000 bytes: a frame was lost"
    assert [(e.error, e.size) for e in session.wire if e.error] == [("oversized_message", 5000)]
    assert turn.result is not None and turn.result.killed and (turn.result.error or "").startswith("lost frame:")
