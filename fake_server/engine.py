"""The fake app-server as a sans-IO state machine that behaves like codex-cli 0.171.0.

Bytes from the client (``feed``), end of input (``feed_eof``) and timer firings (``timer``) go in;
a list of :mod:`fake_server.effects` comes out (frames to write, wake-ups to schedule, stderr text,
exit...). The engine owns no clock: every call says what time it is (``now_ms``, Unix ms), which
only ends up in timestamps. Scripted delays become :class:`~fake_server.effects.Wake` effects.

Turns run as generator programs (:mod:`fake_server.turns`) that yield waits; the engine resumes
them on timers and approval answers, and closes them on interrupt or steer. The JSON-RPC
bookkeeping (ids, pending tables in both directions) is :class:`contracts.jsonrpc.Endpoint`.
"""

from __future__ import annotations

import posixpath
import time
import traceback
from collections.abc import Callable
from typing import Any

from contracts.jsonrpc import (
    DuplicateRequest,
    DuplicateResponse,
    Endpoint,
    IncomingNotification,
    IncomingRequest,
    LateResponse,
    ProtocolViolation,
    ResponseMatched,
    UnknownResponse,
)
from contracts.messages import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    SERVER_OVERLOADED,
    JsonId,
    Request,
)
from contracts.scenario import Fault, Scenario, Usage
from contracts.wire import DEFAULT_MAX_LINE, LineDecoder, WireError
from fake_server import shapes
from fake_server.effects import (
    CloseStdout,
    Effect,
    Exit,
    Send,
    SendBytes,
    SpawnGrandchild,
    TraceEvent,
    Wake,
    WriteStderr,
)
from fake_server.ids import IdMaker, uuid_error
from fake_server.methods import (
    CLIENT_METHODS,
    EXPERIMENTAL_METHODS,
    PARAMLESS_METHODS,
    schema_required_params,
    unknown_variant_message,
)
from fake_server.state import Answer, NextAnswer, Park, Sleep, ThreadState, TurnRun

OVERLOADED_MESSAGE = "Server overloaded; retry later."
STARTUP_INTERRUPT_MS = 5


class _RequestError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _invalid(message: str) -> _RequestError:
    return _RequestError(INVALID_REQUEST, message)


def _json_type(value: Any) -> str:
    """serde's wording for an unexpected value."""
    if isinstance(value, bool):
        return f"boolean `{'true' if value else 'false'}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value}`"
    if isinstance(value, str):
        return f'string "{value}"'
    if value is None:
        return "null"
    if isinstance(value, list):
        return "sequence"
    return "map"


class Engine:
    """One connection of the fake app-server."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        cwd: str = "/RUN/workdir",
        codex_home: str = "/RUN/codex_home",
        hostname: str = "fake-host",
        installation_id: str = "00000000-0000-4000-8000-000000000000",
        max_line: int = DEFAULT_MAX_LINE,
        seed: str = "fake-codex",
    ) -> None:
        self.scenario = scenario
        self.cwd = cwd
        self.codex_home = codex_home
        self.hostname = hostname
        self.installation_id = installation_id
        self.endpoint = Endpoint()
        self.decoder = LineDecoder(max_line)
        self.ids = IdMaker(seed)
        self.now_ms = 0
        self.initialized = False
        self.client_name = "unknown"
        self.experimental = False
        self.opt_out: frozenset[str] = frozenset()
        self.threads: dict[str, ThreadState] = {}
        self.turns_started = 0  # how many scenario turns have begun
        self.approvals_sent = 0
        self.counters: dict[str, int] = {}
        self.exited: int | None = None
        self.hung = False
        self.stdout_closed = False
        self.overload_left = 0
        self.last_response_frame: dict[str, Any] | None = None
        self._out: list[Effect] = []
        self._timers: dict[int, Callable[[], None]] = {}
        self._next_token = 0

    # --- inputs -----------------------------------------------------------------------------

    def start(self, now_ms: int) -> list[Effect]:
        """Called once when the process starts (faults at no point run here; nothing to send)."""
        self.now_ms = now_ms
        return self._flush()

    def feed(self, data: bytes, now_ms: int) -> list[Effect]:
        self.now_ms = now_ms
        if self._silent_input():
            return self._flush()
        for item in self.decoder.feed(data):
            if self._silent_input():
                break
            self._guarded(self._on_item, item)
        return self._flush()

    def feed_eof(self, now_ms: int) -> list[Effect]:
        """stdin closed: the real server shuts down and exits 0 (a hung fake stays alive)."""
        self.now_ms = now_ms
        if self.exited is None and not self.hung:
            self._shutdown(0)
        return self._flush()

    def timer(self, token: int, now_ms: int) -> list[Effect]:
        self.now_ms = now_ms
        callback = self._timers.pop(token, None)
        if callback is not None and self.exited is None and not self.hung:
            self._guarded(callback)
        return self._flush()

    def terminate(self, now_ms: int) -> list[Effect]:
        """SIGTERM: a graceful shutdown like stdin EOF."""
        self.now_ms = now_ms
        if self.exited is None:
            self._shutdown(0)
        return self._flush()

    @property
    def alive(self) -> bool:
        return self.exited is None

    # --- plumbing -----------------------------------------------------------------------------

    def _silent_input(self) -> bool:
        return self.exited is not None or self.hung

    def _flush(self) -> list[Effect]:
        out, self._out = self._out, []
        return out

    def _guarded(self, fn: Callable[..., None], *args: Any) -> None:
        """Nothing a client sends may crash the server: log like a panic handler and carry on."""
        try:
            fn(*args)
        except Exception:
            self._stderr("ERROR fake-codex: internal error\n" + traceback.format_exc())

    def _stderr(self, text: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.now_ms / 1000))
        self._out.append(WriteStderr(f"{stamp}.{self.now_ms % 1000:03d}Z {text.rstrip()}\n"))

    def _can_send(self) -> bool:
        return self.exited is None and not self.hung and not self.stdout_closed

    def _send(self, frame: dict[str, Any]) -> None:
        if self._can_send():
            self._out.append(Send(frame))

    def _send_bytes(self, data: bytes) -> None:
        if self._can_send():
            self._out.append(SendBytes(data))

    def notify(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        frame = {"method": method, "params": params, "emittedAtMs": self.now_ms}
        if method not in self.opt_out:
            self._send(frame)
        return frame

    def _respond(self, request_id: JsonId, result: Any) -> None:
        try:
            response = self.endpoint.respond(request_id, result)
        except ProtocolViolation:
            return
        self.last_response_frame = response.frame
        self._send(response.frame)

    def _respond_error(self, request_id: JsonId, code: int, message: str) -> None:
        try:
            response = self.endpoint.respond_error(request_id, code, message)
        except ProtocolViolation:
            return
        self.last_response_frame = response.frame
        self._send(response.frame)

    def after(self, ms: int, callback: Callable[[], None]) -> int:
        self._next_token += 1
        token = self._next_token
        self._timers[token] = callback
        self._out.append(Wake(token, max(0, ms)))
        return token

    def cancel_timer(self, token: int | None) -> None:
        if token is not None:
            self._timers.pop(token, None)

    def trace(self, kind: str, **data: Any) -> None:
        self._out.append(TraceEvent(kind, {"at_ms": self.now_ms, **data}))

    def next_id(self, prefix: str) -> str:
        self.counters[prefix] = self.counters.get(prefix, 0) + 1
        return f"{prefix}{self.counters[prefix]}"

    def _shutdown(self, code: int) -> None:
        self.trace("shutdown")
        self.exited = code
        self._out.append(Exit(code))

    def crash(self, code: int, partial: bytes = b"") -> None:
        if partial:
            self._send_bytes(partial)
        self.exited = code
        self._out.append(Exit(code, crash=True))

    # --- incoming -----------------------------------------------------------------------------

    def _on_item(self, item: Any) -> None:
        if isinstance(item, WireError):
            self._stderr(f"ERROR codex_app_server::transport: Failed to deserialize JSONRPCMessage: {item.detail}")
            return
        event = self.endpoint.receive(item)
        if isinstance(event, IncomingRequest):
            self._on_request(event.request)
        elif isinstance(event, IncomingNotification):
            pass  # `initialized` is not enforced and nothing else is a client notification
        elif isinstance(event, ResponseMatched):
            self._on_answer(event.request, event.response)
        elif isinstance(event, LateResponse | UnknownResponse | DuplicateResponse):
            rid = event.response.id
            shown = f"Integer({rid})" if isinstance(rid, int) else f'String("{rid}")'
            self._stderr(f"WARN codex_app_server::outgoing_message: could not find callback for {shown}")
        elif isinstance(event, DuplicateRequest):
            self._stderr(f"WARN codex_app_server: duplicate request id {event.request.id!r} ignored")

    def _on_request(self, request: Request) -> None:
        if self.overload_left > 0:
            self.overload_left -= 1
            self._respond_error(request.id, SERVER_OVERLOADED, OVERLOADED_MESSAGE)
            return
        try:
            self._dispatch(request)
        except _RequestError as err:
            self._respond_error(request.id, err.code, err.message)
        except Exception:
            self._stderr("ERROR fake-codex: request handler failed\n" + traceback.format_exc())
            self._respond_error(request.id, INTERNAL_ERROR, "Internal error")

    def _dispatch(self, request: Request) -> None:
        method = request.method
        handler = _HANDLERS.get(method)

        if handler is None and method not in CLIENT_METHODS:
            raise _invalid(unknown_variant_message(method))
        if "params" not in request.frame and method not in PARAMLESS_METHODS:
            raise _invalid("Invalid request: missing field `params`")
        params = request.frame.get("params")
        if handler is not None:
            params = _check_params(method, params)
        elif isinstance(params, dict):
            for name in schema_required_params(method):
                if name not in params:
                    raise _invalid(f"Invalid request: missing field `{name}`")
        if method == "initialize":
            self._initialize(request, params)
            return
        if not self.initialized:
            raise _invalid("Not initialized")
        if method in EXPERIMENTAL_METHODS and not self.experimental:
            raise _invalid(f"{method} requires experimentalApi capability")
        if handler is None:
            raise _RequestError(METHOD_NOT_FOUND, f"{method} is not supported yet")
        handler(self, request, params)

    # --- answers to our requests ---------------------------------------------------------------

    def _on_answer(self, request: Request, response: Any) -> None:
        for thread in self.threads.values():
            run = thread.active
            if run is not None and request.id in run.pending_requests():
                run.answers.append(Answer(request.id, response))
                if run.waiting_answer:
                    run.waiting_answer = False
                    self.resume(run, run.answers.popleft())
                return
        # Answers to fault requests (unknown server requests) need nothing further.

    # --- handlers -------------------------------------------------------------------------------

    def _initialize(self, request: Request, params: dict[str, Any]) -> None:
        if self.initialized:
            raise _invalid("Already initialized")
        self._turn_fault_point(None, "initialize")
        if not self._can_send():
            return
        if self.overload_left > 0:
            self.overload_left -= 1
            self._respond_error(request.id, SERVER_OVERLOADED, OVERLOADED_MESSAGE)
            return
        self._do_initialize(request, params)

    def _do_initialize(self, request: Request, params: dict[str, Any]) -> None:
        info = params["clientInfo"]
        caps = params.get("capabilities") or {}
        self.client_name = info["name"]
        self.experimental = bool(caps.get("experimentalApi"))
        opt_out = caps.get("optOutNotificationMethods") or []
        self.opt_out = frozenset(m for m in opt_out if isinstance(m, str))
        self.initialized = True
        self._respond(request.id, shapes.initialize_result(info["name"], info["version"], self.codex_home))
        self.notify("configWarning", shapes.config_warning())
        self.notify("remoteControl/status/changed", shapes.remote_control_status(self.hostname, self.installation_id))

    def _resolve_cwd(self, cwd: str | None) -> str:
        if not cwd:
            return self.cwd
        return posixpath.normpath(posixpath.join(self.cwd, cwd))

    def _thread_start(self, request: Request, params: dict[str, Any]) -> None:
        config = self.scenario.config
        thread_id = self.ids.uuid7(self.now_ms)
        cwd = self._resolve_cwd(params.get("cwd"))
        ephemeral = bool(params.get("ephemeral"))
        stamp = time.strftime("%Y/%m/%d", time.gmtime(self.now_ms / 1000))
        fname = time.strftime("rollout-%Y-%m-%dT%H-%M-%S", time.gmtime(self.now_ms / 1000))
        path = None if ephemeral else f"{self.codex_home}/sessions/{stamp}/{fname}-{thread_id}.jsonl"
        thread = ThreadState(
            thread_id=thread_id,
            cwd=cwd,
            created_ms=self.now_ms,
            ephemeral=ephemeral,
            path=path,
            approval_policy=params.get("approvalPolicy") or config.approval_policy,
            sandbox=params.get("sandbox") or config.sandbox,
            model=params.get("model") or config.model,
        )
        self.threads[thread_id] = thread
        body = self._thread_obj(thread)
        self._respond(
            request.id,
            shapes.thread_session_result(
                body, model=thread.model, cwd=cwd, approval_policy=thread.approval_policy, sandbox=thread.sandbox
            ),
        )
        self.notify("thread/started", {"thread": body})
        self.trace("thread_started", thread_id=thread_id, model=thread.model, cwd=cwd)

    def _thread_obj(self, thread: ThreadState) -> dict[str, Any]:
        return shapes.thread(
            thread_id=thread.thread_id,
            cwd=thread.cwd,
            model=thread.model,
            created_s=thread.created_ms // 1000,
            path=thread.path,
            ephemeral=thread.ephemeral,
            originator=self.client_name,
            status=thread.status,
            preview=thread.preview,
        )

    def _thread_resume(self, request: Request, params: dict[str, Any]) -> None:
        thread_id = params["threadId"]
        if (err := uuid_error(thread_id)) is not None:
            raise _invalid(f"invalid session id: {err}")
        thread = self.threads.get(thread_id)
        # The real server resumes from the rollout file, which exists once a turn has run.
        if thread is None or not thread.turns or thread.ephemeral:
            raise _invalid(f"no rollout found for thread id {thread_id}")
        from fake_server.turns import history_turn

        body = self._thread_obj(thread)
        if not params.get("excludeTurns"):
            # Observed: full history (finished turns and the running one, items so far), with a nudge first.
            self.notify("deprecationNotice", shapes.FULL_HISTORY_DEPRECATION)
            run = thread.active
            live = [history_turn(self, run)] if run is not None and not run.ended else []
            body["turns"] = [*thread.history, *live]
        result = shapes.thread_session_result(
            body, model=thread.model, cwd=thread.cwd, approval_policy=thread.approval_policy, sandbox=thread.sandbox
        )
        self._respond(request.id, shapes.resume_result(result, thread.thread_id, thread.model, len(thread.turns)))
        self.notify("thread/goal/cleared", {"threadId": thread.thread_id})

    def _thread_read(self, request: Request, params: dict[str, Any]) -> None:
        thread = self._thread(params["threadId"])
        if params.get("includeTurns"):
            raise _RequestError(METHOD_NOT_FOUND, "list_turns is not supported yet")
        self._respond(request.id, {"thread": self._thread_obj(thread), "readState": None})

    def _thread_loaded_list(self, request: Request, params: dict[str, Any]) -> None:
        self._respond(request.id, {"data": list(self.threads), "nextCursor": None})

    def _thread(self, thread_id: str) -> ThreadState:
        if (err := uuid_error(thread_id)) is not None:
            raise _invalid(f"invalid thread id: {err}")
        thread = self.threads.get(thread_id)
        if thread is None:
            raise _invalid(f"thread not found: {thread_id}")
        return thread

    def _turn_start(self, request: Request, params: dict[str, Any]) -> None:
        from fake_server import turns

        thread = self._thread(params["threadId"])
        text = _input_text(params["input"])
        if thread.model not in shapes.KNOWN_MODELS:
            self.notify("warning", shapes.model_warning(thread.thread_id, thread.model))
        if thread.active is not None and not thread.active.ended:
            run = thread.active
            self._respond(request.id, {"turn": shapes.turn(run.turn_id)})
            turns.fold_input(self, thread, run, text)
            return
        if params.get("approvalPolicy"):
            thread.approval_policy = params["approvalPolicy"]
        turns.start_turn(self, thread, request, text)

    def _turn_steer(self, request: Request, params: dict[str, Any]) -> None:
        from fake_server import turns

        thread = self._thread(params["threadId"])
        run = thread.active
        if run is None or run.ended:
            raise _invalid("no active turn to steer")
        expected = params["expectedTurnId"]
        if expected != run.turn_id:
            raise _invalid(f"expected active turn id `{expected}` but found `{run.turn_id}`")
        self._respond(request.id, {"turnId": run.turn_id})
        turns.fold_input(self, thread, run, _input_text(params["input"]))

    def _turn_interrupt(self, request: Request, params: dict[str, Any]) -> None:
        from fake_server import turns

        thread = self._thread(params["threadId"])
        run = thread.active
        turn_id = params["turnId"]
        if turn_id == "":
            # A "startup interrupt": acknowledged at once; observed to abort a running turn all the same.
            self._respond(request.id, {})
            if run is not None and not run.ended:
                # The abort lands a few ms later, after requests sent right behind it (observed).
                active = run

                def abort() -> None:
                    if not active.ended:
                        turns.interrupt(self, thread, active, None)

                self.after(STARTUP_INTERRUPT_MS, abort)
            return
        if run is None or run.ended:
            raise _invalid("no active turn to interrupt")
        if turn_id != run.turn_id:
            raise _invalid(f"expected active turn id {turn_id} but found {run.turn_id}")
        turns.interrupt(self, thread, run, request.id)

    # --- faults at engine-level points --------------------------------------------------------

    def _turn_fault_point(self, run: TurnRun | None, point: str) -> bool:
        """Apply the instant faults attached to ``point`` (no waiting); True when any struck."""
        from fake_server import faults

        script = run.script if run is not None else self.scenario.turn(0)
        counts = run.counts if run is not None else self.counters
        key = f"point:{point}"
        counts[key] = counts.get(key, 0) + 1
        struck = False
        for fault in script.faults:
            if fault.at == point and fault.n == counts[key]:
                struck = True
                if fault.kind not in faults.COURSE_KINDS:
                    faults.apply_instant(self, run, fault)
        return struck

    # --- turn program driving -------------------------------------------------------------------

    def resume(self, run: TurnRun, value: Any = None) -> None:
        """Run the turn's program until it waits; schedule what it waits for."""
        program = run.program
        while program is not None and run.program is program:
            if self.exited is not None or self.hung:
                return
            try:
                wait = program.send(value)
            except StopIteration:
                if run.program is program:
                    run.program = None
                return
            except Exception:
                self._stderr("ERROR fake-codex: turn program failed\n" + traceback.format_exc())
                if run.program is program:
                    run.program = None
                return
            value = None
            if isinstance(wait, Sleep):
                if wait.ms <= 0:
                    continue
                run.timer = self.after(wait.ms, lambda r=run, p=program: self._wake(r, p))
                return
            if isinstance(wait, NextAnswer):
                if run.answers:
                    value = run.answers.popleft()
                    continue
                run.waiting_answer = True
                return
            if isinstance(wait, Park):
                return

    def _wake(self, run: TurnRun, program: Any) -> None:
        if run.program is program:
            run.timer = None
            self.resume(run)

    def stop_program(self, run: TurnRun) -> None:
        self.cancel_timer(run.timer)
        run.timer = None
        for token in run.tool_timers:
            self.cancel_timer(token)
        run.tool_timers.clear()
        run.waiting_answer = False
        program, run.program = run.program, None
        if program is not None:
            program.close()

    def usage_notification(self, thread: ThreadState, run: TurnRun, usage: Usage) -> dict[str, Any]:
        thread.total = Usage(
            thread.total.input + usage.input,
            thread.total.cached + usage.cached,
            thread.total.output + usage.output,
            thread.total.reasoning + usage.reasoning,
        )
        t = thread.total
        params = {
            "threadId": thread.thread_id,
            "turnId": run.turn_id,
            "tokenUsage": {
                "total": shapes.token_breakdown(t.input, t.cached, t.output, t.reasoning),
                "last": shapes.token_breakdown(usage.input, usage.cached, usage.output, usage.reasoning),
                "modelContextWindow": shapes.CONTEXT_WINDOW,
            },
        }
        frame = self.notify("thread/tokenUsage/updated", params)
        thread.usage_frames.append(frame)
        run.usage_frames.append(frame)
        return frame

    def send_frame(self, frame: dict[str, Any]) -> None:
        """Send a prepared frame as is (faults replaying frames)."""
        self._send(frame)

    def send_raw(self, data: bytes) -> None:
        self._send_bytes(data)

    def stderr(self, text: str) -> None:
        self._stderr(text)

    def stderr_raw(self, text: str) -> None:
        if self.exited is None:
            self._out.append(WriteStderr(text))

    def close_stdout(self) -> None:
        if not self.stdout_closed and self.exited is None:
            self._out.append(CloseStdout())
            self.stdout_closed = True

    def hang(self) -> None:
        self.hung = True

    def spawn_grandchild(self, hold_ms: int) -> None:
        self._out.append(SpawnGrandchild(hold_ms))

    def server_request(self, method: str, params: dict[str, Any]) -> Request:
        request = self.endpoint.request(method, params)
        self._send(request.frame)
        return request

    def abandon_request(self, request_id: JsonId) -> None:
        if request_id in self.endpoint.outgoing:
            self.endpoint.abandon(request_id)

    def fault(self, run: TurnRun | None, point: str) -> list[Fault]:
        """The faults of ``run``'s turn attached to the next occurrence of ``point`` (counts it)."""
        if run is None:
            return []
        key = f"point:{point}"
        run.counts[key] = run.counts.get(key, 0) + 1
        return [f for f in run.script.faults if f.at == point and f.n == run.counts[key]]


def _input_text(items: list[dict[str, Any]]) -> str:
    return "\n".join(str(i.get("text", "")) for i in items if isinstance(i, dict) and i.get("type") == "text")


# --- params checking (serde's first complaint, in declaration order) ---------------------------

_USER_INPUT_TYPES = ("text", "image", "localImage", "audio", "localAudio", "skill", "mention")
_REQUIRED: dict[str, tuple[tuple[str, type | None], ...]] = {
    "initialize": (("clientInfo", dict),),
    "thread/start": (),
    "thread/resume": (("threadId", str),),
    "thread/read": (("threadId", str),),
    "thread/loaded/list": (),
    "turn/start": (("threadId", str), ("input", list)),
    "turn/steer": (("threadId", str), ("input", list), ("expectedTurnId", str)),
    "turn/interrupt": (("threadId", str), ("turnId", str)),
}
_OPTIONAL_STRINGS = ("cwd", "model", "approvalPolicy", "sandbox")
_EXPECTED = {str: "a string", list: "a sequence", dict: "struct"}


def _check_params(method: str, params: Any) -> dict[str, Any]:
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise _invalid(f"Invalid request: invalid type: {_json_type(params)}, expected struct")
    for name, kind in _REQUIRED[method]:
        if name not in params:
            raise _invalid(f"Invalid request: missing field `{name}`")
        if kind is not None and not isinstance(params[name], kind):
            raise _invalid(f"Invalid request: invalid type: {_json_type(params[name])}, expected {_EXPECTED[kind]}")
    for name in _OPTIONAL_STRINGS:
        value = params.get(name)
        if value is not None and not isinstance(value, str):
            raise _invalid(f"Invalid request: invalid type: {_json_type(value)}, expected a string")
    if method == "initialize":
        info = params["clientInfo"]
        for name in ("name", "version"):
            if name not in info:
                raise _invalid(f"Invalid request: missing field `{name}`")
            if not isinstance(info[name], str):
                raise _invalid(f"Invalid request: invalid type: {_json_type(info[name])}, expected a string")
        caps = params.get("capabilities")
        if caps is not None and not isinstance(caps, dict):
            raise _invalid(f"Invalid request: invalid type: {_json_type(caps)}, expected struct")
    if method in ("turn/start", "turn/steer"):
        for entry in params["input"]:
            if not isinstance(entry, dict):
                raise _invalid(f"Invalid request: invalid type: {_json_type(entry)}, expected internally tagged enum")
            kind = entry.get("type")
            if kind not in _USER_INPUT_TYPES:
                if kind is None:
                    raise _invalid("Invalid request: missing field `type`")
                listed = ", ".join(f"`{t}`" for t in _USER_INPUT_TYPES)
                raise _invalid(f"Invalid request: unknown variant `{kind}`, expected one of {listed}")
            if kind == "text" and not isinstance(entry.get("text"), str):
                raise _invalid("Invalid request: missing field `text`")
    return params


_HANDLERS: dict[str, Callable[[Engine, Request, dict[str, Any]], None]] = {
    "initialize": lambda e, r, p: None,  # handled before the initialized check
    "thread/start": Engine._thread_start,
    "thread/resume": Engine._thread_resume,
    "thread/read": Engine._thread_read,
    "thread/loaded/list": Engine._thread_loaded_list,
    "turn/start": Engine._turn_start,
    "turn/steer": Engine._turn_steer,
    "turn/interrupt": Engine._turn_interrupt,
}
