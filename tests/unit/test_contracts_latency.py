"""latency: cancel→Result bounded by budget + teardown; small client overhead where the server honours the interrupt."""

from __future__ import annotations

from test_contracts_records import interrupted_record, plain_record

from contracts.checks import latency
from contracts.record import TeardownStep


def by_name(record) -> dict[str, object]:
    return {c.name: c for c in latency.check(record)}


def test_honoured_interrupt_passes_and_reports_both_latencies() -> None:
    checks = by_name(interrupted_record())
    assert checks["turn 1 cancel→Result"].status == "pass"
    overhead = checks["turn 1 interrupt overhead"]
    assert overhead.status == "pass"
    assert "interrupt→turn/completed 12.0 ms" in overhead.detail


def test_no_interrupt_budget_fails() -> None:
    # A client without a budget waits until its turn deadline against a server that ignores the interrupt.
    record = interrupted_record()
    record.results[0].ended_at = record.results[0].cancel_at + 60.0
    assert by_name(record)["turn 1 cancel→Result"].status == "fail"


def test_slow_client_after_turn_completed_fails_overhead() -> None:
    record = interrupted_record()
    record.results[0].ended_at += 0.2  # the server was done; the client took 200 ms more
    checks = by_name(record)
    assert checks["turn 1 cancel→Result"].status == "pass"
    assert checks["turn 1 interrupt overhead"].status == "fail"


def test_ignored_interrupt_skips_overhead_but_still_bounds_total() -> None:
    record = interrupted_record()
    record.wire = [e for e in record.wire if not (e.frame and e.frame.get("method") == "turn/completed")]
    checks = by_name(record)
    assert "turn 1 interrupt overhead" not in checks
    assert checks["turn 1 cancel→Result"].status == "pass"
    assert "did not honour the interrupt" in checks["turn 1 cancel→Result"].detail


def test_virtual_time_says_so() -> None:
    record = interrupted_record()
    record.virtual_time = True
    assert all("virtual time" in c.detail for c in latency.check(record))


def test_unbounded_teardown_fails() -> None:
    record = plain_record()
    record.teardown = [TeardownStep("close_stdin", 1.0, 1.0, "done"), TeardownStep("wait_exit", 1.0, 30.0, "timeout")]
    assert by_name(record)["teardown"].status == "fail"


def test_nothing_to_measure_is_a_skip() -> None:
    record = plain_record()
    record.teardown = []
    assert [c.status for c in latency.check(record)] == ["skip"]


def test_missing_interrupt_log_record_warns() -> None:
    record = interrupted_record()
    assert by_name(record)["turn 1 interrupt logged"].status == "pass"
    record.log = []
    assert by_name(record)["turn 1 interrupt logged"].status == "warn"
