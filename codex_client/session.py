"""The client session: the trio driver of the client core. One reader owns the transport's message stream,
everything runs in the session's nursery.

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

What the client knows lives in the sans-IO core, :class:`~codex_client.connection.ClientConnection`
(``session.connection``); this module does the waiting: the reader task feeds it what the stream gives (a
list of messages per read, framed by the transport: :mod:`contracts.transport`), the
requests wait for their answers, the core's events (:meth:`Session.handle`) wake turns, start policy tasks
and kill the server. Per turn, :mod:`~codex_client.supervisor` watches the deadlines and runs the
interrupt; :mod:`~codex_client.server_requests` runs the approval policy; :mod:`~codex_client.teardown`
closes the session.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeVar

import trio

from codex_client.approvals import Policy, accept_all
from codex_client.connection import (
    ApprovalClosed,
    ApprovalOpened,
    ClientConnection,
    Event,
    KillServer,
    Logged,
    RequestAnswered,
    RequestsFailed,
    SendFrame,
    TurnFinished,
    TurnIdKnown,
    TurnWoken,
)
from codex_client.errors import (
    ClientError,
    MessageTooLarge,
    RequestTimeout,
    ServerExited,
    SessionClosed,
    ThreadStartFailed,
    TurnBusy,
    is_interrupt,
    single_exception,
)
from codex_client.events import TurnEvent
from codex_client.notifications import KNOWN_NOTIFICATIONS as KNOWN_NOTIFICATIONS
from codex_client.options import ClientInfo, SessionOptions
from codex_client.server_requests import run_policy, send_answer
from codex_client.supervisor import supervise
from codex_client.teardown import run_teardown, watch_exit
from codex_client.trace import ClientTrace, NullTrace
from codex_client.tracerecords import TraceClosed, TraceRecord
from codex_client.turn import Turn, UserInput
from codex_client.turncore import TurnCore
from codex_client.turnstate import nested_id
from codex_client.wirerecord import SchemaViolation
from contracts.jsonrpc import RpcError
from contracts.messages import NOTSET, JsonId, Message, Notification, Request
from contracts.record import Budgets, SessionRecord, TeardownStep, TurnResult, WireEntry
from contracts.transport import MessageStream, ProcessHandle, Transport, TransportClosed
from contracts.wire import payload

_T = TypeVar("_T")

logger = logging.getLogger("harness.client")


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
        #: the connection's messages (the framing is the transport's) and the server's process, if it has one
        self.stream: MessageStream = transport.stream
        self.process: ProcessHandle | None = transport.process
        self.stream.max_message = options.max_line
        self.options = options
        self.policy = policy
        self.connection = ClientConnection(
            max_line=options.max_line,
            event_buffer=options.event_buffer,
            interrupt_budget=options.interrupt_budget,
            validate_frames=options.validate_frames,
            has_process=self.process is not None,
        )
        self.teardown: list[TeardownStep] = []
        #: the client trace bundle's writer: the core's trace records go to it (NullTrace: no bundle)
        self.trace: Any = NullTrace()
        self.initialize_result: dict[str, Any] | None = None
        self.turns: list[Turn] = []
        self.reader_done = trio.Event()
        self.exited = trio.Event()
        self._by_core: dict[int, Turn] = {}  # id(TurnCore) -> its Turn
        self._slots: dict[JsonId, _Slot] = {}
        self._policy_scopes: dict[JsonId, trio.CancelScope] = {}
        self._send_lock = trio.Lock()
        self._nursery: trio.Nursery | None = None
        # cancel scopes of the background tasks (reader, exit watcher, supervisors, approval tasks): shielded
        # from the caller's cancellation, stopped by the teardown (see _spawn)
        self._background: set[trio.CancelScope] = set()
        self._background_stopped = False

    # --- what the core knows --------------------------------------------------------------------

    @property
    def wire(self) -> list[WireEntry]:
        """Every frame sent and received and every note, in order, each with its time on the session clock."""
        return self.connection.wire

    @property
    def results(self) -> list[TurnResult]:
        return self.connection.results

    @property
    def log(self) -> list[dict[str, Any]]:
        return self.connection.log

    @property
    def client_errors(self) -> list[str]:
        return self.connection.client_errors

    @property
    def ignored_notifications(self) -> Counter[str]:
        return self.connection.ignored_notifications

    @property
    def other_thread_dropped(self) -> int:
        return self.connection.other_thread_dropped

    @property
    def schema_violations(self) -> list[SchemaViolation]:
        """Frames that broke the pinned schema (``validate_frames``): the first 1,000 (all are counted)."""
        return self.connection.schema_violations

    @property
    def schema_violation_count(self) -> int:
        return self.connection.schema_violation_count

    @property
    def thread_id(self) -> str | None:
        return self.connection.thread_id

    @property
    def model(self) -> str | None:
        return self.connection.model

    @property
    def failure(self) -> BaseException | None:
        return self.connection.failure

    @property
    def killed(self) -> bool:
        return self.connection.killed

    @property
    def kill_reason(self) -> str | None:
        return self.connection.kill_reason

    @property
    def exit_code(self) -> int | None:
        return self.connection.exit_code

    @property
    def alive(self) -> bool:
        return self.connection.alive

    @property
    def budgets(self) -> Budgets:
        return self.options.budgets()

    # --- clock, notes and log -------------------------------------------------------------------

    @staticmethod
    def now() -> float:
        return trio.current_time()

    def note(self, text: str) -> None:
        self.connection.note(self.now(), text)

    def write_log(self, level: int, message: str, **fields: Any) -> None:
        self.drive(lambda conn: conn.emit_log(self.now(), level, message, **fields))

    def stderr_tail(self) -> str:
        """The server's stderr tail (nothing when the transport has no process)."""
        return self.process.stderr_tail() if self.process is not None else ""

    def stderr_suffix(self) -> str:
        tail = self.stderr_tail().strip()
        return f"; stderr: {tail}" if tail else ""

    def kill_server(self) -> None:
        """Force the server down now: kill its process (group), or drop the connection when it has none."""
        if self.process is not None:
            self.process.kill()
        else:
            self.stream.abort()

    def fill_record(self, record: SessionRecord) -> SessionRecord:
        """Copy what the session kept (wire, Results, teardown, log, stderr, exit, budgets) into ``record``."""
        record.wire = list(self.wire)
        record.results = list(self.results)
        record.teardown = list(self.teardown)
        record.log = list(self.log)
        record.client_errors = list(self.client_errors)
        record.budgets = self.budgets
        record.stderr_tail = self.stderr_tail()
        process_exit = self.process.exit_code if self.process is not None else None
        record.server_exit = self.exit_code if self.exit_code is not None else process_exit
        record.experimental_api = self.options.experimental_api
        record.client_trace = self.trace.path
        return record

    # --- the core's events ----------------------------------------------------------------------

    def drive(self, step: Callable[[ClientConnection], _T]) -> _T:
        """Call into the core (``step`` gets it), then do what the core asked: the one way the events of a core
        call are handled, so none can be forgotten (as h11's ``next_event`` is its one way out)."""
        result = step(self.connection)
        self.handle(self.connection.take_events())
        return result

    def handle(self, events: list[Event]) -> None:
        """Do what the core asked (after every call into it), then wake the running turn's consumer."""
        for event in events:
            match event:
                case RequestAnswered():
                    self._answer(event)
                case TurnFinished(turn=core):
                    self._by_core[id(core)].ended()
                case TurnIdKnown(turn=core):
                    self._by_core[id(core)].id_known.set()
                case TurnWoken(turn=core):
                    self._by_core[id(core)].wake.set()
                case ApprovalOpened(pending=pending):
                    scope = self._policy_scopes[pending.request.request_id] = trio.CancelScope()
                    self._spawn(run_policy, self, pending, scope)
                case ApprovalClosed(request_id=request_id):
                    if (policy_scope := self._policy_scopes.get(request_id)) is not None:
                        policy_scope.cancel()
                case SendFrame(message=message):
                    self._spawn(send_answer, self, message)
                case KillServer():
                    self.kill_server()
                case RequestsFailed(error=error):
                    self._fail_pending(error)
                case TraceRecord():
                    event.write_to(self.trace)
                case TraceClosed(status=status):
                    self._close_trace(status)
                case Logged(level=level, message=message, fields=fields):
                    logger.log(level, message, extra=fields)
        active = self.connection.active
        if active is not None:
            self._by_core[id(active)].wake_consumer()

    def _close_trace(self, status: str) -> None:
        try:
            self.trace.close(status)
        except Exception as exc:
            self.connection.client_error(f"trace close: {exc!r}")
        for error in self.trace.errors:
            self.connection.client_error(error)

    def _answer(self, event: RequestAnswered) -> None:
        slot = self._slots.pop(event.request_id, None)
        if slot is not None:
            slot.result, slot.error = event.result, event.error
            slot.done.set()

    def _fail_pending(self, error: BaseException) -> None:
        for request_id, slot in list(self._slots.items()):
            if not slot.done.is_set():
                slot.error = error
                slot.done.set()
            self._slots.pop(request_id, None)

    # --- the reader -----------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        connection = self.connection
        receive = self.stream.receive
        try:
            while True:
                messages = await receive()
                self.handle(connection.receive_messages(messages, self.now()))
                if not messages or connection.failure is not None:
                    break
        except Exception as exc:
            connection.reader_failed(exc)
        finally:
            self.reader_done.set()
            if connection.failure is None and not connection.killed:
                self.note(self.stream.words.eof)
            if self._nursery is not None:
                self._spawn(self._after_eof)

    async def _after_eof(self) -> None:
        """The stream ended: fail waiting requests and the running turn (after a short wait for the exit status)."""
        if self.process is not None and not self.exited.is_set() and not self.killed:
            with trio.move_on_after(self.options.exit_grace):
                await self.exited.wait()
        self.drive(lambda conn: conn.connection_lost(self.now(), self.stderr_tail()))

    # --- sending and requests -------------------------------------------------------------------

    def _check_alive(self) -> None:
        if self.failure is not None:
            raise SessionClosed(f"session failed: {self.failure}") from self.failure
        if self.killed:
            raise SessionClosed(f"server killed: {self.kill_reason}")
        if self.connection.closing:
            raise SessionClosed("session is closing")

    def _failure_cause(self) -> BaseException | None:
        """Why nothing more can be sent, as the typed error the caller should see (None while alive)."""
        if self.failure is not None:
            return self.failure
        if self.killed:
            return ServerExited(f"server killed: {self.kill_reason}", stderr_tail=self.stderr_tail())
        return None

    async def send(self, message: Message) -> None:
        """Write one frame. When the session already failed (or fails while this write breaks), the caller
        gets the session's failure (a lost frame's MessageTooLarge, the kill, the exit), never a secondary
        TransportClosed; a bare TransportClosed is raised only when no cause is known yet.
        """
        async with self._send_lock:
            cause = self._failure_cause()
            if cause is not None:
                raise cause
            self.connection.sent(self.now(), message)
            try:
                await self.stream.send([payload(message)])
                return
            except TransportClosed as exc:
                self.note(f"send failed: server {self.stream.words.closed}")
                closed = exc
        if self._failure_cause() is None and not self.reader_done.is_set():
            # the pipe broke first; the reader is about to learn why (a lost frame, EOF): give it a moment
            with trio.move_on_after(self.options.exit_grace):
                await self.reader_done.wait()
        cause = self._failure_cause()
        if cause is not None:
            raise cause from closed
        raise closed

    async def send_raw(self, line: bytes) -> None:
        """Send ``line`` verbatim as one message (a probe of the server's parsing: any bytes, valid JSON or not;
        on stdio, the line plus a newline); the wire keeps it as a raw client line. Raises like :meth:`send`,
        TransportClosed included."""
        self._check_alive()
        async with self._send_lock:
            cause = self._failure_cause()
            if cause is not None:
                raise cause
            self.connection.sent_raw(self.now(), line)
            await self.stream.send([line])

    async def notify(self, method: str, params: Any = NOTSET) -> None:
        self._check_alive()
        await self.send(Notification.make(method, params))

    async def request(self, method: str, params: Any = NOTSET, *, timeout: float | None = None) -> Any:
        """Send a request and wait for its answer. Raises RpcError, RequestTimeout, ServerExited, SessionClosed."""
        self._check_alive()
        return await self.call(self.connection.request(method, params), timeout or self.options.request_timeout)

    async def call(self, request: Request, timeout: float, *, kill_on_timeout: bool = False) -> Any:
        """Send ``request`` (made by ``session.connection.request``) and wait at most ``timeout`` for its answer."""
        slot = _Slot(request.method)
        self._slots[request.id] = slot
        try:
            with trio.move_on_after(timeout):
                await self.send(request)
                await slot.done.wait()
        except TransportClosed as exc:
            self._abandon(request.id)
            raise ServerExited(f"{request.method}: {exc}", stderr_tail=self.stderr_tail()) from exc
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
        self.connection.abandon(request_id)

    async def _startup_call(self, method: str, params: Any, timeout: float) -> Any:
        """A startup RPC: its own deadline; expiry or cancellation kills the group at once."""
        self._check_alive()
        try:
            return await self.call(self.connection.request(method, params), timeout, kill_on_timeout=True)
        except trio.Cancelled:
            self.kill(f"cancelled during {method}")
            raise

    # --- handshake and threads ------------------------------------------------------------------

    async def initialize(self) -> dict[str, Any]:
        """``initialize`` (clientInfo, capabilities) then the ``initialized`` notification."""
        capabilities: dict[str, Any] = {"experimentalApi": self.options.experimental_api}
        if self.options.opt_out_notifications:
            capabilities["optOutNotificationMethods"] = list(self.options.opt_out_notifications)
        params = {"clientInfo": self.options.client_info.to_json(), "capabilities": capabilities}
        self.write_log(logging.DEBUG, "initialize sent", phase="initialize_sent")
        try:
            bound = max(self.options.request_timeout, self.options.startup_timeout)
            result = await self._startup_call("initialize", params, bound)
        except (ClientError, RpcError) as exc:
            self.write_log(logging.WARNING, "initialize failed", phase="initialize_failure", error=str(exc))
            raise
        self.initialize_result = result if isinstance(result, dict) else {}
        await self.send(Notification.make("initialized"))
        self.write_log(logging.DEBUG, "initialize response", phase="initialize_response")
        return self.initialize_result

    async def start_thread(self, *, cwd: str | None = None, model: str | None = None, **params: Any) -> str:
        """``thread/start``; returns the thread id (ThreadStartFailed when the answer has none)."""
        body = dict(params)
        if cwd is not None:
            body["cwd"] = cwd
        if model is not None:
            body["model"] = model
        self.write_log(logging.DEBUG, "thread/start sent", phase="thread_start_sent")
        try:
            result = await self._startup_call("thread/start", body, self.options.thread_timeout)
        except (ClientError, RpcError) as exc:
            self.write_log(logging.WARNING, "thread/start failed", phase="thread_start_failure", error=str(exc))
            raise
        thread_id = nested_id(result, "thread")
        if thread_id is None:
            self.write_log(logging.WARNING, "thread/start failed", phase="thread_start_failure", error="no thread ID")
            raise ThreadStartFailed("thread/start returned no thread ID")
        self.write_log(logging.DEBUG, "thread/start response", phase="thread_start_response", thread_id=thread_id)
        self.drive(lambda conn: conn.adopt_thread(thread_id, model, result, self.now(), resumed=False))
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
        """``thread/resume`` (``excludeTurns`` where the options say the release takes it); a JSON-RPC error or a
        missing id falls back to thread/start.

        Transport errors (exit, timeout) do not fall back.
        """
        body: dict[str, Any] = {"threadId": thread_id, **params}
        if self.options.resume_exclude_turns:
            body = {"threadId": thread_id, "excludeTurns": True, **params}
        if cwd is not None:
            body["cwd"] = cwd
        if model is not None:
            body["model"] = model
        try:
            result = await self._startup_call("thread/resume", body, self.options.thread_timeout)
        except RpcError as exc:
            if not fallback_to_start:
                raise
            self.write_log(
                logging.WARNING,
                "thread/resume rejected, starting a thread",
                phase="thread_resume_failure",
                error=str(exc),
            )
            return await self.start_thread(cwd=cwd, model=model)
        resumed = nested_id(result, "thread")
        if resumed is None:
            if not fallback_to_start:
                raise ThreadStartFailed("thread/resume returned no thread ID")
            return await self.start_thread(cwd=cwd, model=model)
        self.drive(lambda conn: conn.adopt_thread(resumed, model, result, self.now(), resumed=True))
        return resumed

    async def set_thread_name(self, name: str) -> bool:
        """Optional ``thread/name/set``; errors are only logged (returns whether it succeeded)."""
        if self.thread_id is None:
            return False
        try:
            await self.request("thread/name/set", {"threadId": self.thread_id, "name": name})
        except (ClientError, RpcError) as exc:
            self.write_log(logging.WARNING, "thread/name/set failed", thread_id=self.thread_id, error=str(exc))
            return False
        return True

    # --- turns ----------------------------------------------------------------------------------

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
        deadline = timeout if timeout is not None else self.options.turn_timeout
        core = self.connection.new_turn(_user_input(input), params, deadline, model)
        turn = self._by_core[id(core)] = Turn(self, core)
        self.turns.append(turn)
        return turn

    async def start_turn(self, core: TurnCore) -> None:
        """Send the turn's ``turn/start`` and learn its id (what ``async with turn`` does on entry)."""
        turn = self._by_core[id(core)]
        refusal = self.connection.refuse_turn(core)
        if refusal is not None:
            if self.turns and self.turns[-1] is turn:
                self.turns.pop()
            busy, message = refusal
            raise TurnBusy(message) if busy else ClientError(message)
        request = self.drive(lambda conn: conn.start_turn(core, self.now()))
        if request is None:
            return
        self._spawn(supervise, self, turn)
        try:
            result = await self.call(request, self.options.request_timeout)
        except trio.Cancelled:
            turn.request_cancel("aborted", "execution cancelled")
            await turn.wait_after_cancel()
            raise
        except RpcError as exc:
            self.finish_turn(core, failure=f"turn/start failed: {exc.message}{self.stderr_suffix()}")
            return
        except RequestTimeout as exc:
            self.kill_turn(core, str(exc))
            return
        except ClientError as exc:  # the session's failure: exit, kill, lost frame, closed
            self.finish_turn(core, failure=f"lost frame: {exc}" if isinstance(exc, MessageTooLarge) else str(exc))
            return
        turn_id = nested_id(result, "turn")
        if turn_id is not None:
            self.drive(lambda conn: conn.learn_turn_id(core, turn_id))

    def turn_for(self, core: TurnCore) -> Turn:
        """The driver's :class:`Turn` of one of the core's turns."""
        return self._by_core[id(core)]

    def finish_turn(self, core: TurnCore, *, failure: str | None = None) -> None:
        """Deliver the turn's one Result now (idempotent); ``failure`` is its error when nothing else decided."""
        self.drive(lambda conn: conn.finish_turn(core, self.now(), failure=failure))

    def kill_turn(self, core: TurnCore, reason: str) -> None:
        """Kill the server for the turn's sake (deadline, interrupt failed or past its budget, client error)."""
        self.drive(lambda conn: conn.kill_turn(core, reason, self.now(), stderr=self.stderr_tail()))

    def kill(self, reason: str, *, error: BaseException | None = None) -> None:
        """SIGKILL the server's process group (or crash the in-process engine, or drop a connection that has no
        process) now; the session is dead.

        A running turn ends at once (its Result says ``killed``); waiting requests fail with ``error``
        (default: :class:`ServerExited`).
        """
        self.drive(lambda conn: conn.kill(reason, self.now(), error=error, stderr=self.stderr_tail()))

    # --- background tasks -----------------------------------------------------------------------

    def _spawn(self, fn: Any, *args: Any) -> None:
        """Start a background task in the session's nursery, shielded from the caller's cancellation.

        The caller's cancel scope often encloses the whole session (``fail_after`` around spawn + session +
        turn). Its expiry must interrupt the turn, not stop the tasks the interrupt depends on: without the
        reader no answer and no ``turn/completed`` is read, without the supervisor no ``turn/interrupt`` is
        sent, without the exit watcher the teardown waits for an exit it can never see. Each task is bounded
        on its own (budgets, timeouts); the teardown stops what is left (:meth:`stop_background`).
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

    def stop_background(self) -> None:
        self._background_stopped = True
        for scope in list(self._background):
            scope.cancel()

    async def start(self, nursery: trio.Nursery) -> None:
        """Start the reader and the exit watcher (when there is a process) in ``nursery``, then the handshake
        (what open_session does)."""
        self._nursery = nursery
        self._spawn(self._read_loop)
        if self.process is not None:
            self._spawn(watch_exit, self, self.process)
        if self.options.initialize:
            await self.initialize()


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
            try:
                await session.start(nursery)
                yield session
            except BaseException as exc:
                if is_interrupt(exc):  # Ctrl-C / SIGTERM: the user ends the run, no graceful teardown to wait for
                    session.kill_server()
                raise
            finally:
                with trio.CancelScope(shield=True):
                    try:
                        await run_teardown(session)
                    except Exception as exc:  # teardown must never hang or mask the body's outcome
                        session.connection.client_error(f"teardown: {exc!r}")
                        session.kill_server()
                session.stop_background()
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        raise single_exception(group) from None


def _user_input(value: str | Sequence[dict[str, Any]]) -> UserInput:
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    return [dict(part) for part in value]


__all__ = ["ClientInfo", "Session", "SessionOptions", "TurnEvent", "open_session"]
