"""The session's reader: the one task that owns the server's stdout, and the dispatch of what it reads.

:func:`read_loop` feeds each read to the line decoder and :func:`dispatch` handles its frames in one pass; the
running turn's agent message deltas take an inline path there (keep it inline: it is the ingest hot path).
Everything else goes to :func:`on_item` / :func:`on_notification`. At EOF, :func:`after_eof` fails what waits.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final

import trio

from contracts.jsonrpc import (
    DuplicateRequest,
    IncomingNotification,
    IncomingRequest,
    LateResponse,
    ResponseMatched,
    RpcError,
)
from contracts.messages import ErrorResponse, Message, Response
from contracts.record import WireEntry
from contracts.usage import UsageBuckets
from contracts.wire import WireError, WireErrorKind
from harness.client.errors import ClientError, LineTooLong, ServerExited
from harness.client.events import MessageDelta, UsageUpdated
from harness.client.server_requests import on_resolved, on_server_request
from harness.client.tracemarks import trace_tool_ended, trace_tool_started
from harness.client.turnstate import TOOL_ITEM_TYPES, is_turn_scoped, nested_id, notification_turn_id

if TYPE_CHECKING:
    from harness.client.session import Session
    from harness.client.turn import Turn


_READ_CHUNK: Final = 65536
#: methods the client understands; anything else is ignored and counted
KNOWN_NOTIFICATIONS: Final = frozenset(
    {
        "thread/started",
        "thread/status/changed",
        "thread/tokenUsage/updated",
        "thread/readState/changed",
        "thread/name/updated",
        "turn/started",
        "turn/completed",
        "turn/diff/updated",
        "turn/plan/updated",
        "item/started",
        "item/completed",
        "item/agentMessage/delta",
        "item/reasoning/summaryTextDelta",
        "item/reasoning/summaryPartAdded",
        "item/reasoning/textDelta",
        "item/commandExecution/outputDelta",
        "item/commandExecution/terminalInteraction",
        "item/fileChange/outputDelta",
        "item/fileChange/patchUpdated",
        "item/mcpToolCall/progress",
        "serverRequest/resolved",
        "error",
        "warning",
        "configWarning",
        "deprecationNotice",
        "account/rateLimits/updated",
        "remoteControl/status/changed",
        "model/rerouted",
    }
)


async def read_loop(session: Session) -> None:
    cap = session.options.max_line
    try:
        while True:
            data = await session.transport.receive(_READ_CHUNK)
            t = session.now()
            if not data:
                session._eof_seen = True
                for item in session._decoder.feed_eof():
                    on_item(session, item, t)
                break
            newline = data.rfind(b"\n")
            session._since_newline = len(data) - newline - 1 if newline >= 0 else session._since_newline + len(data)
            if not dispatch(session, session._decoder.feed_fast(data), t):
                return
            if session._since_newline > cap:
                # the line is still streaming in; the child may be blocked writing it: fail now
                error = LineTooLong(session._since_newline, cap, at_least=True)
                session._record(
                    WireEntry(t, "s2c", error=WireErrorKind.OVERSIZED_LINE.value, size=session._since_newline, raw=None)
                )
                lost_frame(session, error)
                return
    except Exception as exc:
        session.client_errors.append(f"reader: {exc!r}")
        session.failure = session.failure or ClientError(f"reader failed: {exc!r}")
    finally:
        session._reader_done.set()
        if session.failure is None and not session.killed:
            session.note("stdout EOF")
        if session._nursery is not None:
            session._spawn(after_eof, session)


async def after_eof(session: Session) -> None:
    """stdout is gone: fail waiting requests and the running turn (after a short wait for the exit status)."""
    if not session._exited.is_set() and not session.killed:
        with trio.move_on_after(session.options.exit_grace):
            await session._exited.wait()
    code = session.exit_code
    what = "process exited" + (
        f" with status {code}" if code is not None else " or closed its stdout (no exit status yet)"
    )
    error = session.failure if isinstance(session.failure, LineTooLong) else None
    session._fail_pending(error or ServerExited(what, exit_code=code, stderr_tail=session.transport.stderr_tail()))
    if session.failure is None:
        session.failure = ServerExited(what, exit_code=code, stderr_tail=session.transport.stderr_tail())
    turn = session._active
    if turn is not None and turn.result is None:
        if error is not None:
            session._finish_turn(turn, failure=f"lost frame: {error}")
        else:
            session._finish_turn(turn, failure=f"{what}{session._stderr_suffix()}")


def lost_frame(session: Session, error: LineTooLong) -> None:
    session.failure = error
    session._log(logging.ERROR, "server line over the cap", size=error.size, cap=error.cap)
    turn = session._active
    if turn is not None and turn.result is None:
        turn.killed = True
        turn.kill_reason = str(error)
        session._finish_turn(turn, failure=f"lost frame: {error}")
    session.kill(str(error), error=error)


def on_item(session: Session, item: Message | WireError, t: float) -> None:
    if isinstance(item, WireError):
        session._record(
            WireEntry(t, "s2c", error=item.kind.value, raw=item.sample.decode("utf-8", "replace"), size=item.size)
        )
        if item.kind is WireErrorKind.OVERSIZED_LINE:
            lost_frame(session, LineTooLong(item.size, session.options.max_line))
        else:
            session._log(logging.DEBUG, "skipped a line that is not a frame", kind=item.kind.value, size=item.size)
        return
    session._record(WireEntry(t, "s2c", frame=item.frame))
    if session._validator is not None:
        session._check_frame(t, "s2c", item.frame)
    event = session._endpoint.receive(item)
    if isinstance(event, ResponseMatched):
        slot = session._slots.pop(event.request.id, None)
        if slot is not None:
            response = event.response
            if isinstance(response, Response):
                slot.result = response.result
            elif isinstance(response, ErrorResponse):
                slot.error = RpcError.from_response(response, event.request.method)
            slot.done.set()
    elif isinstance(event, IncomingNotification):
        on_notification(session, event.notification.method, event.notification.params, t)
    elif isinstance(event, IncomingRequest):
        on_server_request(session, event.request, t)
    elif isinstance(event, DuplicateRequest):
        session._log(logging.WARNING, "server reused a pending request id", request_id=event.request.id)
    elif isinstance(event, LateResponse):
        session._log(logging.DEBUG, "late answer", method=event.request.method, request_id=event.request.id)
    # unknown and duplicate responses are ignored (they are on the wire)


def on_notification(session: Session, method: str, params: Any, t: float) -> None:
    if type(params) is not dict:
        params = {}
    if method == "item/agentMessage/delta" and on_delta(session, params, t):
        return
    thread = params.get("threadId")
    if thread is None and method == "thread/started":
        thread = nested_id(params, "thread")
    if isinstance(thread, str) and session.thread_id is not None and thread != session.thread_id:
        session.other_thread_dropped += 1
        return
    if method not in KNOWN_NOTIFICATIONS:
        session.ignored_notifications[method] += 1
    if method == "thread/tokenUsage/updated":
        on_usage(session, params, t)
        return
    if method == "serverRequest/resolved":
        on_resolved(session, params, t)
        return
    turn = session._active
    if turn is None or turn.result is not None or not is_turn_scoped(method):
        return
    named = notification_turn_id(method, params)
    if (named is not None and named in session._ended_turn_ids) or not turn.state.accepts(method, params):
        # late events of an earlier turn, while the new turn's id is not known yet, are not the new turn's
        turn.state.ignored += 1
        return
    turn.last_activity = t
    if method == "turn/started":
        turn_id = notification_turn_id(method, params)
        if turn_id is not None:
            session._learn_turn_id(turn, turn_id)
    for event in turn.state.on_notification(method, params, t):
        turn.emit(event)
        if method == "item/started" and getattr(event, "item_type", None) in TOOL_ITEM_TYPES:
            trace_tool_started(session, turn, event.item_id, event.item_type, event.item)  # type: ignore[union-attr]
        elif method == "item/completed" and getattr(event, "item_type", None) in TOOL_ITEM_TYPES:
            trace_tool_ended(session, turn, event.item_id, event.status, event.item)  # type: ignore[union-attr]
    if method == "turn/completed" and turn.state.completed:
        session._log(
            logging.DEBUG,
            "turn/completed received",
            thread_id=session.thread_id,
            turn_id=turn.state.turn_id,
            status=turn.state.server_status,
        )
        turn.completed_at = t
        turn.completed_by_server = True
        if turn.usage is None and turn.state.turn_id is not None:
            session._learn_turn_id(turn, turn.state.turn_id)
        if turn.usage is not None:
            turn.usage.apply_completion_usage(turn.state.completion_usage)
        session._finish_turn(turn)


def dispatch(session: Session, items: list[Any], t: float) -> bool:
    """Handle the frames of one read in one pass; False once the session failed (stop reading).

    A notification is recorded as (t, frame) and dispatched without a message object; responses, requests
    and bad lines take the general path. While a turn with a known id runs, its agent message deltas are
    handled inline (the conditions of :func:`on_delta`, re-evaluated after every other frame, since only
    those can change the running turn), and the consumer is woken once for the whole read.
    """
    rx = session._rx
    notify = on_notification
    fast = delta_target(session)
    # inline validation of notifications: the frame is checked while it is still hot in the cache
    check = session._validator.validator.validate if session._validator is not None else None
    for item in items:
        if type(item) is dict:
            rx.append((t, item))
            if check is not None and (violations := check(item, "s2c")):
                session._schema_violation(t, "s2c", item, violations)
            params = item.get("params")
            if fast is not None and item["method"] == "item/agentMessage/delta" and type(params) is dict:
                turn, state, turn_id, thread_id, queue = fast
                if params.get("turnId") == turn_id and params.get("threadId") == thread_id:
                    turn.last_activity = t
                    delta = params.get("delta")
                    if type(delta) is not str:
                        continue
                    item_id = params.get("itemId")
                    if type(item_id) is not str:
                        item_id = str(params.get("itemId", ""))
                    state.deltas += 1
                    parts = state.partial.get(item_id)
                    if parts is None:
                        parts = state.partial[item_id] = []
                    parts.append(delta)
                    if len(queue._items) < queue.limit:
                        queue._items.append(MessageDelta(t, item_id, delta, state.deltas))
                    else:
                        queue.dropped += 1
                    continue
            if fast is not None:
                fast[4].wake()
            notify(session, item["method"], params, t)
        else:
            if fast is not None:
                fast[4].wake()
            on_item(session, item, t)
            if session.failure is not None:
                return False
        fast = delta_target(session)
    if fast is not None:
        fast[4].wake()
    return True


def delta_target(session: Session) -> tuple[Turn, Any, str, str | None, Any] | None:
    """The running turn whose deltas may take the inline path: its id known, not completed, not ended."""
    turn = session._active
    if turn is None or turn.result is not None:
        return None
    state = turn.state
    turn_id = state.turn_id
    if turn_id is None or state.completed or turn_id in session._ended_turn_ids or turn.events._closed:
        return None
    return turn, state, turn_id, session.thread_id, turn.events


def on_delta(session: Session, params: dict[str, Any], t: float) -> bool:
    """The hot path: an agent message delta of the running turn, once its id is known. False: not handled.

    Handles exactly the deltas the general path would accept for the running turn (our thread, our turn
    id, the turn not completed), with the same effects; anything else takes the general path.
    """
    turn = session._active
    if turn is None or turn.result is not None:
        return False
    state = turn.state
    turn_id = state.turn_id
    if (
        turn_id is None
        or state.completed
        or params.get("turnId") != turn_id
        or params.get("threadId") != session.thread_id
        or turn_id in session._ended_turn_ids
    ):
        return False
    turn.last_activity = t
    delta = params.get("delta")
    if type(delta) is not str:
        return True
    item_id = params.get("itemId")
    if type(item_id) is not str:
        item_id = str(params.get("itemId", ""))
    state.deltas += 1
    parts = state.partial.get(item_id)
    if parts is None:
        parts = state.partial[item_id] = []
    parts.append(delta)
    turn.events.put(MessageDelta(t, item_id, delta, state.deltas))
    return True


def on_usage(session: Session, params: dict[str, Any], t: float) -> None:
    accepted = session._ledger.update(params)
    if accepted is None:
        return
    usage, added = accepted
    turn = session._usage_owner.get(usage.turn_id)
    if turn is None:
        return
    turn.usage = usage
    turn.last_activity = t
    if turn.result is not None:
        # late usage after turn/completed still counts: the delivered Result is updated in place
        turn.result.usage = usage.by_model(turn.model or session.model)
        session._log(logging.DEBUG, "late usage", turn_id=usage.turn_id)
    else:
        turn.emit(UsageUpdated(t, UsageBuckets.from_breakdown(added), usage.buckets()))
