"""The turn lifecycle's transition table (codex_client/turnphase.py): every step the table lacks is refused with
a typed error, before anything changes; the core's turn follows the table on its real paths."""

from __future__ import annotations

import itertools

import pytest

from codex_client.connection import ClientConnection, TurnFinished
from codex_client.errors import ClientError
from codex_client.turnphase import TRANSITIONS, IllegalTurnTransition, Phase, Step, advance

ILLEGAL = [(p, s) for p, s in itertools.product(Phase, Step) if s not in TRANSITIONS[p]]
LEGAL = [(p, s) for p, s in itertools.product(Phase, Step) if s in TRANSITIONS[p]]


def test_the_table_names_every_phase() -> None:
    assert set(TRANSITIONS) == set(Phase)


@pytest.mark.parametrize(("phase", "step"), ILLEGAL, ids=lambda x: x.value)
def test_an_illegal_step_is_refused_with_a_typed_error(phase: Phase, step: Step) -> None:
    with pytest.raises(IllegalTurnTransition) as caught:
        advance(phase, step)
    assert isinstance(caught.value, ClientError)
    assert (caught.value.phase, caught.value.step) == (phase, step)
    assert phase.value in str(caught.value) and step.value in str(caught.value)


@pytest.mark.parametrize(("phase", "step"), LEGAL, ids=lambda x: x.value)
def test_a_legal_step_goes_where_the_table_says(phase: Phase, step: Step) -> None:
    assert advance(phase, step) is TRANSITIONS[phase][step]


def test_the_refused_steps_are_the_ones_that_would_be_bugs() -> None:
    """Known-bad steps fail, known-good ones pass (the table is not permissive by accident)."""
    for bad in [
        (Phase.NEW, Step.CANCEL),  # nothing to interrupt: never entered
        (Phase.NEW, Step.INTERRUPT),
        (Phase.RUNNING, Step.START),  # turn/start twice
        (Phase.RUNNING, Step.INTERRUPT),  # an interrupt nobody asked for
        (Phase.INTERRUPTING, Step.INTERRUPT),  # a second turn/interrupt
        (Phase.INTERRUPTING, Step.CANCEL),
        (Phase.ENDED, Step.END),  # two Results
        (Phase.ENDED, Step.START),
        (Phase.ENDED, Step.CANCEL),
    ]:
        assert bad in ILLEGAL, bad
    for good in [(Phase.NEW, Step.END), (Phase.RUNNING, Step.END), (Phase.INTERRUPTING, Step.END)]:
        assert good in LEGAL, good


def test_ended_is_the_only_end_and_every_phase_reaches_it() -> None:
    assert TRANSITIONS[Phase.ENDED] == {}
    for phase in Phase:
        if phase is not Phase.ENDED:
            assert TRANSITIONS[phase].get(Step.END) is Phase.ENDED, phase
    reached, frontier = {Phase.NEW}, [Phase.NEW]
    while frontier:
        for nxt in TRANSITIONS[frontier.pop()].values():
            if nxt not in reached:
                reached.add(nxt)
                frontier.append(nxt)
    assert reached == set(Phase)


# --- the core's turn on the table -------------------------------------------------------------------------


def _connection() -> ClientConnection:
    conn = ClientConnection(max_line=1 << 20, event_buffer=100, interrupt_budget=2.0)
    conn.adopt_thread("thr", None, {}, 0.0, resumed=False)
    return conn


def test_a_cancelled_turn_walks_the_table_to_one_result() -> None:
    conn = _connection()
    turn = conn.new_turn([{"type": "text", "text": "hi"}], {}, None, None)
    assert turn.phase is Phase.NEW and not turn.sent
    assert conn.start_turn(turn, 0.0) is not None
    assert turn.phase is Phase.RUNNING and turn.sent
    conn.learn_turn_id(turn, "turn-1")
    assert conn.request_cancel(turn, "aborted", "execution cancelled", 1.0)
    assert turn.phase is Phase.CANCELLING and turn.cancel_request == ("aborted", "execution cancelled")
    assert not conn.request_cancel(turn, "timeout", "later", 1.1)  # the first cancellation wins
    conn.interrupt(turn, 1.0)
    assert turn.phase is Phase.INTERRUPTING
    with pytest.raises(IllegalTurnTransition):
        conn.interrupt(turn, 1.2)  # a second turn/interrupt is a bug of ours
    conn.finish_turn(turn, 1.5)
    conn.finish_turn(turn, 1.6)  # idempotent: one Result
    assert turn.phase is Phase.ENDED and turn.result is not None and turn.result.status == "aborted"
    assert [e for e in conn.take_events() if isinstance(e, TurnFinished)] == [TurnFinished(turn)]
    assert not conn.request_cancel(turn, "aborted", "too late", 2.0)


def test_a_turn_not_entered_cannot_be_cancelled_or_interrupted() -> None:
    conn = _connection()
    turn = conn.new_turn([], {}, None, None)
    with pytest.raises(IllegalTurnTransition):
        conn.request_cancel(turn, "aborted", "execution cancelled", 0.0)
    with pytest.raises(IllegalTurnTransition):
        conn.interrupt(turn, 0.0)
    assert turn.phase is Phase.NEW and turn.cancel_request is None and turn.cancel_at is None


def test_a_turn_whose_session_is_gone_ends_at_its_start() -> None:
    conn = _connection()
    conn.kill("test", 0.0)
    turn = conn.new_turn([], {}, None, None)
    assert conn.start_turn(turn, 0.0) is None
    assert turn.phase is Phase.ENDED and turn.result is not None and turn.result.status == "failed"
