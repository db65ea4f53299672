"""What the benchmarks need from the client (``harness.client``), in one place.

The client does not validate while it reads: every frame it reads is kept in ``session.wire`` and
the schema contract validates the record (the same per-method ``jsonschema-rs`` validators). So
"validation on" is the client's turn plus validating the turn's frames the way the contract does,
and the rate divides the notifications by the sum of both times.
"""

from __future__ import annotations

import os
import time
from typing import Any

import trio

from contracts.messages import Request
from contracts.validator import Validator
from contracts.wire import encode_frame
from harness.client.events import MessageDelta
from harness.client.memory import memory_pair
from harness.client.process import spawn_process
from harness.client.session import Session, SessionOptions, open_session


def _options(timeout: float, events: int = 1 << 24) -> SessionOptions:
    # Keep every event (the default buffer drops past 65,536 and counts) and no inactivity watchdog.
    return SessionOptions(request_timeout=timeout, inactivity_timeout=None, event_buffer=events)


async def flood_through_client(argv: list[str], *, validate: bool, timeout: float) -> tuple[int, float, float]:
    """One flooded turn through the client and a child process; (notifications, wall s, this process's CPU s)."""
    with trio.fail_after(timeout):
        async with spawn_process(argv) as transport, open_session(transport, _options(timeout)) as session:
            return await _flood_turn(session, validate)


async def flood_in_memory(script: dict[str, Any], *, validate: bool, timeout: float) -> tuple[int, float, float]:
    """The same through the client's in-memory transport: the client's CPU cost without a pipe or a server."""
    transport, peer = memory_pair()
    replies = {m: (r["result"], b"".join(r["after"])) for m, r in script["replies"].items()}

    async def serve() -> None:
        while (message := await peer.receive()) is not None:
            if isinstance(message, Request):
                result, after = replies.get(message.method, ({}, b""))
                await peer.send_raw(encode_frame({"id": message.id, "result": result}) + after)
        peer.exit(0)

    with trio.fail_after(timeout):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve)
            async with open_session(transport, _options(timeout)) as session:
                run = await _flood_turn(session, validate)
            nursery.cancel_scope.cancel()
    return run


async def _flood_turn(session: Session, validate: bool) -> tuple[int, float, float]:
    await session.start_thread(cwd=os.getcwd())
    mark = len(session.wire)
    events = 0
    c0 = time.process_time()
    t0 = time.perf_counter()
    async with session.turn("flood") as turn:
        async for _event in turn:
            events += 1
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - c0
    if turn.dropped_events:
        raise AssertionError(f"client dropped {turn.dropped_events} events")
    frames = [e.frame for e in session.wire[mark:] if e.dir == "s2c" and e.frame is not None]
    notifications = [f for f in frames if "method" in f and "id" not in f]
    if validate:
        check = Validator.for_release().validate
        t1, c1 = time.perf_counter(), time.process_time()
        bad = sum(1 for f in notifications if check(f, "s2c"))
        seconds += time.perf_counter() - t1
        cpu += time.process_time() - c1
        if bad:
            raise AssertionError(f"{bad} flood frames invalid")
    if turn.result is None or turn.result.status != "completed":
        raise AssertionError(f"flood turn did not complete: {turn.result}")
    return len(notifications), seconds, cpu


async def interrupt_samples(argv: list[str], samples: int, timeout: float) -> list[tuple[float, float]]:
    """Per interrupted turn: (caller's cancel -> Result, wire interrupt sent -> turn/completed read), in ms."""
    out: list[tuple[float, float]] = []
    with trio.fail_after(timeout):
        async with spawn_process(argv) as transport, open_session(transport, _options(timeout)) as session:
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
                    raise AssertionError(f"interrupt sample not an interrupted turn: {_brief(result)}")
                server = result.turn_completed_at - result.interrupt_sent_at
                out.append(((t_result - t_cancel) * 1000, server * 1000))
    return out


def _brief(result: Any) -> str:
    return f"status={result.status} error={result.error} killed={result.killed}"
