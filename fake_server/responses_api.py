"""Mock Responses API for driving the real ``codex app-server`` offline (trio + h11, loopback only).

Serves ``POST /v1/responses`` as ``text/event-stream``: one scripted body per request, in order
across the session, turn by turn (a turn makes one request, plus one per tool round trip, plus one
per stream retry), from the scenario's model-level steps (:meth:`TurnScript.response`, so the
defaults match the fake app-server). Anything else gets 404. Every request is recorded (method,
path, headers, parsed JSON body, which turn and response it was given), and the traffic as a timeline
(:attr:`MockResponsesServer.traffic`: each request, each SSE event sent, each stream's end, stamped with
``trio.current_time()``, the clock of the session's wire), for the record's ``model.jsonl``.

Which turn a request belongs to comes from the ``x-codex-turn-metadata`` header codex sends
(``turn_id``): a new turn id starts the next scripted turn; the same id continues the turn. The next scripted
turn is the mock's own count, or the run's (:class:`RunTurnCounter`: a file every mock of a run shares, so a
client that starts a server per turn gets turn N of the scenario on the run's N-th turn, as fake-codex counts
the turns of a ``CODEX_HOME``).

Usage::

    async with serve_responses_api(scenario, workdir=Path("/abs/workdir")) as mock:
        mock.base_url  # "http://127.0.0.1:PORT/v1"
        ...
        mock.requests
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath
from typing import Any

import h11
import orjson
import trio
import zstandard

from contracts import bounded_parse
from contracts.exitcodes import InternalError
from contracts.scenario import MessageItem, ModelResponse, Scenario
from fake_server import turn_counter
from fake_server.sse import IdCounter, StreamPlan, build_stream

RESPONSES_PATH = "/v1/responses"
#: A codex request carries instructions, tools and the whole conversation: tens of KB, far below this.
MAX_REQUEST_BYTES = 32 * 1024 * 1024
MAX_REQUESTS = 10_000
MAX_CONNECTIONS = 64
RECEIVE_CHUNK = 65536
#: How long a connection may sit between requests (codex keeps connections alive).
IDLE_TIMEOUT_S = 120.0
TURN_METADATA_HEADER = "x-codex-turn-metadata"
#: Bound on the traffic timeline: past it, events are counted in ``traffic_dropped``, not kept.
MAX_TRAFFIC = 200_000


class MockServerError(InternalError):
    """The mock Responses API cannot do what it was asked."""


class NotLoopback(MockServerError):
    """Refused to bind an address that is not a loopback address."""

    def __init__(self, host: str) -> None:
        super().__init__(f"the mock Responses API only binds loopback addresses, not {host!r}")
        self.host = host


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: Any  # parsed JSON; None when absent or unparseable
    turn: int | None = None  # 0-based scripted turn it was served from (None: not a responses request)
    response_index: int | None = None  # 0-based response within that turn
    status: int = 0

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((value for key, value in self.headers if key == name), None)


@dataclass(slots=True)
class ResponseSchedule:
    """Sans-IO: which scripted response answers the next request.

    A request whose turn id differs from the previous one's starts the next turn (response 0);
    otherwise it takes the next response of the current turn (a tool round trip, a retry, a steer).
    Requests without a turn id are attributed by the number of user messages in their input.
    """

    scenario: Scenario
    turn: int = -1
    index: int = -1
    _turn_key: str | None = None
    #: the run's turn count (:class:`RunTurnCounter`), shared with the run's other mocks; None: this mock's own
    counter: Callable[[], int] | None = None

    def next(self, turn_key: str | None) -> tuple[int, int, ModelResponse]:
        if self.turn < 0 or turn_key != self._turn_key:
            self.turn = self._next_turn()
            self.index = 0
            self._turn_key = turn_key
        else:
            self.index += 1
        return self.turn, self.index, self.scenario.turn(self.turn).response(self.index)

    def _next_turn(self) -> int:
        if self.counter is not None:
            try:
                return self.counter()
            except OSError:
                self.counter = None  # an unreadable count: this mock counts on from its own
        return self.turn + 1


class RunTurnCounter:
    """The run's turn count, in a file every mock of the run shares (a relayed server's mock lives in its relay's
    process): each call takes the next 0-based turn under an exclusive lock. The file is the harness's, in the
    run's work directory; opened without following a link, and a non-regular file is refused (``OSError``)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)

    def __call__(self) -> int:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
        try:
            return turn_counter.take_next(fd, self.path)
        finally:
            os.close(fd)


def turn_key(headers: dict[str, str], body: Any) -> str | None:
    """What identifies the turn a request belongs to: codex's turn id, else the count of user inputs."""
    raw = headers.get(TURN_METADATA_HEADER)
    if raw:
        try:
            meta = bounded_parse.loads_json(raw)
        except orjson.JSONDecodeError:
            meta = None
        if isinstance(meta, dict) and isinstance(meta.get("turn_id"), str):
            return meta["turn_id"]
    if isinstance(body, dict) and isinstance(body.get("input"), list):
        users = sum(1 for item in body["input"] if isinstance(item, dict) and item.get("role") == "user")
        return f"users:{users}"
    return None


#: The header codex sends on a subagent's model requests; ``guardian`` is the approvals reviewer (``auto_review``).
SUBAGENT_HEADER = "x-openai-subagent"


def is_reviewer_request(headers: dict[str, str], body: Any) -> bool:
    """A request of the approvals reviewer subagent (as observed: the header, and ``subagent_kind`` in the
    request's turn metadata), not a turn of the scenario."""
    if headers.get(SUBAGENT_HEADER) == "guardian":
        return True
    meta = body.get("client_metadata") if isinstance(body, dict) else None
    return isinstance(meta, dict) and meta.get(SUBAGENT_HEADER) == "guardian"


def reviewer_response(outcome: str) -> ModelResponse:
    """The reviewer model's verdict, as the JSON its output schema asks for (``outcome`` allow / deny)."""
    verdict = {"outcome": outcome, "risk_level": "low", "user_authorization": "unknown", "rationale": "scripted review"}
    text = orjson.dumps(verdict).decode()
    return ModelResponse(items=(MessageItem(text=text, deltas=(text,)),))


def _check_loopback(host: str) -> None:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        if host != "localhost":
            raise NotLoopback(host) from None
        return
    if not address.is_loopback:
        raise NotLoopback(host)


@dataclass(slots=True)
class MockResponsesServer:
    scenario: Scenario
    workdir: PurePosixPath
    host: str = "127.0.0.1"
    port: int = 0
    requests: list[RecordedRequest] = field(default_factory=list)
    schedule: ResponseSchedule | None = None
    ids: IdCounter = field(default_factory=IdCounter)
    _responses_served: int = 0
    _connections: int = 0
    _errors: list[str] = field(default_factory=list)
    #: {"t", "dir": "c2m" | "m2c", "msg"} in order: the record's model.jsonl lines
    traffic: list[dict[str, Any]] = field(default_factory=list)
    traffic_dropped: int = 0

    def __post_init__(self) -> None:
        _check_loopback(self.host)
        if self.schedule is None:
            self.schedule = ResponseSchedule(self.scenario)

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    @property
    def errors(self) -> list[str]:
        """Problems seen on connections (bad HTTP, oversized bodies); empty in a healthy run."""
        return list(self._errors)

    def note(self, direction: str, msg: dict[str, Any]) -> None:
        """Add one event to :attr:`traffic` (bounded)."""
        if len(self.traffic) >= MAX_TRAFFIC:
            self.traffic_dropped += 1
            return
        self.traffic.append({"t": trio.current_time(), "dir": direction, "msg": msg})

    def responses_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == RESPONSES_PATH and r.method == "POST"]

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(self.port, host=self.host)
        listener = listeners[0]
        for extra in listeners[1:]:
            await extra.aclose()
        sock = listener.socket
        self.port = sock.getsockname()[1]
        async with listener, trio.open_nursery() as nursery:
            task_status.started(self.port)
            while True:
                stream = await listener.accept()
                if self._connections >= MAX_CONNECTIONS:
                    await stream.aclose()
                    continue
                nursery.start_soon(self._connection, stream)

    async def _connection(self, stream: trio.SocketStream) -> None:
        self._connections += 1
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=64 * 1024)
        try:
            while True:
                request = await self._read_request(conn, stream)
                if request is None:
                    return
                keep_going = await self._answer(conn, stream, request)
                if not keep_going or conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                conn.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # codex dropped the stream (interrupt, steer): expected
        except h11.RemoteProtocolError as exc:
            self._errors.append(f"bad HTTP from client: {exc}")
        finally:
            self._connections -= 1
            await stream.aclose()

    async def _read_request(self, conn: h11.Connection, stream: trio.SocketStream) -> RecordedRequest | None:
        start: h11.Request | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                with trio.move_on_after(IDLE_TIMEOUT_S) as idle:
                    data = await stream.receive_some(RECEIVE_CHUNK)
                if idle.cancelled_caught:
                    return None
                conn.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                start = event
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_REQUEST_BYTES:
                    self._errors.append(f"request body over {MAX_REQUEST_BYTES} bytes")
                    return None
            elif isinstance(event, h11.EndOfMessage) and start is not None:
                return self._record(start, bytes(body))
            elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return None

    def _record(self, start: h11.Request, raw: bytes) -> RecordedRequest:
        headers = tuple((k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in start.headers)
        encoding = dict(headers).get("content-encoding", "")
        body: Any = None
        try:
            if encoding == "zstd":
                raw = zstandard.ZstdDecompressor().decompress(raw, max_output_size=MAX_REQUEST_BYTES)
            body = bounded_parse.loads_json(raw) if raw else None
        except (orjson.JSONDecodeError, zstandard.ZstdError) as exc:
            self._errors.append(f"unreadable request body: {exc}")
        return RecordedRequest(
            method=start.method.decode("ascii", "replace"),
            path=start.target.decode("ascii", "replace"),
            headers=headers,
            body=body,
        )

    async def _answer(self, conn: h11.Connection, stream: trio.SocketStream, request: RecordedRequest) -> bool:
        if len(self.requests) >= MAX_REQUESTS:
            self._errors.append(f"more than {MAX_REQUESTS} requests")
            return False
        if request.method != "POST" or request.path != RESPONSES_PATH:
            self.requests.append(replace(request, status=404))
            self.note("c2m", {"method": request.method, "path": request.path, "status": 404})
            await _send_simple(conn, stream, 404, b'{"error":{"message":"not found"}}')
            return True
        assert self.schedule is not None
        if is_reviewer_request(dict(request.headers), request.body):
            # The auto-review subagent asks the model for a verdict: answered here, outside the scripted turns.
            self._responses_served += 1
            verdict = reviewer_response(self.scenario.config.auto_review)
            plan = build_stream(
                verdict, response_id=f"resp-{self._responses_served}", workdir=self.workdir, ids=self.ids
            )
            self.requests.append(replace(request, status=200))
            self.note("c2m", {"method": request.method, "path": request.path, "reviewer": True, "status": 200})
            return await _send_plan(conn, stream, plan, self.note)
        turn, index, response = self.schedule.next(turn_key(dict(request.headers), request.body))
        self._responses_served += 1
        plan = build_stream(response, response_id=f"resp-{self._responses_served}", workdir=self.workdir, ids=self.ids)
        status = plan.http_error.status if plan.http_error else 200
        self.requests.append(replace(request, turn=turn, response_index=index, status=status))
        self.note(
            "c2m", {"method": request.method, "path": request.path, "turn": turn, "response": index, "status": status}
        )
        return await _send_plan(conn, stream, plan, self.note)


async def _send(conn: h11.Connection, stream: trio.SocketStream, event: h11.Event) -> None:
    data = conn.send(event)
    if data:
        await stream.send_all(data)


async def _send_simple(conn: h11.Connection, stream: trio.SocketStream, status: int, body: bytes) -> None:
    headers = [("content-type", "application/json"), ("content-length", str(len(body)))]
    await _send(conn, stream, h11.Response(status_code=status, headers=headers))
    await _send(conn, stream, h11.Data(data=body))
    await _send(conn, stream, h11.EndOfMessage())


def _event_type(data: bytes) -> str:
    """The ``event:`` name of one SSE chunk (what the traffic timeline keeps of it)."""
    first = data.split(b"\n", 1)[0]
    return first[len(b"event: ") :].decode("utf-8", "replace") if first.startswith(b"event: ") else "data"


async def _send_plan(
    conn: h11.Connection,
    stream: trio.SocketStream,
    plan: StreamPlan,
    note: Callable[[str, dict[str, Any]], None] | None = None,
) -> bool:
    """Send one planned answer. False when the connection must be closed afterwards."""
    if plan.http_error is not None:
        if note is not None:
            note("m2c", {"http": plan.http_error.status})
        await _send_simple(conn, stream, plan.http_error.status, plan.http_error.body)
        return True
    headers = [("content-type", "text/event-stream"), ("cache-control", "no-cache"), ("transfer-encoding", "chunked")]
    await _send(conn, stream, h11.Response(status_code=200, headers=headers))
    for chunk in plan.chunks:
        if chunk.delay_s > 0:
            await trio.sleep(chunk.delay_s)
        await _send(conn, stream, h11.Data(data=chunk.data))
        if note is not None:
            note("m2c", {"event": _event_type(chunk.data)})
    if note is not None:
        note("m2c", {"end": plan.ending})
    if plan.ending == "cut":
        return False  # the caller closes the connection mid-body: no terminal chunk
    await _send(conn, stream, h11.EndOfMessage())
    return True


@asynccontextmanager
async def serve_responses_api(
    scenario: Scenario,
    *,
    workdir: PurePosixPath | str,
    host: str = "127.0.0.1",
    port: int = 0,
    turn_counter: Callable[[], int] | None = None,
) -> AsyncIterator[MockResponsesServer]:
    """Run the mock for the duration of the block; port 0 picks an ephemeral port (``mock.port``).
    ``turn_counter``: the run's turn count (:class:`RunTurnCounter`), when the mock is one of a run's.

    Raises :class:`NotLoopback` for any non-loopback ``host``.
    """
    schedule = ResponseSchedule(scenario, counter=turn_counter)
    server = MockResponsesServer(
        scenario=scenario, workdir=PurePosixPath(workdir), host=host, port=port, schedule=schedule
    )
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve)
            try:
                yield server
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # The block's own exception comes out of the server's nursery wrapped; hand it back as raised.
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
