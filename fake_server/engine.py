"""The fake app-server as a sans-IO state machine, release-neutral: it plays the release its profile reads.

The client's messages (``receive``: payloads as the deployment's framing handed them over, see
:mod:`contracts.transport`), end of input (``feed_eof``) and timer firings (``timer``) go in; a list of
:mod:`fake_server.effects` comes out (frames to write, wake-ups to schedule, stderr text, exit...). The
engine does not know how messages are framed. It owns no clock: every call says what time it is (``now_ms``,
Unix ms), which only ends up in timestamps. Scripted delays become :class:`~fake_server.effects.Wake` effects.

Turns run as generator programs (:mod:`fake_server.turns`) that yield waits;
:mod:`fake_server.programs` resumes them on timers and approval answers and closes them on
interrupt or steer. Turn code and fault strikes act through the :class:`~fake_server.outbox.Outbox`
(frames, ids, timers, the process), never through the engine; faults strike at their points through
one :func:`fake_server.faults.strike` (the registry: :mod:`contracts.faults`). The JSON-RPC
bookkeeping (ids, pending tables in both directions) is :class:`contracts.jsonrpc.Endpoint`.
"""

from __future__ import annotations

import posixpath
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from contracts.jsonrpc import (
    DuplicateRequest,
    DuplicateResponse,
    IncomingNotification,
    IncomingRequest,
    LateResponse,
    ResponseMatched,
    UnknownResponse,
)
from contracts.messages import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    SERVER_OVERLOADED,
    Request,
)
from contracts.scenario import Scenario
from contracts.wire import Incoming, WireError, WireErrorKind, parse_items
from fake_server import profiles, programs, surface, turns
from fake_server.effects import Effect
from fake_server.faults import strike
from fake_server.ids import IdMaker, uuid_error
from fake_server.methods import schema_required_params, unknown_variant_message
from fake_server.outbox import Outbox
from fake_server.serde_words import json_type
from fake_server.state import Answer, ThreadState, TurnRun

OVERLOADED_MESSAGE = "Server overloaded; retry later."
STARTUP_INTERRUPT_MS = 5


class _RequestError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _invalid(message: str) -> _RequestError:
    return _RequestError(INVALID_REQUEST, message)


class Engine:
    """One connection of the fake app-server: the handshake, threads and request dispatch.

    What goes out (frames, timers, trace events, process faults) goes through :attr:`box`, the
    :class:`~fake_server.outbox.Outbox` that turn programs and fault strikes get instead of the engine.
    """

    def __init__(
        self,
        scenario: Scenario,
        *,
        cwd: str = "/RUN/workdir",
        codex_home: str = "/RUN/codex_home",
        hostname: str = "fake-host",
        installation_id: str = "00000000-0000-4000-8000-000000000000",
        seed: str = "fake-codex",
        profile: profiles.Profile | None = None,
    ) -> None:
        self.scenario = scenario
        # The release played (fake_server.profiles); the caller resolves flag and environment first.
        self.profile = profile or profiles.select(scenario=scenario.release)
        self.shapes = self.profile.shapes  # the field sets of the frames the release writes
        self.cwd = cwd
        self.codex_home = codex_home
        self.hostname = hostname
        self.installation_id = installation_id
        self.ids = IdMaker(seed)
        # Session-level fault points take the first turn's faults (docs/scenarios.md).
        self.box = Outbox(self.ids, scenario.turns[0].faults if scenario.turns else ())
        self.endpoint = self.box.endpoint
        self.box.reshape = self.profile.reshape_frame()
        self.initialized = False
        self.client_name = "unknown"
        self.experimental = False
        self.threads: dict[str, ThreadState] = {}
        self.surface = surface.SurfaceState()  # what the methods beyond the turn core remember
        self.turns_started = 0  # how many scenario turns have begun

    # --- inputs -----------------------------------------------------------------------------

    def start(self, now_ms: int) -> list[Effect]:
        """Called once when the process starts (faults at no point run here; nothing to send)."""
        self.box.now_ms = now_ms
        return self.box.flush()

    def receive(self, payloads: Sequence[Incoming], now_ms: int) -> list[Effect]:
        """The client's next messages (one payload each, or a framing's error in its place)."""
        self.box.now_ms = now_ms
        if self.box.silent:
            return self.box.flush()
        for item in parse_items(payloads):
            if self.box.silent:
                break
            if type(item) is WireError and item.kind is WireErrorKind.TRUNCATED_AT_EOF:
                continue  # the end of input cut it off: the server stops reading there (feed_eof)
            self.box.lines_received += 1
            self._guarded(self._on_item, item)
        return self.box.flush()

    def feed_eof(self, now_ms: int) -> list[Effect]:
        """stdin closed: the real server shuts down and exits 0 (a hung fake stays alive)."""
        self.box.now_ms = now_ms
        if not self.box.silent:
            self.box.shutdown(0)
        return self.box.flush()

    def timer(self, token: int, now_ms: int) -> list[Effect]:
        self.box.now_ms = now_ms
        callback = self.box.pop_timer(token)
        if callback is not None and not self.box.silent:
            self._guarded(callback)
        return self.box.flush()

    def terminate(self, now_ms: int) -> list[Effect]:
        """SIGTERM: a graceful shutdown like stdin EOF."""
        self.box.now_ms = now_ms
        if self.box.exited is None:
            self.box.shutdown(0)
        return self.box.flush()

    @property
    def now_ms(self) -> int:
        return self.box.now_ms

    @property
    def exited(self) -> int | None:
        return self.box.exited

    @property
    def hung(self) -> bool:
        return self.box.hung

    @property
    def struck(self) -> list[tuple[int, int]]:
        """(turn index, fault index) of every scripted fault struck so far."""
        return self.box.struck

    def _guarded(self, fn: Callable[..., None], *args: Any) -> None:
        """Nothing a client sends may crash the server: log like a panic handler and carry on."""
        try:
            fn(*args)
        except Exception:
            self.box.stderr("ERROR fake-codex: internal error\n" + traceback.format_exc())

    # --- incoming -----------------------------------------------------------------------------

    def _on_item(self, item: Any) -> None:
        if isinstance(item, WireError):
            self.box.stderr(f"ERROR codex_app_server::transport: Failed to deserialize JSONRPCMessage: {item.detail}")
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
            self.box.stderr(f"WARN codex_app_server::outgoing_message: could not find callback for {shown}")
        elif isinstance(event, DuplicateRequest):
            self.box.stderr(f"WARN codex_app_server: duplicate request id {event.request.id!r} ignored")

    def _on_request(self, request: Request) -> None:
        if surface.overrides.intercept(self, request, self._answer):  # the scenario's [[methods]]
            return
        self._answer(request)

    def _answer(self, request: Request) -> None:
        if self.box.overload_left > 0:
            self.box.overload_left -= 1
            self.box.respond_error(request.id, SERVER_OVERLOADED, OVERLOADED_MESSAGE)
            return
        try:
            self._dispatch(request)
        except _RequestError as err:
            self.box.respond_error(request.id, err.code, err.message)
        except Exception:
            self.box.stderr("ERROR fake-codex: request handler failed\n" + traceback.format_exc())
            self.box.respond_error(request.id, INTERNAL_ERROR, "Internal error")

    def _dispatch(self, request: Request) -> None:
        method = request.method
        handler = _HANDLERS.get(method)

        methods = self.profile.methods  # the release's (its pin is read on the first request)
        if method not in methods.known:
            raise _invalid(unknown_variant_message(method, methods))
        if "params" not in request.frame and method not in methods.paramless:
            raise _invalid("Invalid request: missing field `params`")
        params = request.frame.get("params")
        if handler is not None:
            params = _check_params(method, params)
        elif isinstance(params, dict):
            for name in schema_required_params(self.profile.schema_release, method):
                if name not in params:
                    raise _invalid(f"Invalid request: missing field `{name}`")
        if method == "initialize":
            self._initialize(request, params)
            return
        if not self.initialized:
            raise _invalid("Not initialized")
        if method in methods.experimental and not self.experimental:
            raise _invalid(f"{method} requires experimentalApi capability")
        if handler is None:
            surface.dispatch(self, request, params)  # every method beyond the turn core
            return
        handler(self, request, params)

    # --- answers to our requests ---------------------------------------------------------------

    def _on_answer(self, request: Request, response: Any) -> None:
        for thread in self.threads.values():
            run = thread.active
            if run is not None and request.id in run.pending_requests():
                programs.deliver(self.box, run, Answer(request.id, response))
                return
        # Answers to fault requests (unknown server requests) need nothing further.

    # --- handlers -------------------------------------------------------------------------------

    def _initialize(self, request: Request, params: dict[str, Any]) -> None:
        if self.initialized:
            raise _invalid("Already initialized")
        strike(self.box, "initialize")
        if self.box.silent or self.box.stdout_closed:
            return
        if self.box.overload_left > 0:
            self.box.overload_left -= 1
            self.box.respond_error(request.id, SERVER_OVERLOADED, OVERLOADED_MESSAGE)
            return
        self._do_initialize(request, params)

    def _do_initialize(self, request: Request, params: dict[str, Any]) -> None:
        info = params["clientInfo"]
        caps = params.get("capabilities") or {}
        self.client_name = info["name"]
        self.experimental = bool(caps.get("experimentalApi"))
        opt_out = caps.get("optOutNotificationMethods") or []
        self.box.opt_out = frozenset(m for m in opt_out if isinstance(m, str))
        self.initialized = True
        result = self.shapes.initialize_result(info["name"], info["version"], self.codex_home, self.profile.release)
        self.box.respond(request.id, result)
        self.box.notify("configWarning", self.shapes.config_warning())
        status = self.shapes.remote_control_status(self.hostname, self.installation_id)
        self.box.notify("remoteControl/status/changed", status)

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
        self.box.respond(
            request.id,
            self.shapes.thread_session_result(
                body, model=thread.model, cwd=cwd, approval_policy=thread.approval_policy, sandbox=thread.sandbox
            ),
        )
        self.box.notify("thread/started", {"thread": body})
        self.box.trace("thread_started", thread_id=thread_id, model=thread.model, cwd=cwd)

    def _thread_obj(self, thread: ThreadState) -> dict[str, Any]:
        return surface.decorate_thread(self, thread, self._thread_body(thread))

    def _thread_body(self, thread: ThreadState) -> dict[str, Any]:
        return self.shapes.thread(
            thread_id=thread.thread_id,
            cwd=thread.cwd,
            model=thread.model,
            created_s=thread.created_ms // 1000,
            path=thread.path,
            ephemeral=thread.ephemeral,
            originator=self.client_name,
            status=thread.status,
            preview=thread.preview,
            cli_version=self.profile.release,
        )

    def _thread_resume(self, request: Request, params: dict[str, Any]) -> None:
        thread_id = params["threadId"]
        if (err := uuid_error(thread_id)) is not None:
            raise _invalid(f"invalid session id: {err}")
        thread = self.threads.get(thread_id)
        # The real server resumes from the rollout file, which exists once a turn has run (or it was named...).
        if thread is None or not surface.resumable(self, thread):
            raise _invalid(f"no rollout found for thread id {thread_id}")
        body = self._thread_obj(thread)
        if not params.get("excludeTurns"):
            # Observed: full history (finished turns and the running one, items so far), with a nudge first.
            self.box.notify("deprecationNotice", self.shapes.full_history_deprecation())
            run = thread.active
            live = [turns.history_turn(self.box, run)] if run is not None and not run.ended else []
            body["turns"] = [*thread.history, *live]
        result = self.shapes.resume_result(
            body,
            model=thread.model,
            cwd=thread.cwd,
            approval_policy=thread.approval_policy,
            sandbox=thread.sandbox,
            thread_id=thread.thread_id,
            turns=len(thread.turns),
        )
        surface.reload(self, thread, result)  # a thread unloaded by thread/archive comes back from its rollout
        self.box.respond(request.id, result)
        self.box.notify("thread/goal/cleared", {"threadId": thread.thread_id})

    def _thread(self, thread_id: str) -> ThreadState:
        if (err := uuid_error(thread_id)) is not None:
            raise _invalid(f"invalid thread id: {err}")
        thread = self.threads.get(thread_id)
        if thread is None:
            raise _invalid(f"thread not found: {thread_id}")
        return thread

    def _turn_start(self, request: Request, params: dict[str, Any]) -> None:
        thread = self._thread(params["threadId"])
        text = _input_text(params["input"])
        if thread.model not in self.shapes.known_models:
            self.box.notify("warning", self.shapes.model_warning(thread.thread_id, thread.model))
        if thread.active is not None and not thread.active.ended:
            run = thread.active
            self.box.respond(request.id, {"turn": self.shapes.turn(run.turn_id)})
            turns.fold_input(self.box, thread, run, text)
            return
        if thread.model not in self.shapes.known_models:
            # Traced once per turn that starts (input folded into a running turn is not a new one).
            self.box.trace("protocol_event", thread_id=thread.thread_id, event_type="warning")
        if params.get("approvalPolicy"):
            thread.approval_policy = params["approvalPolicy"]
        index = self.turns_started
        self.turns_started += 1
        run = TurnRun(
            thread_id=thread.thread_id,
            turn_id=self.ids.uuid7(self.now_ms),
            index=index,
            script=self.scenario.turn(index),
            started_ms=self.now_ms,
            max_retries=self.scenario.config.stream_max_retries,
            experimental=self.experimental,
            profile=self.profile,
        )
        turns.start_turn(self.box, thread, run, request.id, text)

    def _turn_steer(self, request: Request, params: dict[str, Any]) -> None:
        thread = self._thread(params["threadId"])
        run = thread.active
        if run is None or run.ended:
            raise _invalid("no active turn to steer")
        expected = params["expectedTurnId"]
        if expected != run.turn_id:
            raise _invalid(f"expected active turn id `{expected}` but found `{run.turn_id}`")
        self.box.respond(request.id, {"turnId": run.turn_id})
        turns.fold_input(self.box, thread, run, _input_text(params["input"]))

    def _turn_interrupt(self, request: Request, params: dict[str, Any]) -> None:
        thread = self._thread(params["threadId"])
        run = thread.active
        turn_id = params["turnId"]
        if turn_id == "":
            # A "startup interrupt": acknowledged at once; observed to abort a running turn all the same.
            self.box.respond(request.id, {})
            if run is not None and not run.ended:
                # The abort lands a few ms later, after requests sent right behind it (observed).
                active = run

                def abort() -> None:
                    if not active.ended:
                        turns.interrupt(self.box, thread, active, None)

                self.box.after(STARTUP_INTERRUPT_MS, abort)
            return
        if run is None or run.ended:
            raise _invalid("no active turn to interrupt")
        if turn_id != run.turn_id:
            raise _invalid(f"expected active turn id {turn_id} but found {run.turn_id}")
        turns.interrupt(self.box, thread, run, request.id)


def _input_text(items: list[dict[str, Any]]) -> str:
    return "\n".join(str(i.get("text", "")) for i in items if isinstance(i, dict) and i.get("type") == "text")


# --- params checking (serde's first complaint, in declaration order) ---------------------------

_USER_INPUT_TYPES = ("text", "image", "localImage", "audio", "localAudio", "skill", "mention")
_REQUIRED: dict[str, tuple[tuple[str, type | None], ...]] = {
    "initialize": (("clientInfo", dict),),
    "thread/start": (),
    "thread/resume": (("threadId", str),),
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
        raise _invalid(f"Invalid request: invalid type: {json_type(params)}, expected struct")
    for name, kind in _REQUIRED[method]:
        if name not in params:
            raise _invalid(f"Invalid request: missing field `{name}`")
        if kind is not None and not isinstance(params[name], kind):
            raise _invalid(f"Invalid request: invalid type: {json_type(params[name])}, expected {_EXPECTED[kind]}")
    for name in _OPTIONAL_STRINGS:
        value = params.get(name)
        if value is not None and not isinstance(value, str):
            raise _invalid(f"Invalid request: invalid type: {json_type(value)}, expected a string")
    if method == "initialize":
        info = params["clientInfo"]
        for name in ("name", "version"):
            if name not in info:
                raise _invalid(f"Invalid request: missing field `{name}`")
            if not isinstance(info[name], str):
                raise _invalid(f"Invalid request: invalid type: {json_type(info[name])}, expected a string")
        caps = params.get("capabilities")
        if caps is not None and not isinstance(caps, dict):
            raise _invalid(f"Invalid request: invalid type: {json_type(caps)}, expected struct")
    if method in ("turn/start", "turn/steer"):
        for entry in params["input"]:
            if not isinstance(entry, dict):
                raise _invalid(f"Invalid request: invalid type: {json_type(entry)}, expected internally tagged enum")
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
    "turn/start": Engine._turn_start,
    "turn/steer": Engine._turn_steer,
    "turn/interrupt": Engine._turn_interrupt,
}
