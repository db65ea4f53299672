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
    async def broken(self: Any, text: Any) -> str:
        raise RuntimeError("steer exploded")

    monkeypatch.setattr(client_turn.Turn, "steer", broken)
    assert "steer exploded" in _machine_fails(QUICK)
