"""The fuzz strategies: drawn scenarios are valid files, their truth follows the documented rules,
and every fault kind and client action is reachable."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, seed, settings

from contracts.scenario import (
    FOLLOW_UP_RESPONSE,
    ClientAction,
    ClientPlan,
    CommandItem,
    Fault,
    MessageItem,
    ModelResponse,
    TurnScript,
    Usage,
)
from contracts.scenario_file import dumps, loads
from contracts.usage import UsageBuckets
from harness.fuzz.coverage import ALL_ACTIONS, ALL_FAULTS, Coverage
from harness.fuzz.strategies import reached_only, scenarios, usages
from harness.fuzz.truth import RacyScenario, derive

QUICK = settings(max_examples=60, suppress_health_check=list(HealthCheck), database=None, deadline=None)


@QUICK
@given(scenarios())
def test_drawn_scenarios_round_trip_through_the_file_format(scenario):
    text = dumps(scenario)
    back = loads(text, "generated.toml")
    assert replace(back, source=None) == scenario
    assert len(back.expect.turns) == len(back.turns)


@QUICK
@given(scenarios())
def test_drawn_truth_is_rederived_identically(scenario):
    # The truth depends only on the scenario: deriving it again from the loaded file gives the same [expect].
    back = loads(dumps(scenario), "generated.toml")
    assert derive(back.turns, back.client).expect == scenario.expect


@QUICK
@given(scenarios())
def test_drawn_faults_all_strike_by_the_walk(scenario):
    # An unreached fault tests nothing and fails the run's fault_not_struck check: the generator places none.
    truth = derive(scenario.turns, scenario.client)
    for turn, walked in zip(scenario.turns, truth.turns, strict=True):
        assert all(any(f is g for g in walked.fired) for f in turn.faults), (turn.faults, walked.fired)


def test_reached_only_drops_faults_past_the_cancel_and_keeps_the_truth():
    turn = TurnScript(
        responses=(ModelResponse((msg(chunks=4),), U1),),
        faults=(Fault("garbage_lines", "delta", 1), Fault("crash", "delta", 3)),
    )
    plan = ClientPlan(actions=(ClientAction(1, "cancel", "delta", 1),))
    truth = derive((turn,), plan)
    kept, again = reached_only((turn,), plan, truth)
    assert [f.kind for f in kept[0].faults] == ["garbage_lines"]  # the crash comes after the cancel lands
    assert again.expect.turns == truth.expect.turns


@QUICK
@given(usages())
def test_usages_are_consistent(usage):
    assert usage.cached <= usage.input and usage.reasoning <= usage.output


def test_every_fault_kind_and_client_action_is_reachable_over_fixed_seeds():
    # Two fixed seeds: hypothesis' draws for one seed still differ a little between plain pytest and xdist
    # workers, and the rarest kinds (held approvals with an interrupt fault) need some room.
    coverage = Coverage()
    for fixed in (20261130, 7):

        @seed(fixed)
        @settings(max_examples=700, suppress_health_check=list(HealthCheck), database=None, deadline=None)
        @given(scenarios())
        def draw(scenario):
            coverage.add(scenario)

        draw()
    assert coverage.missing_faults() == [], coverage.summary()
    assert coverage.missing_actions() == [], coverage.summary()
    assert set(coverage.faults) <= set(ALL_FAULTS) and set(coverage.actions) <= set(ALL_ACTIONS)


# --- the rules, on hand-made steps ------------------------------------------------------------------

U1 = Usage(input=100, cached=40, output=20)
U2 = Usage(input=200, cached=80, output=30, reasoning=5)


def buckets(*usages: Usage) -> UsageBuckets:
    total = UsageBuckets()
    for u in usages:
        total = total + UsageBuckets(u.input - u.cached, u.cached, 0, u.output, u.reasoning)
    return total


def msg(text: str = "Hello there", chunks: int = 3, delay: int = 100) -> MessageItem:
    size = max(1, len(text) // chunks)
    deltas = tuple(text[i : i + size] for i in range(0, len(text), size))
    return MessageItem(text, deltas, delay)


def one(turn: TurnScript, plan: ClientPlan | None = None):
    truth = derive((turn,), plan or ClientPlan())
    return truth.expect.turns[0], truth


def test_plain_turn_completes_with_its_usage():
    expect, _ = one(TurnScript(responses=(ModelResponse((msg(),), U1),)))
    assert (expect.status, expect.server_status, expect.usage) == ("completed", "completed", buckets(U1))


def test_a_tool_loop_adds_every_response_including_the_follow_up():
    turn = TurnScript(responses=(ModelResponse((CommandItem("ls"),), U1),))
    expect, _ = one(turn)
    assert expect.usage == buckets(U1, FOLLOW_UP_RESPONSE.usage)


def test_duplicated_usage_adds_nothing():
    turn = TurnScript(responses=(ModelResponse((msg(),), U1),), faults=(Fault("duplicate_usage", "usage", 1),))
    expect, truth = one(turn)
    assert expect.usage == buckets(U1) and [f.kind for f in truth.fired] == ["duplicate_usage"]


def test_cancel_while_streaming_keeps_only_announced_usage():
    turn = TurnScript(
        responses=(ModelResponse((CommandItem("ls"),), U1), ModelResponse((msg(),), U2)),
    )
    plan = ClientPlan(actions=(ClientAction(1, "cancel", "delta", 1),))
    expect, truth = one(turn, plan)
    assert (expect.status, expect.server_status, expect.usage) == ("aborted", "interrupted", buckets(U1))
    assert truth.turns[0].cancel is not None


def test_cancel_with_an_approval_pending_keeps_the_response_usage_announced_at_the_interrupt():
    turn = TurnScript(responses=(ModelResponse((CommandItem("rm -rf x", approval=True),), U1),))
    plan = ClientPlan(actions=(ClientAction(1, "cancel", "approval_pending", 1),))
    expect, _ = one(turn, plan)
    assert (expect.status, expect.usage) == ("aborted", buckets(U1))


def test_interrupt_ignored_is_killed_and_keeps_what_arrived_before():
    turn = TurnScript(
        responses=(ModelResponse((CommandItem("rm", approval=True),), U1),),
        faults=(Fault("interrupt_ignored", "interrupt"),),
    )
    plan = ClientPlan(actions=(ClientAction(1, "cancel", "approval_pending", 1),))
    expect, truth = one(turn, plan)
    assert (expect.status, expect.server_status, expect.usage) == ("aborted", "none", UsageBuckets())
    assert truth.turns[0].killed and truth.expect.server_trace == "unclosed"


def test_approval_answered_cancel_ends_the_turn_interrupted():
    turn = TurnScript(responses=(ModelResponse((CommandItem("rm", approval=True),), U1),))
    expect, _ = one(turn, ClientPlan(approval="cancel"))
    assert (expect.status, expect.server_status, expect.usage) == ("aborted", "interrupted", buckets(U1))


def test_declined_approval_goes_on_to_the_follow_up():
    turn = TurnScript(responses=(ModelResponse((CommandItem("rm", approval=True),), U1),))
    expect, _ = one(turn, ClientPlan(approval="decline"))
    assert (expect.status, expect.usage) == ("completed", buckets(U1, FOLLOW_UP_RESPONSE.usage))


def test_crash_mid_turn_fails_with_the_exit_code():
    turn = TurnScript(
        responses=(ModelResponse((msg(),), U1),), faults=(Fault("crash", "delta", 2, {"exit_code": 101}),)
    )
    expect, truth = one(turn)
    assert (expect.status, expect.server_status, expect.usage) == ("failed", "none", UsageBuckets())
    assert truth.expect.server_exit == 101


def test_model_error_fails_the_turn():
    turn = TurnScript(responses=(ModelResponse((msg(),), None, end="http_error"),))
    expect, _ = one(turn)
    assert (expect.status, expect.server_status) == ("failed", "failed")


def test_unsupported_server_request_fails_a_completed_turn():
    turn = TurnScript(faults=(Fault("unknown_server_request", "start"),))
    expect, _ = one(turn)
    assert expect.status == "failed"


def test_hang_times_out():
    turn = TurnScript(faults=(Fault("hang", "start"),))
    expect, _ = one(turn)
    assert (expect.status, expect.server_status) == ("timeout", "none")


def test_a_cancel_racing_the_completion_is_refused():
    # No wait between the first delta and the end of the turn: the interrupt would race turn/completed.
    turn = TurnScript(responses=(ModelResponse((MessageItem("hi", ("hi",), 0),), U1),))
    with pytest.raises(RacyScenario):
        derive((turn,), ClientPlan(actions=(ClientAction(1, "cancel", "delta", 1),)))


def test_approvals_after_a_cancel_take_no_decision():
    # Turn 1 is cancelled before its approval arrives, so turn 2's approval gets the plan's first decision.
    first = TurnScript(responses=(ModelResponse((msg(), CommandItem("ls", approval=True)), U1),))
    second = TurnScript(responses=(ModelResponse((CommandItem("rm", approval=True),), U2),))
    plan = ClientPlan(approvals=("cancel",), actions=(ClientAction(1, "cancel", "started"),))
    truth = derive((first, second), plan)
    assert [t.status for t in truth.expect.turns] == ["aborted", "aborted"]
    assert truth.expect.turns[1].server_status == "interrupted"


def test_a_steer_abandons_the_response_and_plays_the_next():
    # Steered while streaming the first response: its usage is never announced, the next response plays.
    turn = TurnScript(responses=(ModelResponse((msg(),), U1), ModelResponse((msg(delay=0),), U2)))
    expect, _ = one(turn, ClientPlan(actions=(ClientAction(1, "steer", "delta", 1),)))
    assert (expect.status, expect.usage) == ("completed", buckets(U2))


def test_the_turn_deadline_is_a_timeout_that_keeps_announced_usage():
    turn = TurnScript(responses=(ModelResponse((CommandItem("sleep 30", duration_ms=30000),), U1),))
    expect, truth = one(turn, ClientPlan(turn_timeout_ms=20001))
    # The deadline lands while the command runs: its response's usage is announced at the interrupt.
    assert (expect.status, expect.server_status, expect.usage) == ("timeout", "interrupted", buckets(U1))
    assert truth.turns[0].cancel is not None


def test_two_approvals_at_once_run_side_by_side():
    # Both requests are out before either answer; the allowed commands run together: the longest sets the wait.
    two = ModelResponse(
        (CommandItem("a", approval=True, duration_ms=1000), CommandItem("b", approval=True, duration_ms=3000)), U1
    )
    plan = ClientPlan(turn_timeout_ms=2001)
    expect, truth = one(TurnScript(responses=(two,)), plan)
    assert (expect.status, expect.usage) == ("timeout", buckets(U1))  # 3 s of running > the 2 s deadline
    expect, _ = one(TurnScript(responses=(two,)), ClientPlan(turn_timeout_ms=4001))
    assert (expect.status, expect.usage) == ("completed", buckets(U1, FOLLOW_UP_RESPONSE.usage))
    assert sum(1 for s in truth.turns[0].steps if s.kind == "approval") == 2


def test_a_cancelled_turn_an_unsupported_request_struck_may_be_reported_failed():
    # Failing the turn after an unknown server request is a correct client's choice whatever ends the turn
    # (careful.py does, and was failed for it on a turn it cancelled): the cancel's status and failed are both due.
    turn = TurnScript(
        responses=(ModelResponse((msg(), CommandItem("ls", approval=True)), U1),),
        faults=(Fault("unknown_server_request", "start"),),
    )
    plan = ClientPlan(actions=(ClientAction(1, "cancel", "approval_pending"),))
    (expect,) = derive((turn,), plan).expect.turns
    assert expect.statuses == ("aborted", "failed")
    hung = TurnScript(faults=(Fault("unknown_server_request", "start"), Fault("hang", "delta", 1)))
    (expect,) = derive((hung,), ClientPlan()).expect.turns
    assert expect.statuses == ("timeout", "failed")


def test_on_the_real_clock_a_cancel_asked_twice_and_a_fault_between_two_turns_are_drawn_often() -> None:
    """The shapes a client's bookkeeping across requests and turns is told by: two interrupts for one turn (one
    turn/completed answers both) and a fault after the end of a turn another follows (a late delta of turn 1 is
    not turn 2's text). Each needs two draws to meet; both come within tens of examples, not hundreds."""
    counts = {"twice": 0, "boundary": 0, "examples": 0}

    @seed(20261207)
    @settings(max_examples=300, suppress_health_check=list(HealthCheck), database=None, deadline=None)
    @given(scenarios(real_time=True))
    def draw(scenario):
        counts["examples"] += 1
        cancels = [(a.turn, a.at, a.n, a.delay_ms) for a in scenario.client.actions if a.do == "cancel"]
        counts["twice"] += len(cancels) > len(set(cancels))
        counts["boundary"] += any(f.at == "after_end" for t in scenario.turns[:-1] for f in t.faults)

    draw()
    # Measured over 300 examples on four seeds: 21-29 and 22-67 (7-11 and 5-7 before each had a draw of its own).
    assert counts["twice"] * 20 >= counts["examples"], counts
    assert counts["boundary"] * 20 >= counts["examples"], counts
