"""An outside client reports one part of a turn's plan ``unsupported`` (an action it cannot send, a decision it
cannot give): that part is not judged, and everything else of the run is (docs/clients.md, The result file)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from support import paths

from fake_server.catalogue import load_builtin
from harness.outside.plan import adapter_plan
from harness.outside.result import read_result, turn_results

CLIENTS = paths.REPO / "conformance" / "clients"


def _careful_with(tmp_path: Path, patch: str) -> list[str]:
    """careful.py with ``patch`` applied: a client that cannot do one thing, and says so in its result file."""
    path = tmp_path / "client.py"
    body = f"import sys\nsys.path.insert(0, {str(CLIENTS)!r})\nimport careful\n_run = careful.Client.run_turn\n"
    path.write_text(body + patch + "careful.Client.run_turn = run_turn\nsys.exit(careful.main())\n")
    return [sys.executable, str(path)]


#: A client that cannot cancel a turn: it leaves the plan's cancels out and reports each one unsupported.
CANNOT_CANCEL = """
def run_turn(self, number, spec):
    cancels = [k for k, a in enumerate(spec['actions'], 1) if a['do'] == 'cancel']
    out = _run(self, number, dict(spec, actions=[a for a in spec['actions'] if a['do'] != 'cancel']))
    if cancels:
        out['unsupported'] = [{'action': k, 'why': 'this client cannot cancel a turn'} for k in cancels]
    return out
"""
#: A client that accepts every approval: the plan's other decisions, read from the plan turn's ``approvals``
#: (no tapping of the client), are reported unsupported.
ACCEPTS_ONLY = """
careful.Client.decision = lambda self: 'accept'
def run_turn(self, number, spec):
    out = _run(self, number, spec)
    cannot = [k for k, d in enumerate(spec['approvals'], 1) if d not in (None, 'accept')]
    if cannot:
        out['unsupported'] = [{'approval': k, 'why': 'this client accepts every approval'} for k in cannot]
    return out
"""


def _fails(run: Any) -> list[Any]:
    return [c for c in run.checks if c.status == "fail"]


@pytest.mark.parametrize(
    ("scenario", "patch", "excused"),
    [
        ("interrupt_pending_approval", CANNOT_CANCEL, "turn 1 action 1"),
        ("approval_decline", ACCEPTS_ONLY, "approval 1"),
    ],
)
def test_one_unsupported_part_leaves_the_rest_judged(
    run_scenario: Callable[..., Any], tmp_path: Path, scenario: str, patch: str, excused: str
) -> None:
    run = run_scenario(scenario, client=_careful_with(tmp_path, patch))
    assert _fails(run) == [], _fails(run)  # today: result file invalid ("unsupported" is no key of a turn)
    by = {(c.contract, c.name): c for c in run.checks}
    plan = by[("client", "plan followed")]
    assert plan.status == "pass" and excused in plan.detail, plan.detail
    # Judged, not turned into skips: the status (against what the server did), the usage, the wire, the teardown.
    status = by[("terminal_status", "turn 1 status")]
    assert status.status == "pass" and "reported unsupported" in status.detail, status.detail
    for key in [("usage", "turn 1 usage"), ("client", "server ended"), ("client", "result file")]:
        assert by[key].status == "pass", by[key]
    assert any(c.contract in ("schema", "protocol") and c.status == "pass" for c in run.checks)


def test_a_status_the_server_did_not_give_still_fails_with_a_part_unsupported(
    run_scenario: Callable[..., Any], tmp_path: Path
) -> None:
    """The turn the client could not cancel completed on the server: reporting it aborted is still wrong."""
    lie = CANNOT_CANCEL.replace("    return out\n", "    out['status'] = 'aborted'\n    return out\n")
    run = run_scenario("interrupt_pending_approval", client=_careful_with(tmp_path, lie))
    assert ("client", "reported statuses agree with the wire") in {(c.contract, c.name) for c in _fails(run)}


def test_the_plan_says_the_decision_for_each_approval_a_turn_asks() -> None:
    turns = {
        n: adapter_plan(load_builtin(n))["turns"] for n in ("two_approvals", "plain", "interrupt_pending_approval")
    }
    assert turns["two_approvals"][0]["approvals"] == ["accept", "decline"]
    assert turns["plain"][0]["approvals"] == []
    assert turns["interrupt_pending_approval"][0]["approvals"] == [None]  # the user cancels while it is pending
    experimental = adapter_plan(load_builtin("experimental_unread"))["turns"]
    assert [len(t["approvals"]) for t in experimental] == [0, 0, 1, 0]


def _read(tmp_path: Path, data: dict[str, Any]) -> Any:
    path = tmp_path / "result.json"
    path.write_bytes(orjson.dumps(data))
    return read_result(path)


def test_the_result_file_carries_unsupported_parts_and_a_usage_style(tmp_path: Path) -> None:
    turn = {"turn": 1, "status": "completed", "unsupported": [{"action": 2, "why": "no steer"}, {"approval": 1}]}
    read = _read(tmp_path, {"turns": [turn], "usage_style": {"input": "with_cache", "scope": "last_request"}})
    assert read.state == "valid", read.problems
    (result,) = turn_results(read)
    assert result.unsupported == ["action 2: no steer", "approval 1"]
    assert result.usage_style == {"input": "with_cache", "scope": "last_request"}
    for bad in ({}, {"why": "x"}, {"action": 1, "approval": 1}, {"action": 0}, {"step": 1}):
        turn = {"turn": 1, "status": "completed", "unsupported": [bad]}
        assert _read(tmp_path, {"turns": [turn]}).state == "invalid", bad
    assert _read(tmp_path, {"turns": [], "usage_style": {"input": "raw"}}).state == "invalid"
    # A bucket the client does not expose is null (input and output are always known).
    usage = {"input": 230, "cache_read": 100, "cache_write": None, "output": 50, "reasoning": None}
    (result,) = turn_results(_read(tmp_path, {"turns": [{"turn": 1, "status": "completed", "usage": usage}]}))
    assert result.usage_unexposed == ["cache_write", "reasoning"] and result.total_usage().input == 230
    usage = {**usage, "input": None}
    assert _read(tmp_path, {"turns": [{"turn": 1, "status": "completed", "usage": usage}]}).state == "invalid"


#: An OpenAI-style client: input counts the cached tokens, and its usage is the turn's last model request only
#: (the `last` of the final update), declared in the result file.
LAST_REQUEST = """
run_turn = _run
_dump = careful.json.dump
def dump(obj, fh, **kw):
    if isinstance(obj, dict) and 'turns' in obj:
        obj = dict(obj, usage_style={'input': 'with_cache', 'scope': 'last_request'})
    return _dump(obj, fh, **kw)
careful.json.dump = dump
def buckets(updates, before=None):
    last = (updates[-1].get('last') or {}) if updates else {}
    names = {'input': 'inputTokens', 'cache_read': 'cachedInputTokens', 'cache_write': 'cacheWriteInputTokens',
             'output': 'outputTokens', 'reasoning': 'reasoningOutputTokens'}
    return {k: int(last.get(v) or 0) for k, v in names.items()}
careful.buckets = buckets
"""


@pytest.mark.parametrize(("scenario", "verdict"), [("plain", "pass"), ("command_approval", "fail")])
def test_a_declared_last_request_style_passes_one_request_and_fails_several(
    run_scenario: Callable[..., Any], tmp_path: Path, scenario: str, verdict: str
) -> None:
    run = run_scenario(scenario, client=_careful_with(tmp_path, LAST_REQUEST))
    usage = next(c for c in run.checks if (c.contract, c.name) == ("usage", "turn 1 usage"))
    assert usage.status == verdict, usage.detail
    if verdict == "fail":  # the bug it is, named as such: the tool turn made two model requests
        assert "last model request only" in usage.detail and "made 2" in usage.detail, usage.detail
    assert [c for c in _fails(run) if c is not usage] == []
