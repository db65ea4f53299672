"""schema: every frame both ways validates against the pinned release, except what [expect] declares."""

from __future__ import annotations

import dataclasses

from test_contracts_records import allow, plain_record

from contracts.checks import schema
from contracts.record import WireEntry


def by_name(record) -> dict[str, object]:
    return {c.name: c for c in schema.check(record)}


def test_valid_session_passes() -> None:
    assert {c.status for c in schema.check(plain_record(2))} == {"pass"}


def test_invalid_client_frame_fails_and_names_the_client() -> None:
    record = plain_record(1)
    record.wire.append(WireEntry(9.0, "c2s", frame={"id": 99, "method": "turn/start", "params": {"threadId": 1}}))
    check = by_name(record)["client_frames_invalid"]
    assert check.status == "fail"
    assert "sent by the client" in check.detail and "turn/start" in check.detail


def test_invalid_server_frame_fails_and_names_the_server() -> None:
    record = plain_record(1)
    record.wire.append(WireEntry(9.0, "s2c", frame={"method": "turn/completed", "params": {"threadId": "t"}}))
    check = by_name(record)["server_frames_invalid"]
    assert check.status == "fail" and "sent by the server" in check.detail


def test_garbage_lines_fail_unless_declared_with_their_exact_count() -> None:
    record = plain_record(1)
    for i in range(3):
        record.wire.append(WireEntry(9.0 + i, "s2c", error="not_json", raw="this is not JSON", size=16))
    assert by_name(record)["server_frames_invalid"].status == "fail"
    record.expect = dataclasses.replace(record.expect, allow=(allow("schema", "server_frames_invalid", 3),))
    assert by_name(record)["server_frames_invalid"].status == "pass"
    record.expect = dataclasses.replace(record.expect, allow=(allow("schema", "server_frames_invalid", 2),))
    assert by_name(record)["server_frames_invalid"].status == "fail"


def test_declared_fault_that_did_not_strike_fails() -> None:
    record = plain_record(1)
    record.expect = dataclasses.replace(record.expect, allow=(allow("schema", "wire_errors", 3),))
    assert by_name(record)["wire_errors"].status == "fail"


def test_allowance_for_the_server_does_not_excuse_the_client() -> None:
    record = plain_record(1)
    record.expect = dataclasses.replace(record.expect, allow=(allow("schema", "server_frames_invalid"),))
    record.wire.append(WireEntry(9.0, "c2s", frame={"id": 99, "method": "no/such"}))
    assert by_name(record)["client_frames_invalid"].status == "fail"


def test_unknown_release_is_a_skip() -> None:
    record = plain_record(1)
    record.schema_release = "0.0.1"
    checks = schema.check(record)
    assert [c.status for c in checks] == ["skip"]
