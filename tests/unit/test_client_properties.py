"""Property: whatever the server does and whenever the caller cancels, every started turn gets exactly one
Result, within its deadline + interrupt budget, the teardown stays within its bound and the client trace is
closed. A scripted peer plays generated behaviours under trio's MockClock (one ``trio.run`` per example).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codex_client.memory import ScriptedPeer, memory_pair
from codex_client.session import SessionOptions, open_session
from contracts.messages import Request
from contracts.trace import check_bundle

THREAD = "thr"
TURN_TIMEOUT = 20.0
BUDGET = 0.5
TEARDOWN = 1.0


class _Stop(Exception):
    """The client closed its side: the peer stops."""


@dataclass(frozen=True)
class TurnPlan:
    start: str  # answer | hang (never answers turn/start)
    deltas: int
    delay: float
    end: str  # complete | fail | crash | close_stdout | hang | garbage | oversized | dup_usage
    on_interrupt: str  # answer | ignore | error | complete_only
    cancel_after: int | None  # the caller cancels after this many deltas (None: never)
    caller_deadline: float | None  # the caller's scope deadline from before turn/start (None: none)


plans = st.builds(
    TurnPlan,
    start=st.sampled_from(["answer", "answer", "answer", "hang"]),
    deltas=st.integers(0, 4),
    delay=st.sampled_from([0.0, 0.1, 1.0]),
    end=st.sampled_from(["complete", "fail", "crash", "close_stdout", "hang", "garbage", "oversized", "dup_usage"]),
    on_interrupt=st.sampled_from(["answer", "ignore", "error", "complete_only"]),
    cancel_after=st.one_of(st.none(), st.integers(0, 4)),
    caller_deadline=st.one_of(st.none(), st.sampled_from([0.0, 0.05, 0.3, 3.0])),
)


async def _next(peer: ScriptedPeer, method: str) -> Request:
    while True:
        message = await peer.receive()
        if message is None:
            raise _Stop
        if isinstance(message, Request) and message.method == method:
            return message


async def _interrupted(peer: ScriptedPeer, wait: float) -> Request | None:
    """Wait up to ``wait`` for a turn/interrupt (other client messages are consumed)."""
    with trio.move_on_after(wait):
        return await _next(peer, "turn/interrupt")
    return None


def _usage() -> dict[str, Any]:
    block = {"totalTokens": 120, "inputTokens": 100, "cachedInputTokens": 40, "outputTokens": 20}
    return {"total": block, "last": block}


async def _end(peer: ScriptedPeer, tid: str, status: str) -> None:
    turn = {"id": tid, "status": status, "error": {"message": "boom"} if status == "failed" else None}
    await peer.notify("turn/completed", {"threadId": THREAD, "turn": turn})


async def _play_turn(peer: ScriptedPeer, tid: str, plan: TurnPlan) -> bool:
    """One turn; returns False when the server is gone (crash, closed stdout)."""
    request = await _next(peer, "turn/start")
    if plan.start == "hang":
        await _next(peer, "never/arrives")
    await peer.respond(request.id, {"turn": {"id": tid, "status": "inProgress"}})
    base = {"threadId": THREAD, "turnId": tid}
    await peer.notify("turn/started", {"threadId": THREAD, "turn": {"id": tid}})
    await peer.notify("item/started", {**base, "item": {"type": "agentMessage", "id": f"m-{tid}", "text": ""}})
    interrupt: Request | None = None
    for _ in range(plan.deltas):
        await peer.notify("item/agentMessage/delta", {**base, "itemId": f"m-{tid}", "delta": "x"})
        interrupt = await _interrupted(peer, plan.delay)
        if interrupt is not None:
            break
    if interrupt is None:
        interrupt = await _interrupted(peer, 0.0)
    if interrupt is not None:
        if plan.on_interrupt == "ignore":
            await _next(peer, "never/arrives")
        if plan.on_interrupt == "error":
            await peer.respond_error(interrupt.id, -32600, "no active turn to interrupt")
            await _next(peer, "never/arrives")
        if plan.on_interrupt == "answer":
            await peer.respond(interrupt.id, {})
        await _end(peer, tid, "interrupted")
        return True
    if plan.end == "dup_usage":
        for _ in range(3):
            await peer.notify("thread/tokenUsage/updated", {**base, "tokenUsage": _usage()})
    if plan.end == "garbage":
        await peer.send_raw(b"not json\n\xff\n[]\n")
    if plan.end == "oversized":
        await peer.send_raw(b"{" + b"x" * 5000 + b"\n")
    if plan.end == "crash":
        await peer.send_raw(b'{"method":"item/comp')
        peer.exit(3)
        return False
    if plan.end == "close_stdout":
        peer.close_output()
        return False
    if plan.end == "hang":
        interrupt = await _next(peer, "turn/interrupt")
        await peer.respond(interrupt.id, {})
        await _end(peer, tid, "interrupted")
        return True
    await peer.notify("item/completed", {**base, "item": {"type": "agentMessage", "id": f"m-{tid}", "text": "x"}})
    await _end(peer, tid, "failed" if plan.end == "fail" else "completed")
    return True


async def _server(peer: ScriptedPeer, turn_plans: list[TurnPlan]) -> None:
    try:
        init = await _next(peer, "initialize")
        await peer.respond(init.id, {"userAgent": "p", "codexHome": "/", "platformFamily": "unix", "platformOs": "x"})
        start = await _next(peer, "thread/start")
        await peer.respond(start.id, {"thread": {"id": THREAD}, "model": "m"})
        for n, plan in enumerate(turn_plans):
            if not await _play_turn(peer, f"t{n}", plan):
                return
        while await peer.receive() is not None:
            pass
        peer.exit(0)
    except _Stop:
        return


async def _run(turn_plans: list[TurnPlan], trace_dir: Path) -> None:
    transport, peer = memory_pair()
    options = SessionOptions(
        interrupt_budget=BUDGET,
        teardown_timeout=TEARDOWN,
        turn_timeout=TURN_TIMEOUT,
        request_timeout=5.0,
        max_line=4096,
        trace_dir=trace_dir,
    )
    started = 0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_server, peer, turn_plans)
        async with open_session(transport, options) as session:
            await session.start_thread()
            for plan in turn_plans:
                if not session.alive:
                    break
                turn = session.turn("go")
                started += 1
                with trio.CancelScope() as caller:
                    if plan.caller_deadline is not None:
                        caller.deadline = trio.current_time() + plan.caller_deadline
                    async with turn:
                        if plan.cancel_after == 0:
                            caller.cancel()
                        seen = 0
                        async for event in turn:
                            if type(event).__name__ == "MessageDelta":
                                seen += 1
                                if seen == plan.cancel_after:
                                    caller.cancel()
                result = turn.result
                assert result is not None
                bound = TURN_TIMEOUT + BUDGET + 1e-6
                assert result.ended_at - result.started_at <= bound, result
                if result.cancel_at is not None:
                    assert result.ended_at - result.cancel_at <= BUDGET + 1e-6, result
                if result.killed:
                    assert session.killed
                assert result.completed_consumed <= 1
        nursery.cancel_scope.cancel()
    assert [r.index for r in session.results] == list(range(started)), session.results
    steps = session.teardown
    assert steps and steps[-1].ended_at - steps[0].started_at <= TEARDOWN + 1e-6, steps
    assert not session.client_errors, session.client_errors
    verdict = check_bundle(trace_dir)
    assert verdict.verdict == "closed", verdict


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(plans, min_size=1, max_size=3))
def test_every_turn_gets_one_bounded_result(turn_plans: list[TurnPlan]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        trio.run(_run, turn_plans, Path(tmp) / "client-trace", clock=trio.testing.MockClock(autojump_threshold=0))
