"""protocol: server requests answered or resolved; nothing after close; interrupt answer first; no unknown ids."""

from __future__ import annotations

import dataclasses

from test_contracts_records import THREAD, allow, approval_record, interrupted_record, plain_record

from contracts.checks import protocol
from contracts.record import WireEntry


def by_name(record) -> dict[str, object]:
    return {c.name: c for c in protocol.check(record)}


def test_good_records_pass() -> None:
    for record in (plain_record(2), approval_record(), interrupted_record()):
        assert {c.status for c in protocol.check(record)} <= {"pass", "skip"}, protocol.check(record)
    assert by_name(interrupted_record())["interrupt answer before turn/completed"].status == "pass"


def test_approval_left_unanswered_fails() -> None:
    check = by_name(approval_record(answer=False))["server requests answered"]
    assert check.status == "fail" and "never answered nor resolved" in check.detail


def test_resolved_only_after_the_request_timeout_fails_a_recommendation() -> None:
    """Closed, but over the request timeout: over a budget but ended is a should; left open is a must."""
    record = approval_record(answer=False)
    record.wire.append(WireEntry(100.0, "s2c", frame={"method": "serverRequest/resolved", "params": {"requestId": 0}}))
    checks = by_name(record)
    assert checks["server requests answered"].status == "pass"
    late = checks["server requests answered in time"]
    assert (late.status, late.level) == ("fail", "should") and "over the request timeout" in late.detail, late
    record.budgets.request_s = 200.0
    assert by_name(record)["server requests answered in time"].status == "pass"
    assert by_name(approval_record(answer=False))["server requests answered"].level == "must"


def test_an_id_reused_in_flight_fails_a_must_and_after_its_answer_a_should() -> None:
    record = plain_record(1)
    first = next(e for e in record.wire if e.dir == "c2s" and e.frame and e.frame.get("method") == "turn/start")
    rid = first.frame["id"]
    answer_at = next(k for k, e in enumerate(record.wire) if e.dir == "s2c" and e.frame and e.frame.get("id") == rid)
    again = WireEntry(50.0, "c2s", frame={"id": first.frame["id"], "method": "model/list", "params": {}})
    after = by_name(dataclasses.replace(record, wire=[*record.wire, again]))
    assert after["request ids not reused"].status == "fail" and after["request ids not reused"].level == "should"
    assert "request ids unique" not in after
    wire = [*record.wire[:answer_at], dataclasses.replace(again, t=record.wire[answer_at].t), *record.wire[answer_at:]]
    inflight = by_name(dataclasses.replace(record, wire=wire))
    assert inflight["request ids unique"].status == "fail" and inflight["request ids unique"].level == "must"


def test_declared_unanswered_request_is_excused() -> None:
    record = approval_record(answer=False)
    record.expect = dataclasses.replace(record.expect, allow=(allow("protocol", "unanswered_server_requests", 1),))
    assert by_name(record)["server requests answered"].status == "pass"


def test_an_allowed_unanswered_request_may_be_answered_but_not_one_more_left_open() -> None:
    """The allowance is a ceiling: answering a request the server never resolved is never wrong."""
    record = approval_record(answer=True)
    record.expect = dataclasses.replace(record.expect, allow=(allow("protocol", "unanswered_server_requests", 1),))
    check = by_name(record)["server requests answered"]
    assert check.status == "pass" and "up to 1" in check.detail, check
    record = approval_record(answer=False)
    record.expect = dataclasses.replace(record.expect, allow=(allow("protocol", "unanswered_server_requests", 0),))
    assert by_name(record)["server requests answered"].status == "fail"


def test_request_answered_twice_fails() -> None:
    record = approval_record()
    record.wire.append(WireEntry(50.0, "c2s", frame={"id": 0, "result": {"decision": "accept"}}))
    assert by_name(record)["server requests answered once"].status == "fail"


def test_request_after_close_fails() -> None:
    record = plain_record(1)
    record.wire.append(WireEntry(50.0, "c2s", frame={"id": 77, "method": "turn/start", "params": {"threadId": THREAD}}))
    assert by_name(record)["no request after close"].status == "fail"


def test_turn_completed_before_interrupt_answer_fails() -> None:
    assert by_name(interrupted_record(answer_first=False))["interrupt answer before turn/completed"].status == "fail"


def test_answer_to_unknown_id_fails() -> None:
    record = plain_record(1)
    record.wire.insert(3, WireEntry(0.0035, "c2s", frame={"id": 42, "result": {"decision": "accept"}}))
    assert by_name(record)["no answer to an unknown id"].status == "fail"


def test_server_duplicate_response_fails_unless_declared() -> None:
    record = plain_record(1)
    record.wire.insert(2, WireEntry(0.0015, "s2c", frame=dict(record.wire[1].frame)))
    assert by_name(record)["server answers known ids"].status == "fail"
    record.expect = dataclasses.replace(record.expect, allow=(allow("protocol", "unknown_response_id", 1),))
    assert by_name(record)["server answers known ids"].status == "pass"


def test_client_reusing_a_request_id_fails() -> None:
    record = plain_record(1)
    first = record.wire[0]
    record.wire.insert(1, WireEntry(first.t, "c2s", frame=dict(first.frame)))
    assert by_name(record)["request ids unique"].status == "fail"


def test_a_client_line_the_record_lost_does_not_blame_the_server() -> None:
    """A 100 MiB request line the relay could not record: the server's answer to its id looked unknown, and
    `server answers known ids` failed the server. The record says it lost the line; the check is not judged."""
    record = plain_record(1)
    first = next(e for e in record.wire if e.dir == "c2s" and e.frame and e.frame.get("method") == "turn/start")
    at = record.wire.index(first)
    lost = WireEntry(first.t, "c2s", error="oversized_line", raw='{"id":', size=100 * 1024 * 1024)
    wire = [*record.wire[:at], lost, *record.wire[at + 1 :]]
    checks = by_name(dataclasses.replace(record, wire=wire))
    known = checks["server answers known ids"]
    assert known.status == "skip", known
    assert "lost a client line of 104857600 bytes" in known.detail
    # An unknown id before the lost line is still the server's.
    early = WireEntry(0.0, "s2c", frame={"id": 999, "result": {}})
    checks = by_name(dataclasses.replace(record, wire=[early, *wire]))
    assert checks["server answers known ids"].status == "fail"
