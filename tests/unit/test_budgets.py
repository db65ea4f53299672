"""Budgets a client declares (``run --budget KEY=MS``, ``--budgets FILE``): it is judged against what it promises.

A client that waits ten minutes for a silent server by design is not failed at the five seconds a scenario's plan
allows itself: the plan, the checks and the run's deadline follow what it declares. Bad input exits 3 with one
line, before anything runs, and nothing hangs on a FIFO.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.careful_wrap import careful_on_rewritten_plan

from contracts.checks import client_run
from contracts.exitcodes import OK, USAGE, UsageError
from contracts.expect import Expect
from contracts.record import Budgets, SessionRecord, WireEntry
from contracts.report import judge
from contracts.scenario import Scenario
from fake_server.catalogue import load_builtin
from harness import budgets
from harness.cli import main
from harness.outside.runner import deadline_for

# --- what can be declared, and what is refused ---------------------------------------------------------------


def test_flags_and_a_file_declare_budgets_and_a_flag_wins(tmp_path: Path) -> None:
    file = tmp_path / "budgets.toml"
    file.write_text("turn = 600000\nteardown_ms = 2000\n")
    got = budgets.declared(["teardown=2500", "request_timeout_ms=45000"], file)
    assert got == {"turn_timeout_ms": 600000, "teardown_ms": 2500, "request_timeout_ms": 45000}
    assert budgets.describe(got) == "turn_timeout_ms=600000, request_timeout_ms=45000, teardown_ms=2500"


@pytest.mark.parametrize(
    ("flag", "words"),
    [
        ("turn=abc", "integer of milliseconds"),
        ("turn=1.5", "integer of milliseconds"),
        ("turn=-5", "positive"),
        ("turn=0", "positive"),
        ("nope=5", "unknown budget 'nope'; known: turn_timeout_ms (turn)"),
        ("turn", "expected KEY=MS"),
        ("turn=900001", "over the cap of 900000 ms (15 min)"),
        ("interrupt=99999999999999999999", "integer of milliseconds"),
        ("turn=\u0661\u0662\u0663", "integer of milliseconds"),  # Arabic-Indic digits: int() reads 123
        ("turn=\uff11\uff12\uff13", "integer of milliseconds"),  # fullwidth digits
        ("turn=1_000", "integer of milliseconds"),
    ],
)
def test_a_bad_budget_flag_exits_3_with_one_line(flag: str, words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--quiet", "--scenario", "plain", "--budget", flag]) == USAGE
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def _fifo(tmp_path: Path) -> Path:
    os.mkfifo(tmp_path / "fifo.toml")
    return tmp_path / "fifo.toml"


def _link(tmp_path: Path) -> Path:
    (tmp_path / "real.toml").write_text("turn = 1000\n")
    (tmp_path / "link.toml").symlink_to(tmp_path / "real.toml")
    return tmp_path / "link.toml"


def _huge(tmp_path: Path) -> Path:
    (tmp_path / "huge.toml").write_bytes(b"#" * (budgets.MAX_FILE_BYTES + 1))
    return tmp_path / "huge.toml"


def _text(text: str) -> Callable[[Path], Path]:
    def write(tmp_path: Path) -> Path:
        (tmp_path / "b.toml").write_text(text)
        return tmp_path / "b.toml"

    return write


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (_fifo, "FIFO"),
        (_link, "symbolic link (not followed)"),
        (_huge, "larger than 65536 bytes"),
        (_text("turn = 1000\nbogus = 1\n"), "unknown budget 'bogus'"),
        (_text('turn = "600000"\n'), "integer of milliseconds"),
        (_text("turn = -1\n"), "positive"),
        (_text("turn = 1000\nturn_timeout_ms = 2000\n"), "given twice"),
        (_text("turn = [\n"), "not TOML"),
        (_text("[budgets]\nturn = 1\n"), "unknown budget 'budgets'"),
        (lambda tmp_path: tmp_path / "missing.toml", "no such file"),
    ],
)
def test_a_bad_budgets_file_exits_3_and_nothing_hangs(
    make: Callable[[Path], Path], words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make(tmp_path)
    assert main(["run", "--quiet", "--scenario", "plain", "--budgets", str(path)]) == USAGE
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err, err


def test_a_run_over_an_hour_under_the_declared_budgets_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    """http_errors has five turns: five 15-minute turns (and their interrupts) are over the 60-minute cap."""
    assert main(["run", "--quiet", "--scenario", "http_errors", "--budget", "turn=900000"]) == USAGE
    err = capsys.readouterr().err
    assert "'http_errors' would run up to" in err and "over the cap of 3600 s (60 min)" in err, err
    assert main(["run", "--quiet", "--scenario", "plain", "--client-deadline", "3601", "--client-cmd", "true"]) == USAGE


# --- what a declaration changes ---------------------------------------------------------------------------------


def test_declared_budgets_replace_the_scenarios_and_the_deadline_follows() -> None:
    scenario = load_builtin("hang_alive")  # [client] turn_timeout_ms = 5000
    assert budgets.with_budgets(scenario, {"turn_timeout_ms": 5000}) is scenario  # nothing changed
    ten = budgets.with_budgets(scenario, {"turn_timeout_ms": 600_000})
    assert ten.client.turn_timeout_ms == 600_000 and ten.source is None  # played from a file written for it
    assert (ten.client.interrupt_budget_ms, ten.client.teardown_ms) == (2000, 3000)  # the rest stay the scenario's
    # start-up 30 s + the turn (turn 5 s, interrupt 2 s, one request 30 s) + teardown 3 s + 10 s
    assert deadline_for(scenario, None) == 30 + (5 + 2 + 30) + 3 + 10
    assert deadline_for(ten, None) == 30 + (600 + 2 + 30) + 3 + 10
    declared = {"request_timeout_ms": 1000, "startup_timeout_ms": 4000}  # startup: a budget a client declares too
    two = budgets.with_budgets(load_builtin("plain_two_turns"), declared)
    assert deadline_for(two, None) == 4 + 2 * (60 + 2 + 1) + 3 + 10
    assert budgets.plan_budgets(ten.client)["turn_timeout_ms"] == 600_000


def test_our_client_declaring_a_10_minute_turn_waits_it_out_on_virtual_time(tmp_path: Path) -> None:
    """hang_alive goes silent for good: with a declared 10-minute turn budget our client gives up at 600 s of
    virtual time, and nothing fails, even under --strict (the run limit follows the budget)."""
    report = tmp_path / "r"
    code = main(
        ["run", "--quiet", "--strict", "--scenario", "hang_alive", "--budget", "turn=600000", "--report", str(report)]
    )
    assert code == OK
    record = orjson.loads((report / "sessions" / "fake" / "hang_alive" / "record.json").read_bytes())
    assert [(r["status"], r["error"]) for r in record["results"]] == [("timeout", "timed out after 600s")]
    assert record["meta"]["budgets"]["turn_timeout_ms"] == 600_000  # saved with the record
    assert "turn_timeout_ms=600000" in (report / "index.html").read_text()


def _waited(turn_ms: int, gave_up_at: float) -> SessionRecord:
    """An outside client's record: the server went silent after its first delta at 0.3 s; the client closed its
    stdin at ``gave_up_at`` s, with ``turn_ms`` as the turn budget it ran with."""
    turn_start = {"id": 3, "method": "turn/start", "params": {"threadId": "t", "input": []}}
    answer = {"id": 3, "result": {"turn": {"id": "turn-1", "status": "inProgress"}}}
    delta = {"method": "item/agentMessage/delta", "params": {"turnId": "turn-1", "delta": "Hel"}}
    wire = [
        WireEntry(0.1, "c2s", frame=turn_start),
        WireEntry(0.2, "s2c", frame=answer),
        WireEntry(0.3, "s2c", frame=delta),
        WireEntry(gave_up_at, "note", note="stdin closed"),
    ]
    server = {"n": 1, "pid": 10, "end": {"reason": "stdin_closed", "t": gave_up_at}, "killed_by_harness": False}
    facts = {"server": server, "servers": [server], "result": {"state": "absent"}, "deadline_s": None}
    facts["budgets"] = {"turn_timeout_ms": turn_ms, "interrupt_budget_ms": 2000, "teardown_ms": 3000}
    return SessionRecord("hang", "fake-process", Expect(), wire=wire, budgets=Budgets(), meta={"outside": facts})


def test_one_bounded_cleanup_request_on_a_hung_server_is_within_the_budgets() -> None:
    """After its 5 s turn timeout (the server silent since 0.3 s) the client interrupts, then sends one cleanup
    request and waits its 30 s request timeout on it before it ends the server: no budget broken. Without the
    request, the same wait is over the budgets (a should)."""
    record = _waited(5_000, 5.3 + 2.0 + 30.0 + 1.0)
    cleanup = {"id": 9, "method": "thread/unsubscribe", "params": {"threadId": "t"}}
    record.wire.insert(3, WireEntry(7.3, "c2s", frame=cleanup))
    ended = next(c for c in client_run.check(record) if c.name == "server ended")
    assert ended.status == "pass" and "then a thread/unsubscribe request" in ended.detail, ended
    silent = next(c for c in client_run.check(_waited(5_000, 5.3 + 2.0 + 30.0 + 1.0)) if c.name == "server ended")
    assert silent.status == "fail" and silent.level == "should", silent


def test_an_outside_client_that_waits_10_minutes_by_design_passes_when_it_declares_it() -> None:
    """Judged on the record (no ten real minutes): giving up 600 s after the server's last frame keeps a declared
    10-minute turn budget, and breaks the 5-second one a scenario's plan allows itself (a should: it ended)."""
    ended = next(c for c in client_run.check(_waited(600_000, 600.4)) if c.name == "server ended")
    assert ended.status == "pass" and "the server's last frame + turn_timeout 600 s" in ended.detail, ended
    late = next(c for c in client_run.check(_waited(5_000, 600.4)) if c.name == "server ended")
    assert (late.status, late.level) == ("fail", "should") and late.detail.startswith("ended late"), late
    assert judge([late]).exit_code == OK  # over a budget but ended: a warning unless --strict


#: careful.py waiting 3 s on a turn by design, whatever the plan says (a client with its own patience).
_PATIENT = careful_on_rewritten_plan("plan['budgets']['turn_timeout_ms'] = 3000")


def _short_silence() -> Scenario:
    """hang_alive with a plan allowing 1 s a turn, 0.3 s an interrupt and 0.5 s of teardown."""
    scenario = load_builtin("hang_alive")
    client = dataclasses.replace(scenario.client, turn_timeout_ms=1000, interrupt_budget_ms=300, teardown_ms=500)
    return dataclasses.replace(scenario, name="hang_alive_short", client=client, source=None)


def test_a_client_waiting_longer_than_the_plan_by_design_passes_with_its_declared_budget(
    run_scenario: Callable[..., Any], tmp_path: Path
) -> None:
    """Real processes, kept short: the server is silent past the plan's 1 s but the client waits 3 s, as it
    promises. Undeclared, it ended late (a should, failed under --strict); declared, nothing fails."""
    script = tmp_path / "patient.py"
    script.write_text(_PATIENT)
    client = [sys.executable, str(script)]
    undeclared = run_scenario(_short_silence(), client=client)
    late = [c for c in undeclared.checks if c.status == "fail"]
    assert [(c.contract, c.name, c.level) for c in late] == [("client", "server ended", "should")], late
    declared = run_scenario(_short_silence(), client=client, budgets={"turn_timeout_ms": 3000})
    assert [c for c in declared.checks if c.status == "fail"] == []
    assert judge(declared.checks, strict=True).exit_code == OK
    facts = declared.record.meta["outside"]
    assert facts["declared_budgets"] == {"turn_timeout_ms": 3000} and facts["budgets"]["turn_timeout_ms"] == 3000
    plan = orjson.loads((declared.saved_to / "plan.json").read_bytes())
    assert plan["budgets"]["turn_timeout_ms"] == 3000  # the plan an adapter reads says what it is judged by


def test_the_terminal_and_report_say_which_budgets_were_declared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "r"
    assert main(["run", "--quiet", "--scenario", "plain", "--budget", "teardown=2500", "--report", str(report)]) == OK
    out = capsys.readouterr()
    assert "budgets declared: teardown_ms=2500" in out.err
    assert "Budgets the client declared (every scenario judged with them): teardown_ms=2500" in out.out
    record = orjson.loads((report / "sessions" / "fake" / "plain" / "record.json").read_bytes())
    assert record["budgets"]["teardown_s"] == 2.5


def test_parse_flag_names_the_budget_it_refuses() -> None:
    with pytest.raises(UsageError, match="request_timeout_ms must be a positive"):
        budgets.parse_flag("request=0")
