"""The in-process fake app-server: a Transport over memory streams, deterministic under MockClock."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson
import pytest
import trio
import trio.testing

from contracts.messages import ErrorResponse, Notification, Request, Response
from contracts.scenario import Fault, MessageItem, ModelResponse, Scenario, TurnScript, Usage
from contracts.transport import Transport, TransportClosed
from contracts.wire import LineDecoder, WireError
from fake_server.inprocess import InProcessServer, serve_in_process

INIT = {"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}}


class Driver:
    def __init__(self, server: InProcessServer) -> None:
        self.server = server
        self.decoder = LineDecoder()
        self.seen: list[Any] = []

    async def send(self, frame: dict[str, Any]) -> None:
        await self.server.send(orjson.dumps(frame) + b"\n")

    async def until(self, predicate: Callable[[Any], bool]) -> Any:
        while True:
            data = await self.server.receive()
            if not data:
                return None
            for item in self.decoder.feed(data):
                self.seen.append(item)
                if predicate(item):
                    return item

    async def request(self, frame: dict[str, Any]) -> Any:
        await self.send(frame)
        return await self.until(lambda m: isinstance(m, Response | ErrorResponse) and m.id == frame["id"])

    async def handshake(self) -> str:
        await self.request(INIT)
        response = await self.request({"id": 1, "method": "thread/start", "params": {}})
        return response.result["thread"]["id"]


def method_is(name: str) -> Callable[[Any], bool]:
    return lambda m: isinstance(m, Notification | Request) and m.method == name


def scenario(*turns: TurnScript) -> Scenario:
    return Scenario("t", "test", turns or (TurnScript(),))


async def test_in_process_server_is_a_transport() -> None:
    async with serve_in_process(scenario()) as server:
        assert isinstance(server, Transport)
        assert server.pid is None


async def test_plain_turn_in_process() -> None:
    async with serve_in_process(scenario()) as server:
        d = Driver(server)
        thread_id = await d.handshake()
        await d.send({"id": 2, "method": "turn/start", "params": {"threadId": thread_id, "input": []}})
        done = await d.until(method_is("turn/completed"))
        assert done.params["turn"]["status"] == "completed"
        await server.close_input()
        with trio.fail_after(1):
            assert await server.wait_exit() == 0
        assert await server.receive() == b""


async def test_scripted_30s_delay_costs_no_wall_time(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    slow = MessageItem("slow", ("sl", "ow"), delay_ms=15_000)
    async with serve_in_process(scenario(TurnScript(responses=(ModelResponse((slow,), Usage(1, 0, 1)),)))) as server:
        d = Driver(server)
        thread_id = await d.handshake()
        start = trio.current_time()
        await d.send({"id": 2, "method": "turn/start", "params": {"threadId": thread_id, "input": []}})
        await d.until(method_is("turn/completed"))
        assert trio.current_time() - start == pytest.approx(30.0)


async def test_a_30s_delayed_completion_costs_no_wall_time(mock_clock: trio.testing.MockClock) -> None:
    """The ``delayed_completion`` fault at 30 s (the built-in scenario uses 3 s, for real processes)."""
    mock_clock.autojump_threshold = 0
    delayed = Fault("delayed_completion", "end", 1, {"delay_ms": 30_000})
    wall = time.perf_counter()
    async with serve_in_process(scenario(TurnScript(faults=(delayed,)))) as server:
        d = Driver(server)
        thread_id = await d.handshake()
        await d.send({"id": 2, "method": "turn/start", "params": {"threadId": thread_id, "input": []}})
        await d.until(method_is("item/completed"))
        last_item = trio.current_time()
        done = await d.until(method_is("turn/completed"))
        assert done.params["turn"]["status"] == "completed"
        assert trio.current_time() - last_item == pytest.approx(30.0)
    assert time.perf_counter() - wall < 10.0  # virtual: no 30 s of real waiting


async def test_crash_reports_exit_code_and_closes_stream(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    crash = Fault("crash", "delta", 1, {"exit_code": 7, "mid_line": True})
    async with serve_in_process(scenario(TurnScript(faults=(crash,)))) as server:
        d = Driver(server)
        thread_id = await d.handshake()
        await d.send({"id": 2, "method": "turn/start", "params": {"threadId": thread_id, "input": []}})
        assert await d.until(method_is("turn/completed")) is None
        assert await server.wait_exit() == 7
        assert any(isinstance(x, WireError) for x in d.decoder.feed_eof())
        with pytest.raises(TransportClosed):
            await server.send(b"{}\n")


async def test_kill_ends_a_hung_server_with_minus_nine(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    async with serve_in_process(scenario(TurnScript(faults=(Fault("hang", "start"),)))) as server:
        d = Driver(server)
        thread_id = await d.handshake()
        await d.send({"id": 2, "method": "turn/start", "params": {"threadId": thread_id, "input": []}})
        with trio.move_on_after(60):
            await d.until(method_is("turn/completed"))
        await server.close_input()
        with trio.move_on_after(5):
            await server.wait_exit()
        assert server.exit_code is None  # alive but silent, even after stdin EOF
        server.kill()
        assert await server.wait_exit() == -9
        assert await server.receive() == b""


async def test_stdout_closed_keeps_reading(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    async with serve_in_process(scenario(TurnScript(faults=(Fault("stdout_closed", "start"),)))) as server:
        d = Driver(server)
        thread_id = await d.handshake()
        await d.send({"id": 2, "method": "turn/start", "params": {"threadId": thread_id, "input": []}})
        assert await d.until(method_is("turn/completed")) is None  # EOF on stdout
        assert server.exit_code is None
        await d.send({"id": 3, "method": "thread/loaded/list", "params": {}})  # stdin still open
        await server.close_input()
        assert await server.wait_exit() == 0


async def test_stderr_is_captured_and_bounded(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    flood = Fault("stderr_flood", "start", 1, {"bytes": 1024 * 1024})
    async with serve_in_process(scenario(TurnScript(faults=(flood,)))) as server:
        d = Driver(server)
        thread_id = await d.handshake()
        await d.send({"id": 2, "method": "turn/start", "params": {"threadId": thread_id, "input": []}})
        await d.until(method_is("turn/completed"))
        tail = server.stderr_tail()
        assert 32 * 1024 < len(tail) <= 64 * 1024
        assert "flood" in tail


async def test_grandchild_keeps_stdout_open_after_exit_until_hold_or_kill(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    hold = Fault("grandchild_holds_stdout", "start", 1, {"hold_ms": 5000})
    async with serve_in_process(scenario(TurnScript(faults=(hold,)))) as server:
        d = Driver(server)
        thread_id = await d.handshake()
        await d.send({"id": 2, "method": "turn/start", "params": {"threadId": thread_id, "input": []}})
        await d.until(method_is("turn/completed"))
        await server.close_input()
        assert await server.wait_exit() == 0
        start = trio.current_time()
        assert await server.receive() == b""  # EOF only once the "grandchild" lets go
        assert trio.current_time() - start == pytest.approx(5.0)
    async with serve_in_process(scenario(TurnScript(faults=(hold,)))) as server:
        d = Driver(server)
        thread_id = await d.handshake()
        await d.send({"id": 2, "method": "turn/start", "params": {"threadId": thread_id, "input": []}})
        await d.until(method_is("turn/completed"))
        await server.close_input()
        assert await server.wait_exit() == 0
        server.kill()  # the group kill takes the grandchild down: EOF at once
        start = trio.current_time()
        assert await server.receive() == b""
        assert trio.current_time() == start


async def test_invalid_input_and_send_after_exit() -> None:
    async with serve_in_process(scenario()) as server:
        await server.send(b"garbage\n")
        await server.send(b'{"id":0,"method":"initialize","params":{"clientInfo":{"name":"t","version":"1"}}}\n')
        d = Driver(server)
        first = await d.until(lambda m: True)
        assert isinstance(first, Response) and first.id == 0
        assert "Failed to deserialize" in server.stderr_tail()
        await server.close_input()
        await server.close_input()  # idempotent
        with trio.fail_after(5):
            assert await server.wait_exit() == 0
        with pytest.raises(TransportClosed):
            await server.send(b"{}\n")
        server.kill()  # after exit: no effect, no error
        assert server.exit_code == 0


async def test_a_huge_chunk_is_handed_out_in_linear_time() -> None:
    """A 40 MiB line (``oversized_line``) read through ``receive(max_bytes)``: the same bytes in
    ``max_bytes`` pieces, each piece copied once (re-slicing the rest on every call took ~20 s)."""
    server = InProcessServer(scenario())
    payload = bytes(range(11, 256)) * (40 * 4096)  # ~40 MiB, no newline in it: one line
    line = payload + b"\n"
    await server.write([payload])
    await server.write([b"tail"])
    await server.close_stdout()
    pieces = []
    started = time.perf_counter()
    with trio.fail_after(60):
        while data := await server.receive(65536):
            pieces.append(data)
    elapsed = time.perf_counter() - started
    assert b"".join(pieces) == line + b"tail\n"
    assert max(len(p) for p in pieces) == 65536
    assert pieces[-1] == b"tail\n"  # a small chunk is handed out whole
    assert elapsed < 5.0, f"{elapsed:.1f} s to hand out 40 MiB"  # linear: well under a second
