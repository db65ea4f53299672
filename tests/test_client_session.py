"""The client against a scripted peer (harness.client.memory), under trio's MockClock."""

from __future__ import annotations

from typing import Any

import trio

from contracts.usage import UsageBuckets
from harness.client.events import (
    MessageDelta,
    TurnEnded,
    UsageUpdated,
)
from harness.client.memory import ScriptedPeer, memory_pair
from harness.client.session import SessionOptions, open_session

THREAD = "thr-1"
MODEL = "mock-model"


def usage(last: tuple[int, int, int], total: tuple[int, int, int]) -> dict[str, Any]:
    def breakdown(v: tuple[int, int, int]) -> dict[str, int]:
        return {
            "totalTokens": v[0] + v[2],
            "inputTokens": v[0],
            "cachedInputTokens": v[1],
            "cacheWriteInputTokens": 0,
            "outputTokens": v[2],
            "reasoningOutputTokens": 0,
        }

    return {"total": breakdown(total), "last": breakdown(last), "modelContextWindow": 258400}


async def handshake(peer: ScriptedPeer) -> None:
    init = await peer.expect("initialize")
    await peer.respond(
        init.id,  # type: ignore[union-attr]
        {"userAgent": "x", "codexHome": "/tmp", "platformFamily": "unix", "platformOs": "linux"},
    )
    await peer.notify("configWarning", {"summary": "no bubblewrap", "details": None}, emittedAtMs=1)
    await peer.notify("remoteControl/status/changed", {"status": "disabled"}, emittedAtMs=1)
    await peer.expect("initialized")


async def thread_start(peer: ScriptedPeer, thread_id: str = THREAD) -> None:
    req = await peer.expect("thread/start")
    await peer.respond(req.id, {"thread": {"id": thread_id}, "model": MODEL})  # type: ignore[union-attr]
    await peer.notify("thread/started", {"thread": {"id": thread_id}})


async def turn_begin(peer: ScriptedPeer, turn_id: str) -> Any:
    req = await peer.expect("turn/start")
    await peer.respond(req.id, {"turn": {"id": turn_id, "status": "inProgress", "items": []}})  # type: ignore[union-attr]
    await peer.notify("thread/status/changed", {"threadId": THREAD, "status": {"type": "active", "activeFlags": []}})
    await peer.notify("turn/started", {"threadId": THREAD, "turn": {"id": turn_id, "status": "inProgress"}})
    return req


async def message(peer: ScriptedPeer, turn_id: str, item_id: str, deltas: list[str], phase: str | None = None) -> None:
    base = {"threadId": THREAD, "turnId": turn_id}
    await peer.notify("item/started", {**base, "item": {"type": "agentMessage", "id": item_id, "text": ""}})
    for delta in deltas:
        await peer.notify("item/agentMessage/delta", {**base, "itemId": item_id, "delta": delta})
    item = {"type": "agentMessage", "id": item_id, "text": "".join(deltas), "phase": phase}
    await peer.notify("item/completed", {**base, "item": item})


async def turn_end(peer: ScriptedPeer, turn_id: str, status: str = "completed", error: str | None = None) -> None:
    await peer.notify("thread/status/changed", {"threadId": THREAD, "status": {"type": "idle"}})
    turn = {"id": turn_id, "status": status, "items": [], "error": {"message": error} if error else None}
    await peer.notify("turn/completed", {"threadId": THREAD, "turn": turn})


async def serve_until_eof(peer: ScriptedPeer) -> None:
    while await peer.receive() is not None:
        pass
    peer.exit(0)


def opts(**kw: Any) -> SessionOptions:
    base: dict[str, Any] = {"teardown_timeout": 1.0, "interrupt_budget": 0.5}
    base.update(kw)
    return SessionOptions(**base)


async def test_plain_turn_completes_with_usage_and_text(autojump_clock: trio.testing.MockClock) -> None:
    transport, peer = memory_pair()

    async def server() -> None:
        await handshake(peer)
        await thread_start(peer)
        await turn_begin(peer, "turn-1")
        await message(peer, "turn-1", "msg-1", ["Hello ", "world"])
        await peer.notify(
            "thread/tokenUsage/updated",
            {"threadId": THREAD, "turnId": "turn-1", "tokenUsage": usage((100, 40, 20), (100, 40, 20))},
        )
        await peer.notify("x/unknownNotification", {"threadId": THREAD})
        await turn_end(peer, "turn-1")
        await serve_until_eof(peer)

    events: list[Any] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server)
        async with open_session(transport, opts()) as session:
            await session.start_thread(cwd="/work")
            async with session.turn("Say hello") as turn:
                async for event in turn:
                    events.append(event)
    result = turn.result
    assert result is not None
    assert result.status == "completed", result
    assert result.error is None
    assert result.final_text == "Hello world"
    assert result.turn_id == "turn-1" and result.thread_id == THREAD
    assert result.usage == {MODEL: UsageBuckets(input=60, cache_read=40, cache_write=0, output=20)}
    assert result.completed_consumed == 1 and result.server_status == "completed"
    assert [e.n for e in events if isinstance(e, MessageDelta)] == [1, 2]
    assert isinstance(events[-1], TurnEnded)
    assert any(isinstance(e, UsageUpdated) for e in events)
    assert session.results == [result]
    assert session.ignored_notifications["x/unknownNotification"] == 1
    assert [s.name for s in session.teardown] == ["close_stdin", "wait_stdout_eof", "wait_exit", "kill"]
    assert session.teardown[-1].outcome == "skipped"
    directions = {e.dir for e in session.wire}
    assert directions == {"c2s", "s2c", "note"}
    times = [e.t for e in session.wire]
    assert times == sorted(times)
    init = session.wire[0].frame
    assert init is not None and init["method"] == "initialize"
    assert init["params"]["capabilities"] == {"experimentalApi": False}
