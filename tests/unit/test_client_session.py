"""The client against a scripted peer (codex_client.memory), under trio's MockClock."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import orjson
import pytest
import trio

from codex_client.approvals import (
    APPROVAL_METHODS,
    ApprovalRequest,
    accept_all,
    answer_for,
    cancel_all,
    decline_all,
    in_order,
)
from codex_client.errors import (
    ClientError,
    LineTooLong,
    RequestTimeout,
    RpcError,
    ServerExited,
    SessionClosed,
    TurnBusy,
)
from codex_client.events import (
    ApprovalAnswered,
    ApprovalRequested,
    MessageDelta,
    TurnEnded,
    TurnStarted,
    UsageUpdated,
)
from codex_client.memory import ScriptedPeer, memory_pair
from codex_client.session import Session, SessionOptions, open_session
from contracts.messages import Notification
from contracts.usage import UsageBuckets

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


async def hello_streamed(peer: ScriptedPeer) -> None:
    """The handshake, a thread, and turn-1 streaming "Hello world" (the turn left open)."""
    await handshake(peer)
    await thread_start(peer)
    await turn_begin(peer, "turn-1")
    await message(peer, "turn-1", "msg-1", ["Hello ", "world"])


def opts(**kw: Any) -> SessionOptions:
    base: dict[str, Any] = {"teardown_timeout": 1.0, "interrupt_budget": 0.5}
    base.update(kw)
    return SessionOptions(**base)


async def test_plain_turn_completes_with_usage_and_text(autojump_clock: trio.testing.MockClock) -> None:
    transport, peer = memory_pair()

    async def server() -> None:
        await hello_streamed(peer)
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


async def test_a_closed_session_is_freed_at_once_its_turns_kept(autojump_clock: trio.testing.MockClock) -> None:
    """No reference cycle holds a closed session: its wire record goes with the last reference, not at CPython's
    next full collection (known-bad: the turns and the session, and the core and its trace queue, were cycles)."""
    transport, peer = memory_pair()

    async def server() -> None:
        await hello_streamed(peer)
        await turn_end(peer, "turn-1")
        await serve_until_eof(peer)

    gc.collect()
    gc.disable()  # only reference counts may free it
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server)
            async with open_session(transport, opts(validate_frames=True)) as session:
                await session.start_thread(cwd="/work")
                async with session.turn("Say hello") as turn:
                    pass
            nursery.cancel_scope.cancel()
        assert len(session.wire) > 10
        gone = weakref.ref(session)
        del session
        assert gone() is None
    finally:
        gc.enable()
    # what the turn is stays the caller's; a turn of a session gone has nothing to cancel or steer
    assert turn.result is not None and turn.result.final_text == "Hello world"
    turn.cancel()
    with pytest.raises(SessionClosed):
        await turn.steer("more")


async def run_client(peer_script: Any, body: Any, **options: Any) -> Session:
    """Run ``peer_script(peer)`` against a session running ``body(session)``; returns the session."""
    transport, peer = memory_pair()
    holder: dict[str, Session] = {}

    async def server() -> None:
        await handshake(peer)
        await thread_start(peer)
        await peer_script(peer)
        await serve_until_eof(peer)

    policy = options.pop("policy", None)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server)
        kwargs: dict[str, Any] = {"policy": policy} if policy is not None else {}
        async with open_session(transport, opts(**options), **kwargs) as session:
            holder["s"] = session
            await session.start_thread()
            await body(session)
        nursery.cancel_scope.cancel()
    return holder["s"]


async def consume(session: Session, text: str = "hi", **kw: Any) -> Any:
    async with session.turn(text, **kw) as turn:
        events = [event async for event in turn]
    return turn, events


async def test_cancel_after_delta_interrupts_and_keeps_usage(autojump_clock: trio.testing.MockClock) -> None:
    async def script(peer: ScriptedPeer) -> None:
        await turn_begin(peer, "t1")
        base = {"threadId": THREAD, "turnId": "t1"}
        await peer.notify("item/started", {**base, "item": {"type": "agentMessage", "id": "m1", "text": ""}})
        await peer.notify("item/agentMessage/delta", {**base, "itemId": "m1", "delta": "Hel"})
        interrupt = await peer.expect("turn/interrupt")
        assert interrupt.params == {"threadId": THREAD, "turnId": "t1"}  # type: ignore[union-attr]
        await trio.sleep(0.12)
        await peer.notify("thread/tokenUsage/updated", {**base, "tokenUsage": usage((100, 30, 10), (100, 30, 10))})
        await peer.respond(interrupt.id, {})  # type: ignore[union-attr]
        await turn_end(peer, "t1", "interrupted")

    seen: list[Any] = []

    async def body(session: Session) -> None:
        with trio.move_on_after(10) as scope:
            async with session.turn("hi") as turn:
                async for event in turn:
                    seen.append(event)
                    if isinstance(event, MessageDelta):
                        scope.cancel()
        assert scope.cancelled_caught
        seen.append(turn)

    session = await run_client(script, body)
    turn = seen[-1]
    result = turn.result
    assert result.status == "aborted" and result.error == "execution cancelled"
    assert result.server_status == "interrupted" and not result.killed
    assert result.usage == {MODEL: UsageBuckets(input=70, cache_read=30, output=10)}
    assert result.items_closed_locally == ["m1"]
    assert turn.partial_text == "Hel"
    assert result.interrupt_sent_at is not None and result.turn_completed_at is not None
    assert abs(result.turn_completed_at - result.interrupt_sent_at - 0.12) < 1e-6
    assert result.ended_at == result.turn_completed_at  # the Result is delivered at turn/completed
    logs = [entry for entry in session.log if entry["msg"] == "codex turn interrupted"]
    assert len(logs) == 1 and abs(logs[0]["latency"] - 0.12) < 1e-6 and logs[0]["turn_id"] == "t1"
    assert logs[0]["answered"] is True
    assert not session.killed
    assert next(n.note for n in session.wire if n.dir == "note").startswith("cancel: aborted")


async def test_completion_without_interrupt_answer_is_logged_and_not_killed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # docs/client-rules.md §2: wait for turn/completed (any status), log "codex turn interrupted" with the
    # latency from the interrupt write; the answer that never comes is recorded, the healthy server is kept
    async def script(peer: ScriptedPeer) -> None:
        await turn_begin(peer, "t1")
        base = {"threadId": THREAD, "turnId": "t1"}
        await peer.notify("item/agentMessage/delta", {**base, "itemId": "m1", "delta": "Hel"})
        await peer.expect("turn/interrupt")
        await trio.sleep(0.05)
        await turn_end(peer, "t1", "interrupted")  # and never an answer to the interrupt

    seen: list[Any] = []

    async def body(session: Session) -> None:
        with trio.move_on_after(10) as scope:
            async with session.turn("hi") as turn:
                async for event in turn:
                    seen.append(event)
                    if isinstance(event, MessageDelta):
                        scope.cancel()
        seen.append(turn)
        await trio.sleep(1)  # past the 0.5 s budget: the missing answer is recorded, nothing is killed

    session = await run_client(script, body)
    result = seen[-1].result
    assert result.status == "aborted" and result.server_status == "interrupted" and not result.killed
    assert result.interrupt_answered_at is None
    logs = [entry for entry in session.log if entry["msg"] == "codex turn interrupted"]
    assert len(logs) == 1 and logs[0]["turn_id"] == "t1" and logs[0]["answered"] is False
    assert abs(logs[0]["latency"] - 0.05) < 1e-6
    assert [type(e).__name__ for e in seen[:-1]].count("InterruptAnswered") == 0  # the Result came first
    assert not session.killed


async def test_frames_validated_inline_when_asked(autojump_clock: trio.testing.MockClock) -> None:
    async def script(peer: ScriptedPeer) -> None:
        await turn_begin(peer, "t1")
        base = {"threadId": THREAD, "turnId": "t1", "itemId": "m1"}
        await peer.notify("item/agentMessage/delta", {**base, "delta": "ok"}, emittedAtMs=1)
        await peer.notify("item/agentMessage/delta", base, emittedAtMs=2)  # no delta: breaks the schema
        await turn_end(peer, "t1")

    async def body(session: Session) -> None:
        turn, _ = await consume(session)
        assert turn.result.status == "completed" and turn.partial_text == "ok"

    session = await run_client(script, body, validate_frames=True)
    deltas = [v for v in session.schema_violations if v[2].get("method") == "item/agentMessage/delta"]
    assert len(deltas) == 1 and deltas[0][1] == "s2c" and deltas[0][2]["emittedAtMs"] == 2
    assert any("delta" in str(violation) for violation in deltas[0][3])
    assert session.schema_violation_count == len(session.schema_violations)
    assert not [v for v in session.schema_violations if v[1] == "c2s"]  # what the client sends is valid


async def test_interrupt_ignored_kills_at_the_budget(autojump_clock: trio.testing.MockClock) -> None:
    async def script(peer: ScriptedPeer) -> None:
        await turn_begin(peer, "t1")
        await peer.expect("turn/interrupt")
        await trio.sleep_forever()

    async def body(session: Session) -> None:
        start = trio.current_time()
        with trio.move_on_after(1):
            await consume(session)
        assert trio.current_time() - start == pytest.approx(1.5)  # cancel at 1 s + the 0.5 s budget
        turn = session.turns[-1]
        assert turn.result.status == "aborted" and turn.result.killed
        assert "interrupt completion timed out after 0.5s" in turn.result.kill_reason

    session = await run_client(script, body)
    assert session.killed and session.transport.killed  # type: ignore[attr-defined]
    assert session.log[-1]["msg"] == "cleanup"


@pytest.mark.parametrize("answers", [True, False])
async def test_caller_scope_around_the_session_still_interrupts(
    answers: bool, autojump_clock: trio.testing.MockClock
) -> None:
    # The caller's scope encloses open_session, so its cancellation reaches the session's own tasks as well.
    # The reader, the exit watcher and the supervisor must outlive it: the interrupt's turn/completed is read
    # (Result when it arrives, no kill), or the budget expires (kill at the budget, never budget + the 30 s
    # request timeout); then the teardown sees the exit instead of timing out on a watcher that was cancelled.
    transport, peer = memory_pair()

    async def server() -> None:
        await handshake(peer)
        await thread_start(peer)
        await turn_begin(peer, "t1")
        await message(peer, "t1", "m1", ["Hel"])
        req = await peer.expect("turn/interrupt")
        if answers:
            await trio.sleep(0.12)
            await peer.respond(req.id, {})  # type: ignore[union-attr]
            await turn_end(peer, "t1", "interrupted")
        await serve_until_eof(peer)

    options = opts(request_timeout=30.0)
    times: dict[str, float] = {}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server)
        with trio.CancelScope() as caller:
            try:
                async with open_session(transport, options) as session:
                    await session.start_thread()
                    async with session.turn("hi") as turn:
                        async for event in turn:
                            if isinstance(event, MessageDelta):
                                times["cancel"] = trio.current_time()
                                caller.cancel()
            finally:
                times["closed"] = trio.current_time()
        nursery.cancel_scope.cancel()
    result = turn.result
    assert result is not None and result.status == "aborted"
    steps = {s.name: s.outcome for s in session.teardown}
    if answers:
        assert not result.killed and result.server_status == "interrupted"
        assert result.ended_at - times["cancel"] == pytest.approx(0.12)
        assert steps == {"close_stdin": "done", "wait_stdout_eof": "done", "wait_exit": "done", "kill": "skipped"}
    else:
        assert result.killed and result.kill_reason == "turn interrupt completion timed out after 0.5s"
        assert result.ended_at - times["cancel"] == pytest.approx(0.5)
        assert steps["wait_exit"] == "done" and steps["kill"] in ("done", "skipped")
    assert times["closed"] - result.ended_at <= options.teardown_timeout


async def test_interrupt_error_answer_kills(autojump_clock: trio.testing.MockClock) -> None:
    async def script(peer: ScriptedPeer) -> None:
        await turn_begin(peer, "t1")
        req = await peer.expect("turn/interrupt")
        await peer.respond_error(req.id, -32600, "no active turn to interrupt")  # type: ignore[union-attr]

    async def body(session: Session) -> None:
        async with session.turn("hi") as turn:
            turn.cancel()
        assert turn.result.status == "aborted" and turn.result.killed
        assert turn.result.kill_reason == "turn interrupt failed: no active turn to interrupt"

    await run_client(script, body)


async def test_cancel_before_turn_id_kills_at_once(autojump_clock: trio.testing.MockClock) -> None:
    async def script(peer: ScriptedPeer) -> None:
        await peer.expect("turn/start")
        await trio.sleep_forever()

    async def body(session: Session) -> None:
        turn = session.turn("hi")
        start = trio.current_time()
        with trio.move_on_after(0.25):
            async with turn:
                pass
        assert trio.current_time() - start == pytest.approx(0.25)
        assert turn.result.status == "aborted" and turn.result.killed
        assert turn.result.kill_reason == "cancelled before the turn had an id"
        assert turn.result.interrupt_sent_at is None

    await run_client(script, body)


async def test_turn_deadline_gives_timeout(autojump_clock: trio.testing.MockClock) -> None:
    async def script(peer: ScriptedPeer) -> None:
        await turn_begin(peer, "t1")
        req = await peer.expect("turn/interrupt")
        await peer.respond(req.id, {})  # type: ignore[union-attr]
        await turn_end(peer, "t1", "interrupted")

    async def body(session: Session) -> None:
        turn, events = await consume(session, timeout=3.0)
        assert turn.result.status == "timeout" and turn.result.error == "timed out after 3s"
        assert turn.result.server_status == "interrupted" and not turn.result.killed
        assert isinstance(events[-1], TurnEnded)

    session = await run_client(script, body)
    assert not session.killed


async def test_error_and_idle_do_not_end_the_turn(autojump_clock: trio.testing.MockClock) -> None:
    async def script(peer: ScriptedPeer) -> None:
        await turn_begin(peer, "t1")
        base = {"threadId": THREAD, "turnId": "t1"}
        await peer.notify("error", {**base, "error": {"message": "Reconnecting... 1/1"}, "willRetry": True})
        await peer.notify("error", {**base, "error": {"message": "boom"}, "willRetry": False})
        await peer.notify("thread/status/changed", {"threadId": THREAD, "status": {"type": "idle"}})
        await message(peer, "t1", "m1", ["final"], phase="final_answer")
        await trio.sleep(1)
        await turn_end(peer, "t1", "completed")

    async def body(session: Session) -> None:
        turn, _ = await consume(session)
        assert turn.result.status == "failed" and turn.result.error == "boom"
        assert turn.result.final_text == "final"
        assert turn.result.ended_at - turn.result.started_at >= 1

    await run_client(script, body)


async def test_failed_turn_and_next_turn_on_the_same_server(autojump_clock: trio.testing.MockClock) -> None:
    async def script(peer: ScriptedPeer) -> None:
        await turn_begin(peer, "t1")
        await turn_end(peer, "t1", "failed", error="model exploded")
        await turn_begin(peer, "t2")
        await message(peer, "t2", "m1", ["a"])
        await message(peer, "t2", "m2", ["b"])
        await turn_end(peer, "t2")

    async def body(session: Session) -> None:
        first, _ = await consume(session)
        second, _ = await consume(session)
        assert first.result.status == "failed" and first.result.error == "model exploded"
        assert second.result.status == "completed" and second.result.final_text == "b"
        assert [r.index for r in session.results] == [0, 1]

    await run_client(script, body)


async def test_completion_before_turn_start_response_and_foreign_events(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def script(peer: ScriptedPeer) -> None:
        req = await peer.expect("turn/start")
        # a sub-agent thread and a replayed earlier turn must not touch this turn
        await peer.notify("turn/started", {"threadId": "other", "turn": {"id": "sub"}})
        await peer.notify("turn/started", {"threadId": THREAD, "turn": {"id": "t1"}})
        await peer.notify("turn/completed", {"threadId": "other", "turn": {"id": "sub", "status": "completed"}})
        await peer.notify(
            "thread/tokenUsage/updated", {"threadId": THREAD, "turnId": "t0", "tokenUsage": usage((9, 0, 9), (9, 0, 9))}
        )
        await message(peer, "t1", "m1", ["done"])
        await turn_end(peer, "t1")
        await peer.respond(req.id, {"turn": {"id": "t1", "status": "inProgress"}})  # type: ignore[union-attr]
        await turn_end(peer, "t1")  # duplicate completion: ignored
        await peer.notify(
            "thread/tokenUsage/updated", {"threadId": THREAD, "turnId": "t1", "tokenUsage": usage((5, 1, 2), (5, 1, 2))}
        )

    async def body(session: Session) -> None:
        turn, _ = await consume(session)
        assert turn.result.status == "completed" and turn.result.final_text == "done"
        assert turn.result.completed_consumed == 1
        await trio.sleep(1)  # the late usage after turn/completed still counts
        assert turn.result.usage == {MODEL: UsageBuckets(input=4, cache_read=1, output=2)}
        assert session.other_thread_dropped == 2

    await run_client(script, body)


async def test_usage_duplicates_and_tool_loop_add_exactly(autojump_clock: trio.testing.MockClock) -> None:
    async def script(peer: ScriptedPeer) -> None:
        await turn_begin(peer, "t2")
        base = {"threadId": THREAD, "turnId": "t2"}
        # the thread's earlier turn is inside `total` and must not be charged
        first = usage((100, 40, 20), (200, 80, 40))
        second = usage((100, 40, 20), (300, 120, 60))
        for tokens in (first, first, second, second):
            await peer.notify("thread/tokenUsage/updated", {**base, "tokenUsage": tokens})
        await turn_end(peer, "t2")

    async def body(session: Session) -> None:
        turn, events = await consume(session)
        assert turn.result.usage == {MODEL: UsageBuckets(input=120, cache_read=80, output=40)}
        added = [e.added for e in events if isinstance(e, UsageUpdated)]
        assert [a.output for a in added] == [20, 0, 20, 0]

    await run_client(script, body)


async def test_approvals_policies_in_order(autojump_clock: trio.testing.MockClock) -> None:
    answers: list[Any] = []

    async def script(peer: ScriptedPeer) -> None:
        await turn_begin(peer, "t1")
        base = {"threadId": THREAD, "turnId": "t1"}
        for n, method in enumerate(
            ["item/commandExecution/requestApproval", "item/fileChange/requestApproval", "execCommandApproval"]
        ):
            item = {"type": "commandExecution", "id": f"call_{n}", "status": "inProgress"}
            await peer.notify("item/started", {**base, "item": item})
            rid = await peer.request(method, {**base, "itemId": f"call_{n}", "startedAtMs": 1})
            answer = await peer.receive()
            answers.append(answer.frame)  # type: ignore[union-attr]
            await peer.notify("serverRequest/resolved", {"threadId": THREAD, "requestId": rid})
            await peer.notify("item/completed", {**base, "item": {**item, "status": "completed"}})
        await turn_end(peer, "t1")

    async def body(session: Session) -> None:
        turn, events = await consume(session)
        assert turn.result.status == "completed"
        asked = [e for e in events if isinstance(e, ApprovalRequested)]
        assert [e.n for e in asked] == [1, 2, 3] and [e.index for e in asked] == [0, 1, 2]
        assert [e.decision for e in events if isinstance(e, ApprovalAnswered)] == ["decline", "accept", "cancel"]

    await run_client(script, body, policy=in_order(["decline", "accept", "cancel"]))
    assert answers == [
        {"id": 0, "result": {"decision": "decline"}},
        {"id": 1, "result": {"decision": "accept"}},
        {"id": 2, "result": {"decision": "abort"}},
    ]


async def test_policy_raising_or_late_and_unknown_requests(autojump_clock: trio.testing.MockClock) -> None:
    answers: list[Any] = []

    async def policy(request: ApprovalRequest) -> str:
        if request.index == 0:
            raise ValueError("no idea")
        await trio.sleep(1000)
        return "accept"

    async def script(peer: ScriptedPeer) -> None:
        await turn_begin(peer, "t1")
        base = {"threadId": THREAD, "turnId": "t1", "startedAtMs": 1}
        for method in ("item/commandExecution/requestApproval", "item/fileChange/requestApproval", "item/tool/call"):
            await peer.request(method, {**base, "itemId": "x"})
            answers.append((await peer.receive()).frame)  # type: ignore[union-attr]
        await turn_end(peer, "t1")

    async def body(session: Session) -> None:
        turn, events = await consume(session)
        assert turn.result.status == "failed"
        assert turn.result.error == "unsupported app-server request: item/tool/call"
        reasons = [e.reason for e in events if isinstance(e, ApprovalAnswered)]
        assert reasons[0].startswith("approval policy failed: ValueError")
        assert reasons[1] == "approval policy past its deadline"

    await run_client(script, body, policy=policy, approval_timeout=5.0)
    assert answers[0]["error"]["code"] == -32603 and "no idea" in answers[0]["error"]["message"]
    assert answers[1] == {"id": 1, "result": {"decision": "cancel"}}
    assert answers[2] == {
        "error": {"code": -32601, "message": "unsupported app-server request: item/tool/call"},
        "id": 2,
    }


async def test_cancel_while_approval_pending_closes_it_locally(autojump_clock: trio.testing.MockClock) -> None:
    got_answer: list[Any] = []

    async def hold(request: ApprovalRequest) -> str:
        await trio.sleep_forever()
        return "accept"

    async def script(peer: ScriptedPeer) -> None:
        await turn_begin(peer, "t1")
        base = {"threadId": THREAD, "turnId": "t1"}
        item = {"type": "commandExecution", "id": "call_1", "status": "inProgress"}
        await peer.notify("item/started", {**base, "item": item})
        rid = await peer.request("item/commandExecution/requestApproval", {**base, "itemId": "call_1"})
        req = await peer.expect("turn/interrupt")
        await peer.notify("thread/tokenUsage/updated", {**base, "tokenUsage": usage((60, 40, 20), (60, 40, 20))})
        await peer.respond(req.id, {})  # type: ignore[union-attr]
        await turn_end(peer, "t1", "interrupted")
        await peer.notify("serverRequest/resolved", {"threadId": THREAD, "requestId": rid})
        while (message := await peer.receive()) is not None:
            got_answer.append(message.frame)

    async def body(session: Session) -> None:
        with trio.move_on_after(100) as scope:
            async with session.turn("hi") as turn:
                async for event in turn:
                    if isinstance(event, ApprovalRequested):
                        scope.cancel()
        result = turn.result
        assert result.status == "aborted" and not result.killed
        assert result.approvals_closed_locally == ["0"] and result.items_closed_locally == ["call_1"]
        assert result.usage == {MODEL: UsageBuckets(input=20, cache_read=40, output=20)}

    session = await run_client(script, body, policy=hold)
    # the cleared request is never answered afterwards
    assert not any("result" in frame or "error" in frame for frame in got_answer)
    assert not session.killed


async def test_steer(autojump_clock: trio.testing.MockClock) -> None:
    async def script(peer: ScriptedPeer) -> None:
        await turn_begin(peer, "t1")
        req = await peer.expect("turn/steer")
        assert req.params["expectedTurnId"] == "t1"  # type: ignore[union-attr]
        await peer.respond(req.id, {"turnId": "t1"})  # type: ignore[union-attr]
        bad = await peer.expect("turn/steer")
        await peer.respond_error(bad.id, -32600, "expected active turn id")  # type: ignore[union-attr]
        await message(peer, "t1", "m1", ["ok"])
        await turn_end(peer, "t1")

    async def body(session: Session) -> None:
        async with session.turn("hi") as turn:
            assert await turn.steer("more") == "t1"
            with pytest.raises(RpcError) as info:
                await turn.steer("again")
            assert info.value.code == -32600 and info.value.method == "turn/steer"
        assert turn.result.status == "completed"

    await run_client(script, body)


async def test_crash_mid_turn_fails_with_stderr(autojump_clock: trio.testing.MockClock) -> None:
    transport, peer = memory_pair()

    async def server() -> None:
        await handshake(peer)
        await thread_start(peer)
        await turn_begin(peer, "t1")
        await peer.send_raw(b'{"method":"item/agentMessage/del')
        transport.stderr.feed(b"panic: Bearer secret-token-123\n")
        peer.exit(101)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(server)
        async with open_session(transport, opts()) as session:
            await session.start_thread()
            start = trio.current_time()
            turn, _ = await consume(session)
            assert trio.current_time() - start < 0.2
            with pytest.raises(Exception) as info:
                await session.request("thread/list", {})
    result = turn.result
    assert result.status == "failed"
    assert result.error.startswith("process exited with status 101; stderr: panic: Bearer [REDACTED]")
    assert any(entry.error == "truncated_at_eof" for entry in session.wire)
    assert "failed" in str(info.value) or "exited" in str(info.value)


async def test_garbage_lines_are_recorded_and_skipped(autojump_clock: trio.testing.MockClock) -> None:
    async def script(peer: ScriptedPeer) -> None:
        await peer.send_raw(b"this is not JSON\n[1,2]\n\xff\xfe\n{}\n")
        await turn_begin(peer, "t1")
        await turn_end(peer, "t1")

    async def body(session: Session) -> None:
        turn, _ = await consume(session)
        assert turn.result.status == "completed"
        kinds = [e.error for e in session.wire if e.error]
        assert kinds == ["invalid_json", "not_an_object", "invalid_utf8", "not_a_message"]

    await run_client(script, body)


async def test_oversized_line_fails_the_turn(autojump_clock: trio.testing.MockClock) -> None:
    async def script(peer: ScriptedPeer) -> None:
        await turn_begin(peer, "t1")
        await peer.send_raw(b"{" + b"x" * 5000)
        await trio.sleep_forever()

    async def body(session: Session) -> None:
        turn, _ = await consume(session)
        result = turn.result
        assert result.status == "failed" and result.killed
        assert (
            result.error
            == "lost frame: server line of at least 5001 bytes exceeds the cap of 4096 bytes: a frame was lost"
        )
        assert isinstance(session.failure, LineTooLong)

    await run_client(script, body, max_line=4096)


async def test_send_after_a_lost_frame_raises_the_typed_failure(autojump_clock: trio.testing.MockClock) -> None:
    # the initialize answer and an oversized line arrive in one read: by the time `initialized` is written the
    # session has failed; the caller gets the LineTooLong naming size and cap, never a TransportClosed
    transport, peer = memory_pair()

    async def server() -> None:
        init = await peer.expect("initialize")
        answer = {"id": init.id, "result": {"userAgent": "x"}}  # type: ignore[union-attr]
        await peer.send_raw(orjson.dumps(answer) + b"\n" + b"x" * 5000 + b"\n")
        await serve_until_eof(peer)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(server)
        with pytest.raises(LineTooLong) as info:
            async with open_session(transport, opts(max_line=4096)):
                pass
        assert info.value.size == 5000 and info.value.cap == 4096
        assert "exceeds the cap of 4096 bytes" in str(info.value)
        nursery.cancel_scope.cancel()


async def test_every_send_path_after_a_kill_gets_the_cause(autojump_clock: trio.testing.MockClock) -> None:
    transport, peer = memory_pair()

    async def server() -> None:
        await handshake(peer)
        await thread_start(peer)
        await serve_until_eof(peer)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(server)
        async with open_session(transport, opts()) as session:
            await session.start_thread()
            session.kill("test kill")
            with pytest.raises(SessionClosed, match="test kill"):
                await session.notify("thread/name/set", {"threadId": THREAD, "name": "n"})
            with pytest.raises(ServerExited, match="test kill"):
                await session.send(Notification.make("initialized"))
            async with session.turn("hi") as turn:
                pass
            assert turn.result is not None and turn.result.status == "failed"
            assert "test kill" in (turn.result.error or "")
        nursery.cancel_scope.cancel()


async def test_request_errors_and_timeouts(autojump_clock: trio.testing.MockClock) -> None:
    async def script(peer: ScriptedPeer) -> None:
        req = await peer.expect("thread/list")
        await peer.respond_error(req.id, -32600, "Invalid request: missing field `params`")  # type: ignore[union-attr]
        await peer.expect("thread/read")
        await trio.sleep_forever()

    async def body(session: Session) -> None:
        with pytest.raises(RpcError) as info:
            await session.request("thread/list")
        assert info.value.code == -32600 and "missing field" in info.value.message
        with pytest.raises(RequestTimeout) as timeout:
            await session.request("thread/read", {}, timeout=2)
        assert str(timeout.value) == "app-server handshake timeout: `thread/read` did not respond after 2s"
        assert session.alive  # only startup requests kill on timeout

    await run_client(script, body)


async def test_turn_start_error_gives_a_failed_result(autojump_clock: trio.testing.MockClock) -> None:
    async def script(peer: ScriptedPeer) -> None:
        req = await peer.expect("turn/start")
        await peer.respond_error(req.id, -32600, "thread not found: x")  # type: ignore[union-attr]

    async def body(session: Session) -> None:
        turn, events = await consume(session)
        assert turn.result.status == "failed" and turn.result.error == "turn/start failed: thread not found: x"
        assert len(events) == 1 and isinstance(events[0], TurnEnded)

    await run_client(script, body)


async def test_inactivity_watchdog_times_out(autojump_clock: trio.testing.MockClock) -> None:
    async def script(peer: ScriptedPeer) -> None:
        await turn_begin(peer, "t1")
        await trio.sleep(5)
        await message(peer, "t1", "m1", ["tick"])
        req = await peer.expect("turn/interrupt")
        await peer.respond(req.id, {})  # type: ignore[union-attr]
        await turn_end(peer, "t1", "interrupted")

    async def body(session: Session) -> None:
        start = trio.current_time()
        turn, _ = await consume(session)
        assert turn.result.status == "timeout"
        assert turn.result.error.startswith("semantic inactivity timeout after 8s")
        assert trio.current_time() - start == pytest.approx(13)  # activity at 5 s restarts the 8 s window

    await run_client(script, body, inactivity_timeout=8.0)


async def test_unknown_server_request_outside_a_turn_is_answered(autojump_clock: trio.testing.MockClock) -> None:
    answered: list[Any] = []

    async def script(peer: ScriptedPeer) -> None:
        await peer.request("account/chatgptAuthTokens/refresh", {})
        answered.append((await peer.receive()).frame)  # type: ignore[union-attr]

    async def body(session: Session) -> None:
        await trio.sleep(1)

    await run_client(script, body)
    assert answered[0]["error"]["code"] == -32601


async def test_resume_falls_back_to_start_on_rpc_error(autojump_clock: trio.testing.MockClock) -> None:
    async def script(peer: ScriptedPeer) -> None:
        req = await peer.expect("thread/resume")
        assert req.params["excludeTurns"] is True  # type: ignore[union-attr]
        await peer.respond_error(req.id, -32600, "thread not found")  # type: ignore[union-attr]
        await thread_start(peer, "thr-2")

    async def body(session: Session) -> None:
        assert await session.resume_thread("gone") == "thr-2"
        assert session.thread_id == "thr-2"

    await run_client(script, body)


async def test_cancel_during_initialize_kills(autojump_clock: trio.testing.MockClock) -> None:
    transport, peer = memory_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(peer.expect, "initialize")
        with trio.move_on_after(0.5):
            async with open_session(transport, opts()):
                pass
        nursery.cancel_scope.cancel()
    assert transport.killed


async def test_kill_mid_turn_ends_the_turn_at_once(autojump_clock: trio.testing.MockClock) -> None:
    async def script(peer: ScriptedPeer) -> None:
        await turn_begin(peer, "t1")
        await trio.sleep_forever()

    async def body(session: Session) -> None:
        async with session.turn("hi") as turn:
            async for event in turn:
                if isinstance(event, TurnStarted):
                    session.kill("operator said so")
        assert turn.result.status == "failed" and turn.result.killed
        assert turn.result.error == "server killed: operator said so"
        with pytest.raises(SessionClosed):
            await session.request("thread/list", {})

    session = await run_client(script, body)
    assert session.teardown[-1].name == "kill"


def test_answers_per_request_kind() -> None:
    def request(method: str, params: dict[str, Any] | None = None) -> ApprovalRequest:
        return ApprovalRequest(0, method, APPROVAL_METHODS[method], params or {}, 0)

    command = request("item/commandExecution/requestApproval")
    assert [answer_for(command, d(command)) for d in (accept_all, decline_all, cancel_all)] == [
        {"decision": "accept"},
        {"decision": "decline"},
        {"decision": "cancel"},
    ]
    amendment = {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["ls"]}}
    assert answer_for(command, amendment) == {"decision": amendment}
    assert answer_for(request("applyPatchApproval"), "acceptForSession") == {"decision": "approved_for_session"}
    assert answer_for(request("mcpServer/elicitation/request"), "accept") == {
        "action": "accept",
        "content": None,
        "_meta": None,
    }
    permissions = request(
        "item/permissions/requestApproval",
        {"permissions": {"network": {"enabled": True}, "fileSystem": {"write": ["/w"]}, "other": 1}},
    )
    assert answer_for(permissions, "accept") == {
        "permissions": {"network": {"enabled": True}, "fileSystem": {"write": ["/w"]}},
        "scope": "turn",
    }
    assert answer_for(permissions, "decline") == {"permissions": {}, "scope": "turn"}


async def test_misuse_raises_instead_of_hanging(autojump_clock: trio.testing.MockClock) -> None:
    async def script(peer: ScriptedPeer) -> None:
        await turn_begin(peer, "t1")
        await turn_end(peer, "t1")

    async def body(session: Session) -> None:
        turn = session.turn("hi")
        with pytest.raises(ClientError, match="not started"):
            await turn.wait()
        with pytest.raises(ClientError, match="not started"):
            await turn.__anext__()
        async with turn:
            with pytest.raises(TurnBusy):
                async with session.turn("again"):
                    pass
        assert turn.result.status == "completed" and turn.result.index == 0
        assert [r.index for r in session.results] == [0]

    await run_client(script, body)


async def test_late_events_of_the_previous_turn_do_not_touch_the_next(autojump_clock: trio.testing.MockClock) -> None:
    async def script(peer: ScriptedPeer) -> None:
        await turn_begin(peer, "t1")
        await message(peer, "t1", "m1", ["first"])
        await turn_end(peer, "t1")
        req = await peer.expect("turn/start")
        # replayed / late frames of turn 1 before turn 2's id is known
        await message(peer, "t1", "m1-late", ["stale"])
        await turn_end(peer, "t1")
        await peer.respond(req.id, {"turn": {"id": "t2", "status": "inProgress"}})  # type: ignore[union-attr]
        await peer.notify("turn/started", {"threadId": THREAD, "turn": {"id": "t2"}})
        await message(peer, "t2", "m2", ["second"])
        await turn_end(peer, "t2")

    async def body(session: Session) -> None:
        first, _ = await consume(session)
        second, _ = await consume(session)
        assert first.result.final_text == "first"
        assert second.result.status == "completed" and second.result.final_text == "second"
        assert second.result.turn_id == "t2" and second.result.completed_consumed == 1

    await run_client(script, body)


async def test_batches_hand_out_a_read_of_deltas_as_one_batch(autojump_clock: trio.testing.MockClock) -> None:
    from codex_client.events import MessageDeltas
    from contracts.wire import encode_frame

    base = {"threadId": THREAD, "turnId": "t1", "itemId": "msg-1"}

    async def script(peer: ScriptedPeer) -> None:
        await turn_begin(peer, "t1")
        await trio.sleep(0.1)
        frames = [{"method": "item/agentMessage/delta", "params": {**base, "delta": f"{i} "}} for i in range(300)]
        await peer.send_raw(b"".join(encode_frame(f) for f in frames))  # one write: one read
        await trio.sleep(0.1)
        await turn_end(peer, "t1")

    async def body(session: Session) -> None:
        batches: list[list[Any]] = []
        async with session.turn("go") as turn:
            async for batch in turn.batches():
                batches.append(batch)
        deltas = [e for batch in batches for e in batch if isinstance(e, MessageDeltas)]
        assert len(deltas) == 1 and deltas[0].first_n == 1 and len(deltas[0]) == 300
        assert [e.n for e in deltas[0].events()] == list(range(1, 301))
        assert isinstance(batches[-1][-1], TurnEnded)
        assert turn.result is not None and turn.result.status == "completed"
        assert turn.partial_text == "".join(f"{i} " for i in range(300))

    await run_client(script, body)
