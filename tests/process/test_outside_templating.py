"""Clients that drive the protocol their own way, judged end to end (careful.py behind a small wrapper).

A client that templates its prompt (role tags, a system preamble, a transcript of the earlier turns) follows the
plan: the plan's text is in every turn's input. One that sends the wrong text fails, and the failure quotes the
input of the turn that carried it. Before, ``client / plan followed`` required the plan's input verbatim and
matched turns by text, so the templating client failed every scenario it played.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.careful_wrap import careful_on_rewritten_plan

#: A system preamble, role tags and the transcript of the earlier turns around each turn's text.
_TEMPLATING = (
    "for k, turn in enumerate(plan['turns']):\n"
    "    earlier = ''.join(f'[USER]\\n{t}\\n[ASSISTANT]\\n...\\n' for t in texts[:k])\n"
    "    turn['input'] = f'[SYSTEM]\\nYou are terse.\\n{earlier}[USER]\\n{texts[k]}'"
)
#: Turn 2 sends turn 1's text again.
_REPEATING = "plan['turns'][1]['input'] = texts[0]"


def _client(tmp_path: Path, rewrite: str) -> list[str]:
    script = tmp_path / "wrapped.py"
    script.write_text(careful_on_rewritten_plan(rewrite))
    return [sys.executable, str(script)]


def _plan_followed(run: Any) -> Any:
    return next(c for c in run.checks if (c.contract, c.name) == ("client", "plan followed"))


def test_a_client_that_templates_its_prompt_follows_the_plan(run_scenario: Callable[..., Any], tmp_path: Path) -> None:
    run = run_scenario("plain_two_turns", client=_client(tmp_path, _TEMPLATING))
    check = _plan_followed(run)
    assert check.status == "pass" and "2 turn(s) started" in check.detail, check
    assert [c for c in run.checks if c.status == "fail"] == []


def test_a_client_that_repeats_turn_1_fails_quoting_turn_2s_own_input(
    run_scenario: Callable[..., Any], tmp_path: Path
) -> None:
    run = run_scenario("plain_two_turns", client=_client(tmp_path, _REPEATING))
    check = _plan_followed(run)
    first = run.record.meta["outside"]["plan_turns"][0]["input"]
    assert check.status == "fail", check
    assert f"turn 2's turn/start did not carry its input: it had input {first[:60]!r}" in check.detail, check
    assert "turn 1" not in check.detail, check  # turn 1 carried its input: it is not the one blamed


#: careful.py that, once a turn timed out, sends one cleanup request and waits its request timeout on it.
_CLEANUP = (
    "run_turn = careful.Client.run_turn\n"
    "def with_cleanup(self, number, spec):\n"
    "    result = run_turn(self, number, spec)\n"
    "    if result['status'] == 'timeout':\n"
    "        self.call('thread/unsubscribe', {'threadId': self.thread_id})\n"
    "    return result\n"
    "careful.Client.run_turn = with_cleanup\n"
)


def test_one_bounded_cleanup_request_on_a_hung_server_is_within_the_run_deadline(
    run_scenario: Callable[..., Any], tmp_path: Path
) -> None:
    """hang_alive with a 1 s turn and a 12 s request budget: after its turn timeout the client waits 12 s on a
    cleanup request the hung server never answers, then ends it. The run deadline counts that request (before, it
    was turn + interrupt + teardown + 10 s = 11.8 s: killed as "still running at its deadline", a must), and so
    does ``server ended``."""
    import dataclasses

    from fake_server.catalogue import load_builtin

    scenario = load_builtin("hang_alive")
    short = {"turn_timeout_ms": 1000, "interrupt_budget_ms": 300, "teardown_ms": 500, "request_timeout_ms": 12000}
    client = dataclasses.replace(scenario.client, **short, startup_timeout_ms=5000)
    scenario = dataclasses.replace(scenario, name="hang_alive_cleanup", client=client, source=None)
    script = tmp_path / "cleanup.py"
    script.write_text(careful_on_rewritten_plan("", after_import=_CLEANUP))
    run = run_scenario(scenario, client=[sys.executable, str(script)])
    failed = [(c.contract, c.name) for c in run.checks if c.status == "fail"]
    assert failed == [], [c for c in run.checks if c.status == "fail"]
    ended = next(c for c in run.checks if (c.contract, c.name) == ("client", "server ended"))
    assert "then a thread/unsubscribe request (request timeout 12 s)" in ended.detail, ended
