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

The session holds the state, the wire record, requests, the handshake and the turns' Results; the rest
works on it beside it: :mod:`~harness.client.options` (what it runs with), :mod:`~harness.client.reader`
(the read loop and the dispatch, the hot path), :mod:`~harness.client.server_requests` (approvals),
:mod:`~harness.client.supervisor` (turn deadlines and the interrupt), :mod:`~harness.client.teardown` and
:mod:`~harness.client.tracemarks` (the client trace's bookkeeping).
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

import trio

from contracts.jsonrpc import Endpoint, RpcError
from contracts.messages import NOTSET, JsonId, Message, Notification, Request
from contracts.record import Budgets, SessionRecord, TeardownStep, TurnResult, WireEntry
from contracts.transport import Transport, TransportClosed
from contracts.wire import LineDecoder, encode
from harness.client.approvals import Policy, accept_all
from harness.client.errors import (
    ClientError,
    LineTooLong,
    RequestTimeout,
    ServerExited,
    SessionClosed,
    ThreadStartFailed,
    TurnBusy,
)
from harness.client.events import TurnEnded, TurnEvent
from harness.client.options import ClientInfo, SessionOptions
from harness.client.reader import KNOWN_NOTIFICATIONS as KNOWN_NOTIFICATIONS
from harness.client.reader import read_loop
from harness.client.server_requests import PendingApproval, close_approval_locally
from harness.client.supervisor import supervise
from harness.client.teardown import run_teardown, watch_exit
from harness.client.trace import ClientTrace, NullTrace
from harness.client.tracemarks import turn_status
from harness.client.turn import Turn, UserInput
from harness.client.turnstate import TOOL_ITEM_TYPES, nested_id
from harness.client.usage import UsageLedger

logger = logging.getLogger("harness.client")

MAX_KEPT_VIOLATIONS: Final = 1000


class _Slot:
    __slots__ = ("done", "error", "method", "result")

    def __init__(self, method: str) -> None:
        self.method = method
        self.done = trio.Event()
        self.result: Any = None
        self.error: BaseException | None = None


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
        self._approvals: dict[JsonId, PendingApproval] = {}
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
        self._spawn(supervise, self, turn)
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
        turn_id = nested_id(result, "turn")
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
                close_approval_locally(self, request_id, pending, t)
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
            self.trace.turn_ended(state.turn_id, turn_status(status, turn.killed))
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

    def _check_frame(self, t: float, direction: str, frame: dict[str, Any]) -> None:
        violations = self._validator.validate(frame, direction)
        if violations:
            self._schema_violation(t, direction, frame, violations)

    def _schema_violation(self, t: float, direction: str, frame: dict[str, Any], violations: list[Any]) -> None:
        self.schema_violation_count += 1
        if len(self.schema_violations) < MAX_KEPT_VIOLATIONS:
            self.schema_violations.append((t, direction, frame, violations))

    # --- server requests --------------------------------------------------------------------------

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

    def _stderr_suffix(self) -> str:
        tail = self.transport.stderr_tail().strip()
        return f"; stderr: {tail}" if tail else ""


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
            session._spawn(read_loop, session)
            session._spawn(watch_exit, session)
            try:
                if session.options.initialize:
                    await session.initialize()
                yield session
            finally:
                with trio.CancelScope(shield=True):
                    try:
                        await run_teardown(session)
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
    return nested_id(result, "thread")


def _user_input(value: str | Sequence[dict[str, Any]]) -> UserInput:
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    return [dict(part) for part in value]


__all__ = ["ClientInfo", "Session", "SessionOptions", "TurnEvent", "open_session"]
