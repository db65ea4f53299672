"""The client keeps its side of the JSON-RPC conversation.

- every server request is answered, or resolved by the server (``serverRequest/resolved``): one left open
  fails (must); one closed after the client's request timeout fails ``answered in time`` (should); answered
  at most once (must);
- no request is sent after the client closed the session (stdin closed or server killed) (should);
- where the server answers the interrupt, the answer precedes turn/completed (the server's order);
- the client never answers an id the server did not ask with; the server's answers to unknown or
  already-answered ids (a fault) are excused only as ``unknown_response_id``;
- no two requests in flight share an id (must); an id used again after its answer came (should).
"""

from __future__ import annotations

from contracts.checks.base import Check, Maker, judge_allowance
from contracts.checks.registry import Contract, Rule
from contracts.checks.wire_index import Request, WireIndex, id_key
from contracts.record import SessionRecord
from contracts.transport import CLOSED_NOTES
from contracts.wire import OVERSIZED_KINDS

NAME = "protocol"
REFERENCE = "docs/client-rules.md §1"
#: The ids of its checks (other modules name a check by these).
SERVER_REQUESTS_ANSWERED = "server requests answered"
SERVER_REQUESTS_ANSWERED_IN_TIME = "server requests answered in time"
SERVER_REQUESTS_ANSWERED_ONCE = "server requests answered once"
NO_REQUEST_AFTER_CLOSE = "no request after close"
INTERRUPT_ANSWER_FIRST = "interrupt answer before turn/completed"
NO_ANSWER_TO_UNKNOWN_ID = "no answer to an unknown id"
SERVER_ANSWERS_KNOWN_IDS = "server answers known ids"
REQUEST_IDS_UNIQUE = "request ids unique"
REQUEST_IDS_NOT_REUSED = "request ids not reused"
CONTRACT = Contract(
    NAME,
    citation=REFERENCE,
    checks=(
        # A request left open hangs the turn: must. One answered (or resolved) past the request timeout ended:
        # over a budget, a should (a person may take minutes to decide an approval).
        SERVER_REQUESTS_ANSWERED,
        Rule(SERVER_REQUESTS_ANSWERED_IN_TIME, level="should"),
        Rule(SERVER_REQUESTS_ANSWERED_ONCE, citation="docs/protocol.md §2"),
        # Nothing can answer it, and the real binary has stopped reading: sloppy, harmless (should).
        Rule(NO_REQUEST_AFTER_CLOSE, level="should"),
        Rule(INTERRUPT_ANSWER_FIRST, citation="docs/protocol.md §4"),
        Rule(NO_ANSWER_TO_UNKNOWN_ID, citation="docs/protocol.md §2"),
        Rule(SERVER_ANSWERS_KNOWN_IDS, citation="docs/protocol.md §2"),
        # Two requests in flight with one id cannot be told apart (must); an id used again after its answer came
        # is unambiguous, JSON-RPC does not forbid it (should).
        Rule(REQUEST_IDS_UNIQUE, citation="docs/protocol.md §2"),
        Rule(REQUEST_IDS_NOT_REUSED, level="should", citation="docs/protocol.md §2"),
    ),
)
_SHOWN = 3
#: Note texts that mark the client ending the session (the client's own vocabulary varies a little; each
#: transport's stream names its close: contracts.transport.StreamWords).
_CLOSE_MARKERS = (*sorted(CLOSED_NOTES), "close_stdin", "closed stdin", "kill", "stdin_closed")


def _summary(items: list[str]) -> str:
    return "; ".join(items[:_SHOWN]) + (f" (+{len(items) - _SHOWN} more)" if len(items) > _SHOWN else "")


def _resolutions(index: WireIndex) -> dict[str, float]:
    """Server-request id → time of its first serverRequest/resolved."""
    out: dict[str, float] = {}
    for _, entry in index.frames("s2c", "serverRequest/resolved"):
        params = entry.frame.get("params") if isinstance(entry.frame, dict) else None
        if isinstance(params, dict) and "requestId" in params:
            out.setdefault(id_key(params["requestId"]), entry.t)
    return out


def _server_requests(make: Maker, record: SessionRecord, index: WireIndex) -> list[Check]:
    resolved = _resolutions(index)
    limit = record.budgets.request_s
    unanswered: list[str] = []
    twice: list[str] = []
    late: list[str] = []
    open_at: list[int] = []  # the requests left open
    late_at: list[int] = []  # the requests answered or resolved late
    twice_at: list[int] = []  # the second and later answers
    for key, request in index.server_requests.items():
        what = f"{request.method} id {request.id!r} (t={request.t:.3f})"
        if len(request.answers) > 1:
            twice.append(f"{what} answered {len(request.answers)} times")
            twice_at += [pos for pos, _, _ in request.answers[1:]]
        ends = [t for _, t, _ in request.answers[:1]] + ([resolved[key]] if key in resolved else [])
        if not ends:
            unanswered.append(f"{what}: never answered nor resolved")
            open_at.append(request.pos)
        elif min(ends) - request.t > limit:
            late.append(f"{what}: open {min(ends) - request.t:.3f} s, over the request timeout {limit:.3f} s")
            late_at.append(request.pos)
    checks = []
    # Answering is never wrong: the allowance is a ceiling (the server may never resolve a request the client
    # could still answer; the real binary ignores an answer it no longer waits for). It excuses the requests
    # left open first, then the ones closed late.
    ok, why, _ = judge_allowance(record, NAME, "unanswered_server_requests", len(unanswered), at_most=True)
    if unanswered or why:
        detail = (f"{why} — " if why else "") + (_summary(unanswered) or "none left open")
        checks.append(make("server requests answered", "pass" if ok else "fail", detail, at=open_at))
    else:
        n = len(index.server_requests)
        checks.append(make("server requests answered", "pass", f"{n} server request(s), each answered or resolved"))
    if late:
        ok, why, _ = judge_allowance(
            record, NAME, "unanswered_server_requests", len(unanswered) + len(late), at_most=True
        )
        detail = (f"{why} — " if why else "") + _summary(late)
        checks.append(make("server requests answered in time", "pass" if ok else "fail", detail, at=late_at))
    elif len(index.server_requests) > len(unanswered):
        closed = len(index.server_requests) - len(unanswered)
        detail = f"{closed} answered or resolved, each within the request timeout {limit:.3f} s"
        checks.append(make("server requests answered in time", "pass", detail))
    checks.append(
        make(
            "server requests answered once",
            "fail" if twice else "pass",
            _summary(twice) or "no request answered twice",
            at=twice_at,
        )
    )
    return checks


def _after_close(make: Maker, record: SessionRecord) -> Check:
    closed_at: int | None = None
    for pos, entry in enumerate(record.wire):
        if entry.dir == "note" and entry.note and any(m in entry.note.lower() for m in _CLOSE_MARKERS):
            closed_at = pos
            break
    if closed_at is None:
        return make("no request after close", "pass", "the session was not closed by the client before its end")
    after = [
        (pos, e)
        for pos, e in enumerate(record.wire[closed_at + 1 :], closed_at + 1)
        if e.dir == "c2s" and isinstance(e.frame, dict) and "method" in e.frame and "id" in e.frame
    ]
    sent = [f"t={e.t:.3f} {e.frame.get('method')}" for _, e in after]  # type: ignore[union-attr]
    if sent:
        detail = f"sent after {record.wire[closed_at].note!r}: {_summary(sent)}"
        return make("no request after close", "fail", detail, at=[closed_at] + [pos for pos, _ in after])
    return make("no request after close", "pass", f"nothing sent after {record.wire[closed_at].note!r}")


def _interrupt_order(make: Maker, index: WireIndex) -> Check | None:
    """None when no interrupt was both answered and followed by turn/completed: nothing to order."""
    judged = 0
    wrong: list[str] = []
    where: list[int] = []
    interrupts: list[Request] = [r for r in index.client_requests.values() if r.method == "turn/interrupt"]
    for request in interrupts:
        turn_id = request.params.get("turnId")
        if not request.answers or "error" in request.answers[0][2] or not isinstance(turn_id, str):
            continue
        completions = [pos for pos, _ in index.turn_completions(turn_id) if pos > request.pos]
        if not completions:
            continue
        judged += 1
        if request.answers[0][0] > completions[0]:
            wrong.append(f"interrupt id {request.id!r}: turn/completed before its answer")
            where += [request.pos, completions[0], request.answers[0][0]]
    if not judged:
        return None
    return make(
        "interrupt answer before turn/completed",
        "fail" if wrong else "pass",
        _summary(wrong) or f"{judged} interrupt(s) answered before turn/completed",
        at=where,
    )


def _unknown_ids(make: Maker, record: SessionRecord, index: WireIndex) -> list[Check]:
    client = [
        f"t={index.entries[pos].t:.3f} answer to id {frame['id']!r}"
        for pos, d, frame in index.orphan_answers
        if d == "c2s"
    ]
    server = [
        f"t={index.entries[pos].t:.3f} answer to id {frame['id']!r}"
        for pos, d, frame in index.orphan_answers
        if d == "s2c"
    ]
    client_at = [pos for pos, d, _ in index.orphan_answers if d == "c2s"]
    server_at = [pos for pos, d, _ in index.orphan_answers if d == "s2c"]
    for request in index.client_requests.values():
        for pos, t, _ in request.answers[1:]:
            server.append(f"t={t:.3f} second answer to {request.method} id {request.id!r}")
            server_at.append(pos)
    checks = [
        make(
            "no answer to an unknown id",
            "fail" if client else "pass",
            _summary(client) or "the client answered only ids the server asked with",
            at=client_at,
        )
    ]
    lost = _lost_client_line(record)
    if lost is not None:  # answers after it may be to the id it held: not the server's fault, not judged
        pos, what = lost
        excused = [text for text, at in zip(server, server_at, strict=True) if at > pos]
        server = [text for text, at in zip(server, server_at, strict=True) if at < pos]
        server_at = [at for at in server_at if at < pos]
        if excused and not server:
            detail = (
                f"not judged: the record lost {what}, so an answer to the id it held looks unknown "
                f"({_summary(excused)})"
            )
            checks.append(make("server answers known ids", "skip", detail, at=[pos]))
            return _ids_reused(make, index, checks)
    ok, why, _ = judge_allowance(record, NAME, "unknown_response_id", len(server))
    if server or why:
        detail = (f"{why} — " if why else "") + (_summary(server) or "none seen")
        checks.append(make("server answers known ids", "pass" if ok else "fail", detail, server_at))
    return _ids_reused(make, index, checks)


def _lost_client_line(record: SessionRecord) -> tuple[int, str] | None:
    """(position, what) of the first client line the record does not hold whole: one past the wire's cap (kept
    as its size and a sample), or everything after a ``recording truncated`` note."""
    for pos, entry in enumerate(record.wire):
        if entry.dir == "c2s" and entry.error in OVERSIZED_KINDS:
            size = "an unknown number of" if entry.size is None else str(entry.size)
            return pos, f"a client line of {size} bytes at t={entry.t:.3f} (past the wire's cap)"
        if entry.dir == "note" and entry.note == "recording truncated":
            return pos, f"every line after t={entry.t:.3f} (recording truncated)"
    return None


def _ids_reused(make: Maker, index: WireIndex, checks: list[Check]) -> list[Check]:
    in_flight, reused = _reused_ids(index)
    if in_flight:
        detail = _summary([x for x, _ in in_flight]) + " (the first still in flight: answers cannot be told apart)"
        checks.append(make("request ids unique", "fail", detail, at=[p for _, p in in_flight]))
    if reused:
        detail = _summary([x for x, _ in reused]) + " (after its answer came: unambiguous, but not unique)"
        checks.append(make("request ids not reused", "fail", detail, at=[p for _, p in reused]))
    return checks


def _reused_ids(index: WireIndex) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """The client's requests that used an id again: (what, position), while the first was in flight (no answer
    yet) or after its answer came."""
    in_flight: list[tuple[str, int]] = []
    reused: list[tuple[str, int]] = []
    for pos, direction, frame in index.duplicate_requests:
        if direction != "c2s":
            continue
        first = index.client_requests.get(id_key(frame["id"]))
        what = f"c2s reused id {frame['id']!r} ({frame.get('method')})"
        answered = first is not None and any(p < pos for p, _, _ in first.answers)
        (reused if answered else in_flight).append((what, pos))
    return in_flight, reused


@CONTRACT.judge
def check(record: SessionRecord) -> list[Check]:
    make = CONTRACT.maker(record)
    index = WireIndex.build(record.wire)
    checks = _server_requests(make, record, index)
    checks.append(_after_close(make, record))
    order = _interrupt_order(make, index)
    if order is not None:
        checks.append(order)
    checks.extend(_unknown_ids(make, record, index))
    return checks
