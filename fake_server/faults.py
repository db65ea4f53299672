"""The fault registry's fake half: one strike function per kind, and :func:`strike`, the one place a
point of the timeline is counted and its faults strike.

:data:`REGISTRY` maps each kind to its :class:`~contracts.faults.FaultSpec` (default point, points,
parameters with bounds, the "fake only" flag, description) and its strike function; importing this
module fails when the two halves disagree. Strike functions act through the
:class:`~fake_server.outbox.Outbox` only. Kinds that act ``now`` write or exit at the point; kinds
that change the ``course`` of the turn set a flag on the run, ask the caller to wait
(:attr:`Strike.sleep_ms`) or are read by the caller from the returned :class:`Strike` (the interrupt
kinds): the registry's point lists say where each has an effect, and loading refuses any other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import orjson

from contracts.faults import FAULTS, FaultSpec
from contracts.scenario import Fault
from fake_server.outbox import Outbox
from fake_server.state import ThreadState, TurnRun

_STDERR_LINE: Final = "WARN codex_core::flood: " + "x" * 200 + "\n"


@dataclass(slots=True)
class Hit:
    """One fault striking: where, and what the point offers (the usage update being sent at ``usage``)."""

    box: Outbox
    run: TurnRun | None
    point: str
    thread: ThreadState | None = None
    frame: dict[str, Any] | None = None
    sleep_ms: int = 0


StrikeFn = Callable[[Hit, Fault], None]


@dataclass(frozen=True, slots=True)
class Registered:
    spec: FaultSpec
    strike: StrikeFn


_STRIKES: dict[str, StrikeFn] = {}


def strikes(kind: str) -> Callable[[StrikeFn], StrikeFn]:
    """Register the strike function of ``kind`` (one per kind of :data:`contracts.faults.FAULTS`)."""

    def register(fn: StrikeFn) -> StrikeFn:
        assert kind in FAULTS and kind not in _STRIKES, kind
        _STRIKES[kind] = fn
        return fn

    return register


@dataclass(frozen=True, slots=True)
class Strike:
    """What struck at one occurrence of a point, in scenario order, and the wait it asks for."""

    faults: tuple[Fault, ...] = ()
    sleep_ms: int = 0

    def get(self, kind: str) -> Fault | None:
        return next((f for f in self.faults if f.kind == kind), None)

    def __contains__(self, kind: object) -> bool:
        return any(f.kind == kind for f in self.faults)


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
    return Strike(tuple(struck), hit.sleep_ms) if hit is not None else NOTHING


# --- course kinds ---------------------------------------------------------------------------------


def _read_by_caller(hit: Hit, fault: Fault) -> None:
    """The caller reads this kind from the returned :class:`Strike` (the interrupt handling)."""


for _kind in (
    "completion_after_interrupt",
    "interrupt_ignored",
    "interrupt_delayed",
    "interrupt_answer_missing",
    "resolved_order",
):
    strikes(_kind)(_read_by_caller)


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
    """Carried out by the deployment's connection (fake_server.ws_serve); refused at run time on stdio."""
    hit.box.transport_fault(fault.kind, {p: fault.param(p) for p in FAULTS[fault.kind].param_map})


for _kind in ("ws_close", "ws_ping_silent", "ws_fragment"):
    strikes(_kind)(_transport)


@strikes("ws_refuse_upgrade")
def _refuse_upgrade(hit: Hit, fault: Fault) -> None:
    """Nothing here: the upgrade is refused before any message (fake_server.ws_serve.refusal_of)."""


@strikes("overload")
def _overload(hit: Hit, fault: Fault) -> None:
    hit.box.overload_left += int(fault.param("count"))


def _complete() -> dict[str, Registered]:
    missing = sorted(set(FAULTS) - set(_STRIKES))
    if missing:
        raise ImportError(f"fault kinds without a strike function: {', '.join(missing)}")
    return {kind: Registered(spec, _STRIKES[kind]) for kind, spec in FAULTS.items()}


#: kind -> (spec, strike function): the whole registry, in the table's order.
REGISTRY: Final[dict[str, Registered]] = _complete()
