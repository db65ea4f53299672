"""The client session: one reader owns the server's stdout, everything runs in the session's nursery.

    async with open_session(transport, SessionOptions(...), policy=accept_all) as session:
        await session.start_thread(cwd="/work")
        async with session.turn("Say hello") as turn:
            async for event in turn:
                ...
        print(turn.result.status, turn.result.final_text)

Every wait is bounded: requests by their timeouts, turns by the deadline / inactivity watchdog and
the interrupt budget, the teardown step by step. Every frame sent or received is kept in
:attr:`Session.wire` with its time on the session's monotonic clock (``trio.current_time()``, so
virtual under MockClock). See ``docs/client.md``.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import math
from collections import Counter
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import trio

from contracts.record import Budgets, SessionRecord, TeardownStep, TurnResult, WireEntry
from contracts.usage import UsageBuckets
from harness.client.approvals import (
    APPROVAL_METHODS,
    DECISIONS,
    ERROR_DECISION,
    ApprovalRequest,
    Policy,
    accept_all,
    answer_for,
)
from harness.client.errors import (
    ClientError,
    LineTooLong,
    RequestTimeout,
    ServerExited,
    SessionClosed,
    ThreadStartFailed,
    TurnBusy,
)
from harness.client.events import (
    ApprovalAnswered,
    ApprovalRequested,
    ApprovalResolved,
    InterruptAnswered,
    InterruptSent,
    MessageDelta,
    TurnEnded,
    TurnEvent,
    UsageUpdated,
)
from harness.client.trace import ClientTrace, NullTrace
from harness.client.transport import Transport, TransportClosed
from harness.client.turn import Turn, UserInput
from harness.client.turnstate import TOOL_ITEM_TYPES, is_turn_scoped, notification_turn_id
from harness.client.usage import UsageLedger
from harness.jsonrpc import (
    DuplicateRequest,
    Endpoint,
    IncomingNotification,
    IncomingRequest,
    LateResponse,
    ProtocolViolation,
    ResponseMatched,
    RpcError,
)
from harness.messages import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    NOTSET,
    ErrorResponse,
    JsonId,
    Message,
    Notification,
    Request,
    Response,
)
from harness.wire import DEFAULT_MAX_LINE, LineDecoder, WireError, WireErrorKind, encode

logger = logging.getLogger("harness.client")

_READ_CHUNK: Final = 65536
MAX_KEPT_VIOLATIONS: Final = 1000
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


@dataclass(frozen=True, slots=True)
class ClientInfo:
    name: str = "codex_harness"
    title: str | None = "codex-harness"
    version: str = "0.1.0"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "version": self.version}
        if self.title is not None:
            data["title"] = self.title
        return data


@dataclass(frozen=True, slots=True)
class SessionOptions:
    """What a session runs with. Times are seconds on the session clock."""

    client_info: ClientInfo = field(default_factory=ClientInfo)
    experimental_api: bool = False  # stable by default; opt in explicitly
    opt_out_notifications: tuple[str, ...] = ()
    request_timeout: float = 30.0  # initialize, turn/start, turn/steer, other requests
    thread_timeout: float = 60.0  # thread/start, thread/resume
    interrupt_budget: float = 2.0  # ONE budget for the interrupt answer + turn/completed
    teardown_timeout: float = 3.0  # bound of the whole teardown
    turn_timeout: float | None = None  # hard deadline per turn -> Result `timeout`
    inactivity_timeout: float | None = 600.0  # semantic inactivity, paused while an approval is pending
    approval_timeout: float = 60.0  # a policy past this answers `cancel`
    exit_grace: float = 0.1  # at stdout EOF, how long to wait for the exit status before failing the turn
    max_line: int = DEFAULT_MAX_LINE
    event_buffer: int = 65536  # events kept per turn for the iterator; beyond, events are dropped and counted
    initialize: bool = True  # open_session does initialize + initialized
    trace_dir: Path | None = None  # the client's trace bundle directory (manifest.json inside); None: no bundle
    trace_marker_events: str = "protocol_event"  # approval/interrupt steps as protocol events (replayable) or "other"
    # validate every frame sent and received with jsonschema-rs as it passes (the schema contract validates the
    # record afterwards either way); findings go to Session.schema_violations
    validate_frames: bool = False

    def budgets(self) -> Budgets:
        return Budgets(
            interrupt_s=self.interrupt_budget, teardown_s=self.teardown_timeout, request_s=self.request_timeout
        )


class _Slot:
    __slots__ = ("done", "error", "method", "result")

    def __init__(self, method: str) -> None:
        self.method = method
        self.done = trio.Event()
        self.result: Any = None
        self.error: BaseException | None = None


@dataclass(slots=True)
class _PendingApproval:
    request: ApprovalRequest
    turn: Turn | None
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    answered: bool = False
    closed: bool = False  # closed locally (turn ended while pending)
    resolved: bool = False  # serverRequest/resolved seen, or closed locally


class Session:
    """A connection to one app-server. Build it with :func:`open_session`."""

    def __init__(self, transport: Transport, options: SessionOptions, policy: Policy) -> None:
        self.transport = transport
        self.options = options
        self.policy = policy
        self._wire: list[WireEntry] = []
        # received notification frames not yet turned into WireEntry: (t, frame), in wire order (see `wire`)
        self._rx: list[tuple[float, dict[str, Any]]] = []
        self.results: list[TurnResult] = []
        self.teardown: list[TeardownStep] = []
        self.log: list[dict[str, Any]] = []
        self.client_errors: list[str] = []
        self.ignored_notifications: Counter[str] = Counter()
        self.other_thread_dropped = 0
        self.thread_id: str | None = None
        self.model: str | None = None
        self.initialize_result: dict[str, Any] | None = None
        self.failure: BaseException | None = None  # why the session cannot go on
        self.killed = False
        self.kill_reason: str | None = None
        self.exit_code: int | None = None
        self.trace: Any = NullTrace()
        self._endpoint = Endpoint(first_id=1)
        self._decoder = LineDecoder(options.max_line)
        #: frames that broke the pinned schema (validate_frames): (t, dir, frame, violations), the first
        #: MAX_KEPT_VIOLATIONS kept; schema_violation_count counts them all
        self.schema_violations: list[tuple[float, str, dict[str, Any], list[Any]]] = []
        self.schema_violation_count = 0
        self._validator: Any = None
        if options.validate_frames:
            from contracts.validator import SessionValidator

            self._validator = SessionValidator()
        self._since_newline = 0
        self._slots: dict[JsonId, _Slot] = {}
        self._send_lock = trio.Lock()
        self._nursery: trio.Nursery | None = None
        self._turns: list[Turn] = []
        self._active: Turn | None = None
        self._ledger = UsageLedger()
        self._usage_owner: dict[str, Turn] = {}
        self._approvals: dict[JsonId, _PendingApproval] = {}
        self._approval_count = 0
        self._ended_turn_ids: set[str] = set()
        self._reader_done = trio.Event()
        self._eof_seen = False
        self._exited = trio.Event()
        self._closing = False
        # cancel scopes of the background tasks (reader, exit watcher, supervisors, approval tasks): shielded
        # from the caller's cancellation, stopped by the teardown (see _spawn)
        self._background: set[trio.CancelScope] = set()
        self._background_stopped = False

    # --- clock, wire and log ----------------------------------------------------------------------

    @staticmethod
    def now() -> float:
        return trio.current_time()

    @property
    def wire(self) -> list[WireEntry]:
        """Every frame sent and received and every note, in order, each with its time on the session clock."""
        if self._rx:
            self._flush_rx()
        return self._wire

    def _flush_rx(self) -> None:
        # The reader records a notification as a (t, frame) pair; the WireEntry is built here, when the record
        # is read or before any other entry is appended, so the order and the timestamps stay the wire's.
        rx = self._rx
        self._wire.extend([WireEntry(t, "s2c", frame=frame) for t, frame in rx])
        rx.clear()

    def _record(self, entry: WireEntry) -> None:
        if self._rx:
            self._flush_rx()
        self._wire.append(entry)

    def note(self, text: str) -> None:
        self._record(WireEntry(self.now(), "note", note=text))

    def _log(self, level: int, message: str, **fields: Any) -> None:
        logger.log(level, message, extra=fields)
        self.log.append({"t": self.now(), "level": logging.getLevelName(level).lower(), "msg": message, **fields})

    @property
    def budgets(self) -> Budgets:
        return self.options.budgets()

    @property
    def alive(self) -> bool:
        return self.failure is None and not self.killed

    def fill_record(self, record: SessionRecord) -> SessionRecord:
        """Copy what the session kept (wire, Results, teardown, log, stderr, exit, budgets) into ``record``."""
        record.wire = list(self.wire)
        record.results = list(self.results)
        record.teardown = list(self.teardown)
        record.log = list(self.log)
        record.client_errors = list(self.client_errors)
        record.budgets = self.budgets
        record.stderr_tail = self.transport.stderr_tail()
        record.server_exit = self.exit_code if self.exit_code is not None else self.transport.exit_code
        record.experimental_api = self.options.experimental_api
        record.client_trace = self.trace.path
        return record

    # --- sending and requests ---------------------------------------------------------------------

    def _check_alive(self) -> None:
        if self.failure is not None:
            raise SessionClosed(f"session failed: {self.failure}") from self.failure
        if self.killed:
            raise SessionClosed(f"server killed: {self.kill_reason}")
        if self._closing:
            raise SessionClosed("session is closing")

    def _failure_cause(self) -> BaseException | None:
        """Why nothing more can be sent, as the typed error the caller should see (None while alive)."""
        if self.failure is not None:
            return self.failure
        if self.killed:
            return ServerExited(f"server killed: {self.kill_reason}", stderr_tail=self.transport.stderr_tail())
        return None

    async def _send_message(self, message: Message) -> None:
        """Write one frame. When the session already failed (or fails while this write breaks), the caller
        gets the session's failure (a lost frame's LineTooLong, the kill, the exit), never a secondary
        TransportClosed; a bare TransportClosed is raised only when no cause is known yet.
        """
        async with self._send_lock:
            cause = self._failure_cause()
            if cause is not None:
                raise cause
            self._record(WireEntry(self.now(), "c2s", frame=message.frame))
            if self._validator is not None:
                self._check_frame(self.now(), "c2s", message.frame)
            try:
                await self.transport.send(encode(message))
                return
            except TransportClosed as exc:
                self.note("send failed: server stdin closed")
                closed = exc
        if self._failure_cause() is None and not self._reader_done.is_set():
            # the pipe broke first; the reader is about to learn why (a lost frame, EOF): give it a moment
            with trio.move_on_after(self.options.exit_grace):
                await self._reader_done.wait()
        cause = self._failure_cause()
        if cause is not None:
            raise cause from closed
        raise closed

    async def notify(self, method: str, params: Any = NOTSET) -> None:
        self._check_alive()
        await self._send_message(Notification.make(method, params))

    async def request(self, method: str, params: Any = NOTSET, *, timeout: float | None = None) -> Any:
        """Send a request and wait for its answer. Raises RpcError, RequestTimeout, ServerExited, SessionClosed."""
        self._check_alive()
        return await self._call(self._endpoint.request(method, params), timeout or self.options.request_timeout)

    async def _call(self, request: Request, timeout: float, *, kill_on_timeout: bool = False) -> Any:
        slot = _Slot(request.method)
        self._slots[request.id] = slot
        try:
            with trio.move_on_after(timeout):
                await self._send_message(request)
                await slot.done.wait()
        except TransportClosed as exc:
            self._abandon(request.id)
            raise ServerExited(f"{request.method}: {exc}", stderr_tail=self.transport.stderr_tail()) from exc
        finally:
            if not slot.done.is_set():
                self._abandon(request.id)
        if not slot.done.is_set():
            error = RequestTimeout(request.method, timeout)
            if kill_on_timeout:
                self.kill(str(error))
            raise error
        if slot.error is not None:
            raise slot.error
        return slot.result

    def _abandon(self, request_id: JsonId) -> None:
        self._slots.pop(request_id, None)
        if request_id in self._endpoint.outgoing:
            self._endpoint.abandon(request_id)

    async def _startup_call(self, method: str, params: Any, timeout: float) -> Any:
        """A startup RPC: its own deadline; expiry or cancellation kills the group at once."""
        self._check_alive()
        try:
            return await self._call(self._endpoint.request(method, params), timeout, kill_on_timeout=True)
        except trio.Cancelled:
            self.kill(f"cancelled during {method}")
            raise

    # --- handshake and threads --------------------------------------------------------------------

    async def initialize(self) -> dict[str, Any]:
        """``initialize`` (clientInfo, capabilities) then the ``initialized`` notification."""
        capabilities: dict[str, Any] = {"experimentalApi": self.options.experimental_api}
        if self.options.opt_out_notifications:
            capabilities["optOutNotificationMethods"] = list(self.options.opt_out_notifications)
        params = {"clientInfo": self.options.client_info.to_json(), "capabilities": capabilities}
        self._log(logging.DEBUG, "initialize sent", phase="initialize_sent")
        try:
            result = await self._startup_call("initialize", params, self.options.request_timeout)
        except (ClientError, RpcError) as exc:
            self._log(logging.WARNING, "initialize failed", phase="initialize_failure", error=str(exc))
            raise
        self.initialize_result = result if isinstance(result, dict) else {}
        await self._send_message(Notification.make("initialized"))
        self._log(logging.DEBUG, "initialize response", phase="initialize_response")
        return self.initialize_result

    async def start_thread(self, *, cwd: str | None = None, model: str | None = None, **params: Any) -> str:
        """``thread/start``; returns the thread id (ThreadStartFailed when the answer has none)."""
        body = dict(params)
        if cwd is not None:
            body["cwd"] = cwd
        if model is not None:
            body["model"] = model
        self._log(logging.DEBUG, "thread/start sent", phase="thread_start_sent")
        try:
            result = await self._startup_call("thread/start", body, self.options.thread_timeout)
        except (ClientError, RpcError) as exc:
            self._log(logging.WARNING, "thread/start failed", phase="thread_start_failure", error=str(exc))
            raise
        thread_id = _thread_id(result)
        if thread_id is None:
            self._log(logging.WARNING, "thread/start failed", phase="thread_start_failure", error="no thread ID")
            raise ThreadStartFailed("thread/start returned no thread ID")
        self._log(logging.DEBUG, "thread/start response", phase="thread_start_response", thread_id=thread_id)
        self._adopt_thread(thread_id, model, result, resumed=False)
        return thread_id

    async def resume_thread(
        self,
        thread_id: str,
        *,
        cwd: str | None = None,
        model: str | None = None,
        fallback_to_start: bool = True,
        **params: Any,
    ) -> str:
        """``thread/resume`` (``excludeTurns``); a JSON-RPC error or a missing id falls back to thread/start.

        Transport errors (exit, timeout) do not fall back.
        """
        body: dict[str, Any] = {"threadId": thread_id, "excludeTurns": True, **params}
        if cwd is not None:
            body["cwd"] = cwd
        if model is not None:
            body["model"] = model
        try:
            result = await self._startup_call("thread/resume", body, self.options.thread_timeout)
        except RpcError as exc:
            if not fallback_to_start:
                raise
            self._log(
                logging.WARNING,
                "thread/resume rejected, starting a thread",
                phase="thread_resume_failure",
                error=str(exc),
            )
            return await self.start_thread(cwd=cwd, model=model)
        resumed = _thread_id(result)
        if resumed is None:
            if not fallback_to_start:
                raise ThreadStartFailed("thread/resume returned no thread ID")
            return await self.start_thread(cwd=cwd, model=model)
        self._adopt_thread(resumed, model, result, resumed=True)
        return resumed

    async def set_thread_name(self, name: str) -> bool:
        """Optional ``thread/name/set``; errors are only logged (returns whether it succeeded)."""
        if self.thread_id is None:
            return False
        try:
            await self.request("thread/name/set", {"threadId": self.thread_id, "name": name})
        except (ClientError, RpcError) as exc:
            self._log(logging.WARNING, "thread/name/set failed", thread_id=self.thread_id, error=str(exc))
            return False
        return True

    def _adopt_thread(self, thread_id: str, model: str | None, result: Any, *, resumed: bool) -> None:
        known = self.thread_id == thread_id
        self.thread_id = thread_id
        answered_model = result.get("model") if isinstance(result, dict) else None
        self.model = model or (answered_model if isinstance(answered_model, str) else None) or self.model
        self.trace.thread_started(thread_id, resumed=resumed or known, metadata={"model": self.model})

    # --- turns ------------------------------------------------------------------------------------

    def turn(
        self,
        input: str | Sequence[dict[str, Any]],
        *,
        timeout: float | None = None,
        model: str | None = None,
        **params: Any,
    ) -> Turn:
        """A turn to run with ``async with``: entering sends turn/start, leaving waits for or cancels the turn.

        ``timeout`` overrides ``turn_timeout``; ``params`` go into turn/start as they are.
        """
        index = len(self._turns)
        turn = Turn(
            self,
            index,
            _user_input(input),
            params,
            timeout if timeout is not None else self.options.turn_timeout,
            model,
        )
        self._turns.append(turn)
        return turn

    async def _start_turn(self, turn: Turn) -> None:
        refusal: ClientError | None = None
        if self._active is not None and self._active.result is None:
            refusal = TurnBusy(f"turn {self._active.index} is still running")
        elif self.thread_id is None:
            refusal = ClientError("no thread: call start_thread() or resume_thread() first")
        if refusal is not None:
            if self._turns and self._turns[-1] is turn:
                self._turns.pop()  # never started: it gets no index and no Result
            raise refusal
        self._active = turn
        turn.state.thread_id = self.thread_id
        if not self.alive or self._closing:
            self._finish_turn(turn, failure=f"session closed: {self.failure or self.kill_reason or 'closing'}")
            return
        params = {"threadId": self.thread_id, "input": turn.input, **turn.params}
        if turn.model is not None:
            params["model"] = turn.model
        request = self._endpoint.request("turn/start", params)
        turn.started_at = self.now()
        turn.last_activity = turn.started_at
        turn.sent = True
        self._spawn(self._supervise, turn)
        self._log(logging.DEBUG, "turn/start sent", thread_id=self.thread_id, turn_index=turn.index)
        try:
            result = await self._call(request, self.options.request_timeout, kill_on_timeout=False)
        except trio.Cancelled:
            turn.request_cancel("aborted", "execution cancelled")
            await turn._wait_after_cancel()
            raise
        except RpcError as exc:
            tail = self._stderr_suffix()
            self._finish_turn(turn, failure=f"turn/start failed: {exc.message}{tail}")
            return
        except RequestTimeout as exc:
            self._kill_for(turn, str(exc))
            return
        except ClientError as exc:  # the session's failure: exit, kill, lost frame, closed
            failure = f"lost frame: {exc}" if isinstance(exc, LineTooLong) else str(exc)
            self._finish_turn(turn, failure=failure)
            return
        turn_id = _nested_id(result, "turn")
        if turn_id is not None:
            self._learn_turn_id(turn, turn_id)

    def _learn_turn_id(self, turn: Turn, turn_id: str) -> None:
        if not turn.state.set_turn_id(turn_id):
            return
        owner = self._ledger.current
        if owner is None or owner.turn_id != turn_id:
            self._usage_owner[turn_id] = turn
            turn.usage = self._ledger.turn_started(turn_id)
        if not turn.trace_open:
            turn.trace_open = True
            self.trace.turn_started(turn_id, self.thread_id or "")
        turn.id_known.set()

    async def _supervise(self, turn: Turn) -> None:
        """Deadline, inactivity and cancellation of one turn; runs the interrupt procedure."""
        opts = self.options
        hard = turn.started_at + turn.timeout if turn.timeout is not None else math.inf
        try:
            while turn.result is None:
                if turn.cancel_request is not None:
                    await self._interrupt(turn)
                    return
                now = self.now()
                if now >= hard:
                    turn.request_cancel("timeout", f"timed out after {turn.timeout:g}s")
                    continue
                idle = math.inf
                if opts.inactivity_timeout is not None and not self._approval_pending(turn):
                    idle = turn.last_activity + opts.inactivity_timeout
                    if now >= idle:
                        turn.request_cancel(
                            "timeout",
                            f"semantic inactivity timeout after {opts.inactivity_timeout:g}s "
                            f"(thread {self.thread_id}, turn {turn.state.turn_id}){self._stderr_suffix()}",
                        )
                        continue
                turn.wake = trio.Event()
                with trio.move_on_at(min(hard, idle)):
                    await turn.wake.wait()
        except Exception as exc:  # a client bug must still end the turn
            self.client_errors.append(f"turn supervisor: {exc!r}")
            self._kill_for(turn, f"client error: {exc!r}")

    def _approval_pending(self, turn: Turn) -> bool:
        return any(p.turn is turn and not p.answered and not p.closed for p in self._approvals.values())

    async def _interrupt(self, turn: Turn) -> None:
        """Send turn/interrupt and wait for turn/completed within ONE budget; kill the group on failure."""
        state = turn.state
        if turn.result is not None:
            return
        if state.completed:
            self._finish_turn(turn)
            return
        if not self.alive:
            self._finish_turn(turn, failure=f"server gone: {self.failure or self.kill_reason}")
            return
        if state.turn_id is None or self.thread_id is None:
            self._kill_for(turn, "cancelled before the turn had an id")
            return
        budget = self.options.interrupt_budget
        status = state.fixed[0] if state.fixed else "aborted"
        request = self._endpoint.request("turn/interrupt", {"threadId": self.thread_id, "turnId": state.turn_id})
        sent_at = self.now()
        answered = False
        outcome = "timeout"
        turn.interrupt_request_id = request.id
        # shielded while the turn is open (a cancelled caller must still get its Result); _finish_turn lifts it
        turn.interrupt_scope = trio.CancelScope(shield=True)
        with turn.interrupt_scope, trio.move_on_after(budget) as budget_scope:
            turn.set_timing(interrupt_sent_at=sent_at)
            turn.emit(InterruptSent(sent_at, status))
            self.trace.other("interrupt.sent", {"request_id": request.id, "reason": status}, turn_id=state.turn_id)
            try:
                await self._call(request, budget)
                answered = True
                outcome = "ok"
            except RpcError as exc:
                outcome = "error"
                self._interrupt_answered(turn, request.id, outcome, exc.message)
                self._log(
                    logging.WARNING,
                    "turn interrupt failed",
                    thread_id=self.thread_id,
                    turn_id=state.turn_id,
                    error=exc.message,
                )
                if turn.result is None:
                    self._kill_for(turn, f"turn interrupt failed: {exc.message}")
                return
            except ClientError as exc:  # timeout, exit, kill, lost frame: the session's typed failure
                outcome = "no answer"
                self._interrupt_answered(turn, request.id, outcome, str(exc))
                if turn.result is None:
                    self._kill_for(turn, f"turn interrupt: {exc}")
                return
            if answered:
                self._interrupt_answered(turn, request.id, outcome, None)
            await turn.finished.wait()
        if turn.result is None or not turn.completed_by_server:
            if not answered:
                self._interrupt_answered(turn, request.id, outcome, "no answer within the budget")
            if turn.result is None:
                self._log(
                    logging.WARNING,
                    "turn interrupt completion timed out",
                    thread_id=self.thread_id,
                    turn_id=state.turn_id,
                    timeout=budget,
                )
                self._kill_for(turn, f"turn interrupt completion timed out after {budget:g}s")
            return
        if not answered and budget_scope.cancelled_caught:
            self._interrupt_answered(turn, request.id, "no answer", "turn/completed came, the answer did not")

    def _interrupt_answered(self, turn: Turn, request_id: JsonId, outcome: str, error: str | None) -> None:
        if turn.interrupt_answer_recorded:
            return
        turn.interrupt_answer_recorded = True
        t = self.now()
        if outcome in ("ok", "error"):
            turn.set_timing(interrupt_answered_at=t)
        turn.emit(InterruptAnswered(t, error))
        meta: dict[str, Any] = {"request_id": request_id, "outcome": outcome}
        if error:
            meta["error"] = error
        self.trace.other("interrupt.answered", meta, turn_id=turn.state.turn_id)

    def _kill_for(self, turn: Turn, reason: str) -> None:
        turn.killed = True
        turn.kill_reason = reason
        self.kill(reason)
        self._finish_turn(turn, failure=f"server killed: {reason}")

    def _finish_turn(self, turn: Turn, *, failure: str | None = None) -> None:
        """Deliver the turn's one Result (idempotent): close open items and pending approvals locally."""
        if turn.result is not None:
            return
        state = turn.state
        t = self.now()
        outcome = state.outcome()
        if outcome is None:
            outcome = ("failed", failure or "turn ended without turn/completed")
        status, error = outcome
        closed_items = state.close_open_items(t)
        for event in closed_items:
            turn.emit(event)
            if event.item_type in TOOL_ITEM_TYPES:
                self.trace.tool_ended(event.item_id, "aborted")
        closed_approvals: list[str] = []
        for request_id, pending in list(self._approvals.items()):
            if pending.turn is turn and not pending.answered and not pending.closed:
                self._close_approval_locally(request_id, pending, t)
                closed_approvals.append(str(request_id))
        model = turn.model or self.model
        usage = turn.usage.by_model(model) if turn.usage is not None else {}
        result = TurnResult(
            index=turn.index,
            status=status,  # type: ignore[arg-type]
            error=error,
            thread_id=state.thread_id or self.thread_id,
            turn_id=state.turn_id,
            final_text=state.final_text,
            usage=usage,
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
            items_closed_locally=[e.item_id for e in closed_items],
            approvals_closed_locally=closed_approvals,
        )
        turn.result = result
        self.results.append(result)
        if turn.interrupt_sent_at is not None and turn.completed_at is not None:
            # logged when turn/completed arrives, whether or not the interrupt's own answer ever does
            self._log(
                logging.INFO,
                "codex turn interrupted",
                thread_id=self.thread_id,
                turn_id=state.turn_id,
                latency=turn.completed_at - turn.interrupt_sent_at,
                timeout=self.options.interrupt_budget,
                # whether the turn/interrupt answer had come by then (it may come later, or never: §6 keys the
                # record to turn/completed; the missing answer is recorded as `interrupt.answered: no answer`)
                answered=turn.interrupt_answered_at is not None,
            )
        if state.turn_id is not None:
            self._ended_turn_ids.add(state.turn_id)
        if turn.trace_open and state.turn_id is not None:
            self.trace.turn_ended(state.turn_id, _trace_turn_status(status, turn.killed))
        turn.emit(TurnEnded(t, status, state.server_status), force=True)
        turn.events.close()
        turn.finished.set()
        turn.wake.set()
        if turn.interrupt_scope is not None:
            turn.interrupt_scope.shield = False
        if self._active is turn:
            self._active = None
        self._log(logging.INFO, "finished", turn_index=turn.index, status=status, duration=t - turn.started_at)

    # --- kill -------------------------------------------------------------------------------------

    def kill(self, reason: str, *, error: BaseException | None = None) -> None:
        """SIGKILL the server's process group (or crash the in-process engine) now; the session is dead.

        A running turn ends at once (its Result says ``killed``); waiting requests fail with ``error``
        (default: :class:`ServerExited`).
        """
        if self.killed:
            return
        self.killed = True
        self.kill_reason = reason
        self.note(f"kill: {reason}")
        self._log(logging.WARNING, "server killed", reason=reason)
        self.transport.kill()
        self._fail_pending(error or ServerExited(f"server killed: {reason}", stderr_tail=self.transport.stderr_tail()))
        for pending in self._approvals.values():
            pending.scope.cancel()
        turn = self._active
        if turn is not None and turn.result is None:
            turn.killed = True
            turn.kill_reason = reason
            self._finish_turn(turn, failure=f"server killed: {reason}")

    def _fail_pending(self, error: BaseException) -> None:
        for request_id, slot in list(self._slots.items()):
            if not slot.done.is_set():
                slot.error = error
                slot.done.set()
            self._slots.pop(request_id, None)

    # --- the reader -------------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        cap = self.options.max_line
        try:
            while True:
                data = await self.transport.receive(_READ_CHUNK)
                t = self.now()
                if not data:
                    self._eof_seen = True
                    for item in self._decoder.feed_eof():
                        self._on_item(item, t)
                    break
                newline = data.rfind(b"\n")
                self._since_newline = len(data) - newline - 1 if newline >= 0 else self._since_newline + len(data)
                if not self._dispatch(self._decoder.feed_fast(data), t):
                    return
                if self._since_newline > cap:
                    # the line is still streaming in; the child may be blocked writing it: fail now
                    error = LineTooLong(self._since_newline, cap, at_least=True)
                    self._record(
                        WireEntry(
                            t, "s2c", error=WireErrorKind.OVERSIZED_LINE.value, size=self._since_newline, raw=None
                        )
                    )
                    self._lost_frame(error)
                    return
        except Exception as exc:
            self.client_errors.append(f"reader: {exc!r}")
            self.failure = self.failure or ClientError(f"reader failed: {exc!r}")
        finally:
            self._reader_done.set()
            if self.failure is None and not self.killed:
                self.note("stdout EOF")
            if self._nursery is not None:
                self._spawn(self._after_eof)

    async def _after_eof(self) -> None:
        """stdout is gone: fail waiting requests and the running turn (after a short wait for the exit status)."""
        if not self._exited.is_set() and not self.killed:
            with trio.move_on_after(self.options.exit_grace):
                await self._exited.wait()
        code = self.exit_code
        what = "process exited" + (
            f" with status {code}" if code is not None else " or closed its stdout (no exit status yet)"
        )
        error = self.failure if isinstance(self.failure, LineTooLong) else None
        self._fail_pending(error or ServerExited(what, exit_code=code, stderr_tail=self.transport.stderr_tail()))
        if self.failure is None:
            self.failure = ServerExited(what, exit_code=code, stderr_tail=self.transport.stderr_tail())
        turn = self._active
        if turn is not None and turn.result is None:
            if error is not None:
                self._finish_turn(turn, failure=f"lost frame: {error}")
            else:
                self._finish_turn(turn, failure=f"{what}{self._stderr_suffix()}")

    def _lost_frame(self, error: LineTooLong) -> None:
        self.failure = error
        self._log(logging.ERROR, "server line over the cap", size=error.size, cap=error.cap)
        turn = self._active
        if turn is not None and turn.result is None:
            turn.killed = True
            turn.kill_reason = str(error)
            self._finish_turn(turn, failure=f"lost frame: {error}")
        self.kill(str(error), error=error)

    def _on_item(self, item: Message | WireError, t: float) -> None:
        if isinstance(item, WireError):
            self._record(
                WireEntry(t, "s2c", error=item.kind.value, raw=item.sample.decode("utf-8", "replace"), size=item.size)
            )
            if item.kind is WireErrorKind.OVERSIZED_LINE:
                self._lost_frame(LineTooLong(item.size, self.options.max_line))
            else:
                self._log(logging.DEBUG, "skipped a line that is not a frame", kind=item.kind.value, size=item.size)
            return
        self._record(WireEntry(t, "s2c", frame=item.frame))
        if self._validator is not None:
            self._check_frame(t, "s2c", item.frame)
        event = self._endpoint.receive(item)
        if isinstance(event, ResponseMatched):
            slot = self._slots.pop(event.request.id, None)
            if slot is not None:
                response = event.response
                if isinstance(response, Response):
                    slot.result = response.result
                elif isinstance(response, ErrorResponse):
                    slot.error = RpcError.from_response(response, event.request.method)
                slot.done.set()
        elif isinstance(event, IncomingNotification):
            self._on_notification(event.notification.method, event.notification.params, t)
        elif isinstance(event, IncomingRequest):
            self._on_server_request(event.request, t)
        elif isinstance(event, DuplicateRequest):
            self._log(logging.WARNING, "server reused a pending request id", request_id=event.request.id)
        elif isinstance(event, LateResponse):
            self._log(logging.DEBUG, "late answer", method=event.request.method, request_id=event.request.id)
        # unknown and duplicate responses are ignored (they are on the wire)

    def _on_notification(self, method: str, params: Any, t: float) -> None:
        if type(params) is not dict:
            params = {}
        if method == "item/agentMessage/delta" and self._on_delta(params, t):
            return
        thread = params.get("threadId")
        if thread is None and method == "thread/started":
            thread = _nested_id(params, "thread")
        if isinstance(thread, str) and self.thread_id is not None and thread != self.thread_id:
            self.other_thread_dropped += 1
            return
        if method not in KNOWN_NOTIFICATIONS:
            self.ignored_notifications[method] += 1
        if method == "thread/tokenUsage/updated":
            self._on_usage(params, t)
            return
        if method == "serverRequest/resolved":
            self._on_resolved(params, t)
            return
        turn = self._active
        if turn is None or turn.result is not None or not is_turn_scoped(method):
            return
        named = notification_turn_id(method, params)
        if (named is not None and named in self._ended_turn_ids) or not turn.state.accepts(method, params):
            # late events of an earlier turn, while the new turn's id is not known yet, are not the new turn's
            turn.state.ignored += 1
            return
        turn.last_activity = t
        if method == "turn/started":
            turn_id = notification_turn_id(method, params)
            if turn_id is not None:
                self._learn_turn_id(turn, turn_id)
        for event in turn.state.on_notification(method, params, t):
            turn.emit(event)
            if method == "item/started" and getattr(event, "item_type", None) in TOOL_ITEM_TYPES:
                self._trace_tool_started(turn, event.item_id, event.item_type, event.item)  # type: ignore[union-attr]
            elif method == "item/completed" and getattr(event, "item_type", None) in TOOL_ITEM_TYPES:
                self._trace_tool_ended(turn, event.item_id, event.status, event.item)  # type: ignore[union-attr]
        if method == "turn/completed" and turn.state.completed:
            self._log(
                logging.DEBUG,
                "turn/completed received",
                thread_id=self.thread_id,
                turn_id=turn.state.turn_id,
                status=turn.state.server_status,
            )
            turn.completed_at = t
            turn.completed_by_server = True
            if turn.usage is None and turn.state.turn_id is not None:
                self._learn_turn_id(turn, turn.state.turn_id)
            if turn.usage is not None:
                turn.usage.apply_completion_usage(turn.state.completion_usage)
            self._finish_turn(turn)

    def _dispatch(self, items: list[Any], t: float) -> bool:
        """Handle the frames of one read in one pass; False once the session failed (stop reading).

        A notification is recorded as (t, frame) and dispatched without a message object; responses, requests
        and bad lines take the general path. While a turn with a known id runs, its agent message deltas are
        handled inline (the conditions of :meth:`_on_delta`, re-evaluated after every other frame, since only
        those can change the running turn), and the consumer is woken once for the whole read.
        """
        rx = self._rx
        on_notification = self._on_notification
        fast = self._delta_target()
        # inline validation of notifications: the frame is checked while it is still hot in the cache
        check = self._validator.validator.validate if self._validator is not None else None
        for item in items:
            if type(item) is dict:
                rx.append((t, item))
                if check is not None and (violations := check(item, "s2c")):
                    self._schema_violation(t, "s2c", item, violations)
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
                on_notification(item["method"], params, t)
            else:
                if fast is not None:
                    fast[4].wake()
                self._on_item(item, t)
                if self.failure is not None:
                    return False
            fast = self._delta_target()
        if fast is not None:
            fast[4].wake()
        return True

    def _check_frame(self, t: float, direction: str, frame: dict[str, Any]) -> None:
        violations = self._validator.validate(frame, direction)
        if violations:
            self._schema_violation(t, direction, frame, violations)

    def _schema_violation(self, t: float, direction: str, frame: dict[str, Any], violations: list[Any]) -> None:
        self.schema_violation_count += 1
        if len(self.schema_violations) < MAX_KEPT_VIOLATIONS:
            self.schema_violations.append((t, direction, frame, violations))

    def _delta_target(self) -> tuple[Turn, Any, str, str | None, Any] | None:
        """The running turn whose deltas may take the inline path: its id known, not completed, not ended."""
        turn = self._active
        if turn is None or turn.result is not None:
            return None
        state = turn.state
        turn_id = state.turn_id
        if turn_id is None or state.completed or turn_id in self._ended_turn_ids or turn.events._closed:
            return None
        return turn, state, turn_id, self.thread_id, turn.events

    def _on_delta(self, params: dict[str, Any], t: float) -> bool:
        """The hot path: an agent message delta of the running turn, once its id is known. False: not handled.

        Handles exactly the deltas the general path would accept for the running turn (our thread, our turn
        id, the turn not completed), with the same effects; anything else takes the general path.
        """
        turn = self._active
        if turn is None or turn.result is not None:
            return False
        state = turn.state
        turn_id = state.turn_id
        if (
            turn_id is None
            or state.completed
            or params.get("turnId") != turn_id
            or params.get("threadId") != self.thread_id
            or turn_id in self._ended_turn_ids
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

    def _trace_tool_started(self, turn: Turn, item_id: str, item_type: str, item: dict[str, Any]) -> None:
        if item_id in turn.traced_tools:
            return
        turn.traced_tools.add(item_id)
        self.trace.tool_started(item_id, item_type, item, self.thread_id or "", turn.state.turn_id or "")

    def _trace_tool_ended(self, turn: Turn, item_id: str, status: str | None, item: dict[str, Any]) -> None:
        if item_id not in turn.traced_tools or item_id in turn.ended_tools:
            return
        turn.ended_tools.add(item_id)
        self.trace.tool_ended(item_id, _trace_tool_status(status), item)

    def _on_usage(self, params: dict[str, Any], t: float) -> None:
        accepted = self._ledger.update(params)
        if accepted is None:
            return
        usage, added = accepted
        turn = self._usage_owner.get(usage.turn_id)
        if turn is None:
            return
        turn.usage = usage
        turn.last_activity = t
        if turn.result is not None:
            # late usage after turn/completed still counts: the delivered Result is updated in place
            turn.result.usage = usage.by_model(turn.model or self.model)
            self._log(logging.DEBUG, "late usage", turn_id=usage.turn_id)
        else:
            turn.emit(UsageUpdated(t, UsageBuckets.from_breakdown(added), usage.buckets()))

    def _on_resolved(self, params: dict[str, Any], t: float) -> None:
        request_id = params.get("requestId")
        pending = self._approvals.get(request_id) if isinstance(request_id, int | str) else None
        if pending is None or pending.resolved:
            return
        pending.resolved = True
        if pending.turn is not None and pending.turn.result is None:
            pending.turn.emit(ApprovalResolved(t, request_id))  # type: ignore[arg-type]
        self.trace.other(
            "approval.resolved", {"request_id": request_id, "local": False}, turn_id=pending.request.turn_id
        )

    # --- server requests --------------------------------------------------------------------------

    def _on_server_request(self, request: Request, t: float) -> None:
        params = request.params if isinstance(request.params, dict) else {}
        turn = self._active
        turn_id = params.get("turnId") if isinstance(params.get("turnId"), str) else None
        if turn is not None and (
            turn.result is not None
            or (turn_id is not None and turn.state.turn_id not in (None, turn_id))
            or turn_id in self._ended_turn_ids
        ):
            turn = None  # another (earlier, sub-agent) turn's request: answered, not attributed
        kind = APPROVAL_METHODS.get(request.method)
        if kind is None:
            reason = f"unsupported app-server request: {request.method}"
            if turn is not None:
                turn.state.record_error(reason)
                turn.emit(ApprovalAnswered(t, request.id, request.method, error=reason, reason=reason))
            self._log(logging.WARNING, reason, request_id=request.id)
            self._spawn(self._answer_error, request.id, METHOD_NOT_FOUND, reason)
            return
        if turn is not None:
            turn.state.approvals += 1
        approval = ApprovalRequest(
            request_id=request.id,
            method=request.method,
            kind=kind,
            params=params,
            index=self._approval_count,
            thread_id=params.get("threadId") if isinstance(params.get("threadId"), str) else None,
            turn_id=turn_id,
            item_id=params.get("itemId") if isinstance(params.get("itemId"), str) else None,
            turn_index=turn.index if turn is not None else None,
            n=turn.state.approvals if turn is not None else 0,
        )
        self._approval_count += 1
        pending = _PendingApproval(approval, turn)
        self._approvals[request.id] = pending
        self.trace.other(
            "approval.opened",
            {"request_id": request.id, "method": request.method, "item_id": approval.item_id},
            turn_id=turn_id,
        )
        if turn is not None:
            turn.emit(
                ApprovalRequested(
                    t, request.id, request.method, approval.item_id, params, turn.state.approvals, approval.index
                )
            )
            turn.wake.set()  # the inactivity window pauses while an approval is pending
        self._spawn(self._run_policy, pending)

    async def _run_policy(self, pending: _PendingApproval) -> None:
        request = pending.request
        decision: Any = None
        reason: str | None = None
        with pending.scope:
            try:
                with trio.move_on_after(self.options.approval_timeout) as deadline:
                    decision = self.policy(request)
                    if inspect.isawaitable(decision):
                        decision = await decision
                if deadline.cancelled_caught:
                    decision, reason = "cancel", "approval policy past its deadline"
                elif not (isinstance(decision, dict) or decision in DECISIONS):
                    decision, reason = ERROR_DECISION, f"approval policy returned an invalid decision: {decision!r}"
            except Exception as exc:
                decision, reason = ERROR_DECISION, f"approval policy failed: {exc!r}"
        if pending.closed or pending.scope.cancelled_caught or not self.alive:
            return
        pending.answered = True
        t = self.now()
        turn = pending.turn
        if turn is not None:
            turn.last_activity = t
            turn.wake.set()
        try:
            if decision == ERROR_DECISION:
                message = reason or "approval refused by the client"
                self._log(
                    logging.INFO, "approval answered with an error", request_id=request.request_id, reason=message
                )
                if turn is not None and turn.result is None:
                    turn.emit(ApprovalAnswered(t, request.request_id, request.method, error=message, reason=reason))
                self.trace.other(
                    "approval.answered", {"request_id": request.request_id, "error": message}, turn_id=request.turn_id
                )
                await self._answer_error(request.request_id, INTERNAL_ERROR, message)
            else:
                result = answer_for(request, decision)
                if turn is not None and turn.result is None:
                    turn.emit(ApprovalAnswered(t, request.request_id, request.method, decision=decision, reason=reason))
                self.trace.other(
                    "approval.answered",
                    {"request_id": request.request_id, "decision": decision},
                    turn_id=request.turn_id,
                )
                await self._send_answer(self._endpoint.respond(request.request_id, result))
        except ProtocolViolation:
            pass  # closed locally meanwhile

    async def _answer_error(self, request_id: JsonId, code: int, message: str) -> None:
        try:
            answer = self._endpoint.respond_error(request_id, code, message)
        except ProtocolViolation:
            return
        await self._send_answer(answer)

    async def _send_answer(self, answer: Message) -> None:
        if not self.alive:
            return
        # an answer that cannot be written is moot: the session's failure is reported where it is awaited
        with contextlib.suppress(TransportClosed, ClientError), trio.move_on_after(self.options.request_timeout):
            await self._send_message(answer)

    def _close_approval_locally(self, request_id: JsonId, pending: _PendingApproval, t: float) -> None:
        pending.closed = True
        pending.scope.cancel()
        self._endpoint.incoming.pop(request_id, None)
        if pending.turn is not None:
            pending.turn.emit(ApprovalResolved(t, request_id, local=True))
        if not pending.resolved:
            pending.resolved = True
            self.trace.other(
                "approval.resolved",
                {"request_id": request_id, "local": True, "outcome": "cancelled"},
                turn_id=pending.request.turn_id,
            )

    # --- background tasks -------------------------------------------------------------------------

    def _spawn(self, fn: Any, *args: Any) -> None:
        """Start a background task in the session's nursery, shielded from the caller's cancellation.

        The caller's cancel scope often encloses the whole session (``fail_after`` around spawn + session +
        turn). Its expiry must interrupt the turn, not stop the tasks the interrupt depends on: without the
        reader no answer and no ``turn/completed`` is read, without the supervisor no ``turn/interrupt`` is
        sent, without the exit watcher the teardown waits for an exit it can never see. Each task is bounded
        on its own (budgets, timeouts); the teardown stops what is left (:meth:`_stop_background`).
        """
        assert self._nursery is not None
        self._nursery.start_soon(self._shielded, fn, *args)

    async def _shielded(self, fn: Any, *args: Any) -> None:
        with trio.CancelScope(shield=True) as scope:
            if self._background_stopped:
                scope.cancel()  # started after the teardown (the reader's EOF handler): no waiting any more
            self._background.add(scope)
            try:
                await fn(*args)
            finally:
                self._background.discard(scope)

    def _stop_background(self) -> None:
        self._background_stopped = True
        for scope in list(self._background):
            scope.cancel()

    # --- exit and teardown ------------------------------------------------------------------------

    async def _watch_exit(self) -> None:
        code = await self.transport.wait_exit()
        self.exit_code = code
        self.note(f"exit {code}")
        self._exited.set()

    def _stderr_suffix(self) -> str:
        tail = self.transport.stderr_tail().strip()
        return f"; stderr: {tail}" if tail else ""

    async def _teardown(self) -> None:
        """Bounded, step by step: end a running turn, close stdin, wait for stdout EOF, wait for exit, kill."""
        opts = self.options
        turn = self._active
        if turn is not None and turn.result is None:
            turn.request_cancel("aborted", "execution cancelled: session closed")
            await turn._wait_after_cancel()
        self._closing = True
        start = self.now()
        total = opts.teardown_timeout
        stdin_close = self._step("close_stdin", self.transport.close_input(), start + total * 0.1)
        await stdin_close
        if not self.killed:
            self.note("stdin closed")
        await self._step(
            "wait_stdout_eof", self._reader_done.wait(), start + total * 0.45, done_already=self._reader_done.is_set()
        )
        await self._step("wait_exit", self._exited.wait(), start + total * 0.9, done_already=self._exited.is_set())
        group_alive = getattr(self.transport, "group_alive", None)
        need_kill = (
            not self._exited.is_set() or not self._reader_done.is_set() or (callable(group_alive) and group_alive())
        )
        kill_start = self.now()
        if need_kill:
            if not self.killed:
                self.kill(
                    "teardown: server did not exit"
                    if not self._exited.is_set()
                    else "teardown: process group still alive"
                )
            else:
                self.transport.kill()  # the group may hold processes started after the first kill
            with trio.move_on_at(max(start + total, self.now() + 0.05)) as scope:
                await self._exited.wait()
                await self._reader_done.wait()
            outcome = "timeout" if scope.cancelled_caught else "done"
        else:
            outcome = "skipped"
        self.teardown.append(TeardownStep("kill", kill_start, self.now(), outcome))
        self._log(
            logging.INFO,
            "cleanup",
            phase="cleanup",
            latency=self.now() - start,
            reaped=self._exited.is_set(),
            exit_status=self.exit_code,
            stderr_bytes=getattr(self.transport, "stderr_bytes", None),
            stderr_truncated=getattr(self.transport, "stderr_truncated", None),
        )
        self._close_trace()

    async def _step(self, name: str, awaitable: Any, deadline: float, *, done_already: bool = False) -> None:
        started = self.now()
        if done_already:
            awaitable.close()
            self.teardown.append(TeardownStep(name, started, started, "done"))
            return
        outcome = "done"
        try:
            with trio.move_on_at(deadline) as scope:
                await awaitable
            if scope.cancelled_caught:
                outcome = "timeout"
        except Exception as exc:
            outcome = f"error: {exc}"
        self.teardown.append(TeardownStep(name, started, self.now(), outcome))

    def _close_trace(self) -> None:
        for turn in self._turns:
            if turn.interrupt_request_id is not None and not turn.interrupt_answer_recorded:
                self._interrupt_answered(turn, turn.interrupt_request_id, "no answer", "session closed first")
        for request_id, pending in self._approvals.items():
            if not pending.resolved:
                pending.resolved = True
                self.trace.other(
                    "approval.resolved",
                    {"request_id": request_id, "local": True, "outcome": "session closed"},
                    turn_id=pending.request.turn_id,
                )
        failed = self.killed or (self.failure is not None and not isinstance(self.failure, ServerExited))
        try:
            self.trace.close("failed" if failed else "completed")
        except Exception as exc:
            self.client_errors.append(f"trace close: {exc!r}")
        self.client_errors.extend(self.trace.errors)


@contextlib.asynccontextmanager
async def open_session(
    transport: Transport,
    options: SessionOptions | None = None,
    *,
    policy: Policy = accept_all,
    trace: Any = None,
) -> AsyncIterator[Session]:
    """Run a session over ``transport``: reader and exit watcher start, ``initialize`` runs (unless
    ``options.initialize`` is False), and on exit the teardown runs, bounded, even when cancelled.
    """
    session = Session(transport, options or SessionOptions(), policy)
    if trace is not None:
        session.trace = trace
    elif session.options.trace_dir is not None:
        session.trace = ClientTrace(session.options.trace_dir, marker_events=session.options.trace_marker_events)
    try:
        async with trio.open_nursery() as nursery:
            session._nursery = nursery
            session._spawn(session._read_loop)
            session._spawn(session._watch_exit)
            try:
                if session.options.initialize:
                    await session.initialize()
                yield session
            finally:
                with trio.CancelScope(shield=True):
                    try:
                        await session._teardown()
                    except Exception as exc:  # teardown must never hang or mask the body's outcome
                        session.client_errors.append(f"teardown: {exc!r}")
                        transport.kill()
                session._stop_background()
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        raise _single(group) from None


def _single(group: BaseExceptionGroup) -> BaseException:
    if len(group.exceptions) == 1:
        inner = group.exceptions[0]
        return _single(inner) if isinstance(inner, BaseExceptionGroup) else inner
    return group


def _thread_id(result: Any) -> str | None:
    return _nested_id(result, "thread")


def _nested_id(obj: Any, key: str) -> str | None:
    if isinstance(obj, Mapping):
        inner = obj.get(key)
        if isinstance(inner, Mapping) and isinstance(inner.get("id"), str) and inner["id"]:
            return inner["id"]
    return None


def _user_input(value: str | Sequence[dict[str, Any]]) -> UserInput:
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    return [dict(part) for part in value]


def _trace_turn_status(status: str, killed: bool) -> str:
    if status == "completed":
        return "completed"
    if status == "failed":
        return "failed"
    # an interrupted turn ends `cancelled`; one whose server was killed stopped with its runtime
    return "aborted" if killed else "cancelled"


def _trace_tool_status(status: str | None) -> str:
    if status == "completed":
        return "completed"
    if status in ("failed", "declined"):
        return "failed"
    return "aborted"


__all__ = ["ClientInfo", "Session", "SessionOptions", "TurnEvent", "open_session"]
