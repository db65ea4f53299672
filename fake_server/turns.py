"""Turn programs: what a 0.171.0 turn sends, in its real order, driven by the scenario's model script.

A program is a generator that emits frames through the engine and yields waits (scripted sleeps,
the next approval answer). Interrupts and steers are handled outside the program: they close it,
which leaves open items open exactly as the real server does.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from contracts.messages import ErrorResponse, JsonId, Request, Response
from contracts.scenario import CommandItem, FileChangeItem, MessageItem, ModelResponse, ReasoningItem, Usage
from fake_server import faults, shapes, sse
from fake_server.state import Answer, NextAnswer, Program, Sleep, ThreadState, Tool, ToolFinished, TurnRun

_ROOT = PurePosixPath("/")  # messages and reasoning carry no workdir

if TYPE_CHECKING:
    from fake_server.engine import Engine

ACCEPTING = ("accept", "acceptForSession")


# --- helpers ------------------------------------------------------------------------------------


def _point(engine: Engine, run: TurnRun, point: str) -> Program:
    """Faults at ``point``: instant ones strike now; a delayed completion sleeps here."""
    for fault in engine.fault(run, point):
        if fault.kind == "delayed_completion":
            yield Sleep(int(fault.param("delay_ms")))
        elif fault.kind == "drop_turn_completed":
            run.drop_completed = True
        elif fault.kind == "trace_unclosed_tool":
            run.trace_bug = True
        elif fault.kind in ("duplicate_usage", "replay_usage"):
            faults.apply_instant(engine, run, fault)
        elif fault.kind not in faults.COURSE_KINDS:
            faults.apply_instant(engine, run, fault)


def _instant_point(engine: Engine, run: TurnRun, point: str) -> None:
    for fault in engine.fault(run, point):
        if fault.kind == "drop_turn_completed":
            run.drop_completed = True
        elif fault.kind == "trace_unclosed_tool":
            run.trace_bug = True
        elif fault.kind not in faults.COURSE_KINDS or fault.kind in ("duplicate_usage", "replay_usage"):
            faults.apply_instant(engine, run, fault)


def set_status(engine: Engine, thread: ThreadState, status: dict[str, Any]) -> None:
    if thread.status != status:
        thread.status = status
        engine.notify("thread/status/changed", {"threadId": thread.thread_id, "status": status})


def _active_status(run: TurnRun) -> dict[str, Any]:
    return shapes.status_active(["waitingOnApproval"] if run.pending_requests() else [])


def _ids(run: TurnRun) -> dict[str, str]:
    return {"threadId": run.thread_id, "turnId": run.turn_id}


def _item_started(engine: Engine, run: TurnRun, item: dict[str, Any]) -> None:
    run.open_items.append(item["id"])
    engine.notify("item/started", {"item": item, **_ids(run), "startedAtMs": item.get("startedAtMs", engine.now_ms)})


def _item_completed(engine: Engine, run: TurnRun, item: dict[str, Any]) -> None:
    if item["id"] in run.open_items:
        run.open_items.remove(item["id"])
    engine.notify(
        "item/completed", {"item": item, **_ids(run), "contentTokenCount": None, "completedAtMs": engine.now_ms}
    )


def emit_usage(engine: Engine, thread: ThreadState, run: TurnRun, usage: Usage) -> None:
    frame = engine.usage_notification(thread, run, usage)
    for fault in engine.fault(run, "usage"):
        if fault.kind == "duplicate_usage":
            for _ in range(int(fault.param("count"))):
                engine.send_frame(frame)
        elif fault.kind == "replay_usage":
            earlier = [f for f in thread.usage_frames if f["params"]["turnId"] != run.turn_id]
            replayed = earlier[-1] if earlier else frame
            for _ in range(int(fault.param("count"))):
                engine.send_frame(replayed)
        elif fault.kind == "drop_turn_completed":
            run.drop_completed = True
        elif fault.kind not in faults.COURSE_KINDS:
            faults.apply_instant(engine, run, fault)
    engine.notify("account/rateLimits/updated", shapes.rate_limits())


def user_message(engine: Engine, run: TurnRun, text: str) -> None:
    item_id = engine.ids.uuid7(engine.now_ms)
    now = engine.now_ms
    _item_started(engine, run, shapes.user_message_item(item_id, text, now, None))
    done = shapes.user_message_item(item_id, text, now, now)
    _item_completed(engine, run, done)
    run.history_items.append(done)


# --- starting, folding, interrupting --------------------------------------------------------------


def start_turn(engine: Engine, thread: ThreadState, request: Request, text: str) -> None:
    index = engine.turns_started
    engine.turns_started += 1
    turn_id = engine.ids.uuid7(engine.now_ms)
    run = TurnRun(
        thread_id=thread.thread_id,
        turn_id=turn_id,
        index=index,
        script=engine.scenario.turn(index),
        started_ms=engine.now_ms,
    )
    thread.active = run
    thread.turns.append(turn_id)
    if not thread.preview:
        thread.preview = text
    engine._respond(request.id, {"turn": shapes.turn(turn_id)})
    set_status(engine, thread, shapes.status_active([]))
    engine.notify(
        "turn/started", {"threadId": thread.thread_id, "turn": shapes.turn(turn_id, started_s=engine.now_ms // 1000)}
    )
    engine.trace("turn_started", thread_id=thread.thread_id, turn_id=turn_id, input=text)
    run.program = _turn_program(engine, thread, run, text)
    engine.resume(run)


def fold_input(engine: Engine, thread: ThreadState, run: TurnRun, text: str) -> None:
    """turn/start on a busy thread and turn/steer: new user message, the stream is abandoned and redone."""
    engine.stop_program(run)
    _abort_pending_requests(engine, thread, run, resolved=True)
    user_message(engine, run, text)
    run.response_index += 1
    run.tools = []
    run.deferred_usage = None
    run.program = _model_loop(engine, thread, run)
    engine.resume(run)


def interrupt(engine: Engine, thread: ThreadState, run: TurnRun, request_id: JsonId | None) -> None:
    """Abort the turn as turn/interrupt does; ``request_id`` None: the request was already answered."""
    struck = engine.fault(run, "interrupt")
    kinds = {f.kind: f for f in struck}
    for fault in struck:
        if fault.kind not in faults.COURSE_KINDS:
            faults.apply_instant(engine, run, fault)
    if not engine.alive or engine.hung:
        return
    if "interrupt_ignored" in kinds:
        return  # the request stays unanswered and the turn runs on
    if "trace_unclosed_tool" in kinds:
        run.trace_bug = True
    if request_id is not None:
        run.pending_interrupts.append(request_id)
    engine.stop_program(run)
    if run.deferred_usage is not None:
        usage, run.deferred_usage = run.deferred_usage, None
        emit_usage(engine, thread, run, usage)
    order = str(kinds["resolved_order"].param("order")) if "resolved_order" in kinds else "after"
    pending = [t for t in run.tools if t.request_id is not None and not t.answered and not t.done]
    for tool in pending:
        tool.answered = True
        engine.abandon_request(tool.request_id)  # type: ignore[arg-type]
        engine.trace("tool_pending_at_abort", turn_id=run.turn_id, call_id=tool.item_id, traced_end=not run.trace_bug)
    if order == "before":
        _resolved(engine, run, pending)
    if "interrupt_answer_missing" not in kinds:
        for rid in run.pending_interrupts:
            engine._respond(rid, {})
    run.pending_interrupts.clear()
    late = kinds.get("completion_after_interrupt")
    if late is not None:
        run.ended = True
        thread.active = None
        thread.last_turn_id = run.turn_id
        thread.history.append(history_turn(engine, run, "interrupted"))
        if not late.param("never"):

            def complete_late() -> None:
                set_status(engine, thread, {"type": "idle"})
                _turn_completed(engine, thread, run, "interrupted", None)

            engine.after(int(late.param("delay_ms")), complete_late)
        engine.trace("turn_ended", turn_id=run.turn_id, status="interrupted")
    else:
        set_status(engine, thread, {"type": "idle"})
        _end_turn(engine, thread, run, "interrupted", None)
    if order == "after":
        _resolved(engine, run, pending)
    _instant_point(engine, run, "after_end")


def _resolved(engine: Engine, run: TurnRun, tools: list[Tool]) -> None:
    for tool in tools:
        engine.notify("serverRequest/resolved", {"threadId": run.thread_id, "requestId": tool.request_id})


def _abort_pending_requests(engine: Engine, thread: ThreadState, run: TurnRun, *, resolved: bool) -> None:
    pending = [t for t in run.tools if t.request_id is not None and not t.answered and not t.done]
    for tool in pending:
        tool.answered = True
        engine.abandon_request(tool.request_id)  # type: ignore[arg-type]
    if resolved:
        _resolved(engine, run, pending)


def history_turn(engine: Engine, run: TurnRun, status: str = "inProgress", error: Any = None) -> dict[str, Any]:
    """The turn as thread/resume shows it: every user and agent message so far (``itemsView: full``)."""
    ended = status != "inProgress"
    turn = shapes.turn(
        run.turn_id,
        status=status,
        started_s=run.started_ms // 1000,
        completed_s=engine.now_ms // 1000 if ended else None,
        duration_ms=engine.now_ms - run.started_ms if ended else None,
        error=error,
    )
    return {**turn, "items": list(run.history_items), "itemsView": "full"}


def _turn_completed(engine: Engine, thread: ThreadState, run: TurnRun, status: str, error: Any) -> None:
    if run.drop_completed:
        return
    now = engine.now_ms
    items = list(run.agent_messages) if status == "completed" else None
    engine.notify(
        "turn/completed",
        {
            "threadId": thread.thread_id,
            "turn": shapes.turn(
                run.turn_id,
                status=status,
                started_s=run.started_ms // 1000,
                completed_s=now // 1000,
                duration_ms=now - run.started_ms,
                items=items,
                error=error,
            ),
        },
    )


def _end_turn(engine: Engine, thread: ThreadState, run: TurnRun, status: str, error: Any) -> None:
    run.ended = True
    if thread.active is run:
        thread.active = None
    thread.last_turn_id = run.turn_id
    thread.history.append(history_turn(engine, run, status, error))
    _turn_completed(engine, thread, run, status, error)
    engine.trace("turn_ended", turn_id=run.turn_id, status=status)


# --- the program --------------------------------------------------------------------------------


def _turn_program(engine: Engine, thread: ThreadState, run: TurnRun, text: str) -> Program:
    yield from _point(engine, run, "start")
    user_message(engine, run, text)
    yield from _model_loop(engine, thread, run)


def _model_loop(engine: Engine, thread: ThreadState, run: TurnRun) -> Program:
    while True:
        response = run.script.response(run.response_index)
        more = yield from _play_response(engine, thread, run, response)
        if not more:
            return
        run.response_index += 1


def _play_response(engine: Engine, thread: ThreadState, run: TurnRun, response: ModelResponse) -> Program:
    """Play one model response; returns True when the model is called again."""
    engine.trace("inference_started", turn_id=run.turn_id, model=thread.model)
    if response.end == "http_error":
        engine.trace("inference_ended", turn_id=run.turn_id, status="failed", error=f"http {response.http_status}")
        message, info = shapes.http_failure(response.http_status, response.error)
        yield from _fail(engine, thread, run, message, info)
        return False
    cut = response.end in ("failed", "disconnect")
    run.tools = []
    run.model_items = []
    for item in response.items:
        if isinstance(item, MessageItem):
            yield from _stream_message(engine, run, item, complete=not cut)
        elif isinstance(item, ReasoningItem):
            yield from _stream_reasoning(engine, run, item, complete=not cut)
        elif not cut:
            yield from _start_tool(engine, thread, run, item)
    if cut:
        engine.trace("inference_ended", turn_id=run.turn_id, status="failed", error=response.end)
    if response.end == "failed":
        engine.notify("account/rateLimits/updated", shapes.rate_limits())
        yield from _fail(engine, thread, run, f"stream disconnected before completion: {response.error}", "other")
        return False
    if response.end == "disconnect":
        limit = engine.scenario.config.stream_max_retries
        details = "stream disconnected before completion: stream closed before response.completed"
        info = {"responseStreamDisconnected": {"httpStatusCode": None}}
        if run.retries < limit:
            run.retries += 1
            error = shapes.turn_error(f"Reconnecting... {run.retries}/{limit}", info, details)
            engine.notify("error", {"error": error, "willRetry": True, **_ids(run)})
            return True
        yield from _fail(engine, thread, run, details, "other")
        return False
    run.retries = 0
    engine.trace(
        "inference_ended",
        turn_id=run.turn_id,
        status="completed",
        response_id=engine.next_id("resp_"),
        items=list(run.model_items),
    )
    # Traced once the response is complete, as the real binary orders them (inference, then its calls).
    for tool in run.tools:
        engine.trace(
            "tool_started",
            turn_id=run.turn_id,
            call_id=tool.item_id,
            item_kind=tool.item.type,
            command=tool.item.command if isinstance(tool.item, CommandItem) else tool.item.path,
            arguments=sse.function_call_item(tool.item, tool.item_id, PurePosixPath(thread.cwd))["arguments"],
        )
    if not run.tools:
        if response.usage is not None:
            emit_usage(engine, thread, run, response.usage)
        yield from _finish(engine, thread, run, "completed")
        return False
    run.deferred_usage = response.usage
    cancelled = yield from _settle_tools(engine, thread, run)
    if run.deferred_usage is not None:
        usage, run.deferred_usage = run.deferred_usage, None
        emit_usage(engine, thread, run, usage)
    if cancelled:
        yield from _finish(engine, thread, run, "interrupted")
        return False
    return True


def _fail(engine: Engine, thread: ThreadState, run: TurnRun, message: str, info: Any) -> Program:
    yield from _point(engine, run, "end")
    error = shapes.turn_error(message, info)
    set_status(engine, thread, {"type": "systemError"})
    engine.notify("error", {"error": error, "willRetry": False, **_ids(run)})
    _read_state(engine, thread, run)
    _end_turn(engine, thread, run, "failed", error)
    yield from _point(engine, run, "after_end")


def _finish(engine: Engine, thread: ThreadState, run: TurnRun, status: str) -> Program:
    yield from _point(engine, run, "end")
    if run.diff:
        engine.notify("turn/diff/updated", {**_ids(run), "diff": run.diff})
    if status == "completed":
        _read_state(engine, thread, run)
    set_status(engine, thread, {"type": "idle"})
    _end_turn(engine, thread, run, status, None)
    yield from _point(engine, run, "after_end")


def _read_state(engine: Engine, thread: ThreadState, run: TurnRun) -> None:
    """Observed with experimentalApi: a turn that completed or failed is unread (an interrupted one not)."""
    if engine.experimental:
        read_state = {"firstUnread": {"type": "turn", "turnId": run.turn_id}, "revision": engine.ids.uuid4()}
        engine.notify("thread/readState/changed", {"threadId": thread.thread_id, "readState": read_state})


def _stream_message(engine: Engine, run: TurnRun, item: MessageItem, *, complete: bool) -> Program:
    item_id = item.id or engine.next_id("msg-")
    run.last_message_id = item_id
    started = engine.now_ms
    _item_started(engine, run, shapes.agent_message_item(item_id, "", started, None))
    yield from _point(engine, run, "item_started")
    for delta in item.deltas:
        if item.delay_ms:
            yield Sleep(item.delay_ms)
        engine.notify("item/agentMessage/delta", {**_ids(run), "itemId": item_id, "delta": delta})
        yield from _point(engine, run, "delta")
    if complete:
        done = shapes.agent_message_item(item_id, item.text, started, engine.now_ms)
        _item_completed(engine, run, done)
        run.agent_messages.append(done)
        run.history_items.append(done)
        run.model_items.append(sse.output_item(item, item_id, _ROOT))


def _stream_reasoning(engine: Engine, run: TurnRun, item: ReasoningItem, *, complete: bool) -> Program:
    item_id = item.id or engine.next_id("rs_")
    started = engine.now_ms
    _item_started(engine, run, shapes.reasoning_item(item_id, [], started, None))
    yield from _point(engine, run, "item_started")
    engine.notify("item/reasoning/summaryPartAdded", {**_ids(run), "itemId": item_id, "summaryIndex": 0})
    for delta in item.deltas:
        if item.delay_ms:
            yield Sleep(item.delay_ms)
        engine.notify(
            "item/reasoning/summaryTextDelta", {**_ids(run), "itemId": item_id, "delta": delta, "summaryIndex": 0}
        )
    if complete:
        _item_completed(engine, run, shapes.reasoning_item(item_id, [item.summary], started, engine.now_ms))
        run.model_items.append(sse.output_item(item, item_id, _ROOT))


def _start_tool(engine: Engine, thread: ThreadState, run: TurnRun, item: CommandItem | FileChangeItem) -> Program:
    item_id = item.call_id or engine.next_id("call_")
    tool = Tool(item, item_id, engine.now_ms)
    run.tools.append(tool)
    run.model_items.append(sse.output_item(item, item_id, PurePosixPath(thread.cwd)))
    if isinstance(item, CommandItem):
        # Observed: a command that runs at once is already a unified-exec process when it starts.
        started = shapes.command_item(
            item_id,
            item.command,
            thread.cwd,
            status="inProgress",
            started_ms=tool.started_ms,
            process_id=None if item.approval else str(40000 + len(run.tools)),
            source="agent" if item.approval else "unifiedExecStartup",
        )
        if item.approval:
            request = engine.endpoint.request(
                "item/commandExecution/requestApproval",
                shapes.command_approval_params(
                    run.thread_id, run.turn_id, item_id, item.command, thread.cwd, tool.started_ms, item.justification
                ),
            )
            tool.request_id = request.id
            set_status(engine, thread, _active_status(run))
            _item_started(engine, run, started)
            yield from _point(engine, run, "item_started")
            engine.send_frame(request.frame)
            engine.approvals_sent += 1
            yield from _point(engine, run, "approval_pending")
        else:
            _item_started(engine, run, started)
            yield from _point(engine, run, "item_started")
        return
    path = item.path if item.path.startswith("/") else f"{thread.cwd}/{item.path}"
    _item_started(
        engine,
        run,
        shapes.file_change_item(item_id, path, item.content, status="inProgress", started_ms=tool.started_ms),
    )
    yield from _point(engine, run, "item_started")
    if item.approval:
        request = engine.endpoint.request(
            "item/fileChange/requestApproval",
            shapes.file_change_approval_params(run.thread_id, run.turn_id, item_id, tool.started_ms),
        )
        tool.request_id = request.id
        set_status(engine, thread, _active_status(run))
        engine.send_frame(request.frame)
        engine.approvals_sent += 1
        yield from _point(engine, run, "approval_pending")


def _decision(response: Response | ErrorResponse) -> str:
    if isinstance(response, ErrorResponse):
        return "error"
    result = response.result
    decision = result.get("decision") if isinstance(result, dict) else None
    if decision in ("accept", "acceptForSession", "decline", "cancel"):
        return str(decision)
    if isinstance(decision, dict) and len(decision) == 1:
        key = next(iter(decision))
        if key in ("acceptWithExecpolicyAmendment", "applyNetworkPolicyAmendment"):
            return "accept"
    return "decline"  # an unparseable answer counts as a decline


def _settle_tools(engine: Engine, thread: ThreadState, run: TurnRun) -> Program:
    """Start what needs no approval, then handle approval answers and tool ends as they come.

    Tools run concurrently, as in the real server: an accepted command that takes time completes
    after a decline that was answered later (``two_approvals``). True when an answer cancelled the turn.
    """
    for tool in run.tools:
        if tool.request_id is None and not tool.done:
            _run_tool(engine, thread, run, tool, "accept")
    while not all(t.done for t in run.tools):
        event = yield NextAnswer()
        if isinstance(event, ToolFinished):
            continue
        answer: Answer = event
        tool = next((t for t in run.tools if t.request_id == answer.request_id and not t.answered), None)
        if tool is None:
            continue
        decision = _decision(answer.response)
        tool.decision = decision
        tool.answered = True
        engine.notify("serverRequest/resolved", {"threadId": run.thread_id, "requestId": tool.request_id})
        if decision in ACCEPTING:
            set_status(engine, thread, _active_status(run))
            _run_tool(engine, thread, run, tool, decision)
        elif isinstance(tool.item, FileChangeItem):
            # Observed for file changes: the status first; a cancelled patch never completes.
            set_status(engine, thread, _active_status(run))
            if decision == "cancel":
                tool.done = True
                ids = {"turn_id": run.turn_id, "call_id": tool.item_id}
                engine.trace("tool_ended", **ids, status="cancelled", decision=decision)
            else:
                _run_tool(engine, thread, run, tool, decision)
        else:
            _run_tool(engine, thread, run, tool, decision)
            set_status(engine, thread, _active_status(run))
        if decision == "cancel":
            _abort_pending_requests(engine, thread, run, resolved=True)
            return True
    return False


def _run_tool(engine: Engine, thread: ThreadState, run: TurnRun, tool: Tool, decision: str) -> None:
    """Complete the tool now, or once its command has run ``duration_ms`` (a wake-up, not a wait)."""
    item = tool.item
    if isinstance(item, CommandItem) and decision in ACCEPTING:
        engine.trace("tool_running", turn_id=run.turn_id, call_id=tool.item_id)
    if isinstance(item, CommandItem) and decision in ACCEPTING and item.duration_ms:

        def finished() -> None:
            if run.ended or tool.done or tool not in run.tools:
                return
            if item.output and tool.request_id is None:
                # Observed: output printed at the end of a long command streams as one delta just before
                # the item completes (an interrupt before it sees none); after an approval none was sent.
                delta = {**_ids(run), "itemId": tool.item_id, "delta": item.output}
                engine.notify("item/commandExecution/outputDelta", delta)
            _complete_tool(engine, thread, run, tool, decision)
            run.answers.append(ToolFinished(tool.item_id))
            if run.waiting_answer:
                run.waiting_answer = False
                engine.resume(run, run.answers.popleft())

        run.tool_timers.append(engine.after(item.duration_ms, finished))
        return
    _complete_tool(engine, thread, run, tool, decision)


def _complete_tool(engine: Engine, thread: ThreadState, run: TurnRun, tool: Tool, decision: str) -> None:
    tool.done = True
    item = tool.item
    status = {"decline": "declined", "cancel": "declined", "error": "failed"}.get(decision, "completed")
    if isinstance(item, CommandItem):
        if status == "completed":
            status = "completed" if item.exit_code == 0 else "failed"
            done = shapes.command_item(
                tool.item_id,
                item.command,
                thread.cwd,
                status=status,
                started_ms=tool.started_ms,
                completed_ms=engine.now_ms,
                process_id=str(40000 + len(run.tools)),
                source="unifiedExecStartup",
                output=item.output,
                exit_code=item.exit_code,
                duration_ms=item.duration_ms,
            )
        else:
            done = shapes.command_item(
                tool.item_id,
                item.command,
                thread.cwd,
                status=status,
                started_ms=tool.started_ms,
                completed_ms=engine.now_ms,
            )
        _item_completed(engine, run, done)
    else:
        path = item.path if item.path.startswith("/") else f"{thread.cwd}/{item.path}"
        done = shapes.file_change_item(
            tool.item_id, path, item.content, status=status, started_ms=tool.started_ms, completed_ms=engine.now_ms
        )
        _item_completed(engine, run, done)
        if status == "completed":
            rel = item.path if not item.path.startswith("/") else item.path.lstrip("/")
            run.diff += shapes.unified_diff_add(rel, item.content)
            engine.notify("turn/diff/updated", {**_ids(run), "diff": run.diff})
    if not run.trace_bug:
        engine.trace("tool_ended", turn_id=run.turn_id, call_id=tool.item_id, status=status, decision=decision)
