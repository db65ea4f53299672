"""The one interpreter of a client plan (contracts.triggers), without trio, a clock or a server."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import paths

from contracts.scenario import ClientAction, ClientPlan
from contracts.triggers import (
    Action,
    ActionSchedule,
    decision,
    frame_moment,
    held_approvals,
    resumes,
)
from harness.fuzz.walk import Step, trigger_index

REPO = paths.REPO


def test_each_action_fires_once_at_its_counted_moment() -> None:
    cancel = ClientAction(1, "cancel", at="delta", n=3)
    steer = ClientAction(1, "steer", at="item_started", n=1)
    schedule = ActionSchedule([cancel, steer])
    assert schedule.observe("delta", now=0) == []
    assert schedule.observe("delta", now=0) == []
    assert schedule.observe("item_started", now=0) == [steer]
    assert schedule.observe("delta", now=0) == [cancel]
    assert schedule.observe("delta", now=0) == []
    assert schedule.pending == ()
    assert schedule.count("delta") == 4


def test_delay_actions_come_due_after_the_turn_began_and_resume_is_not_a_turn_action() -> None:
    delayed = ClientAction(1, "cancel", at="delay", delay_ms=50)
    at_once = ClientAction(1, "steer", at="delay", delay_ms=0)
    schedule = ActionSchedule([delayed, at_once, ClientAction(1, "resume")])
    assert schedule.waits
    assert schedule.start(10.0) == [at_once]
    assert schedule.next_wake() == 10.0 + 50 / 1000
    assert schedule.wake(10.049) == []
    assert schedule.wake(10.05) == [delayed]
    assert schedule.wake(11.0) == []
    assert schedule.next_wake() is None
    assert schedule.pending == ()


def test_a_delay_after_a_moment_waits_for_its_time() -> None:
    later = ClientAction(1, "cancel", at="delta", n=1, delay_ms=300)
    schedule = ActionSchedule([later])
    assert schedule.start(0.0) == []
    assert schedule.observe("delta", now=2.0) == []
    assert schedule.pending == (later,)
    assert schedule.next_wake() == 2.0 + 300 / 1000
    assert schedule.wake(2.3) == [later]


def test_times_are_exact_on_the_callers_clock() -> None:
    """Seconds (trio, monotonic) and virtual milliseconds (the fake's self-check player) alike."""
    action = ClientAction(1, "steer", at="delay", delay_ms=300)
    seconds = ActionSchedule([action])
    seconds.start(1.7)
    assert seconds.next_wake() == 1.7 + 300 / 1000  # what trio.sleep(delay_ms / 1000) would wait for
    millis = ActionSchedule([action], per_second=1000)
    millis.start(1_796_022_741_000)
    assert millis.next_wake() == 1_796_022_741_300


def test_waiting_actions_come_out_in_time_order_then_plan_order() -> None:
    first = ClientAction(1, "steer", at="delay", delay_ms=200, text="first")
    second = ClientAction(1, "steer", at="delay", delay_ms=100, text="second")
    third = ClientAction(1, "cancel", at="delay", delay_ms=200)
    schedule = ActionSchedule([first, second, third], per_second=1000)
    schedule.start(0)
    assert schedule.wake(1000) == [second, first, third]


def test_the_end_of_the_turn_drops_what_still_waits() -> None:
    schedule = ActionSchedule([ClientAction(1, "cancel", at="delay", delay_ms=5), ClientAction(1, "steer", n=2)])
    schedule.start(0.0)
    schedule.end()
    assert schedule.next_wake() is None and schedule.pending == ()
    assert schedule.observe("started", now=1.0) == [] and schedule.wake(9.0) == []


def test_a_cancel_at_an_approval_holds_that_request_and_no_other() -> None:
    hold = ClientAction(1, "cancel", at="approval_pending", n=2)
    steer = ClientAction(1, "steer", at="approval_pending", n=1)  # a steer never holds the answer back
    schedule = ActionSchedule([hold, steer])
    assert not schedule.holds_approval(1)
    assert schedule.holds_approval(2)
    assert schedule.observe("approval_pending", now=0) == [steer]
    assert schedule.observe("approval_pending", now=0) == [hold]
    assert schedule.holds_approval(2)  # a static fact of the plan, whenever it is asked
    assert held_approvals([hold, steer]) == {2}


def test_a_watchers_own_count_wins() -> None:
    at_five = ClientAction(1, "cancel", at="delta", n=5)
    schedule = ActionSchedule([at_five])
    assert schedule.observe("delta", now=0, n=4) == []
    assert schedule.observe("delta", now=0, n=5) == [at_five]


def test_a_count_that_skips_past_n_never_fires() -> None:
    at_two = ClientAction(1, "steer", at="delta", n=2)
    schedule = ActionSchedule([at_two])
    assert schedule.observe("delta", now=0, n=1) == []
    assert schedule.observe("delta", now=0, n=3) == []
    assert schedule.pending == (at_two,)


def test_no_waiting_without_a_time_in_the_plan() -> None:
    assert not ActionSchedule([ClientAction(1, "cancel", at="delta", n=3)]).waits
    assert not ActionSchedule([]).waits


def test_approval_decisions_in_order_then_the_default() -> None:
    assert [decision(i, ("decline", "cancel"), "accept") for i in range(4)] == ["decline", "cancel", "accept", "accept"]
    plan = ClientPlan(approval="decline", approvals=("accept",))
    assert [plan.decision(i) for i in range(3)] == ["accept", "decline", "decline"]


def test_resume_is_asked_before_the_turn() -> None:
    assert resumes([ClientAction(2, "resume")]) and not resumes([ClientAction(2, "cancel")])


@pytest.mark.parametrize(
    ("frame", "moment"),
    [
        ({"method": "turn/started", "params": {"turn": {"id": "t1"}}}, "started"),
        ({"method": "turn/started", "params": {"turn": {"id": "t0"}}}, None),
        ({"method": "item/agentMessage/delta", "params": {"turnId": "t1", "delta": "x"}}, "delta"),
        ({"method": "item/agentMessage/delta", "params": {"turnId": "t0", "delta": "x"}}, None),  # a late one
        ({"method": "item/started", "params": {"turnId": "t1", "item": {}}}, "item_started"),
        ({"id": 7, "method": "item/commandExecution/requestApproval", "params": {"turnId": "t1"}}, "approval_pending"),
        ({"id": 8, "method": "item/fileChange/requestApproval", "params": {"turnId": "t1"}}, "approval_pending"),
        ({"method": "item/commandExecution/requestApproval", "params": {"turnId": "t1"}}, None),  # no id: no request
        ({"id": 9, "method": "item/tool/requestUserInput", "params": {"turnId": "t1"}}, None),
        ({"method": "item/reasoning/textDelta", "params": {"turnId": "t1"}}, None),
        ({"method": "turn/started", "params": "not an object"}, None),
        ({"id": 1, "result": {}}, None),
    ],
)
def test_which_frame_is_which_moment(frame: dict, moment: str | None) -> None:
    assert frame_moment(frame, "t1") == moment


def test_the_plan_files_actions_read_as_the_scenarios() -> None:
    spec = {"do": "steer", "at": "delta", "n": 2, "delay_ms": 5, "text": "Also"}
    assert Action.from_json(spec) == Action("steer", "delta", 2, 5, "Also")
    assert Action.from_json({"do": "cancel"}) == Action("cancel")


def test_the_interpreter_imports_nothing_but_the_standard_library() -> None:
    """An outside client (conformance/clients/careful.py) imports it under any Python, from a clone too."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import contracts.triggers; "
        "ours = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('contracts', 'harness', 'fake_server', 'conformance', 'trio', 'orjson')); print(ours)"
    )
    out = subprocess.run([sys.executable, "-I", "-c", code, str(REPO)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['contracts', 'contracts.triggers']"


#: The walk's steps as the moments a client sees (the fuzz oracle's model: harness.fuzz.walk.Step).
_STEP_MOMENT = {
    "started": "started",
    "user_item": "item_started",
    "item_started": "item_started",
    "delta": "delta",
    "approval": "approval_pending",
}
_STEP_KINDS = (*_STEP_MOMENT, "rdelta", "item_completed", "usage", "sleep", "end", "completed")


@given(
    kinds=st.lists(st.sampled_from(_STEP_KINDS), max_size=40),
    at=st.sampled_from(("started", "delta", "item_started", "approval_pending")),
    n=st.integers(1, 8),
)
def test_the_fuzz_oracles_own_copy_agrees_with_the_interpreter(kinds: list[str], at: str, n: int) -> None:
    """Two readings of the same rules (docs/scenarios.md), kept apart on purpose (harness.fuzz.walk.trigger_index):
    on any timeline the oracle can walk, the action fires at the step the oracle predicts, or at none."""
    if at == "started":
        n = 1  # the loader refuses more: turn/started comes once a turn
        kinds = ["started", *(k for k in kinds if k != "started")]
    steps = [Step(kind, t=i) for i, kind in enumerate(kinds)]
    action = ClientAction(1, "cancel", at=at, n=n)
    schedule = ActionSchedule([action])
    fired = next(
        (i for i, s in enumerate(steps) if s.kind in _STEP_MOMENT and schedule.observe(_STEP_MOMENT[s.kind], now=s.t)),
        None,
    )
    assert fired == trigger_index(steps, action)
