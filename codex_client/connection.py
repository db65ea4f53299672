"""The client core, sans-IO as h11 does it: messages and times in, events and frames to send out.

:class:`ClientConnection` owns everything the client knows about one app-server connection: the JSON-RPC
endpoint, the wire record (and its inline schema check), the turns and their states, the usage ledger and
the approvals table. It never waits, sleeps or writes, and it does not know how messages are framed: the
trio driver (:class:`codex_client.session.Session`) reads the transport's message stream
(:mod:`contracts.transport`) and calls :meth:`receive_messages` with each read's list of payloads, sends
the frames the core hands out, and reacts to the events the core queues (:meth:`take_events`): a request
answered, an approval to ask the policy about, a frame to send, a turn ended, the server to kill.

The hot path is :meth:`receive_messages` for a read made only of agent message deltas of the running turn
(what a streaming model writes): the read's frames are recorded as one run, validated in one call,
appended to the turn's partial text and handed to its consumer as one :class:`MessageDeltas` batch;
no Python call per frame beyond decoding. Any other read goes frame by frame, with the same deltas
taken by the same code in runs between the other frames.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any, Final

from codex_client.approvals import Decision
from codex_client.approvaltable import ApprovalTable, PendingApproval
from codex_client.errors import ClientError, MessageTooLarge, ServerExited, too_large
from codex_client.events import (
    InterruptAnswered,
    InterruptSent,
    ItemCompleted,
    ItemStarted,
    MessageDeltas,
    TurnEnded,
    UsageUpdated,
)
from codex_client.notifications import KNOWN_NOTIFICATIONS, thread_of
from codex_client.tracemarks import tool_status, turn_status
from codex_client.tracerecords import TraceClosed, TraceQueue, TraceRecord
from codex_client.turncore import TurnCore, UserInput
from codex_client.turnphase import CANCELLED_OR_ENDED, Phase, Step
from codex_client.turnstate import TOOL_ITEM_TYPES, is_turn_scoped, notification_turn_id
from codex_client.usage import UsageLedger
from codex_client.wirerecord import DELTA_METHOD, FrameChecker, SchemaViolation, WireRecord
from contracts.jsonrpc import (
    DuplicateRequest,
    Endpoint,
    IncomingNotification,
    IncomingRequest,
    LateResponse,
    ResponseMatched,
    RpcError,
)
from contracts.messages import ErrorResponse, JsonId, Message, Request, Response
from contracts.record import TurnResult, WireEntry
from contracts.usage import UsageBuckets
from contracts.wire import Incoming, WireError, parse_payloads

# --- what the core asks of its driver ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestAnswered:
    """A request of ours got its answer (``error`` set for a JSON-RPC error answer)."""

    request_id: JsonId
    result: Any = None
    error: RpcError | None = None


@dataclass(frozen=True, slots=True)
class RequestsFailed:
    """Every request still waiting fails with ``error`` (kill, exit, lost frame)."""

    error: BaseException


@dataclass(frozen=True, slots=True)
class ApprovalOpened:
    """Ask the policy about this approval, then hand its decision to :meth:`ClientConnection.answer_approval`."""

    pending: PendingApproval


@dataclass(frozen=True, slots=True)
class ApprovalClosed:
    """Stop asking the policy: the request was closed (its turn ended, the server was killed)."""

    request_id: JsonId


@dataclass(frozen=True, slots=True)
class SendFrame:
    """Write this frame (an answer the core decided on by itself)."""

    message: Message


@dataclass(frozen=True, slots=True)
class TurnFinished:
    """The turn has its Result: wake whoever waits for it."""

    turn: TurnCore


@dataclass(frozen=True, slots=True)
class KillServer:
    """Kill the server's process group now (the core already counts it as killed)."""

    reason: str


@dataclass(frozen=True, slots=True)
class TurnIdKnown:
    """The turn learnt its id (from the ``turn/start`` answer or ``turn/started``): steering may go on."""

    turn: TurnCore


@dataclass(frozen=True, slots=True)
class Logged:
    """Pass this record to the ``client`` logger (it is in :attr:`ClientConnection.log` already)."""

    level: int
    message: str
    fields: dict[str, Any]


@dataclass(frozen=True, slots=True)
class TurnWoken:
    """The turn's supervisor should look again (an approval opened or was answered: the inactivity window)."""

    turn: TurnCore


Event = (
    RequestAnswered
    | RequestsFailed
    | ApprovalOpened
    | ApprovalClosed
    | SendFrame
    | TurnFinished
    | KillServer
    | TurnIdKnown
    | TurnWoken
    | TraceRecord
    | TraceClosed
    | Logged
)

_FIRST_REQUEST_ID: Final = 1


class ClientConnection:
    """One app-server connection as the client sees it (see the module doc). Times are on the session clock."""

    def __init__(
        self,
        *,
        max_line: int,
        event_buffer: int,
        interrupt_budget: float,
        validate_frames: bool = False,
        has_process: bool = True,
    ) -> None:
        self.max_line = max_line
        self.interrupt_budget = interrupt_budget  # for the "codex turn interrupted" record
        self.event_buffer = event_buffer
        self.endpoint = Endpoint(first_id=_FIRST_REQUEST_ID)
        self.record = WireRecord()
        self.checker: FrameChecker | None = FrameChecker() if validate_frames else None
        self.ledger = UsageLedger()
        self._events: list[Event] = []
        #: what the client trace should record: queued among the events, written by the driver
        self._trace = TraceQueue(self._events.append)  # not a method of self: no reference cycle to the record
        self.approvals = ApprovalTable(self.endpoint, self._trace)
        self.turns: list[TurnCore] = []
        self.active: TurnCore | None = None
        self.ended_turn_ids: set[str] = set()
        self.usage_owner: dict[str, TurnCore] = {}
        self.results: list[TurnResult] = []
        self.log: list[dict[str, Any]] = []
        self.client_errors: list[str] = []
        self.ignored_notifications: Counter[str] = Counter()
        self.other_thread_dropped = 0
        self.thread_id: str | None = None
        self.model: str | None = None
        self.failure: BaseException | None = None  # why the session cannot go on
        self.killed = False
        self.kill_reason: str | None = None
        self.exit_code: int | None = None
        self.closing = False
        #: False for a transport that started no server (a socket): its end is the connection's, not an exit
        self.has_process = has_process
        self._position = 0  # messages (lines, on stdio) received before the current read (for reports only)
        self._read: tuple[list[Incoming], int] = ([], 0)  # the current read and the position of its first message
        #: the current read's payloads when its n-th item came from its n-th payload (for the wire record)
        self._lines: list[Incoming] | None = None

    # --- plumbing -----------------------------------------------------------------------------------

    def take_events(self) -> list[Event]:
        """What the driver must do, in order, since the last call (the one way out of the core)."""
        # one list for the connection's life: the trace queue appends to it
        events = self._events.copy()
        self._events.clear()
        return events

    @property
    def wire(self) -> list[WireEntry]:
        return self.record.entries

    @property
    def schema_violations(self) -> list[SchemaViolation]:
        return self.checker.violations if self.checker is not None else []

    @property
    def schema_violation_count(self) -> int:
        return self.checker.count if self.checker is not None else 0

    @property
    def alive(self) -> bool:
        return self.failure is None and not self.killed

    def note(self, t: float, text: str) -> None:
        self.record.append(WireEntry(t, "note", note=text))

    def emit_log(self, t: float, level: int, message: str, **fields: Any) -> None:
        """Keep a log record (the session record's ``log``) and queue it for the driver's logger."""
        self.log.append({"t": t, "level": logging.getLevelName(level).lower(), "msg": message, **fields})
        self._events.append(Logged(level, message, fields))

    def client_error(self, text: str) -> None:
        """A bug of ours, caught so that the session still ends cleanly (the record lists it)."""
        self.client_errors.append(text)

    def reader_failed(self, error: Exception) -> None:
        """The driver's reader broke (a bug of ours): the session cannot go on."""
        self.client_errors.append(f"reader: {error!r}")
        self.failure = self.failure or ClientError(f"reader failed: {error!r}")

    def process_exited(self, code: int, t: float) -> None:
        """The server's process exited with ``code``."""
        self.exit_code = code
        self.note(t, f"exit {code}")

    def begin_closing(self) -> None:
        """The teardown began: no new request or turn."""
        self.closing = True

    def adopt_thread(self, thread_id: str, model: str | None, result: Any, t: float, *, resumed: bool) -> None:
        """``thread/start`` or ``thread/resume`` answered with ``thread_id``: turns run on it from now on."""
        known = self.thread_id == thread_id
        self.thread_id = thread_id
        answered_model = result.get("model") if isinstance(result, dict) else None
        self.model = model or (answered_model if isinstance(answered_model, str) else None) or self.model
        self._trace.thread_started(thread_id, resumed=resumed or known, metadata={"model": self.model})

    # --- sending ------------------------------------------------------------------------------------

    def request(self, method: str, params: Any) -> Request:
        """A new request (its id allocated); send it with :meth:`sent`."""
        return self.endpoint.request(method, params)

    def sent(self, t: float, message: Message) -> None:
        """``message`` is being written: record it (and check it)."""
        self.record.append(WireEntry(t, "c2s", frame=message.frame))
        if self.checker is not None:
            self.checker.check(t, "c2s", message.frame)

    def sent_raw(self, t: float, line: bytes) -> None:
        """``line`` is being written verbatim (a probe of the server's parsing): recorded as a raw client line."""
        self.record.append(WireEntry(t, "c2s", raw=line.decode("utf-8", "replace"), error="raw_line", size=len(line)))

    def abandon(self, request_id: JsonId) -> None:
        """Stop waiting for an answer (a later one is a late answer)."""
        if request_id in self.endpoint.outgoing:
            self.endpoint.abandon(request_id)

    # --- receiving ----------------------------------------------------------------------------------

    def receive_messages(self, payloads: list[Incoming], t: float) -> list[Event]:
        """One read of the message stream (``[]``: its end). Returns :meth:`take_events`.

        ``payloads``: one entry per message, in order, as the transport's framing handed them over (a message
        over the cap, or cut off by the end of the stream, as its WireError)."""
        if not payloads:
            return self.receive_eof(t)
        self._read = (payloads, self._position)
        self._position += len(payloads)
        items = parse_payloads(payloads)
        # Each payload gives at most one item, in order: as many items as payloads is one line per item.
        self._lines = payloads if len(items) == len(payloads) else None
        if not self._all_deltas(items, t):
            self._dispatch(items, t)
        return self.take_events()

    def receive_eof(self, t: float) -> list[Event]:
        """The stream ended (a torn last message came before, as its error): :meth:`connection_lost` fails
        what waits."""
        return self.take_events()

    def _delta_target(self) -> tuple[TurnCore, str, str | None] | None:
        """The running turn whose deltas take the batch path: its id known, not completed, not ended."""
        turn = self.active
        if turn is None or turn.result is not None:
            return None
        turn_id = turn.state.turn_id
        if turn_id is None or turn.state.completed or turn_id in self.ended_turn_ids or turn.events.closed:
            return None
        return turn, turn_id, self.thread_id

    def _all_deltas(self, items: list[Any], t: float) -> bool:
        """The hot path: every frame of the read is an agent message delta of the running turn. False: not so."""
        target = self._delta_target()
        if target is None or not items:
            return False
        try:
            params = [f["params"] for f in items if f["method"] == DELTA_METHOD]
            if len(params) != len(items) or {(p["turnId"], p["threadId"]) for p in params} != {target[1:]}:
                return False
        except (TypeError, KeyError):  # a message object, a bad line, a frame without params or ids
            return False
        self._take_deltas(target[0], items, params, 0, t)
        return True

    def _take_deltas(self, turn: TurnCore, frames: list[Any], params: list[Any], first: int, t: float) -> None:
        """A run of the running turn's delta frames (``first``: the run's index among the read's items)."""
        lines = self._lines
        self.record.received_run(t, frames, None if lines is None else lines[first : first + len(frames)])  # type: ignore[arg-type]
        if self.checker is not None:
            for i in self.checker.check_deltas(frames):
                self._violation(t, frames[i], first + i)
        turn.last_activity = t
        item_ids = [p.get("itemId") for p in params]
        deltas = [p.get("delta") for p in params]
        if set(map(type, deltas)) != {str} or set(map(type, item_ids)) != {str}:
            # rare: a delta that is not text counts for nothing; an item id that is not text is its str()
            kept = [(i, p) for i, p in zip(item_ids, params, strict=True) if type(p.get("delta")) is str]
            item_ids = [i if type(i) is str else str(p.get("itemId", "")) for i, p in kept]
            deltas = [p["delta"] for _, p in kept]
            if not deltas:
                return
        state = turn.state
        first_n = state.deltas + 1
        state.deltas += len(deltas)
        partial = state.partial
        if item_ids.count(item_ids[0]) == len(item_ids):
            partial.setdefault(item_ids[0], []).extend(deltas)
        else:
            for item_id, delta in zip(item_ids, deltas, strict=True):
                partial.setdefault(item_id, []).append(delta)
        turn.events.put_deltas(MessageDeltas(t, item_ids, deltas, first_n))

    def _dispatch(self, items: list[Any], t: float) -> None:
        """A read that is not all deltas: frame by frame, the running turn's deltas still taken in runs."""
        target = self._delta_target()
        run: list[dict[str, Any]] = []
        run_params: list[dict[str, Any]] = []
        for index, item in enumerate(items):
            if target is not None and type(item) is dict and item["method"] == DELTA_METHOD:
                params = item.get("params")
                if type(params) is dict and params.get("turnId") == target[1] and params.get("threadId") == target[2]:
                    run.append(item)
                    run_params.append(params)
                    continue
            if run:
                self._take_deltas(target[0], run, run_params, index - len(run), t)  # type: ignore[index]
                run, run_params = [], []
            self._on_item(item, t, index)
            if self.failure is not None:
                return  # the session failed (a lost frame): nothing after it is read
            target = self._delta_target()
        if run:
            self._take_deltas(target[0], run, run_params, len(items) - len(run), t)  # type: ignore[index]

    def _line_of(self, index: int | None) -> int | None:
        """The stream position (on stdio: the stdout line) of the ``index``-th item of the current read.

        Reports only: it walks the read again, counting the payloads that gave an item (blank ones give none)."""
        if index is None:
            return None
        payloads, base = self._read
        seen = -1
        for pos, one in enumerate(payloads):
            if type(one) is WireError or one.strip():  # type: ignore[union-attr]
                seen += 1
                if seen == index:
                    return base + pos + 1
        return base + len(payloads)

    def _violation(self, t: float, frame: Any, index: int | None, violations: list[Any] | None = None) -> None:
        assert self.checker is not None
        if violations is None:  # a frame of a failed batch: say why (a notification: no request table to upset)
            violations = self.checker.session_validator.validator.validate(frame, "s2c")
        self.checker.report(t, "s2c", frame, violations, self._line_of(index))

    def _on_item(self, item: Any, t: float, index: int | None) -> None:
        """One frame (or bad line) off the general path."""
        if type(item) is dict:  # a notification, as a bare frame
            line = None if self._lines is None or index is None else self._lines[index]
            self.record.received(t, item, line if type(line) is bytes else None)
            if self.checker is not None and (violations := self.checker.session_validator.validate(item, "s2c")):
                self._violation(t, item, index, violations)
            params = item.get("params")
            self.on_notification(item["method"], params if type(params) is dict else {}, t)
            return
        if isinstance(item, WireError):
            # a message still streaming in past the cap: the writer may be blocked writing it, fail now
            raw = None if item.partial else item.sample.decode("utf-8", "replace")
            self.record.append(WireEntry(t, "s2c", error=item.kind.value, raw=raw, size=item.size))
            error = too_large(item, self.max_line)
            if error is not None:
                self.lost_frame(t, error)
            else:
                self.emit_log(
                    t, logging.DEBUG, "skipped a line that is not a frame", kind=item.kind.value, size=item.size
                )
            return
        self.record.append(WireEntry(t, "s2c", frame=item.frame))
        if self.checker is not None and (violations := self.checker.session_validator.validate(item.frame, "s2c")):
            self._violation(t, item.frame, index, violations)
        self._on_message(item, t)

    def _on_message(self, message: Message, t: float) -> None:
        event = self.endpoint.receive(message)
        if isinstance(event, ResponseMatched):
            response = event.response
            if isinstance(response, Response):
                self._events.append(RequestAnswered(event.request.id, response.result))
            elif isinstance(response, ErrorResponse):
                error = RpcError.from_response(response, event.request.method)
                self._events.append(RequestAnswered(event.request.id, None, error))
        elif isinstance(event, IncomingNotification):
            params = event.notification.params
            self.on_notification(event.notification.method, params if type(params) is dict else {}, t)
        elif isinstance(event, IncomingRequest):
            self._on_server_request(event.request, t)
        elif isinstance(event, DuplicateRequest):
            self.emit_log(t, logging.WARNING, "server reused a pending request id", request_id=event.request.id)
        elif isinstance(event, LateResponse):
            self.emit_log(t, logging.DEBUG, "late answer", method=event.request.method, request_id=event.request.id)
        # unknown and duplicate responses are ignored (they are on the wire)

    # --- notifications ------------------------------------------------------------------------------

    def on_notification(self, method: str, params: dict[str, Any], t: float) -> None:
        """One notification off the general path: thread filter, usage, resolved requests, the turn gate."""
        thread = thread_of(method, params)
        if isinstance(thread, str) and self.thread_id is not None and thread != self.thread_id:
            self.other_thread_dropped += 1
            return
        if method not in KNOWN_NOTIFICATIONS:
            self.ignored_notifications[method] += 1
        if method == "thread/tokenUsage/updated":
            self._on_usage(params, t)
            return
        if method == "serverRequest/resolved":
            self.approvals.resolved(params, t)
            return
        turn = self.active
        if turn is None or turn.result is not None or not is_turn_scoped(method):
            return
        named = notification_turn_id(method, params)
        if (named is not None and named in self.ended_turn_ids) or not turn.state.accepts(method, params):
            # late events of an earlier turn, while the new turn's id is not known yet, are not the new turn's
            turn.state.ignored += 1
            return
        turn.last_activity = t
        if method == "turn/started" and named is not None:
            self.learn_turn_id(turn, named)
        for event in turn.state.on_notification(method, params, t):
            turn.emit(event)
            if isinstance(event, ItemStarted) and method == "item/started" and event.item_type in TOOL_ITEM_TYPES:
                self._tool_started(turn, event.item_id, event.item_type, event.item)
            elif isinstance(event, ItemCompleted) and method == "item/completed" and event.item_type in TOOL_ITEM_TYPES:
                self._tool_ended(turn, event.item_id, event.status, event.item)
        if method == "turn/completed" and turn.state.completed:
            self._on_turn_completed(turn, t)

    def _on_turn_completed(self, turn: TurnCore, t: float) -> None:
        state = turn.state
        self.emit_log(
            t,
            logging.DEBUG,
            "turn/completed received",
            thread_id=self.thread_id,
            turn_id=state.turn_id,
            status=state.server_status,
        )
        turn.completed_at = t
        if turn.usage is None and state.turn_id is not None:
            self.learn_turn_id(turn, state.turn_id)
        if turn.usage is not None:
            turn.usage.apply_completion_usage(state.completion_usage)
        self.finish_turn(turn, t)

    def _on_usage(self, params: dict[str, Any], t: float) -> None:
        accepted = self.ledger.update(params)
        if accepted is None:
            return
        usage, added = accepted
        turn = self.usage_owner.get(usage.turn_id)
        if turn is None:
            return
        turn.usage = usage
        turn.last_activity = t
        if turn.result is not None:
            # late usage after turn/completed still counts: the delivered Result is updated in place
            turn.result.usage = usage.by_model(turn.model or self.model)
            self.emit_log(t, logging.DEBUG, "late usage", turn_id=usage.turn_id)
        else:
            turn.emit(UsageUpdated(t, UsageBuckets.from_breakdown(added), usage.buckets()))

    def _on_server_request(self, request: Request, t: float) -> None:
        params = request.params if isinstance(request.params, dict) else {}
        turn = self.active
        turn_id = params.get("turnId") if isinstance(params.get("turnId"), str) else None
        if turn is not None and (
            turn.result is not None
            or (turn_id is not None and turn.state.turn_id not in (None, turn_id))
            or turn_id in self.ended_turn_ids
        ):
            turn = None  # another (earlier, sub-agent) turn's request: answered, not attributed
        opened = self.approvals.open(request, turn, t)
        if isinstance(opened, PendingApproval):
            if turn is not None:
                self._events.append(TurnWoken(turn))  # the inactivity window pauses while an approval is pending
            self._events.append(ApprovalOpened(opened))
            return
        reason = opened.message
        self.emit_log(t, logging.WARNING, reason, request_id=request.id)
        self._events.append(SendFrame(opened))

    # --- approvals ----------------------------------------------------------------------------------

    def answer_approval(self, pending: PendingApproval, decision: Decision, reason: str | None, t: float) -> None:
        """The policy decided: queue the answer (nothing when the request was closed or the session is gone)."""
        if not self.alive or not pending.open:
            return
        answer = self.approvals.answer(pending, decision, reason, t)
        if answer is None:
            return
        if isinstance(answer, ErrorResponse):
            rid = pending.request.request_id
            self.emit_log(t, logging.INFO, "approval answered with an error", request_id=rid, reason=answer.message)
        if pending.turn is not None:
            self._events.append(TurnWoken(pending.turn))
        self._events.append(SendFrame(answer))

    # --- turns --------------------------------------------------------------------------------------

    def new_turn(self, input: UserInput, params: dict[str, Any], timeout: float | None, model: str | None) -> TurnCore:
        turn = TurnCore(len(self.turns), input, params, timeout, model, self.thread_id, self.event_buffer)
        self.turns.append(turn)
        return turn

    def refuse_turn(self, turn: TurnCore) -> tuple[bool, str] | None:
        """Why ``turn`` cannot start now, as (busy, message): another turn runs, or no thread; None when it can.

        A refused turn is dropped (it gets no index and no Result).
        """
        if self.active is not None and self.active.result is None:
            refusal = (True, f"turn {self.active.index} is still running")
        elif self.thread_id is None:
            refusal = (False, "no thread: call start_thread() or resume_thread() first")
        else:
            return None
        if self.turns and self.turns[-1] is turn:
            self.turns.pop()
        return refusal

    def start_turn(self, turn: TurnCore, t: float) -> Request | None:
        """Make ``turn`` the running one: its ``turn/start`` request, or None when the session is gone (ended)."""
        self.active = turn
        turn.state.thread_id = self.thread_id
        if not self.alive or self.closing:
            self.finish_turn(turn, t, failure=f"session closed: {self.failure or self.kill_reason or 'closing'}")
            return None
        params = {"threadId": self.thread_id, "input": turn.input, **turn.params}
        if turn.model is not None:
            params["model"] = turn.model
        turn.step(Step.START)
        request = self.endpoint.request("turn/start", params)
        turn.started_at = t
        turn.last_activity = t
        self.emit_log(t, logging.DEBUG, "turn/start sent", thread_id=self.thread_id, turn_index=turn.index)
        return request

    def learn_turn_id(self, turn: TurnCore, turn_id: str) -> None:
        if not turn.state.set_turn_id(turn_id):
            return
        owner = self.ledger.current
        if owner is None or owner.turn_id != turn_id:
            self.usage_owner[turn_id] = turn
            turn.usage = self.ledger.turn_started(turn_id)
        if not turn.trace_open:
            turn.trace_open = True
            self._trace.turn_started(turn_id, self.thread_id or "")
        self._events.append(TurnIdKnown(turn))

    def request_cancel(self, turn: TurnCore, status: str, error: str, t: float) -> bool:
        """Fix the turn's status at a cancellation or deadline (the first wins); True when this one counted.

        IllegalTurnTransition for a turn not started yet (nothing to cancel: it was never entered)."""
        if turn.phase in CANCELLED_OR_ENDED:
            return False
        turn.step(Step.CANCEL)
        turn.cancel_at = t
        turn.state.fix(status, error)
        self.note(t, f"cancel: {status}: {error}")
        return True

    def finish_turn(self, turn: TurnCore, t: float, *, failure: str | None = None) -> None:
        """Deliver the turn's one Result (idempotent): close open items and pending approvals locally."""
        if turn.phase is Phase.ENDED:
            return
        turn.step(Step.END)
        state = turn.state
        status, error = state.outcome() or ("failed", failure or "turn ended without turn/completed")
        closed_items = state.close_open_items(t)
        for event in closed_items:
            turn.emit(event)
            if event.item_type in TOOL_ITEM_TYPES:
                self._trace.tool_ended(event.item_id, "aborted")
        closed_approvals = self.approvals.close_for_turn(turn, t)
        self._events.extend(ApprovalClosed(rid) for rid in closed_approvals)
        turn.result = self._result(turn, status, error, t)
        turn.result.items_closed_locally = [e.item_id for e in closed_items]
        turn.result.approvals_closed_locally = [str(rid) for rid in closed_approvals]
        self.results.append(turn.result)
        if turn.interrupt_sent_at is not None and turn.completed_at is not None:
            # logged when turn/completed arrives, whether or not the interrupt's own answer ever does
            self.emit_log(
                t,
                logging.INFO,
                "codex turn interrupted",
                thread_id=self.thread_id,
                turn_id=state.turn_id,
                latency=turn.completed_at - turn.interrupt_sent_at,
                timeout=self.interrupt_budget,
                # whether the turn/interrupt answer had come by then (it may come later, or never: §6 keys the
                # record to turn/completed; the missing answer is recorded as `interrupt.answered: no answer`)
                answered=turn.interrupt_answered_at is not None,
            )
        if state.turn_id is not None:
            self.ended_turn_ids.add(state.turn_id)
            if turn.trace_open:
                self._trace.turn_ended(state.turn_id, turn_status(status, turn.killed))
        turn.emit(TurnEnded(t, status, state.server_status), force=True)
        turn.events.closed = True
        if self.active is turn:
            self.active = None
        self.emit_log(t, logging.INFO, "finished", turn_index=turn.index, status=status, duration=t - turn.started_at)
        self._events.append(TurnFinished(turn))

    def _result(self, turn: TurnCore, status: str, error: str | None, t: float) -> TurnResult:
        state = turn.state
        return TurnResult(
            index=turn.index,
            status=status,  # type: ignore[arg-type]
            error=error,
            thread_id=state.thread_id or self.thread_id,
            turn_id=state.turn_id,
            final_text=state.final_text,
            usage=turn.usage.by_model(turn.model or self.model) if turn.usage is not None else {},
            server_status=state.server_status,
            completed_consumed=state.completed_consumed,
            started_at=turn.started_at,
            ended_at=t,
            cancel_at=turn.cancel_at,
            interrupt_sent_at=turn.interrupt_sent_at,
            interrupt_answered_at=turn.interrupt_answered_at,
            turn_completed_at=turn.completed_at,
            killed=turn.killed,
            kill_reason=turn.kill_reason,
        )

    def kill_turn(self, turn: TurnCore, reason: str, t: float, *, stderr: str = "") -> None:
        """Kill the server for the turn's sake: the Result says ``killed``."""
        turn.killed = True
        turn.kill_reason = reason
        self.kill(reason, t, stderr=stderr)
        self.finish_turn(turn, t, failure=f"server killed: {reason}")

    def kill(self, reason: str, t: float, *, error: BaseException | None = None, stderr: str = "") -> None:
        """The session is dead: queue the kill, fail waiting requests, end the running turn (``killed``)."""
        if self.killed:
            return
        self.killed = True
        self.kill_reason = reason
        self.note(t, f"kill: {reason}")
        self.emit_log(t, logging.WARNING, "server killed", reason=reason)
        self._events.append(KillServer(reason))
        self._events.append(RequestsFailed(error or ServerExited(f"server killed: {reason}", stderr_tail=stderr)))
        self._events.extend(ApprovalClosed(rid) for rid, p in self.approvals.pending.items() if p.open)
        turn = self.active
        if turn is not None and turn.result is None:
            turn.killed = True
            turn.kill_reason = reason
            self.finish_turn(turn, t, failure=f"server killed: {reason}")

    def lost_frame(self, t: float, error: MessageTooLarge) -> None:
        """A line (message) over the cap: the session fails with it, the running turn too, the group is killed."""
        self.failure = error
        self.emit_log(t, logging.ERROR, f"server {error.what} over the cap", size=error.size, cap=error.cap)
        turn = self.active
        if turn is not None and turn.result is None:
            turn.killed = True
            turn.kill_reason = str(error)
            self.finish_turn(turn, t, failure=f"lost frame: {error}")
        self.kill(str(error), t, error=error)

    def connection_lost(self, t: float, stderr: str) -> None:
        """The stream ended (and the exit status known, or given up on): fail what waits, end the running turn."""
        code = self.exit_code
        if not self.has_process:
            what = "the server closed the connection"
        else:
            what = "process exited" + (
                f" with status {code}" if code is not None else " or closed its stdout (no exit status yet)"
            )
        lost = self.failure if isinstance(self.failure, MessageTooLarge) else None
        self._events.append(RequestsFailed(lost or ServerExited(what, exit_code=code, stderr_tail=stderr)))
        if self.failure is None:
            self.failure = ServerExited(what, exit_code=code, stderr_tail=stderr)
        turn = self.active
        if turn is not None and turn.result is None:
            tail = stderr.strip()
            failure = f"lost frame: {lost}" if lost is not None else f"{what}{'; stderr: ' + tail if tail else ''}"
            self.finish_turn(turn, t, failure=failure)

    # --- the client trace ---------------------------------------------------------------------------

    def interrupt(self, turn: TurnCore, t: float) -> Request:
        """The ``turn/interrupt`` of ``turn`` (cancelled, its id known), being sent now: its timing, its event, its
        trace mark."""
        turn.step(Step.INTERRUPT)
        request = self.endpoint.request("turn/interrupt", {"threadId": self.thread_id, "turnId": turn.state.turn_id})
        turn.interrupt_request_id = request.id
        status = turn.state.fixed[0] if turn.state.fixed else "aborted"
        turn.set_timing(interrupt_sent_at=t)
        turn.emit(InterruptSent(t, status))
        self._trace.other("interrupt.sent", {"request_id": request.id, "reason": status}, turn_id=turn.state.turn_id)
        return request

    def interrupt_answered(self, turn: TurnCore, request_id: JsonId, outcome: str, error: str | None, t: float) -> None:
        if turn.interrupt_answer_recorded:
            return
        turn.interrupt_answer_recorded = True
        if outcome in ("ok", "error"):
            turn.set_timing(interrupt_answered_at=t)
        turn.emit(InterruptAnswered(t, error))
        meta: dict[str, Any] = {"request_id": request_id, "outcome": outcome}
        if error:
            meta["error"] = error
        self._trace.other("interrupt.answered", meta, turn_id=turn.state.turn_id)

    def _tool_started(self, turn: TurnCore, item_id: str, item_type: str, item: dict[str, Any]) -> None:
        if item_id in turn.traced_tools:
            return
        turn.traced_tools.add(item_id)
        self._trace.tool_started(item_id, item_type, item, self.thread_id or "", turn.state.turn_id or "")

    def _tool_ended(self, turn: TurnCore, item_id: str, status: str | None, item: dict[str, Any]) -> None:
        if item_id not in turn.traced_tools or item_id in turn.ended_tools:
            return
        turn.ended_tools.add(item_id)
        self._trace.tool_ended(item_id, tool_status(status), item)

    def close_trace(self, t: float) -> None:
        """The session is over: record what never got an answer, then :class:`TraceClosed` (the driver closes its
        trace writer)."""
        for turn in self.turns:
            if turn.interrupt_request_id is not None and not turn.interrupt_answer_recorded:
                self.interrupt_answered(turn, turn.interrupt_request_id, "no answer", "session closed first", t)
        self.approvals.close_at_session_end()
        failed = self.killed or (self.failure is not None and not isinstance(self.failure, ServerExited))
        self._events.append(TraceClosed("failed" if failed else "completed"))
