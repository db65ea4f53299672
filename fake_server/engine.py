"""The fake app-server as a sans-IO state machine, release-neutral: it plays the release its profile reads.

The client's messages (``receive``: payloads as the deployment's framing handed them over, see
:mod:`contracts.transport`), end of input (``feed_eof``) and timer firings (``timer``) go in; a list of
:mod:`fake_server.effects` comes out (frames to write, wake-ups to schedule, stderr text, exit...). The
engine does not know how messages are framed. It owns no clock: every call says what time it is (``now_ms``,
Unix ms), which only ends up in timestamps. Scripted delays become :class:`~fake_server.effects.Wake` effects.

The engine owns the dispatch: each request passes the ``[[methods]]`` overrides, the release's method table
and the handshake gates, then goes to one handler of :mod:`fake_server.surface` with a
:class:`~fake_server.surface.call.Call` that carries the connection's :class:`~fake_server.world.World`
(threads, ids, outbox, what the surface remembers, the release). Handlers never see the engine.
Turns run as generator programs (:mod:`fake_server.turns`) that yield waits;
:mod:`fake_server.programs` resumes them on timers and approval answers and closes them on
interrupt or steer. Turn code and fault strikes act through the :class:`~fake_server.outbox.Outbox`
(frames, ids, timers, the process), never through the engine; faults strike at their points through
one :func:`fake_server.faults.strike` (the registry: :mod:`contracts.faults`). The JSON-RPC
bookkeeping (ids, pending tables in both directions) is :class:`contracts.jsonrpc.Endpoint`.
"""

from __future__ import annotations

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
from contracts.messages import INTERNAL_ERROR, NOTSET, Request
from contracts.scenario import Scenario
from contracts.wire import Incoming, WireError, WireErrorKind, parse_items
from fake_server import profiles, programs
from fake_server.effects import Effect
from fake_server.ids import IdMaker
from fake_server.methods import schema_required_params, unknown_variant_message
from fake_server.outbox import Outbox
from fake_server.state import Answer
from fake_server.surface import core, overrides, router
from fake_server.surface.call import Call
from fake_server.surface.errors import RequestError, invalid
from fake_server.world import Host, World


class Engine:
    """One connection of the fake app-server: its inputs, and the dispatch of every request to its handler.

    What it knows is :attr:`world`; what goes out (frames, timers, trace events, process faults) goes
    through :attr:`box`, the world's :class:`~fake_server.outbox.Outbox`.
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
        store: Any = None,
        setup: Any = None,
    ) -> None:
        # The release played (fake_server.profiles); the caller resolves flag and environment first.
        profile = profile or profiles.select(scenario=scenario.release)
        # Session-level fault points take the first turn's faults (docs/scenarios.md).
        box = Outbox(IdMaker(seed), scenario.turns[0].faults if scenario.turns else ())
        box.reshape = profile.reshape_frame()
        box.notifications = profile.notifications
        host = Host(cwd=cwd, codex_home=codex_home, hostname=hostname, installation_id=installation_id)
        self.world = World(scenario=scenario, profile=profile, host=host, box=box, store=store, setup=setup)
        self.box = box

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
        self._keep()
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
            self._keep()
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
    def cwd(self) -> str:
        """The session's working directory (the deployment makes it; the client sees it)."""
        return self.world.host.cwd

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

    def _keep(self) -> None:
        """What this input materialised goes to the home's store before anything is sent about it."""
        store = self.world.store
        if store is not None:
            self._guarded(store.save, self.world)
            for problem in store.problems:
                self.box.stderr(f"WARN fake-codex: {problem}")
            store.problems.clear()

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
        event = self.box.endpoint.receive(item)
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
        scripted = overrides.find(self.world, request.method)  # the scenario's [[methods]]
        if scripted is None:
            self._answer(request)
        elif scripted.delay_ms:
            self.box.after(scripted.delay_ms, lambda: self._play(request, scripted))
        else:
            self._play(request, scripted)

    def _play(self, request: Request, scripted: overrides.Scripted) -> None:
        if not self.box.silent and not overrides.play(self.world, request, scripted):
            self._answer(request)

    def _answer(self, request: Request) -> None:
        if self.box.refuse_overloaded(request.id):
            return
        try:
            self._dispatch(request)
        except RequestError as err:
            self.box.respond_error(request.id, err.code, err.message, NOTSET if err.data is None else err.data)
        except Exception:
            self.box.stderr("ERROR fake-codex: request handler failed\n" + traceback.format_exc())
            self.box.respond_error(request.id, INTERNAL_ERROR, "Internal error")

    def _dispatch(self, request: Request) -> None:
        """The gates every request passes, in the real server's order; then its handler."""
        world, method = self.world, request.method
        handler = core.HANDLERS.get(method)
        methods = world.profile.methods  # the release's (its pin is read on the first request)
        if method not in methods.known:
            raise invalid(unknown_variant_message(method, methods))
        if "params" not in request.frame and method not in methods.paramless:
            raise invalid("Invalid request: missing field `params`")
        params = request.frame.get("params")
        if handler is not None:
            params = core.check_params(method, params)
        elif isinstance(params, dict):
            for name in schema_required_params(world.profile.schema_release, method):
                if name not in params:
                    raise invalid(f"Invalid request: missing field `{name}`")
        call = Call(world, request, params if isinstance(params, dict) else {})
        if method == "initialize":
            core.initialize(call)
            return
        if not world.client.initialized:
            raise invalid("Not initialized")
        if method in methods.experimental and not world.client.experimental:
            raise invalid(f"{method} requires experimentalApi capability")
        if world.store is not None:
            world.store.fill(world)  # threads another process of this home left since
        if handler is None:
            router.dispatch(call)  # every method beyond the turn core
        else:
            handler(call)

    # --- answers to our requests ---------------------------------------------------------------

    def _on_answer(self, request: Request, response: Any) -> None:
        for thread in self.world.threads.values():
            run = thread.active
            if run is not None and request.id in run.pending_requests():
                programs.deliver(self.box, run, Answer(request.id, response))
                return
        # Answers to fault requests (unknown server requests) need nothing further.
