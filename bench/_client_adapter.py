"""What the benchmarks need from the client (``client``), in one place.

"Validation on" is the client validating every frame as it reads it (``SessionOptions.validate_frames``:
the deltas of one read in one ``jsonschema-rs`` call); a flood frame that breaks the schema fails the run.
The consumer takes the turn's events a read at a time (``Turn.batches``), or one event at a time
(``per_event``: ``async for event in turn``).
"""

from __future__ import annotations

import os
import time
from typing import Any

import trio

from codex_client.events import MessageDelta, MessageDeltas
from codex_client.memory import memory_pair
from codex_client.process import spawn_process
from codex_client.session import Session, SessionOptions, open_session
from contracts.messages import Request
from contracts.wire import encode_frame


def _options(timeout: float, events: int = 1 << 24, validate: bool = False) -> SessionOptions:
    # Keep every event (the default buffer drops past 65,536 and counts) and no inactivity watchdog.
    return SessionOptions(
        request_timeout=timeout, inactivity_timeout=None, event_buffer=events, validate_frames=validate
    )


async def flood_through_client(
    argv: list[str], *, validate: bool, timeout: float, per_event: bool = False
) -> tuple[int, float, float]:
    """One flooded turn through the client and a child process; (notifications, wall s, this process's CPU s)."""
    with trio.fail_after(timeout):
        options = _options(timeout, validate=validate)
        async with spawn_process(argv) as transport, open_session(transport, options) as session:
            return await _flood_turn(session, per_event)


async def flood_in_memory(
    script: dict[str, Any], *, validate: bool, timeout: float, per_event: bool = False
) -> tuple[int, float, float]:
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
            async with open_session(transport, _options(timeout, validate=validate)) as session:
                run = await _flood_turn(session, per_event)
            nursery.cancel_scope.cancel()
    return run


async def _flood_turn(session: Session, per_event: bool) -> tuple[int, float, float]:
    await session.start_thread(cwd=os.getcwd())
    mark = len(session.wire)
    events = 0
    c0 = time.process_time()
    t0 = time.perf_counter()
    async with session.turn("flood") as turn:
        if per_event:
            async for _event in turn:
                events += 1
        else:
            async for batch in turn.batches():
                events += sum(len(e) if isinstance(e, MessageDeltas) else 1 for e in batch)
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - c0
    if turn.dropped_events:
        raise AssertionError(f"client dropped {turn.dropped_events} events")
    if session.schema_violation_count:
        raise AssertionError(f"{session.schema_violation_count} flood frames invalid: {session.schema_violations[0]}")
    frames = [e.frame for e in session.wire[mark:] if e.dir == "s2c" and e.frame is not None]
    notifications = [f for f in frames if "method" in f and "id" not in f]
    if turn.result is None or turn.result.status != "completed":
        raise AssertionError(f"flood turn did not complete: {turn.result}")
    if events < len(notifications) // 2:
        raise AssertionError(f"the consumer saw {events} events for {len(notifications)} notifications")
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
