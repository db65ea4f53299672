"""terminal_status: exactly one Result per turn with the declared status; one turn/completed consumed."""

from __future__ import annotations

import dataclasses

from test_contracts_records import interrupted_record, plain_record

from contracts.checks import terminal_status
from contracts.expect import Expect, ExpectTurn


def statuses(record) -> dict[str, str]:
    return {c.name: c.status for c in terminal_status.check(record)}


def test_good_records_pass() -> None:
    for record in (plain_record(2), interrupted_record()):
        got = statuses(record)
        assert set(got.values()) == {"pass"}, got
        assert all(
            c.reference.startswith("docs/") and "§" in c.reference for c in terminal_status.check(record)
        )


def test_missing_result_fails() -> None:
    record = plain_record(2)
    record.results.pop()
    assert statuses(record)["turn 2 result"] == "fail"


def test_two_results_for_one_turn_fail() -> None:
    record = plain_record(1)
    record.results.append(dataclasses.replace(record.results[0]))
    assert statuses(record)["turn 1 result"] == "fail"


def test_wrong_status_fails() -> None:
    record = plain_record(1)
    record.results[0].status = "failed"
    record.results[0].error = "process exited"
    check = next(c for c in terminal_status.check(record) if c.name == "turn 1 status")
    assert check.status == "fail"
    assert "failed" in check.detail and "completed" in check.detail


def test_second_turn_completed_consumed_fails() -> None:
    record = plain_record(1)
    record.results[0].completed_consumed = 2
    assert statuses(record)["turn 1 turn/completed consumed"] == "fail"


def test_server_status_mismatch_fails() -> None:
    record = interrupted_record()
    record.results[0].server_status = None
    assert statuses(record)["turn 1 server status"] == "fail"


def test_server_exit_is_judged_when_declared() -> None:
    record = plain_record(1)
    record.expect = dataclasses.replace(record.expect, server_exit=3)
    record.server_exit = 0
    assert statuses(record)["server exit"] == "fail"
    record.server_exit = 3
    assert statuses(record)["server exit"] == "pass"


def test_result_for_a_turn_never_started_fails() -> None:
    record = plain_record(1)
    record.results.append(dataclasses.replace(record.results[0], index=5))
    assert statuses(record)["results"] == "fail"


def test_escaped_client_exception_fails() -> None:
    record = plain_record(1)
    record.client_errors.append("Traceback ... KeyError: 'turn'")
    assert statuses(record)["client errors"] == "fail"


def test_undeclared_turn_is_a_skip_not_a_pass() -> None:
    record = plain_record(1)
    record.expect = Expect()
    assert statuses(record)["turn 1 status"] == "skip"
    record.expect = Expect(turns=(ExpectTurn("completed"),))
    assert statuses(record)["turn 1 status"] == "pass"


def test_scenario_turn_count_from_the_runner_requires_results_without_expect() -> None:
    record = plain_record(1)
    record.expect = Expect()
    record.results = []
    record.wire = []
    record.meta["scenario_turns"] = 2
    got = statuses(record)
    assert got["turn 1 result"] == "fail" and got["turn 2 result"] == "fail"


def test_a_status_the_truth_also_allows_passes_and_another_fails() -> None:
    record = plain_record(1)
    record.expect = dataclasses.replace(record.expect, turns=(ExpectTurn("failed", also=("completed",)),))
    check = next(c for c in terminal_status.check(record) if c.name == "turn 1 status")
    assert check.status == "pass" and "failed or completed" in check.detail
    record.results[0].status = "aborted"
    check = next(c for c in terminal_status.check(record) if c.name == "turn 1 status")
    assert check.status == "fail" and "failed or completed" in check.detail


def test_also_is_read_from_a_file_and_refused_when_not_a_status(tmp_path) -> None:
    import pytest

    from contracts.scenario_file import ScenarioError, dumps, load

    text = (
        'description = "d"\n[[turns]]\ninput = "x"\n[expect]\n[[expect.turns]]\nstatus = "failed"\n'
        'also = ["completed", "failed", "completed"]\n'
    )
    path = tmp_path / "s.toml"
    path.write_text(text)
    scenario = load(path)
    assert scenario.expect.turns[0].statuses == ("failed", "completed")
    path.write_text(dumps(scenario))
    assert load(path).expect.turns[0].also == ("completed",)
    path.write_text(text.replace('"completed", "failed"', '"done"'))
    with pytest.raises(ScenarioError, match=r"expect\.turns\[0\]\.also\[0\]"):
        load(path)


def _completed_after_the_interrupt(reported: str):
    """interrupted_record, but the server completed the turn ("completed") although the client interrupted it."""
    record = interrupted_record()
    for entry in record.wire:
        if entry.frame and entry.frame.get("method") == "turn/completed":
            entry.frame["params"]["turn"]["status"] = "completed"
    record.results[0].status = reported
    record.results[0].server_status = "completed"
    record.results[0].cancel_at = None  # an outside client's Result: only the wire says it cancelled
    return record


def _status_check(record):
    return next(c for c in terminal_status.check(record) if c.name == "turn 1 status")


def test_a_turn_the_server_completed_after_a_cancel_may_be_reported_completed_or_aborted() -> None:
    for reported in ("completed", "aborted"):
        check = _status_check(_completed_after_the_interrupt(reported))
        assert check.status == "pass" and "after the client's cancel" in check.detail, check
    assert _status_check(_completed_after_the_interrupt("failed")).status == "fail"


def _never_confirmed(reported: str, *, completed_after_s: float | None = None):
    """interrupted_record, but the server never sent the turn's turn/completed (or sent it ``completed_after_s``
    after the interrupt): the client's own budget ended the cancelled turn."""
    record = interrupted_record()
    sent = next(e.t for e in record.wire if e.frame and e.frame.get("method") == "turn/interrupt")
    for k, entry in enumerate(record.wire):
        if entry.frame and entry.frame.get("method") == "turn/completed":
            del record.wire[k]
            if completed_after_s is not None:
                record.wire.append(dataclasses.replace(entry, t=sent + completed_after_s))
            break
    record.expect = Expect(turns=(ExpectTurn("aborted", record.expect.turns[0].usage, "none"),))
    record.results[0].status = reported
    record.results[0].server_status = None
    record.results[0].cancel_at = None  # an outside client's Result: only the wire says it cancelled
    return record


def test_a_cancelled_turn_the_server_never_confirmed_may_be_reported_timeout_or_aborted() -> None:
    for reported in ("timeout", "aborted"):
        check = _status_check(_never_confirmed(reported))
        assert check.status == "pass" and "never confirmed" in check.detail, check
        # Confirmed only after the interrupt budget (2 s): the client had given up by then.
        assert _status_check(_never_confirmed(reported, completed_after_s=5.0)).status == "pass"
    assert _status_check(_never_confirmed("completed")).status == "fail"
    # Confirmed within the budget: the server ended it, so the client saw it end; timeout is wrong.
    late_ok = _status_check(_never_confirmed("timeout", completed_after_s=0.5))
    assert late_ok.status == "fail" and "Result timeout" in late_ok.detail, late_ok


def test_a_timeout_without_a_cancel_is_not_excused_as_aborted() -> None:
    record = _never_confirmed("timeout")
    record.wire = [e for e in record.wire if not (e.frame and e.frame.get("method") == "turn/interrupt")]
    assert _status_check(record).status == "fail"


def test_a_completed_turn_without_a_cancel_is_not_excused_as_aborted() -> None:
    record = plain_record(1)
    record.results[0].status = "aborted"
    assert statuses(record)["turn 1 status"] == "fail"


def test_the_results_select_the_course_of_the_truth() -> None:
    from contracts.checks import run_all

    record = plain_record(1)
    failed_course = Expect(turns=(ExpectTurn("failed", server_status="none"),))
    completed_course = dataclasses.replace(record.expect, why="the client read it whole")
    record.expect = dataclasses.replace(failed_course, alternatives=(completed_course,))
    checks = {c.name: c for c in run_all(record, ("terminal_status",))}
    assert checks["turn 1 status"].status == "pass" and "read it whole" in checks["turn 1 status"].detail
    record.results[0].status = "timeout"  # no course allows it: judged against the first, which says so
    checks = {c.name: c for c in run_all(record, ("terminal_status",))}
    assert checks["turn 1 status"].status == "fail" and "declares failed" in checks["turn 1 status"].detail


def test_an_or_course_is_read_checked_and_written_back(tmp_path) -> None:
    import pytest

    from contracts.scenario_file import ScenarioError, dumps, load

    course = '[[expect.or]]\nwhy = "reads it whole"\n[[expect.or.turns]]\nstatus = "completed"\n'
    text = 'description = "d"\n[[turns]]\ninput = "x"\n[expect]\n[[expect.turns]]\nstatus = "failed"\n' + course
    path = tmp_path / "s.toml"
    path.write_text(text)
    scenario = load(path)
    assert [c.turns[0].status for c in scenario.expect.alternatives] == ["completed"]
    path.write_text(dumps(scenario))
    assert load(path).expect == scenario.expect
    for bad, key in (
        (course.replace('why = "reads it whole"\n', ""), r"expect\.or\[0\]\.why"),
        (course + '[[expect.or.turns]]\nstatus = "completed"\n', r"expect\.or\[0\]\.turns"),
        (course.replace('"completed"', '"completed"\nserver_status = "none"'), r"expect\.or\[0\]\.turns\[0\]"),
    ):
        path.write_text(text.replace(course, bad))
        with pytest.raises(ScenarioError, match=key):
            load(path)


def _final_text(record) -> object:
    return next(c for c in terminal_status.check(record) if c.name == "turn 2 final text")


def test_the_final_text_is_one_the_servers_messages_of_that_turn_make() -> None:
    from contracts.record import WireEntry

    record = plain_record(2)
    assert _final_text(record).status == "pass"
    # Two deltas of turn 1 after its turn/completed, read into turn 2's text: a leak.
    first = record.results[0].turn_id
    at = next(i for i, e in enumerate(record.wire) if e.frame and e.frame.get("method") == "turn/completed") + 1
    for text in ("late0", "late1"):
        delta = {"threadId": "thr", "turnId": first, "itemId": "msg-1", "delta": text}
        record.wire.insert(at, WireEntry(record.wire[at - 1].t, "s2c", frame={"method": "item/agentMessage/delta",
                                                                            "params": delta}))
    assert _final_text(record).status == "pass"  # the late deltas belong to no reported text
    record.results[1].final_text = "late0late1Hello world"
    check = _final_text(record)
    assert check.status == "fail" and "another turn" in check.detail, check
    record.results[1].final_text = "Hello"  # a completed turn's text cut short
    assert _final_text(record).status == "fail"


def test_a_message_of_item_completed_or_the_final_answer_is_the_final_text() -> None:
    from contracts.record import WireEntry

    record = plain_record(1)
    turn_id = record.results[0].turn_id
    done = next(i for i, e in enumerate(record.wire) if e.frame and e.frame.get("method") == "turn/completed")
    for text, phase in (("Thinking…", None), ("Answer.", "final_answer")):
        item = {"type": "agentMessage", "id": "m", "text": text, **({"phase": phase} if phase else {})}
        frame = {"method": "item/completed", "params": {"threadId": "thr", "turnId": turn_id, "item": item}}
        record.wire.insert(done, WireEntry(record.wire[done - 1].t, "s2c", frame=frame))
        done += 1
    for reported in ("Answer.", "Thinking…Answer.", "Thinking…\nAnswer.", "Hello world"):
        record.results[0].final_text = reported
        assert next(c for c in terminal_status.check(record) if c.name == "turn 1 final text").status == "pass"
    record.results[0].final_text = "Thinking…"
    assert next(c for c in terminal_status.check(record) if c.name == "turn 1 final text").status == "fail"


def test_no_final_text_is_right_when_no_message_completed() -> None:
    """A steer abandoned the stream after "Hel" and the turn completed with no message: '' is the final text
    (the fuzzer found our client failed for it)."""
    from contracts.record import WireEntry

    record = plain_record(1)
    assert any(e.frame and e.frame.get("method") == "item/agentMessage/delta" for e in record.wire)
    record.results[0].final_text = ""
    assert next(c for c in terminal_status.check(record) if c.name == "turn 1 final text").status == "pass"
    done = next(i for i, e in enumerate(record.wire) if e.frame and e.frame.get("method") == "turn/completed")
    item = {"type": "agentMessage", "id": "m", "text": "Hello world"}
    params = {"threadId": "thr", "turnId": record.results[0].turn_id, "item": item}
    frame = {"method": "item/completed", "params": params}
    record.wire.insert(done, WireEntry(record.wire[done - 1].t, "s2c", frame=frame))
    assert next(c for c in terminal_status.check(record) if c.name == "turn 1 final text").status == "fail"


def test_a_final_text_trimmed_of_surrounding_whitespace_is_the_same_text() -> None:
    """A client (or its UI) may strip the text it reports: that is the server's text, not another one."""
    record = plain_record(2)
    sent = record.results[1].final_text
    record.results[1].final_text = f"\n  {sent}  \n"
    assert _final_text(record).status == "pass"
    record.results[1].final_text = f"{sent} world"  # more than whitespace: a different text
    assert _final_text(record).status == "fail"


def test_a_result_missing_because_the_harness_killed_the_client_at_its_deadline_is_not_a_second_failure() -> None:
    """A client killed at its deadline (client / deadline fails) never wrote the Results of the turns it had not
    ended: each is that one hang, not a failure more of its own."""
    record = plain_record(2)
    record.results.pop()
    record.meta["outside"] = {"deadline_hit": True}
    check = next(c for c in terminal_status.check(record) if c.name == "turn 2 result")
    assert check.status == "skip" and "client / deadline" in check.detail, check
    record.meta["outside"] = {"deadline_hit": False}  # a client that exited without reporting it: its own bug
    assert statuses(record)["turn 2 result"] == "fail"
