"""The session API in any order (start, steer, cancel, answer approvals, crash, resume, wait), in process
under MockClock: :class:`harness.fuzz.stateful.SessionMachine`."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from codex_client import turn as client_turn
from codex_client.connection import ClientConnection
from harness.fuzz.stateful import SessionMachine

SessionMachine.TestCase.settings = settings(
    max_examples=20,
    stateful_step_count=10,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
TestSessionMachine = SessionMachine.TestCase


def _machine_fails(settings_: settings) -> str:
    try:
        run_state_machine_as_test(SessionMachine, settings=settings_)
    except AssertionError as exc:
        return str(exc)
    except Exception as exc:  # an exception escaping the client through a rule is a failure too
        return repr(exc)
    raise AssertionError("the state machine found nothing")


QUICK = settings(
    max_examples=30, stateful_step_count=8, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)


@pytest.mark.fuzz
def test_a_second_result_for_a_turn_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ClientConnection.finish_turn

    def twice(self: ClientConnection, turn: Any, t: float, *, failure: str | None = None) -> None:
        had = turn.result is not None
        real(self, turn, t, failure=failure)
        if not had and turn.result is not None:
            self.results.append(turn.result)

    monkeypatch.setattr(ClientConnection, "finish_turn", twice)
    assert "several Results" in _machine_fails(QUICK)


@pytest.mark.fuzz
def test_an_exception_escaping_steer_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception a steer raises leaves the client through the machine's rule, which the search reports as its
    finding (``_machine_fails``). The rules are played in the one order that reaches a steer (start, steer): a
    search of 30 examples reached it in 20 runs of 20 alone, but missed it in a run of the whole suite."""

    async def broken(self: Any, text: Any) -> str:
        raise RuntimeError("steer exploded")

    monkeypatch.setattr(client_turn.Turn, "steer", broken)
    machine = SessionMachine()
    try:
        machine.start("Say hello")
        assert machine.harness.active is not None, "the turn is still running at this frozen instant"
        with pytest.raises(RuntimeError, match="steer exploded"):  # out through the rule: the search's finding
            machine.steer()
    finally:
        machine.harness.errors.clear()  # the planted error is this test's finding, not the teardown's
        machine.teardown()
