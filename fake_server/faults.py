"""The fault registry's fake half: one row per kind with all its behaviour, and :func:`strike`, the one
place a point of the timeline is counted and its faults strike.

:data:`REGISTRY` maps each kind to its row: its :class:`~contracts.faults.FaultSpec` (default point,
points, parameters with bounds, the "fake only" flag, description), its strike function and, for the
websocket kinds, what the connection does (``on_socket``, ``on_upgrade``); importing this module fails
when the two halves disagree. Nothing else in the fake names a kind: a new kind is a row of
:data:`contracts.faults.FAULTS` and a ``@strikes`` function here.

Strike functions act through the :class:`~fake_server.outbox.Outbox` only. Kinds that act ``now``
write or exit at the point; kinds that change the ``course`` of the turn set a flag on the run, ask
the caller to wait (:attr:`Strike.sleep_ms`) or say how the interrupt goes on (:class:`Course`, read
by :func:`fake_server.turns.interrupt`): the registry's point lists say where each has an effect, and
loading refuses any other.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import orjson

from contracts.faults import FAULTS, FaultSpec
from contracts.scenario import Fault
from fake_server.outbox import Outbox
from fake_server.state import ThreadState, TurnRun

if TYPE_CHECKING:  # the socket handlers only call its methods: the engine imports no websocket code
    from contracts.websocket import WsStream

_STDERR_LINE: Final = "WARN codex_core::flood: " + "x" * 200 + "\n"
#: The websocket close code of a server going away (RFC 6455 §7.4.1).
GOING_AWAY: Final = 1001


@dataclass(slots=True)
class Course:
    """How the faults struck at a ``turn/interrupt`` change its course (:func:`fake_server.turns.interrupt`).

    Each field is set by one strike function; when two faults set one field, the first in scenario order
    holds (``None`` / False: the interrupt's own course)."""

    ignored: bool = False  # never answered, the turn runs on
    delay_ms: int | None = None  # the abort lands this much later, the turn running on meanwhile
    resolved_order: str | None = None  # serverRequest/resolved "before" or "after" the turn ends
    unanswered: bool = False  # the turn ends, the {} answer is never sent
    late: tuple[int, bool] | None = None  # (delay_ms, never): idle and turn/completed come late, or never


@dataclass(slots=True)
class Hit:
    """One fault striking: where, and what the point offers (the usage update being sent at ``usage``)."""

    box: Outbox
    run: TurnRun | None
    point: str
    thread: ThreadState | None = None
    frame: dict[str, Any] | None = None
    sleep_ms: int = 0
    course: Course = field(default_factory=Course)


StrikeFn = Callable[[Hit, Fault], None]
#: What a websocket connection does when the kind strikes; True: the connection is gone after it.
SocketFn = Callable[["WsStream", Mapping[str, Any]], Awaitable[bool]]
#: A kind that answers the websocket upgrade itself: the refusal's HTTP status and body.
UpgradeFn = Callable[[Fault], tuple[int, str]]


@dataclass(frozen=True, slots=True)
class Registered:
    """One kind's row: its declaration and everything the fake does for it."""

    spec: FaultSpec
    strike: StrikeFn
    on_socket: SocketFn | None = None
    on_upgrade: UpgradeFn | None = None


_STRIKES: dict[str, StrikeFn] = {}
_SOCKET: dict[str, SocketFn] = {}
_UPGRADE: dict[str, UpgradeFn] = {}


def strikes(
    kind: str, *, on_socket: SocketFn | None = None, on_upgrade: UpgradeFn | None = None
) -> Callable[[StrikeFn], StrikeFn]:
    """Register the strike function of ``kind`` (one per kind of :data:`contracts.faults.FAULTS`), and what a
    websocket connection does for it."""

    def register(fn: StrikeFn) -> StrikeFn:
        assert kind in FAULTS and kind not in _STRIKES, kind
        _STRIKES[kind] = fn
        if on_socket is not None:
            _SOCKET[kind] = on_socket
        if on_upgrade is not None:
            _UPGRADE[kind] = on_upgrade
        return fn

    return register


@dataclass(frozen=True, slots=True)
class Strike:
    """What struck at one occurrence of a point, in scenario order, and the wait it asks for."""

    faults: tuple[Fault, ...] = ()
    sleep_ms: int = 0
    course: Course = field(default_factory=Course)


NOTHING: Final = Strike()


def strike(
    box: Outbox,
    point: str,
    run: TurnRun | None = None,
    *,
    thread: ThreadState | None = None,
    frame: dict[str, Any] | None = None,
) -> Strike:
    """Count one occurrence of ``point`` (in ``run``'s turn, or the session's when ``run`` is None) and
    strike the faults attached to it, in scenario order. Every strike goes to the outbox's ledger."""
    if run is None:
        faults, counts, turn = box.session_faults, box.session_counts, 0
    else:
        faults, counts, turn = run.script.faults, run.counts, run.index
    if not faults:
        return NOTHING
    n = counts[point] = counts.get(point, 0) + 1
    hit: Hit | None = None  # made only when a fault strikes (this runs at every delta of a faulted turn)
    struck: list[Fault] = []
    for index, fault in enumerate(faults):
        if fault.at == point and fault.n == n:
            if hit is None:
                hit = Hit(box, run, point, thread, frame)
            box.fault_struck(turn, index, fault)
            REGISTRY[fault.kind].strike(hit, fault)
            struck.append(fault)
    return Strike(tuple(struck), hit.sleep_ms, hit.course) if hit is not None else NOTHING


# --- course kinds ---------------------------------------------------------------------------------


@strikes("completion_after_interrupt")
def _completion_after_interrupt(hit: Hit, fault: Fault) -> None:
    if hit.course.late is None:
        hit.course.late = (int(fault.param("delay_ms")), bool(fault.param("never")))


@strikes("interrupt_ignored")
def _interrupt_ignored(hit: Hit, fault: Fault) -> None:
    hit.course.ignored = True


@strikes("interrupt_delayed")
def _interrupt_delayed(hit: Hit, fault: Fault) -> None:
    if hit.course.delay_ms is None:
        hit.course.delay_ms = int(fault.param("delay_ms"))


@strikes("interrupt_answer_missing")
def _interrupt_answer_missing(hit: Hit, fault: Fault) -> None:
    hit.course.unanswered = True


@strikes("resolved_order")
def _resolved_order(hit: Hit, fault: Fault) -> None:
    if hit.course.resolved_order is None:
        hit.course.resolved_order = str(fault.param("order"))


@strikes("delayed_completion")
def _delayed_completion(hit: Hit, fault: Fault) -> None:
    hit.sleep_ms += int(fault.param("delay_ms"))


@strikes("drop_turn_completed")
def _drop_turn_completed(hit: Hit, fault: Fault) -> None:
    if hit.run is not None:
        hit.run.drop_completed = True


@strikes("trace_unclosed_tool")
def _trace_unclosed_tool(hit: Hit, fault: Fault) -> None:
    if hit.run is not None:
        hit.run.trace_bug = True


@strikes("duplicate_usage")
def _duplicate_usage(hit: Hit, fault: Fault) -> None:
    if hit.frame is not None:
        for _ in range(int(fault.param("count"))):
            hit.box.send_frame(hit.frame)


@strikes("replay_usage")
def _replay_usage(hit: Hit, fault: Fault) -> None:
    if hit.frame is None or hit.run is None or hit.thread is None:
        return
    turn_id = hit.run.turn_id
    earlier = [f for f in hit.thread.usage_frames if f["params"]["turnId"] != turn_id]
    replayed = earlier[-1] if earlier else hit.frame
    for _ in range(int(fault.param("count"))):
        hit.box.send_frame(replayed)


# --- kinds that act now ---------------------------------------------------------------------------


def half_frame(box: Outbox, run: TurnRun | None) -> bytes:
    """The first half of the frame the server was writing when it died."""
    params = {"threadId": run.thread_id if run else "", "turnId": run.turn_id if run else "", "itemId": "msg-cut"}
    frame = {"method": "item/agentMessage/delta", "params": {**params, "delta": "cut mid-li"}}
    data = orjson.dumps({**frame, "emittedAtMs": box.now_ms})
    return data[: len(data) // 2]


@strikes("crash")
def _crash(hit: Hit, fault: Fault) -> None:
    partial = half_frame(hit.box, hit.run) if fault.param("mid_line") else b""
    hit.box.crash(int(fault.param("exit_code")), partial)


@strikes("hang")
def _hang(hit: Hit, fault: Fault) -> None:
    hit.box.hang()


@strikes("partial_line")
def _partial_line(hit: Hit, fault: Fault) -> None:
    # The line is never finished: no newline follows, and the server stays up without another byte (stdin EOF
    # ignored, as `hang`), so only a reader with its own bound gets past it.
    hit.box.send_raw(half_frame(hit.box, hit.run), torn=True)
    hit.box.hang()


@strikes("stdout_closed")
def _stdout_closed(hit: Hit, fault: Fault) -> None:
    hit.box.close_stdout()


@strikes("grandchild_holds_stdout")
def _grandchild(hit: Hit, fault: Fault) -> None:
    hit.box.spawn_grandchild(int(fault.param("hold_ms")))


@strikes("garbage_lines")
def _garbage_lines(hit: Hit, fault: Fault) -> None:
    line = str(fault.param("text")).replace("\n", " ").encode()  # one message (on stdio, one line)
    for _ in range(int(fault.param("count"))):
        hit.box.send_raw(line)


@strikes("oversized_line")
def _oversized_line(hit: Hit, fault: Fault) -> None:
    size = int(fault.param("size"))
    head, tail = b'{"method":"x/oversized","params":{"pad":"', b'"}}'
    hit.box.send_raw(head + b"x" * max(0, size - len(head) - len(tail)) + tail)


@strikes("invalid_utf8")
def _invalid_utf8(hit: Hit, fault: Fault) -> None:
    for _ in range(int(fault.param("count"))):
        hit.box.send_raw(b'{"method":"x/invalidUtf8","params":{"text":"\xff\xfe\xfd"}}')


@strikes("stderr_flood")
def _stderr_flood(hit: Hit, fault: Fault) -> None:
    remaining = int(fault.param("bytes"))
    chunk = _STDERR_LINE * 64
    while remaining > 0:
        piece = chunk[:remaining]
        hit.box.stderr_raw(piece)
        remaining -= len(piece)


@strikes("unknown_notification")
def _unknown_notification(hit: Hit, fault: Fault) -> None:
    for _ in range(int(fault.param("count"))):
        hit.box.notify(
            str(fault.param("method")), {"threadId": hit.run.thread_id if hit.run else None}, unchecked=True
        )


@strikes("unknown_server_request")
def _unknown_server_request(hit: Hit, fault: Fault) -> None:
    hit.box.request(str(fault.param("method")), {"threadId": hit.run.thread_id if hit.run else None})


@strikes("late_events")
def _late_events(hit: Hit, fault: Fault) -> None:
    run = hit.run
    if run is None:
        return
    item_id = run.last_message_id or "msg-late"
    for i in range(int(fault.param("count"))):
        hit.box.notify(
            "item/agentMessage/delta",
            {"threadId": run.thread_id, "turnId": run.turn_id, "itemId": item_id, "delta": f" late{i}"},
        )


@strikes("duplicate_response_id")
def _duplicate_response_id(hit: Hit, fault: Fault) -> None:
    if hit.box.last_response_frame is not None:
        hit.box.send_frame(hit.box.last_response_frame)


@strikes("no_answer")
def _no_answer(hit: Hit, fault: Fault) -> None:
    """Nothing to write: the [[methods]] request it struck is left unanswered (fake_server.surface.overrides)."""


@strikes("slow_reader")
def _slow_reader(hit: Hit, fault: Fault) -> None:
    hit.box.pause_input(int(fault.param("pause_ms")))


def _transport(hit: Hit, fault: Fault) -> None:
    """Carried out by the deployment's connection (its ``on_socket``, fake_server.ws_serve.carry_out); refused
    at run time on stdio."""
    hit.box.transport_fault(fault.kind, {p: fault.param(p) for p in FAULTS[fault.kind].param_map})


async def _close_socket(ws: WsStream, params: Mapping[str, Any]) -> bool:
    if params.get("frame"):
        await ws.close_with_frame(GOING_AWAY)
    else:
        await ws.close_raw()
    return True


async def _ping_silent(ws: WsStream, params: Mapping[str, Any]) -> bool:
    ws.answer_pings = False
    return False


async def _fragment(ws: WsStream, params: Mapping[str, Any]) -> bool:
    ws.frame_size = max(1, int(params.get("size", 16)))
    return False


strikes("ws_close", on_socket=_close_socket)(_transport)
strikes("ws_ping_silent", on_socket=_ping_silent)(_transport)
strikes("ws_fragment", on_socket=_fragment)(_transport)


def _refusal(fault: Fault) -> tuple[int, str]:
    return int(fault.param("status")), str(fault.param("body"))


@strikes("ws_refuse_upgrade", on_upgrade=_refusal)
def _refuse_upgrade(hit: Hit, fault: Fault) -> None:
    """Nothing here: the upgrade is refused before any message (its ``on_upgrade``, fake_server.ws_serve)."""


@strikes("overload")
def _overload(hit: Hit, fault: Fault) -> None:
    hit.box.overload_left += int(fault.param("count"))


def _complete() -> dict[str, Registered]:
    missing = sorted(set(FAULTS) - set(_STRIKES))
    if missing:
        raise ImportError(f"fault kinds without a strike function: {', '.join(missing)}")
    return {
        kind: Registered(spec, _STRIKES[kind], _SOCKET.get(kind), _UPGRADE.get(kind)) for kind, spec in FAULTS.items()
    }


#: kind -> (spec, strike function): the whole registry, in the table's order.
REGISTRY: Final[dict[str, Registered]] = _complete()
