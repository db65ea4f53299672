"""The Python builder is equivalent to the TOML format: same Scenario objects, round trips, same errors."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from contracts.scenario_file import ScenarioError
from fake_server import scenario_file
from fake_server.builder import (
    action,
    allow,
    buckets,
    client,
    command,
    config,
    expect,
    expect_turn,
    fault,
    file_change,
    message,
    reasoning,
    response,
    scenario,
    turn,
    usage,
)
from fake_server.catalogue import builtin_names, load_builtin

TOML = """
name = "approve_then_cancel"
description = "A command needing approval; the client cancels while it is pending."

[[turns]]
input = "Run echo"

[[turns.responses]]
usage = { input = 100, cached = 40, output = 20, reasoning = 5 }
items = [
  { type = "reasoning", summary = "Think.", chunks = 2 },
  { type = "command", command = "echo hi", call_id = "call_echo", approval = true },
]

[[turns.faults]]
kind = "resolved_order"
order = "before"

[client]
actions = [{ turn = 1, do = "cancel", at = "approval_pending" }]

[expect]
server_trace = "closed"

[[expect.turns]]
status = "aborted"
server_status = "interrupted"
usage = { input = 60, cache_read = 40, cache_write = 0, output = 20, reasoning = 5 }

[[expect.allow]]
contract = "protocol"
what = "unanswered_server_requests"
count = 0
"""


def built():
    return scenario(
        "approve_then_cancel",
        "A command needing approval; the client cancels while it is pending.",
        turn(
            response(
                reasoning("Think.", chunks=2),
                command("echo hi", call_id="call_echo", approval=True),
                usage=usage(100, 40, 20, 5),
            ),
            input="Run echo",
            faults=[fault("resolved_order", order="before")],
        ),
        client=client(actions=[action(1, "cancel", at="approval_pending")]),
        expect=expect(
            expect_turn("aborted", usage=buckets(60, 40, 0, 20, 5), server_status="interrupted"),
            allow=[allow("protocol", "unanswered_server_requests", 0)],
        ),
    )


def test_builder_equals_the_toml_file() -> None:
    from_file = scenario_file.loads(TOML, "x.toml")
    assert replace(from_file, source=None) == built()


def test_builder_round_trips_through_dumps_and_loads(tmp_path: Path) -> None:
    s = built()
    path = scenario_file.dump(s, tmp_path / "s.toml")
    assert replace(scenario_file.load(path), source=None) == s


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_round_trips(name: str) -> None:
    s = load_builtin(name)
    again = scenario_file.loads(scenario_file.dumps(s), "again.toml", name)
    assert replace(again, source=None) == replace(s, source=None)


def test_config_and_defaults() -> None:
    s = scenario("x", "d", turn(response(file_change("a.txt", "hi\n"))))
    assert s.config.approval_policy == "on-request"
    s = scenario("x", "d", turn(), config=config(stream_max_retries=2, approval_policy="never"))
    assert s.config.stream_max_retries == 2 and s.config.approval_policy == "never"
    assert message("hello", chunks=3).deltas == ("he", "ll", "o")


@pytest.mark.parametrize(
    ("make", "key"),
    [
        (lambda: fault("no_such_fault"), "fault.kind"),
        (lambda: fault("crash", at="nowhere"), "fault.at"),
        (lambda: fault("crash", exit_code="3"), "fault.exit_code"),
        (lambda: fault("crash", bogus=1), "fault.bogus"),
        (lambda: fault("delayed_completion"), "fault.delay_ms"),
        (lambda: usage(10, 20), "usage.cached"),
        (lambda: usage(10, 0, 1, 2), "usage.reasoning"),
        (lambda: message("abc", deltas=["a", "b"]), "message.deltas"),
        (lambda: response(end="exploded"), "response.end"),
        (lambda: action(1, "dance"), "client.actions.do"),
        (lambda: client(approval="maybe"), "client.approval"),
        (lambda: expect_turn("great"), "expect.turns.status"),
        (lambda: expect(server_trace="shiny"), "expect.server_trace"),
        (lambda: scenario("x", "d"), "turns"),
    ],
)
def test_builder_errors_name_the_key(make, key: str) -> None:
    with pytest.raises(ScenarioError) as info:
        make()
    assert info.value.key == key and "<builder>" in str(info.value)


def test_builder_checks_consistency_like_the_loader() -> None:
    with pytest.raises(ScenarioError, match=r"client\.actions"):
        scenario("x", "d", turn(), client=client(actions=[action(3, "cancel")]))
    with pytest.raises(ScenarioError, match=r"expect\.turns"):
        scenario("x", "d", turn(), expect=expect(expect_turn("completed"), expect_turn("completed")))
