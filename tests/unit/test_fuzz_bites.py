"""Proof the fuzzer bites: plant a client bug, the fuzzer finds it, shrinks it to a small scenario file, and
``codex-harness run --scenario FILE`` reproduces the failure.

The client's files are not edited: each bug is planted through the client's public seams (a public method
of the session or of its core, the client trace's fault-injection hook), active for the fuzz run and for the
replay through the CLI (in this process).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from codex_client import usage as client_usage
from codex_client.connection import TurnFinished
from codex_client.session import Session
from harness import cli, runner
from harness.fuzz.driver import FuzzReport, fuzz
from harness.fuzz.shrink import scenario_size

pytestmark = pytest.mark.fuzz

#: A shrunk scenario is small: a handful of TOML lines beyond the fixed [expect] boilerplate.
MAX_SHRUNK_LINES = 80


def _found_and_replayed(report: FuzzReport, contract: str, tmp_path: Path) -> dict[str, int]:
    assert report.failure is not None, report.text()
    failure = report.failure
    assert not failure.flaky and failure.error is None, report.text()
    assert failure.scenario_file is not None and failure.checks_file is not None
    failing = orjson.loads(failure.checks_file.read_bytes())["failing"]
    assert any(c["contract"] == contract for c in failing), failing
    size = scenario_size(failure.scenario)
    print(f"\n{contract}: found after {report.generated} examples, shrunk to {size}: {failure.scenario_file}")
    assert size["toml_lines"] <= MAX_SHRUNK_LINES, (size, failure.scenario_file.read_text())
    code = cli.main(["run", "--quiet", "--scenario", str(failure.scenario_file), "--report", str(tmp_path / "replay")])
    assert code == 1, "the shrunk scenario does not reproduce through codex-harness run"
    replayed = orjson.loads((tmp_path / "replay" / "checks.json").read_bytes())
    assert any(c["contract"] == contract and c["status"] == "fail" for c in replayed)
    return size


def _fuzz(tmp_path: Path, examples: int = 300, seed: int = 1) -> FuzzReport:
    return fuzz(examples, seed_value=seed, out=tmp_path / "found")


def test_usage_summed_from_total_is_found_and_shrunk(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def summed_total(self: Any, token_usage: Any) -> Any:
        total = client_usage.breakdown(token_usage.get("total")) or client_usage.zero()
        self.fields = client_usage.add(self.fields, total)
        self.accepted += 1
        return total

    monkeypatch.setattr(client_usage.TurnUsage, "apply", summed_total)
    size = _found_and_replayed(_fuzz(tmp_path), "usage", tmp_path)
    assert size["turns"] <= 2


def test_no_kill_after_the_interrupt_budget_is_found_and_shrunk(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real_kill_turn = Session.kill_turn

    def no_kill_on_budget(self: Session, turn: Any, reason: str) -> None:
        if reason.startswith("turn interrupt completion timed out"):
            self.finish_turn(turn, failure=f"gave up: {reason}")  # the Result, but the server lives on
            return
        real_kill_turn(self, turn, reason)

    monkeypatch.setattr(Session, "kill_turn", no_kill_on_budget)
    # A rare draw (an ignored interrupt needs a held approval in the last turn): about 1 example in 200-500.
    _found_and_replayed(_fuzz(tmp_path, examples=2000), "trace_closure", tmp_path)


def test_approval_left_unanswered_is_found_and_shrunk(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    async def never(request: Any) -> str:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    monkeypatch.setattr(runner, "approval_policy", lambda plan: never)
    report = _fuzz(tmp_path)
    assert report.failure is not None
    failing = {c.contract for c in report.failure.checks if c.status == "fail"}
    assert failing & {"terminal_status", "protocol"}, report.text()
    _found_and_replayed(report, next(iter(sorted(failing & {"terminal_status", "protocol"}))), tmp_path)


def test_window_left_open_on_crash_is_found_and_shrunk(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real_handle: Callable[..., None] = Session.handle

    def leaky_handle(self: Session, events: list[Any]) -> None:
        for event in events:
            turn = event.turn if isinstance(event, TurnFinished) else None
            if turn is not None and turn.turn_id is not None and (turn.result.error or "").startswith("process exited"):
                # The crash path forgets the turn's window: never ended, and no longer tracked to be closed.
                leak = getattr(self.trace, "leak_turn", None)
                if leak is not None:
                    leak(turn.turn_id)
        real_handle(self, events)

    monkeypatch.setattr(Session, "handle", leaky_handle)
    _found_and_replayed(_fuzz(tmp_path), "trace_closure", tmp_path)
