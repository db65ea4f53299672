"""usage: the Result's usage equals the server's usage of the turn on the wire (in the client's declared style);
buckets consistent; [expect] judges the server's usage of the declared course."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st
from test_contracts_records import PLAIN_USAGE, RecordBuilder, breakdown, interrupted_record, plain_record

from contracts.checks import usage
from contracts.checks.wire_index import WireIndex
from contracts.expect import Expect, ExpectTurn
from contracts.usage import UsageBuckets


def by_name(record) -> dict[str, object]:
    return {c.name: c for c in usage.check(record)}


def test_exact_usage_passes() -> None:
    for record in (plain_record(2), interrupted_record()):
        assert {c.status for c in usage.check(record)} == {"pass"}


def test_usage_summed_from_total_fails() -> None:
    # Billing `total` charges turn 1 again in turn 2: input 120 (uncached) instead of 60.
    record = plain_record(2)
    record.results[1].usage = {"mock-model": UsageBuckets(input=120, cache_read=80, output=40)}
    check = by_name(record)["turn 2 usage"]
    assert check.status == "fail"
    assert "input 120 != 60" in check.detail


def test_reasoning_added_to_output_fails() -> None:
    record = plain_record(1)
    record.expect = Expect(turns=(ExpectTurn("completed", dataclasses.replace(PLAIN_USAGE, reasoning=5)),))
    record.results[0].usage = {"m": dataclasses.replace(PLAIN_USAGE, output=25, reasoning=5)}
    assert by_name(record)["turn 1 usage"].status == "fail"


def test_inconsistent_buckets_fail() -> None:
    record = plain_record(1)
    record.results[0].usage = {"m": UsageBuckets(input=60, cache_read=40, output=5, reasoning=10)}
    assert by_name(record)["turn 1 buckets consistent"].status == "fail"
    record.results[0].usage = {"m": UsageBuckets(input=-1, cache_read=40, output=20)}
    assert by_name(record)["turn 1 buckets consistent"].status == "fail"


def test_usage_lost_on_cancel_fails() -> None:
    record = interrupted_record()
    record.results[0].usage = {}
    assert by_name(record)["turn 1 usage"].status == "fail"


def test_wire_derivation_follows_first_last_then_total_deltas() -> None:
    b = RecordBuilder()
    turn_id, _ = b.start_turn(0)
    b.raw_usage(turn_id, breakdown(100, 40, 20), breakdown(100, 40, 20))
    b.raw_usage(turn_id, breakdown(100, 40, 20), breakdown(200, 80, 40))
    b.raw_usage(turn_id, breakdown(100, 40, 20), breakdown(200, 80, 40))  # duplicate: adds nothing
    b.raw_usage("turn-0", breakdown(999, 0, 999), breakdown(999, 0, 999))  # another turn: never counts
    derived = usage.wire_usage(WireIndex.build(b.wire), turn_id)
    assert derived == UsageBuckets(input=120, cache_read=80, output=40)


def test_undeclared_usage_is_judged_against_the_wire_like_any() -> None:
    record = plain_record(1)
    record.expect = Expect(turns=(ExpectTurn("completed"),))
    assert by_name(record)["turn 1 usage"].status == "pass"
    assert "turn 1 server usage" not in by_name(record)  # nothing declared of the server either
    record.results[0].usage = {"m": UsageBuckets(input=100, cache_read=40, output=20)}
    check = by_name(record)["turn 1 usage"]
    assert check.status == "fail" and "input 100 != 60" in check.detail, check.detail


def test_a_result_without_turn_id_is_matched_to_the_wire_turn_by_order() -> None:
    """An outside client that keeps no turn id: its usage is judged against the turn started at its position."""
    record = plain_record(2)
    record.expect = Expect(turns=(ExpectTurn("completed"), ExpectTurn("completed")))
    for result in record.results:
        result.turn_id = None
    for name in ("turn 1 usage", "turn 2 usage"):
        check = by_name(record)[name]
        assert check.status == "pass", check.detail
        assert "server's usage of this turn" in check.detail and "by order" in check.detail, check.detail
    record.results[1].usage = {"m": UsageBuckets(input=100, cache_read=40, output=20)}
    check = by_name(record)["turn 2 usage"]
    assert check.status == "fail" and "input 100 != 60" in check.detail, check.detail


def test_server_reporting_cached_above_input_warns() -> None:
    record = plain_record(1)
    b = RecordBuilder()
    b.raw_usage("turn-1", breakdown(10, 40, 20), breakdown(10, 40, 20))
    record.wire.extend(b.wire)
    assert by_name(record)["server usage consistent"].status == "warn"


@given(
    responses=st.lists(
        st.tuples(st.integers(0, 500), st.integers(0, 500), st.integers(0, 300)).map(
            lambda t: (t[0] + t[1], t[1], t[2])  # (input incl. cached, cached, output)
        ),
        min_size=1,
        max_size=6,
    ),
    duplicates=st.lists(st.integers(0, 5), max_size=4),
)
def test_wire_derivation_sums_responses_once_whatever_the_duplicates(
    responses: list[tuple[int, int, int]], duplicates: list[int]
) -> None:
    b = RecordBuilder()
    turn_id, _ = b.start_turn(0)
    repeat = {d % len(responses) for d in duplicates}
    for i, (inp, cached, out) in enumerate(responses):
        b.usage(turn_id, inp, cached, out)
        if i in repeat:  # a duplicated notification: same last, same total
            b.wire.append(b.wire[-1])
    derived = usage.wire_usage(WireIndex.build(b.wire), turn_id)
    expected = UsageBuckets()
    for inp, cached, out in responses:
        expected = expected + UsageBuckets.from_breakdown(breakdown(inp, cached, out))
    assert derived == expected


def _completed_after_the_interrupt(reported_usage: UsageBuckets | None) -> object:
    """interrupted_record, but the server completed the turn although the client interrupted it, and [expect]
    declares the aborted course's usage (nothing): the client reports the turn completed, with ``reported_usage``
    (None: what the server's usage updates of the turn add up to)."""
    record = interrupted_record()
    for entry in record.wire:
        if entry.frame and entry.frame.get("method") == "turn/completed":
            entry.frame["params"]["turn"]["status"] = "completed"
    result = record.results[0]
    result.status, result.server_status, result.cancel_at = "completed", "completed", None
    derived = usage.wire_usage(WireIndex.build(record.wire), result.turn_id)
    assert derived is not None and not derived.is_zero()
    result.usage = {"m": derived if reported_usage is None else reported_usage}
    record.expect = Expect(turns=(ExpectTurn("aborted", UsageBuckets()),))
    return record


def test_a_turn_completed_after_a_cancel_and_reported_completed_is_judged_by_its_wire_usage() -> None:
    # A correct client may report such a turn completed (terminal_status allows it); its usage is then the
    # completed turn's, which the server's updates say, not the aborted course's that [expect] declares.
    check = by_name(_completed_after_the_interrupt(None))["turn 1 usage"]
    assert check.status == "pass" and "completed after the client's cancel" in check.detail, check
    check = by_name(_completed_after_the_interrupt(UsageBuckets(input=1, output=1)))["turn 1 usage"]
    assert check.status == "fail" and "completed after the client's cancel" in check.detail, check


def test_a_turn_reported_as_the_server_ended_it_is_judged_by_its_wire_usage_even_against_expect() -> None:
    """A client that dropped its cancel reports the turn completed, as the server ended it: terminal_status and
    plan followed fail that; its usage is the completed turn's, right, not the aborted course's [expect]."""
    record = _completed_after_the_interrupt(None)
    record.wire = [e for e in record.wire if not (e.frame and e.frame.get("method") == "turn/interrupt")]
    assert not WireIndex.build(record.wire).interrupts(record.results[0].turn_id)
    check = by_name(record)["turn 1 usage"]
    assert check.status == "pass" and "[expect] declares" in check.detail, check
    # Whatever status it reports (terminal_status judges that), its usage is the wire's.
    record.results[0].status = "failed"
    assert by_name(record)["turn 1 usage"].status == "pass"
    record.results[0].usage = {"m": UsageBuckets(input=1, output=1)}
    assert by_name(record)["turn 1 usage"].status == "fail"


def _answered_the_pending_approval() -> object:
    """The client answered an approval [expect] expected to stay pending (the turn aborted, usage 60/40/20): the
    server played a second response, the turn completed, and its usage is both responses' (120/80/40)."""
    b = RecordBuilder("approval_pending")
    turn_id, started = b.start_turn(0)
    rid = b.approval(turn_id)
    b.usage(turn_id, 100, 40, 20)
    b.answer(rid)
    b.resolved(rid)
    b.raw_usage(turn_id, breakdown(100, 40, 20), breakdown(200, 80, 40))
    b.complete(turn_id)
    wire_total = UsageBuckets(input=120, cache_read=80, output=40)
    b.result(0, "completed", turn_id, started, usage={"m": wire_total}, server_status="completed")
    return b.build(Expect(turns=(ExpectTurn("aborted", PLAIN_USAGE, "interrupted"),)))


def test_usage_of_a_course_the_client_took_is_the_wire_s_not_expect_s() -> None:
    record = _answered_the_pending_approval()
    check = by_name(record)["turn 1 usage"]
    assert check.status == "pass", check.detail  # today: input 120 != 60 against [expect]'s other course
    assert "2 model requests" in check.detail and "[expect] declares" in check.detail, check.detail
    server = by_name(record)["turn 1 server usage"]
    assert server.status == "skip" and "ended it completed" in server.detail, server.detail
    # The wrong count on that course still fails: billing `total` of the second update again.
    record.results[0].usage = {"m": UsageBuckets(input=180, cache_read=120, output=60)}
    assert by_name(record)["turn 1 usage"].status == "fail"


def test_expect_judges_the_server_on_its_declared_course() -> None:
    record = plain_record(2)
    assert by_name(record)["turn 2 server usage"].status == "pass"
    # The server sends other numbers than [expect] declares: the server's finding; the client reporting what
    # the server sent passes.
    record.expect = Expect(turns=(ExpectTurn("completed", PLAIN_USAGE), ExpectTurn("completed", UsageBuckets(input=5))))
    checks = by_name(record)
    assert checks["turn 2 server usage"].status == "fail" and checks["turn 2 server usage"].level == "should"
    assert checks["turn 2 usage"].status == "pass", checks["turn 2 usage"].detail


def test_an_unsupported_turn_s_usage_is_judged_from_the_wire() -> None:
    """A client that cannot steer reports its turn unsupported, with the usage the wire shows (60/40/20): judged
    against the wire, not the steered script's [expect] (50/100/10)."""
    record = plain_record(1)
    record.results[0].status = "unsupported"
    record.expect = Expect(turns=(ExpectTurn("completed", UsageBuckets(input=50, cache_read=100, output=10)),))
    checks = by_name(record)
    assert checks["turn 1 usage"].status == "pass", checks["turn 1 usage"].detail
    assert checks["turn 1 server usage"].status == "skip"
    record.results[0].usage = {"m": UsageBuckets(input=50, cache_read=100, output=10)}
    assert by_name(record)["turn 1 usage"].status == "fail"


def _two_requests(style: dict[str, str], reported: UsageBuckets) -> object:
    b = RecordBuilder("tool_round_trip")
    turn_id, started = b.start_turn(0)
    b.raw_usage(turn_id, breakdown(100, 40, 20), breakdown(100, 40, 20))
    b.raw_usage(turn_id, breakdown(100, 40, 20), breakdown(100, 40, 20))  # a duplicate: no request
    b.raw_usage(turn_id, breakdown(130, 60, 30), breakdown(230, 100, 50))
    b.complete(turn_id)
    b.result(0, "completed", turn_id, started, usage={"m": reported}, server_status="completed", usage_style=style)
    return b.build(Expect(turns=(ExpectTurn("completed"),)))


def test_a_declared_usage_style_with_cache_in_input_is_judged_as_it_counts() -> None:
    # The turn: uncached 130, cached 100, output 50; an OpenAI-style prompt_tokens count is 230.
    style = {"input": "with_cache"}
    assert (
        by_name(_two_requests(style, UsageBuckets(input=230, cache_read=100, output=50)))["turn 1 usage"].status
        == "pass"
    )
    wrong = by_name(_two_requests(style, UsageBuckets(input=130, cache_read=100, output=50)))["turn 1 usage"]
    assert wrong.status == "fail" and "input 130 != 230" in wrong.detail and "with_cache" in wrong.detail
    # Undeclared, the same report is judged in the documented buckets (cached tokens counted twice).
    assert (
        by_name(_two_requests({}, UsageBuckets(input=230, cache_read=100, output=50)))["turn 1 usage"].status == "fail"
    )


def test_a_last_request_report_of_a_turn_of_several_requests_fails_as_the_bug_it_is() -> None:
    style = {"input": "with_cache", "scope": "last_request"}
    last = UsageBuckets(input=130, cache_read=60, output=30)  # the last request's `last`, input with cache
    check = by_name(_two_requests(style, last))["turn 1 usage"]
    assert check.status == "fail" and "last model request only" in check.detail and "made 2" in check.detail
    # The turn's whole usage is right whatever the declared scope.
    whole = UsageBuckets(input=230, cache_read=100, output=50)
    assert by_name(_two_requests(style, whole))["turn 1 usage"].status == "pass"
    # One request: the last request is the turn, and such a client passes.
    record = plain_record(1)
    record.results[0].usage_style = style
    record.results[0].usage = {"m": UsageBuckets(input=100, cache_read=40, output=20)}
    assert by_name(record)["turn 1 usage"].status == "pass", by_name(record)["turn 1 usage"].detail


def test_a_bucket_the_client_does_not_expose_is_not_judged() -> None:
    """An OpenAI-style client has prompt tokens (cache included) and cached tokens, but no cache writes: its
    ``null`` bucket is not judged, never read as zeros; what it does expose still is."""
    record = _two_requests({"input": "with_cache"}, UsageBuckets(input=230, cache_read=100, output=50))
    record.results[0].usage_unexposed = ["cache_write"]
    record.wire = [  # the server reports 7 cache-written tokens in the last request
        dataclasses.replace(e, frame=_with_cache_write(e.frame)) for e in record.wire
    ]
    check = by_name(record)["turn 1 usage"]
    assert check.status == "fail" and "input 230 != 237" in check.detail, check.detail  # inputTokens includes them
    record.results[0].usage = {"m": UsageBuckets(input=237, cache_read=100, output=50)}
    check = by_name(record)["turn 1 usage"]
    assert check.status == "pass" and "not judged: cache_write" in check.detail, check.detail
    record.results[0].usage_unexposed = []
    assert by_name(record)["turn 1 usage"].status == "fail"  # cache_write 0 != 7, when it says it exposes it


def _with_cache_write(frame: object) -> object:
    if not (isinstance(frame, dict) and frame.get("method") == "thread/tokenUsage/updated"):
        return frame
    usage = frame["params"]["tokenUsage"]
    if usage["total"]["inputTokens"] != 230:
        return frame
    out = {
        **usage,
        "last": {**usage["last"], "inputTokens": usage["last"]["inputTokens"] + 7, "cacheWriteInputTokens": 7},
        "total": {**usage["total"], "inputTokens": 237, "cacheWriteInputTokens": 7},
    }
    return {**frame, "params": {**frame["params"], "tokenUsage": out}}
