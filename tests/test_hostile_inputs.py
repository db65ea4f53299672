"""Hostile input: each case gets a clear error, the documented exit code and no traceback.

Exit codes (README): 0 success, 1 the thing checked does not hold, 2 invalid input, 3 usage errors and
unreadable paths. Every case runs the real entry point (``main(argv)``) and captures what a user sees.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest


def run_cli(
    capsys: pytest.CaptureFixture[str], main: Callable[[Sequence[str]], int], argv: Sequence[str]
) -> tuple[int, str]:
    """Exit code and everything printed (stdout + stderr); SystemExit is an exit code too."""
    try:
        code = int(main(list(argv)))
    except SystemExit as exc:  # argparse
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out + err


def assert_clean(text: str) -> None:
    assert "Traceback (most recent call last)" not in text, text


# Scenario-file cases and CLI/path cases follow, each in its own section.


# --- scenario files: refused at load (exit 2), or a failing `scenario` check when only the run can tell ---

_PLAIN_TURN = '[[turns]]\ninput = "Say hello"\n'


def _hostile_cases() -> list[tuple[str, str, str]]:
    """(id, scenario TOML, what the message must say). Every case is refused at load with exit 2."""
    deep_array = "x = " + "[" * 500 + "]" * 500 + "\n"
    deep_table = "[expect.notes." + ".".join(["a"] * 500) + "]\nv = 1\n"
    between = "expected an integer between"

    def fault(body: str, turn: str = _PLAIN_TURN) -> str:
        return f"{turn}[[turns.faults]]\n{body}\n"

    def expect(body: str) -> str:
        return f"{_PLAIN_TURN}[expect]\n{body}\n"

    def items(body: str, extra: str = "") -> str:
        return f"[[turns]]\n[[turns.responses]]\nitems = [{body}]\n{extra}"

    two_calls = '{ type = "command", command = "a", call_id = "c" }, { type = "command", command = "b", call_id = "c" }'
    cancel_at_99 = '[client]\nactions = [{ turn = 1, do = "cancel", at = "delta", n = 99 }]\n'
    completed = '[[expect.turns]]\nstatus = "completed"\n'
    return [
        # issue 12 section 4
        ("name-traversal", f'name = "../../x"\n{_PLAIN_TURN}', "name: expected a safe name"),
        ("name-absolute", f'name = "/tmp/x"\n{_PLAIN_TURN}', "name: expected a safe name"),
        ("nested-arrays-500", deep_array + _PLAIN_TURN, "nested at most 32 deep"),
        ("crash-exit-256", fault('kind = "crash"\nexit_code = 256'), f"exit_code: {between} 0 and 255"),
        ("garbage-count-1e9", fault('kind = "garbage_lines"\ncount = 1000000000'), f"count: {between} 1 and 10000"),
        ("garbage-count-float", fault('kind = "garbage_lines"\ncount = 1e9'), f"count: {between} 1 and 10000"),
        ("oversized-1e12", fault('kind = "oversized_line"\nsize = 1000000000000'), f"size: {between} 64"),
        ("negative-delay", fault('kind = "delayed_completion"\ndelay_ms = -5'), f"delay_ms: {between} 0"),
        ("point-never-comes", fault('kind = "crash"\nat = "delta"\nn = 99'), "n: expected at most 2"),
        ("server-status-banana", expect(completed + 'server_status = "banana"'), "server_status: expected one of"),
        ("completed-with-exit-3", expect("server_exit = 3\n" + completed), "server_exit: expected an exit status"),
        ("reasoning-over-output", expect(completed + "usage = { output = 2, reasoning = 5 }"), "reasoning <= output"),
        # found beyond the list
        ("name-from-file-stem", _PLAIN_TURN, "name: expected a safe name"),
        ("nested-tables-500", deep_table + _PLAIN_TURN, "nested at most 32 deep"),
        ("fault-where-it-does-nothing", fault('kind = "interrupt_ignored"\nat = "start"'), "has an effect: interrupt"),
        ("session-point-in-turn-2", _PLAIN_TURN + fault('kind = "overload"\nat = "initialize"'), "first turn's faults"),
        ("once-per-turn-point-n-2", fault('kind = "hang"\nat = "end"\nn = 2'), "comes once per turn"),
        ("resolved-order-unknown", fault('kind = "resolved_order"\norder = "up"'), "one of before, after, never"),
        ("oversized-below-64", fault('kind = "oversized_line"\nsize = 10'), f"size: {between} 64"),
        ("unknown-fault-parameter", fault('kind = "crash"\nexitcode = 3'), "a parameter of fault crash"),
        ("fake-only-on-real-only", 'targets = ["real"]\n' + fault('kind = "hang"'), "targets: expected fake or"),
        ("duplicate-call-id", items(two_calls), "unique within a turn"),
        ("action-never-fires", _PLAIN_TURN + cancel_at_99, "this action would never fire"),
        ("item-delay-huge", items('{ type = "message", text = "hi", delay_ms = 10000000000 }'), f"delay_ms: {between}"),
        ("http-status-99", items("", 'end = "http_error"\nhttp_status = 99\n'), f"http_status: {between} 100 and 599"),
        ("retries-1000", f"[config]\nstream_max_retries = 1000\n{_PLAIN_TURN}", f"stream_max_retries: {between}"),
        ("usage-tokens-1e13", items("", "usage = { input = 10000000000000 }\n"), f"input: {between} 0 and"),
        ("allow-count-negative", expect('[[expect.allow]]\ncontract = "a"\nwhat = "b"\ncount = -1'), "integer >= 0"),
        ("completed-but-interrupted", expect(completed + 'server_status = "interrupted"'), "a completed Result is"),
        ("deltas-200000", items('{ type = "message", text = "", deltas = [' + '"",' * 200_000 + "] }"), "at most 100"),
        ("client-timeout-huge", f"{_PLAIN_TURN}[client]\nturn_timeout_ms = 99999999999\n", "turn_timeout_ms: expected"),
    ]


@pytest.mark.parametrize(("text", "needle", "stem"), [
    pytest.param(text, needle, "my scenario" if case == "name-from-file-stem" else "case", id=case)
    for case, text, needle in _hostile_cases()
])
def test_hostile_scenario_refused_at_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, needle: str, stem: str
) -> None:
    from fake_server.cli import main as fake_main
    from harness.cli import main as harness_main

    path = tmp_path / f"{stem}.toml"
    path.write_text('description = "hostile"\n' + text, encoding="utf-8")
    report = tmp_path / "report"
    for main, argv in (
        (harness_main, ["run", "--quiet", "--scenario", str(path), "--report", str(report)]),
        (fake_main, ["app-server", "--scenario", str(path)]),
    ):
        code, out = run_cli(capsys, main, argv)
        assert code == 2, out
        assert needle in out, out
        assert str(path) in out, out  # the message names the file
        assert_clean(out)
    assert not report.exists()  # refused before anything is written
    assert not (tmp_path.parent / "x").exists()


def test_two_scenarios_with_one_name_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main as harness_main

    first, second = tmp_path / "a.toml", tmp_path / "b.toml"
    for path in (first, second):
        path.write_text(f'name = "same"\ndescription = "twins"\n{_PLAIN_TURN}', encoding="utf-8")
    code, out = run_cli(capsys, harness_main, ["run", "--quiet", "--scenario", str(first), "--scenario", str(second)])
    assert code == 2, out
    assert "a name no other scenario of the run has" in out and str(first) in out and str(second) in out
    assert_clean(out)
    code, out = run_cli(capsys, harness_main, ["run", "--quiet", "--scenario", "plain", "--scenario", "plain"])
    assert code == 2 and "a name no other scenario of the run has" in out
    assert_clean(out)


_NOT_STRUCK = """name = "not_struck"
description = "crash after the first delta; the garbage lines at delta 2 never come"

[[turns]]
[[turns.faults]]
kind = "crash"
at = "delta"
exit_code = 3

[[turns.faults]]
kind = "garbage_lines"
at = "delta"
n = 2

[expect]
server_exit = 3
server_trace = "unclosed"

[[expect.turns]]
status = "failed"
server_status = "none"
"""


@pytest.mark.parametrize("target", ["fake", "fake-process"])
def test_fault_never_reached_fails_the_scenario_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    """Only the run can tell that an earlier crash cut the point off: a failing `scenario` check, the
    client's contracts all hold."""
    import json

    from harness.cli import main as harness_main

    path = tmp_path / "not_struck.toml"
    path.write_text(_NOT_STRUCK, encoding="utf-8")
    report = tmp_path / "report"
    argv = ["run", "--quiet", "--ascii", "--target", target, "--scenario", str(path), "--report", str(report)]
    code, out = run_cli(capsys, harness_main, argv)
    assert code == 1, out
    assert "scenario / fault_not_struck" in out and "garbage_lines at delta n=2" in out, out
    assert_clean(out)
    checks = json.loads((report / "checks.json").read_text())
    rows = checks if isinstance(checks, list) else checks["checks"]
    failed = [(c["contract"], c["name"]) for c in rows if c["status"] == "fail"]
    assert failed == [("scenario", "fault_not_struck")]  # never blamed on the client


def test_python_built_scenario_with_unsafe_name_writes_nothing_outside_report(tmp_path: Path) -> None:
    from contracts.scenario import Scenario, TurnScript
    from harness.runner import run_many

    root = tmp_path
    report = root / "deep" / "report"
    runs = run_many([Scenario("../../escaped", "built past the loader", (TurnScript(),))], ["fake"], report_dir=report)
    assert [(c.contract, c.name, c.status) for c in runs[0].checks] == [("scenario", "name", "fail")]
    assert not (root / "escaped").exists() and not (root / "deep" / "escaped").exists()
