"""Breaking the client on purpose turns the matching contract checks red (a suite that cannot fail is a defect).

The client's files are not edited: each break is a monkeypatch of the client or the runner, or a record
the contracts re-judge.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from codex_client import usage as client_usage
from contracts.checks import run_all
from contracts.record import SessionRecord
from contracts.trace import TraceWriter
from harness import runner


def failing(run: Any, contract: str) -> list[str]:
    return [c.name for c in run.checks if c.contract == contract and c.status == "fail"]


def test_no_interrupt_budget_turns_latency_red(
    monkeypatch: pytest.MonkeyPatch, run_scenario: Callable[..., Any]
) -> None:
    real = runner.session_options
    monkeypatch.setattr(
        runner, "session_options", lambda plan, d: dataclasses.replace(real(plan, d), interrupt_budget=math.inf)
    )
    run = run_scenario("interrupt_ignored")
    assert "turn 1 cancel→Result" in failing(run, "latency")


def test_usage_summed_from_total_turns_usage_red(
    monkeypatch: pytest.MonkeyPatch, run_scenario: Callable[..., Any]
) -> None:
    def summed_total(self: Any, token_usage: Any) -> Any:
        total = client_usage.breakdown(token_usage.get("total")) or client_usage.zero()
        self.fields = client_usage.add(self.fields, total)
        self.accepted += 1
        return total

    assert failing(run_scenario("plain_two_turns"), "usage") == []
    monkeypatch.setattr(client_usage.TurnUsage, "apply", summed_total)
    run = run_scenario("plain_two_turns")
    assert "turn 2 usage" in failing(run, "usage")


def test_approval_left_unanswered_turns_protocol_red(
    monkeypatch: pytest.MonkeyPatch, run_scenario: Callable[..., Any]
) -> None:
    async def never(request: Any) -> str:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    monkeypatch.setattr(runner, "approval_policy", lambda plan: never)
    run = run_scenario("command_approval")
    # The client's own approval timeout answers it at last (cancel): late, a should; the turn it cost, a must.
    late = next(c for c in run.checks if c.contract == "protocol" and c.name == "server requests answered in time")
    assert (late.status, late.level) == ("fail", "should"), late
    assert "turn 1 status" in failing(run, "terminal_status")


def test_unclosed_window_in_the_client_trace_turns_trace_closure_red(
    run_scenario: Callable[..., Any], tmp_path: Path
) -> None:
    run = run_scenario("plain")
    record: SessionRecord = run.record
    # The client's trace as a client that forgets a window leaves it: a turn started, never ended.
    writer = TraceWriter(tmp_path / "leaky-client-trace", rollout_id="r", root_thread_id="thr")
    thread = writer.start_thread("thr")
    turn = thread.start_turn("turn-1")
    writer._untrack(turn)
    writer.complete()
    record.client_trace = tmp_path / "leaky-client-trace"
    checks = [c for c in run_all(record) if c.contract == "trace_closure" and c.name == "client trace"]
    assert [c.status for c in checks] == ["fail"]
    assert "violation" in checks[0].detail
