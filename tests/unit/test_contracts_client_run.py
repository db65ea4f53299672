"""contracts.checks.client_run: the wire-judged checks of an outside client, on hand-built records."""

from __future__ import annotations

from typing import Any

import pytest

from contracts.checks import client_run
from contracts.expect import Expect
from contracts.record import SessionRecord, WireEntry
from contracts.report import judge

TURN_START = {"id": 5, "method": "turn/start", "params": {"threadId": "t", "input": []}}
TURN_ANSWER = {"id": 5, "result": {"turn": {"id": "turn-1", "status": "inProgress"}}}
COMPLETED = {"method": "turn/completed", "params": {"threadId": "t", "turn": {"id": "turn-1", "status": "completed"}}}
APPROVAL = {"id": 0, "method": "item/commandExecution/requestApproval", "params": {"threadId": "t", "turnId": "turn-1"}}
RESOLVED = {"method": "serverRequest/resolved", "params": {"threadId": "t", "requestId": 0}}


def record(wire: list[tuple[float, str, dict[str, Any]]], **facts: Any) -> SessionRecord:
    server = {"n": 1, "pid": 7, "scenario": "s", "scenario_hash": "h", "started_t": 0.0, "killed_by_harness": False}
    server.update(facts.pop("server", None) or {})
    base = {
        "primary": True,
        "expected_hash": "h",
        "deadline_s": 30.0,
        "deadline_hit": False,
        "client_ended_t": 5.0,
        "client_exit": 0,
        "left_running": [],
        "servers": [server],
        "server": server,
        "result": {"state": "absent"},
        "budgets": {"turn_timeout_ms": 4000},
    }
    base.update(facts)
    entries = [
        WireEntry(t, d, note=f["note"]) if d == "note" else WireEntry(t, d, frame=f)  # type: ignore[arg-type]
        for t, d, f in wire
    ]
    return SessionRecord("s", "fake-process", Expect(), wire=entries, meta={"outside": base})


def status(rec: SessionRecord, name: str) -> str:
    return next(c.status for c in client_run.check(rec) if c.name == name)


ENDED = {"end": {"reason": "stdin_closed", "t": 1.5}}
CONVERSATION = [(0.1, "c2s", TURN_START), (0.2, "s2c", TURN_ANSWER), (1.0, "s2c", COMPLETED)]


def test_a_clean_session_passes() -> None:
    rec = record(CONVERSATION, server=ENDED)
    assert {c.name: c.status for c in client_run.check(rec)} == {
        "server started": "pass",
        "exit status": "pass",
        "deadline": "pass",
        "nothing left running": "pass",
        "server's descendants ended": "pass",
        "result file": "skip",
        "played as given": "pass",
        "not answered after resolved": "pass",
        "server ended": "pass",
    }


def test_scenario_hash_mismatch_fails() -> None:
    assert status(record(CONVERSATION, server=ENDED, expected_hash="other"), "played as given") == "fail"


def test_answer_after_resolved_fails_a_recommendation_only() -> None:
    """A should: the real binary ignores an answer to a request it resolved. It warns (exit 0) and fails under
    --strict."""
    wire = [*CONVERSATION[:2], (0.3, "s2c", APPROVAL), (0.4, "s2c", RESOLVED), (0.5, "c2s", {"id": 0, "result": {}})]
    late = next(c for c in client_run.check(record(wire, server=ENDED)) if c.name == "not answered after resolved")
    assert (late.status, late.level) == ("fail", "should"), late
    assert judge([late]).exit_code == 0 and judge([late], strict=True).exit_code == 1


def test_server_ended_late_by_the_harness_or_by_itself() -> None:
    late = {"end": {"reason": "signal", "t": 9.0}}
    assert status(record(CONVERSATION, server=late), "server ended") == "fail"  # 8 s after, budget 3 s
    assert status(record(CONVERSATION, server={"end": None, "killed_by_harness": True}), "server ended") == "fail"
    crashed = {"end": {"reason": "crash", "t": 0.5}}
    assert status(record(CONVERSATION[:2], server=crashed), "server ended") == "pass"
    # A silent server: the budget counts from the turn deadline (turn/start + turn_timeout).
    silent = {"end": {"reason": "stdin_closed", "t": 4.1 + 2.0 + 3.0}}
    assert status(record(CONVERSATION[:2], server=silent), "server ended") == "pass"


def detail(rec: SessionRecord, name: str) -> str:
    return next(c.detail for c in client_run.check(rec) if c.name == name)


@pytest.mark.parametrize(("note", "move"), [("signal SIGTERM", "sent SIGTERM"), ("stdin closed", "closed its stdin")])
def test_server_ended_reads_the_recordings_notes_when_end_json_is_missing(note: str, move: str) -> None:
    """A fake killed before it wrote end.json still noted the client's SIGTERM or stdin close on its wire."""
    killed = {"end": None, "killed_by_harness": True}
    rec = record([*CONVERSATION, (1.205, "note", {"note": note})], server=killed)
    assert status(rec, "server ended") == "pass", detail(rec, "server ended")
    assert detail(rec, "server ended").startswith(f"the client {move} +0.205 s after the last turn/completed")
    assert "never closed" not in detail(rec, "server ended")
    late = record([*CONVERSATION, (9.0, "note", {"note": note})], server=killed)
    assert status(late, "server ended") == "fail"
    said = detail(late, "server ended")
    assert said.startswith(f"ended late: the client {move} +8.000 s"), said


def test_server_ended_takes_the_clients_first_move() -> None:
    """end.json says signal at 9 s, but stdin was closed at 1.5 s: the first move counts."""
    end = {"reason": "signal", "signal": "SIGTERM", "t": 9.0, "stdin_closed_t": 1.5}
    rec = record(CONVERSATION, server={"end": end})
    assert status(rec, "server ended") == "pass" and "closed its stdin +0.500 s" in detail(rec, "server ended")


def test_what_the_server_saw_after_the_harness_killed_the_client_is_not_the_clients_move() -> None:
    """A client killed at its deadline (73.331 s) closes the server's stdin by dying: the note at 73.355 s is the
    harness's doing, never "the client closed its stdin ... ended late"."""
    killed = {"end": None, "killed_by_harness": True}
    for server in (killed, {"end": {"reason": "stdin_closed", "t": 73.355}}):
        rec = record(
            [*CONVERSATION, (73.355, "note", {"note": "stdin closed"})],
            server=server,
            deadline_hit=True,
            client_ended_t=73.331,
        )
        said = detail(rec, "server ended")
        assert status(rec, "server ended") == "fail" and said.startswith("the client never closed"), said
        assert "hit its deadline" in said
    # A move before the kill is still the client's own.
    rec = record(
        [*CONVERSATION, (1.2, "note", {"note": "stdin closed"})],
        server=killed,
        deadline_hit=True,
        client_ended_t=73.331,
    )
    assert status(rec, "server ended") == "pass"


def test_session_facts() -> None:
    none = record([], servers=[])
    none.meta["outside"]["server"] = None
    assert status(none, "server started") == "fail"
    assert status(record(CONVERSATION, server=ENDED, deadline_hit=True), "deadline") == "fail"
    assert status(record(CONVERSATION, server=ENDED, left_running=["9 (sleep)"]), "nothing left running") == "fail"
    assert status(record(CONVERSATION, server=ENDED, deadline_s=None), "deadline") == "skip"


def test_reported_statuses_against_the_wire() -> None:
    def reported(s: str) -> str:
        result = {"state": "valid", "turns": [{"turn": 1, "status": s}]}
        return status(record(CONVERSATION, server=ENDED, result=result), "reported statuses agree with the wire")

    assert reported("completed") == "pass"
    assert reported("aborted") == "fail"  # no interrupt, the server completed it
    assert reported("failed") == "pass"  # the client's own outcome; terminal_status judges it


def test_reported_statuses_count_only_the_turns_the_server_started() -> None:
    """A turn/start the server refused (then retried) starts no turn: the reported turn 1 is the retried one."""
    busy = {"id": 4, "error": {"code": -32001, "message": "busy"}}
    refused = [(0.05, "c2s", {**TURN_START, "id": 4}), (0.06, "s2c", busy)]
    result = {"state": "valid", "turns": [{"turn": 1, "status": "completed"}]}
    rec = record(refused + CONVERSATION, server=ENDED, result=result)
    assert status(rec, "reported statuses agree with the wire") == "pass"


def test_a_cancel_the_plan_asks_for_must_be_sent() -> None:
    """Judged by plan followed over the run's records (tests/unit/test_contracts_client_plan.py has the rest)."""
    from contracts.checks import client_plan

    plan = [{"turn": 1, "input": "x", "actions": [{"do": "cancel", "at": "started", "n": 1, "delay_ms": 0}]}]
    started = {"method": "turn/started", "params": {"threadId": "t", "turn": {"id": "turn-1"}}}
    start = {**TURN_START, "params": {"threadId": "t", "input": [{"type": "text", "text": "x"}]}}
    wire = [(0.1, "c2s", start), CONVERSATION[1], (0.3, "s2c", started), CONVERSATION[2]]
    check = client_plan.check([record(wire, server=ENDED, plan_turns=plan)])
    assert check.status == "fail" and "no turn/interrupt was sent" in check.detail, check
