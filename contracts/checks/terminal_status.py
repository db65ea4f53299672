"""Exactly one Result per turn, with a status ``[expect]`` allows; at most one turn/completed consumed.

A turn the server completed ("completed") although the client interrupted or cancelled it may be reported
``completed`` (what the server says) or ``aborted`` (what the client asked), whatever ``[expect]`` declares.
A cancelled turn the server never confirmed ended (no ``turn/completed`` within the interrupt budget of the
client's ``turn/interrupt``) was ended by the client's own budget: ``timeout`` is as right as ``aborted``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from contracts.checks.base import Check, Maker, Status
from contracts.checks.client_run import wire_turns
from contracts.checks.registry import Contract, Rule
from contracts.checks.wire_index import WireIndex
from contracts.jsonval import as_object
from contracts.record import SessionRecord, TurnResult

NAME = "terminal_status"
#: Scheduling room on a wire-judged bound (as contracts.checks.client_run).
_SLACK_S = 0.5
REFERENCE = "docs/client-rules.md §3"
#: Why an outside client is not judged on what it consumed: only what the server sent is on the wire.
NOT_ON_THE_WIRE = "which turn/completed the client read is not on the wire (the server's sending is)"
#: The ids of its checks (other modules name a check by these).
RESULTS = "results"
TURN_N_RESULT = "turn N result"
TURN_N_STATUS = "turn N status"
TURN_N_FINAL_TEXT = "turn N final text"
TURN_N_COMPLETED_CONSUMED = "turn N turn/completed consumed"
TURN_N_SERVER_STATUS = "turn N server status"
SERVER_EXIT = "server exit"
CLIENT_ERRORS = "client errors"
CONTRACT = Contract(
    NAME,
    citation=REFERENCE,
    checks=(
        RESULTS,
        TURN_N_RESULT,
        TURN_N_STATUS,
        TURN_N_FINAL_TEXT,
        Rule(TURN_N_COMPLETED_CONSUMED, outside=NOT_ON_THE_WIRE),
        Rule(
            TURN_N_SERVER_STATUS,
            citation="docs/protocol.md §4",
            outside="what the client consumed is not on the wire; the status it reported is judged",
        ),
        # How the client ended the server (close stdin, a signal, a kill) is its choice; the exit status follows.
        Rule(
            SERVER_EXIT,
            level="should",
            citation="docs/client-rules.md §5",
            outside="the exit status follows from how the client ended the server (client / server ended)",
        ),
        Rule(CLIENT_ERRORS, outside="an outside client's exceptions are its own: its Results and exit are judged"),
    ),
)


def _turns_started(record: SessionRecord) -> int:
    """How many turns the session had: declared, started on the wire, or given a Result."""
    index = WireIndex.build(record.wire)
    started = len(index.frames("c2s", "turn/start"))
    highest = max((r.index + 1 for r in record.results), default=0)
    if record.expect.turns:
        return len(record.expect.turns)
    planned = record.meta.get("scenario_turns")  # the runner notes how many turns the scenario has
    if isinstance(planned, int) and not isinstance(planned, bool):
        return max(planned, highest)
    return max(started, highest)


def completed_after_cancel(index: WireIndex, result: TurnResult) -> bool:
    """The client asked to interrupt this turn (or cancelled it) and the server still completed it ("completed"):
    a correct client may report the turn ``completed`` (what the server says) or ``aborted`` (what it asked)."""
    if not result.turn_id:
        return False
    completions = index.turn_completions(result.turn_id)
    if not completions:
        return False
    frame = completions[0][1].frame or {}
    turn = (frame.get("params") or {}).get("turn") if isinstance(frame.get("params"), dict) else None
    if not isinstance(turn, dict) or turn.get("status") != "completed":
        return False
    return bool(index.interrupts(result.turn_id)) or result.cancel_at is not None


def cancel_unconfirmed(index: WireIndex, turn_id: str | None, interrupt_s: float) -> bool:
    """The client interrupted this turn and the server did not confirm it ended (no ``turn/completed`` within the
    interrupt budget of the first ``turn/interrupt``): the client's own budget ended the turn, so it may report it
    ``timeout`` as well as ``aborted``."""
    if not turn_id:
        return False
    interrupts = index.interrupts(turn_id)
    if not interrupts:
        return False
    first = min(r.t for r in interrupts)
    done = [e.t for _, e in index.turn_completions(turn_id)]
    return not any(t - first <= interrupt_s + _SLACK_S for t in done)


@dataclass(slots=True)
class _Texts:
    """What the server sent of one turn's agent text: the completed messages, in order, and the deltas that came
    before the turn's turn/completed (later ones belong to no turn a client reports)."""

    messages: list[str] = field(default_factory=list)
    final_answer: str | None = None
    deltas: list[str] = field(default_factory=list)
    ended: bool = False
    on_completion: list[str] = field(default_factory=list)  # turn/completed's own agentMessage items, where written

    def allowed(self) -> set[str]:
        """Every final text a correct client may report for the turn: the last message (or the final answer),
        all messages joined, or what streamed."""
        messages = self.messages or self.on_completion
        out = {"".join(self.deltas)}
        if messages:
            out |= {messages[-1], "".join(messages), "\n".join(messages), "\n\n".join(messages)}
        else:
            out.add("")  # no message completed (a stream a steer abandoned, say): no final text is as right
        if self.final_answer is not None:
            out.add(self.final_answer)
        return out


def _agent_text(item: Any) -> tuple[str, str | None] | None:
    if isinstance(item, dict) and item.get("type") == "agentMessage" and isinstance(item.get("text"), str):
        return item["text"], item.get("phase") if isinstance(item.get("phase"), str) else None
    return None


def _turn_texts(record: SessionRecord) -> dict[str, _Texts]:
    """turn id → what the server sent of its text, in one pass over the wire (linear in the session)."""
    out: dict[str, _Texts] = {}
    for entry in record.wire:
        frame = entry.frame if entry.dir == "s2c" else None
        method = frame.get("method") if isinstance(frame, dict) else None
        params = frame.get("params") if isinstance(frame, dict) else None
        if not isinstance(params, dict) or method not in _TEXT_METHODS:
            continue
        if method == "turn/completed":
            turn = params.get("turn")
            if isinstance(turn, dict) and isinstance(turn.get("id"), str):
                texts = out.setdefault(turn["id"], _Texts())
                texts.ended = True
                for item in turn.get("items") or () if isinstance(turn.get("items"), list) else ():
                    got = _agent_text(item)
                    if got is not None:
                        texts.on_completion.append(got[0])
            continue
        turn_id = params.get("turnId")
        if not isinstance(turn_id, str):
            continue
        texts = out.setdefault(turn_id, _Texts())
        if method == "item/agentMessage/delta" and isinstance(params.get("delta"), str) and not texts.ended:
            texts.deltas.append(params["delta"])
        elif method == "item/completed" and not texts.ended:
            got = _agent_text(params.get("item"))
            if got is not None:
                texts.messages.append(got[0])
                if got[1] == "final_answer":
                    texts.final_answer = got[0]
    return out


_TEXT_METHODS = frozenset({"item/agentMessage/delta", "item/completed", "turn/completed"})
_CLIP = 60


def _clip(text: str) -> str:
    return repr(text[:_CLIP] + ("…" if len(text) > _CLIP else "")) + f" ({len(text)} characters)"


def _final_text(
    make: Maker, record: SessionRecord, result: TurnResult, texts: dict[str, _Texts], order: list[str | None] | None
) -> Check:
    """The reported final text is one the server's messages of that turn make (no other turn's text in it).

    ``order``: the ids of the turns started on the wire, in order, for an outside client's Result without a turn id
    (it is the turn started at its position, as :mod:`contracts.checks.usage` matches it)."""
    name = f"turn {result.index + 1} final text"
    outside = order is not None
    turn_id, known = result.turn_id, result.turn_id is not None or not outside
    if turn_id is None and order is not None:
        turn_id = order[result.index] if 0 <= result.index < len(order) else None
        known = turn_id is not None or result.index >= len(order)  # no turn/start at its place: never started
        # Its turn/start named no turn (refused, or never answered) and no text on the wire is of a turn no
        # turn/start named: whichever turn it was, the server sent it no text.
        known = known or not (set(texts) - {t for t in order if t is not None})
    sent = texts.get(turn_id or "")
    if not result.final_text:
        # No text is the right text where the server sent none for the turn (a turn that never started, a turn
        # that failed or was cancelled before any message). An outside client's empty text is also what it
        # reports when it reports none: judged only where the turn it names is known.
        if sent is None and known:
            return make(name, "pass", "no final text, and the server sent no text of this turn")
        if outside and (sent is None or "" not in sent.allowed()):
            return make(name, "skip", "the client reported no final text")
    if sent is None:
        return make(name, "skip", "no turn id, or no text of that turn on the wire, to judge the final text by")
    allowed = sent.allowed()
    # Leading and trailing whitespace is the client's to keep or strip (a UI trims it): not a different text.
    if result.final_text in allowed or result.final_text.strip() in {t.strip() for t in allowed}:
        return make(name, "pass", f"{_clip(result.final_text)}, as the server sent it")
    streamed = "".join(sent.deltas)
    if result.status != "completed" and streamed.startswith(result.final_text):
        return make(name, "pass", f"{_clip(result.final_text)}: what streamed before the turn ended")
    shown = _clip(max(allowed, key=len))
    return make(
        name,
        "fail",
        f"reported {_clip(result.final_text)}; the server's messages of this turn make {shown} (a text of another "
        "turn, a delta after the turn ended, or a lost message)",
    )


#: turn/completed's status on the wire (looked up with whatever a peer sent) -> the Result status that reports it
_REPORTS: dict[object, str] = {"completed": "completed", "interrupted": "aborted", "failed": "failed"}


def _unsupported_course(
    index: WireIndex, result: TurnResult, order: list[str | None] | None, allowed: tuple[str, ...]
) -> tuple[tuple[str, ...], str]:
    """A turn of which the client reported a part of the plan ``unsupported`` (an action it cannot send, a
    decision it cannot give) took another course than [expect]'s: the status that reports what the server did
    is right (the client's own ``timeout`` or ``failed`` where the server never ended the turn)."""
    turn_id = result.turn_id
    if turn_id is None and order is not None and 0 <= result.index < len(order):
        turn_id = order[result.index]
    completions = index.turn_completions(turn_id) if turn_id else []
    frame = completions[0][1].frame or {} if completions else {}
    params = as_object(frame.get("params"))
    turn = params.get("turn") if isinstance(params, dict) else None
    ended = _REPORTS.get(turn.get("status")) if isinstance(turn, dict) else None
    played = (ended,) if ended else ("timeout", "failed")
    said = "; ".join(result.unsupported)[:300]
    why = f" (reported unsupported: {said}; the server ended the turn {ended or 'never'})"
    return (*allowed, *(s for s in played if s not in allowed)), why


@CONTRACT.judge
def check(record: SessionRecord) -> list[Check]:
    make = CONTRACT.maker(record)
    checks: list[Check] = []
    turns = _turns_started(record)
    index = WireIndex.build(record.wire)
    if turns == 0:
        checks.append(make("results", "skip", "the session started no turn and [expect] declares none", applies=False))
    texts = _turn_texts(record)
    order = [t["id"] for t in wire_turns(index)] if record.meta.get("outside") is not None else None
    by_index: dict[int, list[TurnResult]] = {}  # grouped once: a lookup per turn keeps this linear
    for r in record.results:
        by_index.setdefault(r.index, []).append(r)
    outside = record.meta.get("outside")
    killed_at_deadline = isinstance(outside, dict) and outside.get("deadline_hit") is True
    for i in range(turns):
        label = f"turn {i + 1}"
        results = by_index.get(i, [])
        if not results and killed_at_deadline:
            # The harness killed the client before it reported this turn: that hang fails client / deadline once.
            checks.append(
                make(
                    f"{label} result",
                    "skip",
                    f"not judged: the client was killed at its deadline before it reported {label} (client / deadline)",
                )
            )
            continue
        if len(results) != 1:
            what = "no Result" if not results else f"{len(results)} Results"
            checks.append(make(f"{label} result", "fail", f"{what} for {label}; every turn gets exactly one"))
            continue
        result = results[0]
        # Where the turn ended on the wire (its turn/completed frames), for the report to mark.
        ended = [pos for pos, _ in index.turn_completions(result.turn_id)] if result.turn_id else []
        expected = record.expect.turns[i] if i < len(record.expect.turns) else None
        if expected is None:
            checks.append(
                make(f"{label} status", "skip", f"[expect] declares no status for {label} (got {result.status})")
            )
        else:
            allowed: tuple[str, ...] = expected.statuses
            raced = completed_after_cancel(index, result)
            why = ""
            if raced:
                allowed = (*allowed, *(s for s in ("completed", "aborted") if s not in allowed))
                why = " (the server completed the turn after the client's cancel)"
            turn_id = result.turn_id or (order[i] if order is not None and i < len(order) else None)
            if "aborted" in allowed and "timeout" not in allowed and cancel_unconfirmed(
                index, turn_id, record.budgets.interrupt_s
            ):
                allowed = (*allowed, "timeout")
                why = " (the server never confirmed the cancelled turn ended: the client's budget ended it)"
            if result.unsupported:
                allowed, why = _unsupported_course(index, result, order, allowed)
            declared = " or ".join(allowed)
            if result.status not in allowed:
                error = f" ({result.error})" if result.error else ""
                detail = f"Result {result.status}{error}, [expect] declares {declared}{why}"
                checks.append(make(f"{label} status", "fail", detail))
            else:
                also = f" ([expect] declares {declared}{why})" if len(allowed) > 1 or result.unsupported else ""
                course = f"; the course where {record.expect.why}" if record.expect.why else ""
                checks.append(make(f"{label} status", "pass", f"Result {result.status}{also}{course}"))
        checks.append(_final_text(make, record, result, texts, order))
        if result.completed_consumed is None:
            consumed = f"{label} turn/completed consumed"
            checks.append(make(consumed, "skip", f"not judged: {NOT_ON_THE_WIRE}", applies=False))
        elif result.completed_consumed > 1:
            checks.append(
                make(
                    f"{label} turn/completed consumed",
                    "fail",
                    f"{result.completed_consumed} turn/completed consumed; a turn ends once",
                    at=ended,
                )
            )
        else:
            checks.append(make(f"{label} turn/completed consumed", "pass", f"{result.completed_consumed} consumed"))
        if expected is not None and expected.server_status is not None:
            got = result.server_status or "none"
            status: Status = "pass" if got == expected.server_status else "fail"
            checks.append(
                make(
                    f"{label} server status",
                    status,
                    f"turn/completed status {got}, [expect] declares {expected.server_status}",
                    at=ended[:1],
                )
            )
    extra = [r for r in record.results if r.index >= turns or r.index < 0]
    if extra:
        checks.append(make("results", "fail", f"Results for turns that were never started: {[r.index for r in extra]}"))
    if record.expect.server_exit is not None:
        ok = record.server_exit == record.expect.server_exit
        checks.append(
            make(
                "server exit",
                "pass" if ok else "fail",
                f"server exit status {record.server_exit}, [expect] declares {record.expect.server_exit}",
            )
        )
    if record.client_errors:
        checks.append(
            make(
                "client errors",
                "fail",
                f"{len(record.client_errors)} exception(s) escaped the client: {record.client_errors[0][:300]}",
            )
        )
    return checks
