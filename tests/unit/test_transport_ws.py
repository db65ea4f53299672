"""The websocket transports pass the seam's check (``tests/transport_check.py``) before anything else: wsproto
over the in-process bounded byte stream (upgraded as a ``ws://`` and as a ``unix://`` listener), and over real
loopback TCP and unix sockets with the fake's own upgrade. Then whole sessions over them are judged as stdio
sessions are, frame for frame."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
import trio
import trio.testing
from transport_check import Connect, check_transport, serve_echo

from contracts.checks import run_all
from contracts.checks import scenario as scenario_check
from contracts.record import SessionRecord
from contracts.transport import MessageStream, ProcessHandle, Transport
from contracts.websocket import WsStream, client_handshake
from fake_server.catalogue import resolve
from fake_server.runtime import default_clock_ms
from fake_server.ws_auth import Policy
from fake_server.ws_pipe import WsPipe
from fake_server.ws_serve import upgrade
from harness.runner import play


@dataclass
class Connection:
    stream: MessageStream
    process: ProcessHandle | None = None


def ws_pipe_transport(unix: bool) -> Connect:
    @asynccontextmanager
    async def connect() -> AsyncIterator[Transport]:
        pipe = WsPipe(unix=unix)

        async def exit(code: int) -> None:
            pipe.close_server_output()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_echo, pipe.server, exit)
            await pipe.connect()
            yield Connection(pipe.client)
            nursery.cancel_scope.cancel()

    return connect


def socket_transport(kind: str, tmp: Path) -> Connect:
    """The fake's upgrade on an accepted loopback socket, the echo peer behind it, our client's upgrade in front."""

    @asynccontextmanager
    async def connect() -> AsyncIterator[Transport]:
        async with trio.open_nursery() as nursery:
            if kind == "tcp":
                listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
            else:
                sock = trio.socket.socket(trio.socket.AF_UNIX)
                path = Path(tempfile.mkdtemp(prefix="ws-", dir="/tmp")) / "s.sock"  # a socket address is short
                await sock.bind(str(path))
                sock.listen(4)
                listeners = [trio.SocketListener(sock)]

            async def handle(stream: trio.abc.Stream) -> None:
                ws = await upgrade(stream, unix=kind == "unix", policy=Policy(), clock_ms=default_clock_ms())
                assert ws is not None

                async def exit(code: int) -> None:
                    await ws.close_raw()

                await serve_echo(ws, exit)

            nursery.start_soon(trio.serve_listeners, handle, listeners)
            if kind == "tcp":
                port = listeners[0].socket.getsockname()[1]
                stream: trio.abc.Stream = await trio.open_tcp_stream("127.0.0.1", port)
            else:
                stream = await trio.open_unix_socket(str(path))
            ws = await client_handshake(stream)
            yield Connection(ws)
            ws.abort()
            nursery.cancel_scope.cancel()

    return connect


async def test_the_in_process_websocket(autojump_clock: trio.testing.MockClock) -> None:
    await check_transport(ws_pipe_transport(unix=False))


async def test_the_in_process_unix_flavoured_websocket(autojump_clock: trio.testing.MockClock) -> None:
    await check_transport(ws_pipe_transport(unix=True))


async def test_a_websocket_on_a_loopback_tcp_socket(tmp_path: Path) -> None:
    await check_transport(socket_transport("tcp", tmp_path))


async def test_a_websocket_on_a_unix_socket(tmp_path: Path) -> None:
    await check_transport(socket_transport("unix", tmp_path))


async def test_fragments_reassemble_and_pings_are_answered_twice(autojump_clock: trio.testing.MockClock) -> None:
    """A message split across frames is one message to the reader; a ping gets 0.171.0's two pongs."""
    pipe = WsPipe()
    async with trio.open_nursery() as nursery:

        async def echo() -> None:
            await serve_echo(pipe.server, lambda code: trio.lowlevel.checkpoint())

        nursery.start_soon(echo)
        client = await pipe.connect()
        client.frame_size = 7
        await client.send([b'{"split":"across many frames"}'])
        with trio.fail_after(5):
            assert await client.receive() == [b'{"split":"across many frames"}']
        server_ws = await pipe.server_ws()
        assert server_ws is not None and server_ws.stats.fragments == [5]
        await client.ping(b"p")
        await client.send([b'{"after":"ping"}'])
        with trio.fail_after(5):
            assert await client.receive() == [b'{"after":"ping"}']
        assert client.stats.pongs_received == 2
        nursery.cancel_scope.cancel()


async def test_a_binary_message_is_its_typed_error(autojump_clock: trio.testing.MockClock) -> None:
    from wsproto.events import BytesMessage

    pipe = WsPipe()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pipe.server_ws)
        client = await pipe.connect()
        server_ws = await pipe.server_ws()
        assert isinstance(server_ws, WsStream)
        await server_ws._write(server_ws._conn.send(BytesMessage(data=b'{"id":1}')))
        with trio.fail_after(5):
            got = await client.receive()
        assert [(e.kind.value, e.size) for e in got] == [("binary_frame", 8)]  # type: ignore[union-attr]
        nursery.cancel_scope.cancel()


# --- whole sessions ----------------------------------------------------------------------------------


def _frames(record: SessionRecord) -> list[tuple[str, object]]:
    return [(e.dir, e.frame) for e in record.wire if e.dir != "note"]


@pytest.mark.parametrize("transport", ["ws", "unix"])
@pytest.mark.parametrize("name", ["plain", "long_stream", "interrupt_ignored", "command_approval"])
def test_a_websocket_session_is_judged_as_a_stdio_one(name: str, transport: str, tmp_path: Path) -> None:
    """The in-process fake and our client over a websocket: every check as on stdio, the same frames, and the
    connection's teardown steps."""
    scenario = resolve(name)
    records = {t: play(scenario, "fake", work_dir=tmp_path / t, transport=t) for t in ("stdio", transport)}
    checks = run_all(records[transport]) + scenario_check.check(records[transport])
    assert checks and [c for c in checks if c.status == "fail"] == []
    assert {(c.contract, c.name, c.status) for c in checks} == {
        (c.contract, c.name, c.status) for c in run_all(records["stdio"]) + scenario_check.check(records["stdio"])
    }
    assert _frames(records[transport]) == _frames(records["stdio"])
    assert records[transport].meta["transport"] == transport
    steps = [s.name for s in records[transport].teardown]
    assert steps == ["close_connection", "wait_connection_eof", "wait_exit", "kill"]


WS_SCENARIOS = ["ws_close_mid_turn", "ws_close_frame_mid_turn", "ws_fragment", "ws_refuse_upgrade", "ws_ping_silent"]


@pytest.mark.parametrize("transport", ["ws", "unix"])
@pytest.mark.parametrize("name", [*WS_SCENARIOS, "slow_reader"])
def test_the_websocket_fault_scenarios_judge_our_client(name: str, transport: str, tmp_path: Path) -> None:
    """Each websocket fault struck, and our client met it as the scenario's [expect] says (no check fails)."""
    record = play(resolve(name), "fake", work_dir=tmp_path, transport=transport)
    checks = run_all(record) + scenario_check.check(record)
    assert [c for c in checks if c.status == "fail"] == []
    assert record.meta["faults_struck"], "the fault never struck"
    if name == "ws_refuse_upgrade":
        assert "HTTP 503" in record.meta["connect_failure"]


@pytest.mark.parametrize("name", ["ws_close_frame_mid_turn", "ws_refuse_upgrade", "ws_fragment"])
def test_the_websocket_faults_act_on_fake_codex_too(name: str, tmp_path: Path) -> None:
    record = play(resolve(name), "fake-process", work_dir=tmp_path, transport="ws")
    checks = run_all(record) + scenario_check.check(record)
    assert [c for c in checks if c.status == "fail"] == []
    assert record.meta["faults_struck"]


def test_a_websocket_scenario_over_stdio_is_skipped_saying_why(tmp_path: Path) -> None:
    from harness.runner import run_one

    run = run_one(resolve("ws_fragment"), "fake", work_root=tmp_path)
    assert run.skipped == "fault ws_fragment acts on a websocket: run it with --transport ws or unix"


async def test_fake_codex_records_each_websocket_connection_on_its_own(tmp_path: Path) -> None:
    """An outside client that starts ``fake-codex app-server --listen ws://…`` (as it would ``$CODEX_BIN``) and
    connects twice: two recordings, one per connection, each the whole session as on stdio."""
    from codex_client.process import spawn_process
    from codex_client.session import SessionOptions, open_session
    from codex_client.sockets import Listener, SocketTransport, connect_ws, wait_for_port
    from harness.targets.fake import fake_codex_argv

    record = tmp_path / "rec"
    argv = [*fake_codex_argv(), "app-server", "--listen", "ws://127.0.0.1:0", "--record", str(record)]
    with trio.fail_after(60):
        async with spawn_process(argv, cwd=tmp_path) as process:
            _, port = await wait_for_port(process)
            for _ in range(2):
                ws = await connect_ws("127.0.0.1", port)
                async with open_session(SocketTransport(ws, None), SessionOptions()) as session:
                    await session.start_thread(cwd=str(tmp_path))
                    async with session.turn("hi") as turn:
                        await turn.wait()
                    assert turn.result is not None and turn.result.status == "completed"
            Listener(process).stop_after_close()
            assert await process.wait_exit() == 0
    folders = sorted(p.name for p in record.iterdir() if not p.name.startswith("."))
    assert len(folders) == 2 and [f.split("-")[0] for f in folders] == ["1", "2"]
    for folder in folders:
        wire = [orjson.loads(line) for line in (record / folder / "wire.jsonl").read_bytes().splitlines()]
        methods = [e["msg"].get("method") for e in wire if e["dir"] == "c2s"]
        assert methods[:3] == ["initialize", "initialized", "thread/start"] and "turn/start" in methods
        assert (record / folder / "end.json").exists()


async def test_keepalive_pings_a_silent_server_and_gives_up_without_a_pong(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Our client pings after its keepalive of silence; a server that answers (0.171.0 does, twice) keeps the
    connection, one that does not is gone a pong timeout later."""
    for answers in (True, False):
        pipe = WsPipe()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pipe.server_ws)
            client = await pipe.connect()
            client.keepalive, client.pong_timeout = 5.0, 5.0
            server_ws = await pipe.server_ws()
            assert server_ws is not None
            server_ws.answer_pings = answers

            async def pump(ws: WsStream) -> None:
                while await ws.receive():
                    pass

            nursery.start_soon(pump, server_ws)
            start = trio.current_time()
            with trio.move_on_after(30):
                got = await client.receive()
            if answers:
                assert trio.current_time() - start == pytest.approx(30) and client.dead is None
                assert client.stats.pongs_received >= 2
            else:
                assert got == [] and trio.current_time() - start == pytest.approx(10)
                assert client.dead == "no pong within 5 s of a ping (after 5 s of silence)"
            nursery.cancel_scope.cancel()


async def test_the_keepalive_does_not_ping_a_connection_it_is_closing(autojump_clock: trio.testing.MockClock) -> None:
    """Our client sent its close frame and reads on until the server's: a keepalive falling due meanwhile must
    not ping (wsproto refuses a ping once the close is sent; it escaped the client as an error)."""
    pipe = WsPipe()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pipe.server_ws)
        client = await pipe.connect()
        client.keepalive = 5.0
        server_ws = await pipe.server_ws()
        assert server_ws is not None
        server_ws.close_reply = False  # the server never answers the close frame
        await client.send_eof()
        with trio.move_on_after(30):
            assert await client.receive() == []
        nursery.cancel_scope.cancel()


def _tiny_frames(frames: int) -> bytes:
    """One text message as ``frames`` masked frames of two bytes (a zero mask: the payload as it is)."""
    first = b"\x01\x82\x00\x00\x00\x00" + b'["'
    rest = (b"\x00\x82\x00\x00\x00\x00" + b"aa") * (frames - 2)
    return first + rest + b"\x80\x82\x00\x00\x00\x00" + b'"]'


async def test_a_message_of_tiny_fragments_is_dropped_at_the_frame_cap() -> None:
    """200,000 two-byte frames were kept one bytes object each (the probe's 3,000,000: 33 -> 199 MiB, 137 s of
    CPU) and the message delivered; past MAX_MESSAGE_FRAMES the server drops the connection, as past its byte
    caps, and holds the message in one buffer until then."""
    from contracts.websocket import MAX_MESSAGE_FRAMES

    async with trio.open_nursery() as nursery:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        got: list[object] = []
        done = trio.Event()

        async def handle(stream: trio.abc.Stream) -> None:
            ws = await upgrade(stream, unix=False, policy=Policy(), clock_ms=default_clock_ms())
            assert ws is not None
            try:
                while batch := await ws.receive():
                    got.extend(batch)
            finally:
                got.append(ws.dead)
                done.set()

        nursery.start_soon(trio.serve_listeners, handle, listeners)
        stream = await trio.open_tcp_stream("127.0.0.1", listeners[0].socket.getsockname()[1])
        client = await client_handshake(stream)
        started = trio.current_time()
        try:
            await client._stream.send_all(_tiny_frames(200_000))
        except trio.BrokenResourceError:
            pass  # dropped under the write: what is wanted
        with trio.fail_after(60):
            await done.wait()
        assert got and got[-1] is not None and f"more than {MAX_MESSAGE_FRAMES} frames" in str(got[-1]), got[-3:]
        assert not any(isinstance(g, bytes) and len(g) > 100_000 for g in got)
        assert trio.current_time() - started < 30
        client.abort()
        nursery.cancel_scope.cancel()


async def test_idle_connections_never_starve_a_health_check_or_a_new_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """256 idle websocket connections held every slot: a 257th client's /readyz got no answer. A health check
    is read and answered at once now, and a new session takes the place of the longest idle one."""
    from fake_server import ws_serve
    from fake_server.ws_http import Listen

    monkeypatch.setattr(ws_serve, "MAX_CONNECTIONS", 8)
    monkeypatch.setattr(ws_serve, "MAX_PENDING", 8, raising=False)
    monkeypatch.setattr(ws_serve, "IDLE_DROP_S", 0.5, raising=False)

    async def session(ws: WsStream, n: int) -> None:
        while await ws.receive():
            pass

    async with trio.open_nursery() as nursery:
        port = await nursery.start(
            ws_serve.serve_listener, Listen("ws", "127.0.0.1", 0), Policy(), session, default_clock_ms()
        )
        held = [await client_handshake(await trio.open_tcp_stream("127.0.0.1", port)) for _ in range(8)]
        silent = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(8)]  # no request head ever
        await trio.sleep(0.6)
        with trio.fail_after(5):
            probe = await trio.open_tcp_stream("127.0.0.1", port)
            await probe.send_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (await probe.receive_some(4096)).startswith(b"HTTP/1.1 200")
            newcomer = await client_handshake(await trio.open_tcp_stream("127.0.0.1", port))
            await newcomer.send([b'{"id":1,"method":"initialize"}'])
        for ws in [*held, newcomer]:
            ws.abort()
        for stream in silent:
            await stream.aclose()
        nursery.cancel_scope.cancel()
