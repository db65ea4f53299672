"""Turn programs: what a turn sends, in the real order, driven by the scenario's model script.

A program is a generator that emits frames through the :class:`~fake_server.outbox.Outbox` and
yields waits (scripted sleeps, the next approval answer); :mod:`fake_server.programs` drives it.
Interrupts and steers are handled outside the program: they close it, which leaves open items open
exactly as the real server does. Faults strike through :func:`fake_server.faults.strike` at the
points the registry names.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from contracts.messages import ErrorResponse, JsonId, Response
from contracts.scenario import CommandItem, FileChangeItem, MessageItem, ModelResponse, ReasoningItem, Usage
from fake_server import policy, programs, shapes, sse
from fake_server.faults import Course, strike
from fake_server.outbox import Outbox
from fake_server.state import Answer, NextAnswer, Program, ProgramPart, Sleep, ThreadState, Tool, ToolFinished, TurnRun

_ROOT = PurePosixPath("/")  # messages and reasoning carry no workdir
ACCEPTING = ("accept", "acceptForSession")


# --- helpers ------------------------------------------------------------------------------------


def _point(box: Outbox, run: TurnRun, point: str) -> Program:
    """A point inside the program: its faults strike; a delay they ask for is waited here."""
    struck = strike(box, point, run)
    if struck.sleep_ms:
        yield Sleep(struck.sleep_ms)


def set_status(box: Outbox, thread: ThreadState, status: dict[str, Any]) -> None:
    if thread.status != status:
        thread.status = status
        box.notify("thread/status/changed", {"threadId": thread.thread_id, "status": status})


def _active_status(run: TurnRun) -> dict[str, Any]:
    return run.shapes.status_active(["waitingOnApproval"] if run.pending_requests() else [])


def _ids(run: TurnRun) -> dict[str, str]:
    return {"threadId": run.thread_id, "turnId": run.turn_id}


def _item_started(box: Outbox, run: TurnRun, item: dict[str, Any]) -> None:
    box.notify("item/started", {"item": item, **_ids(run), "startedAtMs": item.get("startedAtMs", box.now_ms)})


def _item_completed(box: Outbox, run: TurnRun, item: dict[str, Any]) -> None:
    box.notify("item/completed", {"item": item, **_ids(run), "contentTokenCount": None, "completedAtMs": box.now_ms})


def _usage_notification(box: Outbox, thread: ThreadState, run: TurnRun, usage: Usage) -> dict[str, Any]:
    t = thread.total = Usage(
        thread.total.input + usage.input,
        thread.total.cached + usage.cached,
        thread.total.output + usage.output,
        thread.total.reasoning + usage.reasoning,
    )
    params = {
        **_ids(run),
        "tokenUsage": {
            "total": run.shapes.token_breakdown(t.input, t.cached, t.output, t.reasoning),
            "last": run.shapes.token_breakdown(usage.input, usage.cached, usage.output, usage.reasoning),
            "modelContextWindow": run.shapes.context_window,
        },
    }
    frame = box.notify("thread/tokenUsage/updated", params)
    thread.usage_frames.append(frame)
    return frame


def emit_usage(box: Outbox, thread: ThreadState, run: TurnRun, usage: Usage) -> None:
    frame = _usage_notification(box, thread, run, usage)
    strike(box, "usage", run, thread=thread, frame=frame)
    box.notify("account/rateLimits/updated", run.shapes.rate_limits())


def user_message(box: Outbox, run: TurnRun, text: str) -> None:
    item_id = box.ids.uuid7(box.now_ms)
    now = box.now_ms
    _item_started(box, run, run.shapes.user_message_item(item_id, text, now, None))
    done = run.shapes.user_message_item(item_id, text, now, now)
    _item_completed(box, run, done)
    run.history_items.append(done)
    box.trace("input_accepted", turn_id=run.turn_id)


def _abandon_pending(box: Outbox, run: TurnRun, *, traced: bool = False) -> list[Tool]:
    """Approvals still pending are abandoned (their answers will be late), and reviews still deciding;
    ``traced``: the trace records each pending tool as aborted (or leaks it under ``trace_unclosed_tool``)."""
    pending = [
        t for t in run.tools if not t.done and not t.answered and (t.request_id is not None or t.outcome == "review")
    ]
    for tool in pending:
        tool.answered = True
        if tool.request_id is not None:
            box.abandon_request(tool.request_id)
        if traced:
            box.trace("tool_pending_at_abort", turn_id=run.turn_id, call_id=tool.item_id, traced_end=not run.trace_bug)
    return pending


def _resolved(box: Outbox, run: TurnRun, tools: list[Tool]) -> None:
    for tool in tools:
        if tool.request_id is None:
            continue  # a review the interrupt ended: no request of the client's to resolve
        box.notify("serverRequest/resolved", {"threadId": run.thread_id, "requestId": tool.request_id})


# --- starting, folding, interrupting --------------------------------------------------------------


def start_turn(box: Outbox, thread: ThreadState, run: TurnRun, request_id: JsonId, text: str) -> None:
    """``run`` (built by the engine for the next scenario turn) starts on ``thread``; answers ``request_id``."""
    thread.active = run
    thread.turns.append(run.turn_id)
    if not thread.preview:
        thread.preview = text
    box.respond(request_id, {"turn": run.shapes.turn(run.turn_id)})
    set_status(box, thread, run.shapes.status_active([]))
    turn = run.shapes.turn(run.turn_id, started_s=box.now_ms // 1000)
    box.notify("turn/started", {"threadId": thread.thread_id, "turn": turn})
    box.trace("turn_started", thread_id=thread.thread_id, turn_id=run.turn_id, input=text)
    run.program = _turn_program(box, thread, run, text)
    programs.resume(box, run)


#: From the answer to a steer (or a turn/start on the busy thread) to the next model request, while the
#: model streams: the real server wrote the pending user messages 2-4 ms after the answer (every release recorded).
PENDING_FLUSH_MS = 3


def fold_input(box: Outbox, thread: ThreadState, run: TurnRun, text: str) -> None:
    """turn/start on a busy thread and turn/steer (answered at once by the caller): the input waits for
    the next model request, as the real server times it (probes/pending_*.jsonl).

    While the model streams, that request comes at once: the in-flight stream is abandoned (its open
    items never complete, its usage is never reported) and every input pending by then is emitted
    together, in order, before the new response; a release whose switch ``input_while_streaming`` is
    ``waits`` lets the response finish first. While an approval is pending or a tool runs, the
    input waits until the tool is settled and the model is called again (:func:`_model_loop`).
    """
    run.pending_input.append(text)
    if run.profile.input_while_streaming == "waits":
        return  # the release's switch: the response streams on; the model loop sends the input next
    if run.flush_timer is None and not _settling(run):
        run.flush_timer = box.after(PENDING_FLUSH_MS, lambda: _flush_pending(box, thread, run))


def _settling(run: TurnRun) -> bool:
    """A tool of the current response is awaiting approval or running: the model is not streaming."""
    return any(not t.done for t in run.tools)


def _flush_pending(box: Outbox, thread: ThreadState, run: TurnRun) -> None:
    run.flush_timer = None
    if run.ended or not run.pending_input or _settling(run) or run.program is None:
        return  # the turn ended, or the model loop emits the input before its next response
    box.trace("inference_ended", turn_id=run.turn_id, status="cancelled")  # the stream is abandoned
    programs.stop(box, run)
    run.response_index += 1
    run.tools = []
    run.deferred_usage = None
    run.program = _model_loop(box, thread, run)
    programs.resume(box, run)


def _emit_pending(box: Outbox, run: TurnRun) -> None:
    """The next model request begins: every pending input becomes a user message, in order."""
    box.cancel_timer(run.flush_timer)
    run.flush_timer = None
    pending, run.pending_input = run.pending_input, []
    for text in pending:
        user_message(box, run, text)


def interrupt(box: Outbox, thread: ThreadState, run: TurnRun, request_id: JsonId | None) -> None:
    """Abort the turn as turn/interrupt does; ``request_id`` None: the request was already answered."""
    course = strike(box, "interrupt", run).course
    if box.silent or course.ignored:
        return  # exited or hung; or the request stays unanswered and the turn runs on
    if request_id is not None:
        run.pending_interrupts.append(request_id)
    if course.delay_ms is not None:
        # The real binary stores the request and answers it when the abort lands (observed a few ms later): here
        # ``delay_ms`` later, the turn running on meanwhile; interrupts arriving meanwhile wait with it (join).
        run.landing = True

        def land() -> None:
            run.landing = False
            if not run.ended and not box.silent:
                _land(box, thread, run, course)

        box.after(course.delay_ms, land)
        return
    _land(box, thread, run, course)


def join_interrupt(run: TurnRun, request_id: JsonId) -> bool:
    """A turn/interrupt that arrives while an earlier one is landing (``interrupt_delayed``): stored, answered
    ``{}`` with it, as the real binary answers two interrupts sent back to back. False: none is landing."""
    if not run.landing:
        return False
    run.pending_interrupts.append(request_id)
    return True


def _land(box: Outbox, thread: ThreadState, run: TurnRun, course: Course) -> None:
    """The abort itself: the turn's program stops, the stored interrupts are answered, the turn ends interrupted."""
    programs.stop(box, run)
    if run.deferred_usage is not None:
        usage, run.deferred_usage = run.deferred_usage, None
        emit_usage(box, thread, run, usage)
    order = course.resolved_order or "after"
    pending = _abandon_pending(box, run, traced=True)
    if order == "before":
        _resolved(box, run, pending)
    if not course.unanswered:
        for rid in run.pending_interrupts:
            box.respond(rid, {})
    run.pending_interrupts.clear()
    if course.late is not None:
        _complete_late(box, thread, run, *course.late)
    else:
        set_status(box, thread, {"type": "idle"})
        _end_turn(box, thread, run, "interrupted", None)
    if order == "after":
        _resolved(box, run, pending)
    strike(box, "after_end", run)


def _complete_late(box: Outbox, thread: ThreadState, run: TurnRun, delay_ms: int, never: bool) -> None:
    """The turn is over now; idle and turn/completed come ``delay_ms`` later, or never (Course.late)."""
    run.ended = True
    thread.active = None
    thread.history.append(history_turn(box, run, "interrupted"))
    if not never:

        def complete_late() -> None:
            set_status(box, thread, {"type": "idle"})
            _turn_completed(box, thread, run, "interrupted", None)

        box.after(delay_ms, complete_late)
    box.trace("turn_ended", turn_id=run.turn_id, status="interrupted")


def history_turn(box: Outbox, run: TurnRun, status: str = "inProgress", error: Any = None) -> dict[str, Any]:
    """The turn as thread/resume shows it: every user and agent message so far (``itemsView: full``)."""
    ended = status != "inProgress"
    turn = run.shapes.turn(
        run.turn_id,
        status=status,
        started_s=run.started_ms // 1000,
        completed_s=box.now_ms // 1000 if ended else None,
        duration_ms=box.now_ms - run.started_ms if ended else None,
        error=error,
    )
    return {**turn, "items": list(run.history_items), "itemsView": "full"}


def _turn_completed(box: Outbox, thread: ThreadState, run: TurnRun, status: str, error: Any) -> None:
    if run.drop_completed:
        return
    now = box.now_ms
    items = list(run.agent_messages) if status == "completed" else None
    turn = run.shapes.turn(
        run.turn_id,
        status=status,
        started_s=run.started_ms // 1000,
        completed_s=now // 1000,
        duration_ms=now - run.started_ms,
        items=items,
        error=error,
    )
    box.notify("turn/completed", {"threadId": thread.thread_id, "turn": turn})


def _end_turn(box: Outbox, thread: ThreadState, run: TurnRun, status: str, error: Any) -> None:
    run.ended = True
    if thread.active is run:
        thread.active = None
    thread.history.append(history_turn(box, run, status, error))
    _turn_completed(box, thread, run, status, error)
    box.trace("turn_ended", turn_id=run.turn_id, status=status)


# --- the program --------------------------------------------------------------------------------


def _turn_program(box: Outbox, thread: ThreadState, run: TurnRun, text: str) -> Program:
    yield from _point(box, run, "start")
    user_message(box, run, text)
    yield from _model_loop(box, thread, run)


def _model_loop(box: Outbox, thread: ThreadState, run: TurnRun) -> Program:
    while True:
        _emit_pending(box, run)
        response = run.script.response(run.response_index)
        more = yield from _play_response(box, thread, run, response)
        if not more:
            return
        run.response_index += 1


def _play_response(box: Outbox, thread: ThreadState, run: TurnRun, response: ModelResponse) -> ProgramPart:
    """Play one model response; returns True when the model is called again."""
    box.trace("inference_started", turn_id=run.turn_id, model=thread.model)
    if response.end == "http_error":
        box.trace("inference_ended", turn_id=run.turn_id, status="failed", error=f"http {response.http_status}")
        message, info = run.shapes.http_failure(response.http_status, response.error)
        yield from _fail(box, thread, run, message, info)
        return False
    cut = response.end in ("failed", "disconnect")
    run.tools = []
    run.model_items = []
    for item in response.items:
        if isinstance(item, MessageItem):
            yield from _stream_message(box, run, item, complete=not cut)
        elif isinstance(item, ReasoningItem):
            yield from _stream_reasoning(box, run, item, complete=not cut)
        elif not cut:
            yield from _start_tool(box, thread, run, item)
    if cut:
        box.trace("inference_ended", turn_id=run.turn_id, status="failed", error=response.end)
        return (yield from _cut_stream(box, thread, run, response))
    run.retries = 0
    items = list(run.model_items)
    box.trace("inference_ended", turn_id=run.turn_id, status="completed", response_id=box.next_id("resp_"), items=items)
    _trace_tools(box, thread, run)
    if not run.tools:
        if response.usage is not None:
            emit_usage(box, thread, run, response.usage)
        if run.pending_input:
            return True  # input arrived while the response ended: the model is called again with it
        yield from _finish(box, thread, run, "completed")
        return False
    run.deferred_usage = response.usage
    cancelled = yield from _settle_tools(box, thread, run)
    if run.deferred_usage is not None:
        usage, run.deferred_usage = run.deferred_usage, None
        emit_usage(box, thread, run, usage)
    if run.diff and not cancelled and run.profile.diff_after_tools:
        box.notify("turn/diff/updated", {**_ids(run), "diff": run.diff})  # the release's switch: once more here
    if cancelled:
        yield from _finish(box, thread, run, "interrupted")
        return False
    return True


def _cut_stream(box: Outbox, thread: ThreadState, run: TurnRun, response: ModelResponse) -> ProgramPart:
    """A response that ended ``failed`` or ``disconnect``: a retry while retries last, else a failed turn."""
    if response.end == "failed":
        box.notify("account/rateLimits/updated", run.shapes.rate_limits())
        yield from _fail(box, thread, run, f"stream disconnected before completion: {response.error}", "other")
        return False
    limit = run.max_retries
    details = "stream disconnected before completion: stream closed before response.completed"
    info = {"responseStreamDisconnected": {"httpStatusCode": None}}
    if run.retries < limit:
        run.retries += 1
        error = run.shapes.turn_error(f"Reconnecting... {run.retries}/{limit}", info, details)
        box.notify("error", {"error": error, "willRetry": True, **_ids(run)})
        return True
    yield from _fail(box, thread, run, details, "other")
    return False


def _trace_tools(box: Outbox, thread: ThreadState, run: TurnRun) -> None:
    """Traced once the response is complete, as the real binary orders them (inference, then its calls)."""
    for tool in run.tools:
        box.trace(
            "tool_started",
            turn_id=run.turn_id,
            call_id=tool.item_id,
            item_kind=tool.item.type,
            command=tool.item.command if isinstance(tool.item, CommandItem) else tool.item.path,
            arguments=sse.function_call_item(tool.item, tool.item_id, PurePosixPath(thread.cwd))["arguments"],
        )
        if tool.outcome == "reject" and not run.trace_bug:
            box.trace("tool_ended", turn_id=run.turn_id, call_id=tool.item_id, status="declined", decision="reject")


def _fail(box: Outbox, thread: ThreadState, run: TurnRun, message: str, info: Any) -> Program:
    yield from _point(box, run, "end")
    error = run.shapes.turn_error(message, info)
    set_status(box, thread, {"type": "systemError"})
    box.notify("error", {"error": error, "willRetry": False, **_ids(run)})
    _read_state(box, thread, run)
    _end_turn(box, thread, run, "failed", error)
    yield from _point(box, run, "after_end")


def _finish(box: Outbox, thread: ThreadState, run: TurnRun, status: str) -> Program:
    yield from _point(box, run, "end")
    if run.diff:
        box.notify("turn/diff/updated", {**_ids(run), "diff": run.diff})
    if status == "completed":
        _read_state(box, thread, run)
    set_status(box, thread, {"type": "idle"})
    _end_turn(box, thread, run, status, None)
    yield from _point(box, run, "after_end")


def _read_state(box: Outbox, thread: ThreadState, run: TurnRun) -> None:
    """Observed with experimentalApi: a turn that completed or failed is unread (an interrupted one not)."""
    if run.experimental:
        read_state = {"firstUnread": {"type": "turn", "turnId": run.turn_id}, "revision": box.ids.uuid4()}
        box.notify("thread/readState/changed", {"threadId": thread.thread_id, "readState": read_state})


def _stream_message(box: Outbox, run: TurnRun, item: MessageItem, *, complete: bool) -> Program:
    item_id = item.id or box.next_id("msg-")
    run.last_message_id = item_id
    started = box.now_ms
    _item_started(box, run, run.shapes.agent_message_item(item_id, "", started, None))
    yield from _point(box, run, "item_started")
    for delta in item.deltas:
        if item.delay_ms:
            yield Sleep(item.delay_ms)
        box.notify("item/agentMessage/delta", {**_ids(run), "itemId": item_id, "delta": delta})
        yield from _point(box, run, "delta")
    if complete:
        done = run.shapes.agent_message_item(item_id, item.text, started, box.now_ms)
        _item_completed(box, run, done)
        run.agent_messages.append(done)
        run.history_items.append(done)
        run.model_items.append(sse.output_item(item, item_id, _ROOT))


def _stream_reasoning(box: Outbox, run: TurnRun, item: ReasoningItem, *, complete: bool) -> Program:
    item_id = item.id or box.next_id("rs_")
    started = box.now_ms
    _item_started(box, run, run.shapes.reasoning_item(item_id, [], started, None))
    yield from _point(box, run, "item_started")
    box.notify("item/reasoning/summaryPartAdded", {**_ids(run), "itemId": item_id, "summaryIndex": 0})
    for delta in item.deltas:
        if item.delay_ms:
            yield Sleep(item.delay_ms)
        params = {**_ids(run), "itemId": item_id, "delta": delta, "summaryIndex": 0}
        box.notify("item/reasoning/summaryTextDelta", params)
    if complete:
        _item_completed(box, run, run.shapes.reasoning_item(item_id, [item.summary], started, box.now_ms))
        run.model_items.append(sse.output_item(item, item_id, _ROOT))


# --- tools ----------------------------------------------------------------------------------------


def _file_path(thread: ThreadState, item: FileChangeItem) -> str:
    return item.path if item.path.startswith("/") else f"{thread.cwd}/{item.path}"


def _start_tool(box: Outbox, thread: ThreadState, run: TurnRun, item: CommandItem | FileChangeItem) -> Program:
    item_id = item.call_id or box.next_id("call_")
    tool = Tool(item, item_id, box.now_ms)
    tool.outcome = policy.outcome(run.profile.policy(), thread_settings(thread), item, thread.cwd)
    run.tools.append(tool)
    run.model_items.append(sse.output_item(item, item_id, PurePosixPath(thread.cwd)))
    if tool.outcome == "reject":
        # Observed: refused before it starts (an escalation under "never", a write the sandbox blocks and no one
        # may approve): no item, no request; the model is told and called again.
        tool.done = True
        return
    asks = tool.outcome == "ask"
    if isinstance(item, CommandItem):
        # Observed: a command that runs at once is already a unified-exec process when it starts; one that waits
        # for an approval or a review is not yet.
        waits = tool.outcome in ("ask", "review")
        started = run.shapes.command_item(
            item_id,
            item.command,
            thread.cwd,
            status="inProgress",
            started_ms=tool.started_ms,
            process_id=None if waits else str(40000 + len(run.tools)),
            source="agent" if waits else "unifiedExecStartup",
        )
        if asks:
            # Observed order for commands: the request id is taken and the status set before item/started.
            params = run.shapes.command_approval_params(
                run.thread_id, run.turn_id, item_id, item.command, thread.cwd, tool.started_ms, item.justification
            )
            request = _reserve_approval(box, thread, run, tool, "item/commandExecution/requestApproval", params)
            _item_started(box, run, started)
            yield from _point(box, run, "item_started")
            yield from _send_approval(box, run, request.frame)
            return
        _item_started(box, run, started)
        yield from _point(box, run, "item_started")
        return
    path = _file_path(thread, item)
    started_item = run.shapes.file_change_item(
        item_id, path, item.content, status="inProgress", started_ms=tool.started_ms
    )
    _item_started(box, run, started_item)
    yield from _point(box, run, "item_started")
    if asks:
        params = run.shapes.file_change_approval_params(run.thread_id, run.turn_id, item_id, tool.started_ms)
        request = _reserve_approval(box, thread, run, tool, "item/fileChange/requestApproval", params)
        yield from _send_approval(box, run, request.frame)


def thread_settings(thread: ThreadState) -> policy.Settings:
    return policy.Settings(thread.approval_policy, thread.sandbox, thread.reviewer)


#: From item/started to the reviewer's verdict (observed 230-370 ms with the mock reviewer answering at once).
REVIEW_MS = 250


def _review_action(thread: ThreadState, item: CommandItem | FileChangeItem) -> dict[str, Any]:
    """The ``action`` of item/autoApprovalReview/* as observed (a command as the shell runs it; a patch's files)."""
    if isinstance(item, CommandItem):
        return {
            "type": "command",
            "source": "unifiedExec",
            "command": shapes.shell_command(item.command),
            "cwd": thread.cwd,
        }
    return {"type": "applyPatch", "cwd": thread.cwd, "files": [_file_path(thread, item)]}


def _start_review(box: Outbox, thread: ThreadState, run: TurnRun, tool: Tool, verdict: str) -> None:
    """The approvals reviewer decides (``approvalsReviewer: "auto_review"``): the client sees the review start
    and end (``item/autoApprovalReview/*``, with a ``guardianWarning`` saying the verdict) and is asked nothing;
    approved, the tool runs; denied, it is declined."""
    started_ms = box.now_ms
    base = {
        **_ids(run),
        "startedAtMs": started_ms,
        "reviewId": box.ids.uuid4(),
        "targetItemId": tool.item_id,
    }
    action = _review_action(thread, tool.item)
    pending = {"status": "inProgress", "riskLevel": None, "userAuthorization": None, "rationale": None}
    box.notify("item/autoApprovalReview/started", {**base, "review": pending, "action": action})

    def decided() -> None:
        if run.ended or tool.done or tool not in run.tools:
            return
        approved = verdict == "allow"
        status = "approved" if approved else "denied"
        review = {"status": status, "riskLevel": "low", "userAuthorization": "unknown", "rationale": "scripted review"}
        said = "approved" if approved else "denied"
        message = f"Automatic approval review {said} (risk: low, authorization: unknown): scripted review"
        box.notify("guardianWarning", {"threadId": run.thread_id, "message": message})
        completed = {**base, "completedAtMs": box.now_ms, "decisionSource": "agent", "review": review, "action": action}
        box.notify("item/autoApprovalReview/completed", completed)
        decision = "accept" if approved else "decline"
        tool.decision = decision
        _run_tool(box, thread, run, tool, decision)
        if tool.done:
            programs.deliver(box, run, ToolFinished(tool.item_id))

    run.tool_timers.append(box.after(REVIEW_MS, decided))


def _reserve_approval(
    box: Outbox, thread: ThreadState, run: TurnRun, tool: Tool, method: str, params: dict[str, Any]
) -> Any:
    """The approval request gets its id now (sent by :func:`_send_approval`); the thread waits on approval."""
    request = box.request(method, params, send=False)
    tool.request_id = request.id
    set_status(box, thread, _active_status(run))
    return request


def _send_approval(box: Outbox, run: TurnRun, frame: dict[str, Any]) -> Program:
    box.send_frame(frame)
    yield from _point(box, run, "approval_pending")


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


def _settle_tools(box: Outbox, thread: ThreadState, run: TurnRun) -> ProgramPart:
    """Start what needs no approval, then handle approval answers and tool ends as they come.

    Tools run concurrently, as in the real server: an accepted command that takes time completes
    after a decline that was answered later (``two_approvals``). True when an answer cancelled the turn.
    """
    tool: Tool | None
    for tool in run.tools:
        if tool.request_id is None and not tool.done:
            if tool.outcome == "review":
                _start_review(box, thread, run, tool, run.auto_review)
            else:
                _run_tool(box, thread, run, tool, "accept")
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
        box.notify("serverRequest/resolved", {"threadId": run.thread_id, "requestId": tool.request_id})
        _answered(box, thread, run, tool, decision)
        if decision == "cancel":
            _resolved(box, run, _abandon_pending(box, run))
            return True
    return False


def _answered(box: Outbox, thread: ThreadState, run: TurnRun, tool: Tool, decision: str) -> None:
    """A tool's approval answered: run it, decline it, or (a cancelled patch) end it untraced as completed."""
    if decision in ACCEPTING:
        set_status(box, thread, _active_status(run))
        _run_tool(box, thread, run, tool, decision)
    elif isinstance(tool.item, FileChangeItem):
        # Observed for file changes: the status first; a cancelled patch never completes.
        set_status(box, thread, _active_status(run))
        if decision == "cancel":
            tool.done = True
            box.trace("tool_ended", turn_id=run.turn_id, call_id=tool.item_id, status="cancelled", decision=decision)
        else:
            _run_tool(box, thread, run, tool, decision)
    else:
        _run_tool(box, thread, run, tool, decision)
        set_status(box, thread, _active_status(run))


def _run_tool(box: Outbox, thread: ThreadState, run: TurnRun, tool: Tool, decision: str) -> None:
    """Complete the tool now, or once its command has run ``duration_ms`` (a wake-up, not a wait)."""
    item = tool.item
    if isinstance(item, CommandItem) and decision in ACCEPTING:
        box.trace("tool_running", turn_id=run.turn_id, call_id=tool.item_id)
    if isinstance(item, CommandItem) and decision in ACCEPTING and item.duration_ms:

        def finished() -> None:
            if run.ended or tool.done or tool not in run.tools:
                return
            if item.output and tool.request_id is None:
                # Observed: output printed at the end of a long command streams as one delta just before
                # the item completes (an interrupt before it sees none); after an approval none was sent.
                delta = {**_ids(run), "itemId": tool.item_id, "delta": item.output}
                box.notify("item/commandExecution/outputDelta", delta)
            _complete_tool(box, thread, run, tool, decision)
            programs.deliver(box, run, ToolFinished(tool.item_id))

        run.tool_timers.append(box.after(item.duration_ms, finished))
        return
    _complete_tool(box, thread, run, tool, decision)


def _complete_tool(box: Outbox, thread: ThreadState, run: TurnRun, tool: Tool, decision: str) -> None:
    tool.done = True
    item = tool.item
    status = {"decline": "declined", "cancel": "declined", "error": "failed"}.get(decision, "completed")
    if isinstance(item, CommandItem):
        ran: dict[str, Any] = {}
        if status == "completed":
            status = "completed" if item.exit_code == 0 else "failed"
            ran = {
                "process_id": str(40000 + len(run.tools)),
                "source": "unifiedExecStartup",
                "output": item.output,
                "exit_code": item.exit_code,
                "duration_ms": item.duration_ms,
            }
        done = run.shapes.command_item(
            tool.item_id,
            item.command,
            thread.cwd,
            status=status,
            started_ms=tool.started_ms,
            completed_ms=box.now_ms,
            **ran,
        )
        _item_completed(box, run, done)
    else:
        done = run.shapes.file_change_item(
            tool.item_id,
            _file_path(thread, item),
            item.content,
            status=status,
            started_ms=tool.started_ms,
            completed_ms=box.now_ms,
        )
        _item_completed(box, run, done)
        if status == "completed":
            rel = item.path if not item.path.startswith("/") else item.path.lstrip("/")
            run.diff += shapes.unified_diff_add(rel, item.content)
            box.notify("turn/diff/updated", {**_ids(run), "diff": run.diff})
    if not run.trace_bug:
        box.trace("tool_ended", turn_id=run.turn_id, call_id=tool.item_id, status=status, decision=decision)
