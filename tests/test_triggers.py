"""The one interpreter of client-plan triggers (contracts.triggers), without trio or a server."""

from __future__ import annotations

from contracts.scenario import ClientAction
from contracts.triggers import ActionSchedule


def test_each_action_fires_once_at_its_counted_moment() -> None:
    cancel = ClientAction(1, "cancel", at="delta", n=3)
    steer = ClientAction(1, "steer", at="item_started", n=1)
    schedule = ActionSchedule([cancel, steer])
    assert schedule.observe("delta") == []
    assert schedule.observe("delta") == []
    assert schedule.observe("item_started") == [steer]
    assert schedule.observe("delta") == [cancel]
    assert schedule.observe("delta") == []
    assert schedule.pending == ()


def test_delay_actions_are_handed_out_once_and_resume_is_not_a_turn_action() -> None:
    delayed = ClientAction(1, "cancel", at="delay", delay_ms=50)
    schedule = ActionSchedule([delayed, ClientAction(1, "resume")])
    assert schedule.timed() == [delayed]
    assert schedule.timed() == []
    assert schedule.pending == ()


def test_waits_for_looks_ahead_without_counting() -> None:
    hold = ClientAction(1, "cancel", at="approval_pending", n=2)
    schedule = ActionSchedule([hold])
    assert not schedule.waits_for("approval_pending")
    assert schedule.observe("approval_pending") == []
    assert schedule.waits_for("approval_pending")
    assert schedule.waits_for("approval_pending")  # still not counted
    assert schedule.observe("approval_pending") == [hold]


def test_a_watchers_own_count_wins() -> None:
    at_five = ClientAction(1, "cancel", at="delta", n=5)
    schedule = ActionSchedule([at_five])
    assert schedule.observe("delta", n=4) == []
    assert schedule.observe("delta", n=5) == [at_five]


def test_a_count_that_skips_past_n_never_fires() -> None:
    at_two = ClientAction(1, "steer", at="delta", n=2)
    schedule = ActionSchedule([at_two])
    assert schedule.observe("delta", n=1) == []
    assert schedule.observe("delta", n=3) == []
    assert schedule.pending == (at_two,)
