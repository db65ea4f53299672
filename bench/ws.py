"""Our client over a websocket: interrupt overhead and ingest, each against a bare websocket loop on the same server.

Usage: ``python bench/ws.py [--samples N] [--deltas N] [--quick] [--json PATH]``

Servers: the *hold server* of this file (``serve``: the script of ``bench/_flood.py`` answered over
``ws://127.0.0.1:0``, one text frame per message, with the fake's own upgrade and frames), and ``fake-codex
app-server --listen ws://127.0.0.1:0``. Our client connects as ``run --transport ws`` does
(``codex_client.sockets``); the baseline of each row is a bare loop by hand on the same kind of server:
wsproto frames through :class:`contracts.websocket.WsStream`, ``orjson.loads`` of each message.

- **interrupt overhead** (as ``bench/interrupt.py``): per interrupted turn, (cancel -> Result) minus (wire
  interrupt sent -> turn/completed read). Target: p99 <= 1 ms, on the hold server and on the fake.
- **ingest**: one flooded turn of N deltas, notifications/s through the whole client with validation on, as a
  ratio to the bare loop reading the same turn. Target: >= 0.3x.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import orjson
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _flood
from _common import Deadline, Row, arg_parser, fake_codex_argv, finish, percentile

BENCH = "ws"
TARGET_P99_MS = 1.0
TARGET_RATIO = 0.3


# --- the hold server over a websocket ---------------------------------------------------------------


async def _serve(script_path: str) -> None:
    from fake_server.runtime import default_clock_ms
    from fake_server.ws_auth import Policy
    from fake_server.ws_serve import upgrade

    data = orjson.loads(Path(script_path).read_bytes())
    replies = {
        m: (r["result"], [line for chunk in r["after"] for line in chunk.encode().split(b"\n") if line])
        for m, r in data["replies"].items()
    }
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    os.write(2, f"bench hold server\n  listening on: ws://127.0.0.1:{port}\n".encode())

    async def handle(stream: trio.abc.Stream) -> None:
        ws = await upgrade(stream, unix=False, policy=Policy(), clock_ms=default_clock_ms())
        if ws is None:
            return
        turns = 0
        while batch := await ws.receive():
            out: list[bytes] = []
            for message in batch:
                if not isinstance(message, bytes):
                    continue
                frame = orjson.loads(message)
                if "id" not in frame or "method" not in frame:
                    continue
                if frame["method"] == "turn/start":
                    turns += 1
                result, after = replies.get(frame["method"], ({}, []))
                out.append(orjson.dumps({"id": frame["id"], "result": result}))
                lines = after
                if turns > 1:
                    lines = [line.replace(_flood._TURN_ID_BYTES, _flood._nth_turn_id(turns)) for line in lines]
                out += lines
            if out:
                await ws.send(out)
        await ws.close_raw()

    await trio.serve_listeners(handle, listeners)


def hold_argv(script_path: Path) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "serve", str(script_path)]


# --- connecting -------------------------------------------------------------------------------------


class Server:
    """A listening server we started, and how to reach it."""

    def __init__(self, process: Any, port: int) -> None:
        self.process = process
        self.port = port


async def open_server(argv: list[str], stack: AsyncExitStack) -> Server:
    from codex_client.process import spawn_process
    from codex_client.sockets import wait_for_port

    process = await stack.enter_async_context(spawn_process(argv, cwd=os.getcwd()))
    _, port = await wait_for_port(process, timeout=20.0)
    return Server(process, port)


class Bare:
    """The baseline: a websocket by hand, ``orjson.loads`` of every message."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.next_id = 0
        self.pending: list[dict[str, Any]] = []

    async def request(self, method: str, params: dict[str, Any]) -> int:
        rid = self.next_id
        self.next_id += 1
        await self.ws.send([orjson.dumps({"id": rid, "method": method, "params": params})])
        return rid

    async def read(self) -> list[dict[str, Any]]:
        batch = await self.ws.receive()
        if not batch:
            raise EOFError("the server closed the connection")
        return [orjson.loads(m) for m in batch if isinstance(m, bytes)]

    async def answer(self, rid: int) -> dict[str, Any]:
        while True:
            for i, frame in enumerate(self.pending):
                if frame.get("id") == rid and "method" not in frame:
                    del self.pending[i]
                    return frame
            self.pending += await self.read()

    async def handshake(self) -> str:
        rid = await self.request("initialize", {"clientInfo": {"name": "bench", "title": "bench", "version": "0"}})
        await self.answer(rid)
        await self.ws.send([b'{"method":"initialized"}'])
        reply = await self.answer(await self.request("thread/start", {"cwd": os.getcwd()}))
        return str(reply["result"]["thread"]["id"])

    async def until(self, method: str) -> tuple[int, str]:
        """Frames read until the first ``method`` (counted), and the turn id seen."""
        count, turn_id = 0, ""
        while True:
            frames, self.pending = self.pending or await self.read(), []
            for i, frame in enumerate(frames):
                count += 1
                name = frame.get("method")
                if name == "turn/started":
                    turn_id = frame["params"]["turn"]["id"]
                if name == method:
                    self.pending = frames[i + 1 :]
                    return count, turn_id or frame.get("params", {}).get("turnId", "")


async def bare_interrupts(port: int, samples: int) -> list[float]:
    from codex_client.sockets import connect_ws

    bare = Bare(await connect_ws("127.0.0.1", port))
    thread_id = await bare.handshake()
    out = []
    for _ in range(samples):
        bare.pending.clear()
        await bare.request("turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": "x"}]})
        _, turn_id = await bare.until("item/agentMessage/delta")
        t0 = time.perf_counter()
        await bare.request("turn/interrupt", {"threadId": thread_id, "turnId": turn_id})
        await bare.until("turn/completed")
        out.append((time.perf_counter() - t0) * 1000)
    await bare.ws.aclose()
    return out


async def client_session(server: Server, validate: bool) -> Any:
    from codex_client.session import SessionOptions, open_session
    from codex_client.sockets import Listener, SocketTransport, connect_ws, keepalive

    ws = keepalive(await connect_ws("127.0.0.1", server.port))
    options = SessionOptions(
        request_timeout=30.0, inactivity_timeout=None, event_buffer=1 << 24, validate_frames=validate
    )
    return open_session(SocketTransport(ws, Listener(server.process)), options)


async def client_interrupts(server: Server, samples: int) -> list[tuple[float, float]]:
    from codex_client.events import MessageDelta

    out: list[tuple[float, float]] = []
    async with await client_session(server, validate=True) as session:
        await session.start_thread(cwd=os.getcwd())
        for _ in range(samples):
            t_cancel = 0.0
            async with session.turn("stream slowly") as turn:
                async for event in turn:
                    if isinstance(event, MessageDelta):
                        t_cancel = trio.current_time()
                        turn.cancel()
                        break
            result = await turn.wait()
            t_result = trio.current_time()
            if result.status != "aborted" or result.interrupt_sent_at is None or result.turn_completed_at is None:
                raise AssertionError(f"not an interrupted turn: {result.status} {result.error}")
            out.append(((t_result - t_cancel) * 1000, (result.turn_completed_at - result.interrupt_sent_at) * 1000))
    return out


async def bare_flood(port: int) -> tuple[int, float]:
    from codex_client.sockets import connect_ws

    bare = Bare(await connect_ws("127.0.0.1", port))
    thread_id = await bare.handshake()
    t0 = time.perf_counter()
    await bare.request("turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": "flood"}]})
    count, _ = await bare.until("turn/completed")
    seconds = time.perf_counter() - t0
    await bare.ws.aclose()
    return count, seconds


async def client_flood(server: Server) -> tuple[int, float]:
    from _client_adapter import _flood_turn

    async with await client_session(server, validate=True) as session:
        count, seconds, _cpu = await _flood_turn(session, per_event=False)
    return count, seconds


def pairs_of(a: list[float], b: list[float]) -> list[tuple[float, float]]:
    return list(zip(a, b, strict=True))


def interrupt_rows(label: str, bare: list[float], pairs: list[tuple[float, float]]) -> list[Row]:
    overhead = [c - s for c, s in pairs]
    p99 = percentile(overhead, 99)
    return [
        Row(BENCH, f"{label} bare ws interrupt->completed p99", percentile(bare, 99), "ms"),
        Row(BENCH, f"{label} client cancel->Result p99", percentile([c for c, _ in pairs], 99), "ms"),
        Row(BENCH, f"{label} overhead p50", percentile(overhead, 50), "ms"),
        Row(
            BENCH,
            f"{label} overhead p99",
            p99,
            "ms",
            f"{label} bare ws interrupt->completed p99",
            p99 / max(percentile(bare, 99), 1e-9),
            target=f"<= {TARGET_P99_MS} ms",
            ok=p99 <= TARGET_P99_MS,
            note=f"{len(pairs)} samples over ws; overhead = (cancel->Result) - (wire interrupt->turn/completed)",
        ),
    ]


async def main_async(samples: int, deltas: int, repeat: int, deadline: Deadline) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-ws-") as tmp:
        interrupt_script = Path(tmp) / "interrupt.json"
        _flood.write_script(_flood.synthetic_interrupt_script(), interrupt_script)
        flood_script = Path(tmp) / "flood.json"
        _flood.write_script(_flood.synthetic_script(deltas), flood_script)
        if True:
            servers: list[tuple[str, list[str]]] = [("hold", hold_argv(interrupt_script))]
            fake = fake_codex_argv()
            if fake is not None:
                from interrupt import slow_scenario

                scenario = slow_scenario(samples, Path(tmp))
                servers.append(("fake", [*fake, "app-server", "--scenario", str(scenario), "--listen", "ws://127.0.0.1:0"]))
            for label, argv in servers:
                # two servers: the bare loop's session and the client's (each plays its own turns)
                async with AsyncExitStack() as stack:
                    s1 = await open_server(argv, stack)
                    s2 = await open_server(argv, stack)
                    with trio.fail_after(min(60.0, deadline.left)):
                        bare = await bare_interrupts(s1.port, samples)
                        pairs = await client_interrupts(s2, samples)
                    rows += interrupt_rows(label, bare, pairs)
            bare_rates, client_rates = [], []
            for _ in range(repeat):  # interleaved rounds, the best of each counts (a loaded machine)
                async with AsyncExitStack() as stack:
                    s1 = await open_server(hold_argv(flood_script), stack)
                    count, seconds = await bare_flood(s1.port)
                    bare_rates.append(count / seconds)
                    count, seconds = await client_flood(s1)
                    client_rates.append(count / seconds)
            best_bare, best_client = max(bare_rates), max(client_rates)
            rows += [
                Row(BENCH, "hold ws bare read loop", best_bare, "notif/s", note=f"{deltas} deltas, best of {repeat}"),
                Row(
                    BENCH,
                    "hold ws client validate on",
                    best_client,
                    "notif/s",
                    "hold ws bare read loop",
                    best_client / best_bare,
                    target=f">= {TARGET_RATIO}x bare",
                    ok=best_client / best_bare >= TARGET_RATIO,
                    note=f"median ratio {statistics.median(c / b for c, b in pairs_of(client_rates, bare_rates)):.2f}",
                ),
            ]
    return rows


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 2 and sys.argv[1] == "serve":
        trio.run(_serve, sys.argv[2])
        return 0
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100, help="interrupted turns per server")
    parser.add_argument("--deltas", type=int, default=20000, help="deltas of the flooded turn")
    parser.add_argument("--repeat", type=int, default=3, help="flood rounds (the best counts)")
    args = parser.parse_args(argv)
    samples = 5 if args.quick else args.samples
    deltas = 500 if args.quick else args.deltas
    repeat = 1 if args.quick else args.repeat
    t0 = time.perf_counter()
    rows = trio.run(main_async, samples, deltas, repeat, Deadline(120.0))
    title = f"ws: {samples} interrupts per server, {deltas} deltas, {time.perf_counter() - t0:.1f} s"
    return finish(rows, title, args.json)


if __name__ == "__main__":
    sys.exit(main())
