"""conformance/clients/buggy.py: each bug class outside clients were found with fails a check of the scenario that
catches it, and with no flag the client (careful.py underneath) passes those scenarios.

The flags: a 64 KiB line cap, dying on a garbage line, a dropped cancel at ``started``, late deltas leaking into
the next turn, an empty result to an unknown server request, reasoning added to output, no turn timeout, waiting
out the timeout after stdout EOF, no request timeout, a line read without bound once it began, the turn's end
awaited only after the interrupt's answer, one turn/completed awaited per interrupt.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import paths

from contracts.exitcodes import FAILED, OK
from contracts.report import judge
from contracts.scenario import Scenario
from fake_server.catalogue import load_builtin

BUGGY = [sys.executable, str(paths.REPO / "conformance" / "clients" / "buggy.py")]


def _short_turns(name: str) -> Scenario:
    """The built-in scenario with a 2 s turn timeout (and 5 s requests, a 10 s start-up: the run deadline counts
    them): a client that waits it out (or waits forever, to its deadline) costs seconds, not the default minute."""
    scenario = load_builtin(name)
    short = {"turn_timeout_ms": 2000, "request_timeout_ms": 5000, "startup_timeout_ms": 10000}
    client = dataclasses.replace(scenario.client, **short)
    # Another name and no source file: the runner writes this scenario for the fake instead of the built-in file.
    return dataclasses.replace(scenario, name=f"{name}_short", client=client, source=None)


#: flag → (scenario, the check it fails): the check is a bug its authors would accept.
CAUGHT: dict[str, tuple[str, tuple[str, str]]] = {
    "--line-cap-64k": ("large_message_1mib", ("terminal_status", "turn 1 status")),
    "--die-on-garbage": ("garbage_lines", ("terminal_status", "turn 1 status")),
    "--drop-cancel-at-started": ("cancel_at_started", ("client", "plan followed")),
    "--leak-late-deltas": ("late_events_next_turn", ("terminal_status", "turn 2 final text")),
    "--empty-result-unknown-request": ("unknown_server_request", ("schema", "client_frames_invalid")),
    "--reasoning-in-output": ("plain", ("usage", "turn 1 usage")),
    "--no-turn-timeout": ("hang_alive", ("client", "deadline")),
    "--wait-after-eof": ("stdout_closed", ("terminal_status", "turn 1 status")),
    # A live server that never answers: each hangs the client to its deadline (a must: it never ends by itself).
    "--no-request-timeout": ("unanswered_turn_start", ("client", "deadline")),
    "--unbounded-line-read": ("partial_line", ("client", "deadline")),
    "--completion-after-interrupt": ("interrupt_after_completion", ("client", "deadline")),
    "--completion-per-interrupt": ("interrupt_twice", ("client", "deadline")),
}
#: Scenarios played with a short turn timeout (the bug is waiting).
SHORT = {
    "hang_alive",
    "stdout_closed",
    "unanswered_turn_start",
    "unanswered_thread_start",
    "unanswered_interrupt",
    "partial_line",
    "interrupt_after_completion",
    "interrupt_twice",
}


def _scenario(name: str) -> str | Scenario:
    return _short_turns(name) if name in SHORT else name


def failed(run: Any) -> set[tuple[str, str]]:
    return {(c.contract, c.name) for c in run.checks if c.status == "fail"}


@pytest.mark.parametrize("flag", sorted(CAUGHT))
def test_each_bug_fails_the_must_check_that_catches_it(run_scenario: Callable[..., Any], flag: str) -> None:
    """A bug its authors would accept fails a ``must`` check: the run fails without --strict."""
    scenario, check = CAUGHT[flag]
    run = run_scenario(_scenario(scenario), client=[*BUGGY, flag])
    assert check in failed(run), [c for c in run.checks if c.status != "pass"]
    caught = next(c for c in run.checks if (c.contract, c.name) == check and c.status == "fail")
    assert caught.level == "must", caught
    assert judge(run.checks).exit_code == FAILED


@pytest.mark.parametrize("scenario", sorted({s for s, _ in CAUGHT.values()}))
def test_without_a_flag_it_passes_those_scenarios(run_scenario: Callable[..., Any], scenario: str) -> None:
    """Every check, should-level ones included: it passes under --strict."""
    run = run_scenario(_scenario(scenario), client=BUGGY)
    assert failed(run) == set(), [c for c in run.checks if c.status == "fail"]
    assert judge(run.checks, strict=True).exit_code == OK, [c for c in run.checks if c.status != "pass"]


@pytest.mark.parametrize("scenario", ["unanswered_thread_start", "unanswered_interrupt"])
def test_no_request_timeout_hangs_on_every_unanswered_request(run_scenario: Callable[..., Any], scenario: str) -> None:
    """thread/start and turn/interrupt left unanswered by a live server: without a request timeout the client
    waits to its deadline (turn/start is in CAUGHT; initialize is the same wait, before any of the plan's budgets)."""
    run = run_scenario(_scenario(scenario), client=[*BUGGY, "--no-request-timeout"])
    assert ("client", "deadline") in failed(run), [c for c in run.checks if c.status != "pass"]


@pytest.mark.parametrize("scenario", ["unanswered_thread_start", "unanswered_interrupt"])
def test_without_a_flag_it_gives_up_on_every_unanswered_request(
    run_scenario: Callable[..., Any], scenario: str
) -> None:
    run = run_scenario(_scenario(scenario), client=BUGGY)
    assert failed(run) == set(), [c for c in run.checks if c.status == "fail"]
    assert judge(run.checks, strict=True).exit_code == OK, [c for c in run.checks if c.status != "pass"]


def test_an_unknown_flag_is_refused(tmp_path: Path) -> None:
    import subprocess

    done = subprocess.run([*BUGGY, "--no-such-bug"], capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert done.returncode == 2 and "--line-cap-64k" in done.stderr
