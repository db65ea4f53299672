"""``run --client-cmd``: outside clients judged from what the fake saw (acceptance of the outside-client work).

Two tiny standard-library clients of our own (conformance/clients/careful.py and careless.py) must get
different verdicts naming the cause, and nothing a ``--client-cmd`` run starts may outlive it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import escaper
import orjson
import pytest
from support import paths

from codex_sandbox import proctree
from codex_sandbox.proctree import procfs as procs
from contracts.exitcodes import FAILED, OK, USAGE
from fake_server.catalogue import builtin_names
from harness.cli import main

CLIENTS = paths.REPO / "conformance" / "clients"
CAREFUL = [sys.executable, str(CLIENTS / "careful.py")]
CARELESS = [sys.executable, str(CLIENTS / "careless.py")]
#: What the careless client gets wrong, and nothing else, on a scenario with an approval.
CARELESS_FAILS = {
    ("protocol", "server requests answered"),
    ("client", "server ended"),
    ("client", "nothing left running"),
}


def failed(run: Any) -> set[tuple[str, str]]:
    return {(c.contract, c.name) for c in run.checks if c.status == "fail"}


def client_script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "client.py"
    path.write_text("import json, os, subprocess, sys, time\n" + body)
    return [sys.executable, str(path)]


@pytest.mark.parametrize("scenario", ["command_approval", "two_approvals"])
def test_careless_client_fails_exactly_its_faults(run_scenario: Callable[..., Any], scenario: str) -> None:
    run = run_scenario(scenario, client=CARELESS)
    assert failed(run) == CARELESS_FAILS, [c for c in run.checks if c.status == "fail"]
    facts = run.record.meta["outside"]
    assert any("sleep 60" in k for k in facts["killed"])  # the helper, named
    assert any("fake-codex" in k for k in facts["killed"])  # the server it never ended
    skipped = {(c.contract, c.name) for c in run.checks if c.status == "skip"}
    assert ("client", "result file") in skipped  # no result file: not judged, never passed
    assert all(c.status == "skip" for c in run.checks if c.contract in ("terminal_status", "usage"))


@pytest.mark.parametrize("scenario", ["command_approval", "two_approvals", "hang_alive", "plain_two_turns"])
def test_careful_client_passes_every_check(run_scenario: Callable[..., Any], scenario: str) -> None:
    run = run_scenario(scenario, client=CAREFUL)
    assert failed(run) == set(), [c for c in run.checks if c.status == "fail"]
    names = {(c.contract, c.name, c.status) for c in run.checks}
    assert ("client", "result file", "pass") in names
    assert ("client", "server ended", "pass") in names
    assert ("client", "nothing left running", "pass") in names
    assert any(c.contract == "terminal_status" and c.status == "pass" for c in run.checks)


def test_careful_client_interrupts_where_the_plan_cancels(run_scenario: Callable[..., Any]) -> None:
    run = run_scenario("interrupt_pending_approval", client=CAREFUL)
    assert failed(run) == set(), [c for c in run.checks if c.status == "fail"]
    assert any(c.name == "interrupt -> turn/completed" and c.status == "pass" for c in run.checks)
    plan = next(c for c in run.checks if c.name == "plan followed")
    assert plan.status == "pass" and "1 action(s) sent at their trigger (turn 1 cancel)" in plan.detail, plan


def test_the_record_keeps_the_clients_output_and_the_recording(
    run_scenario: Callable[..., Any], tmp_path: Path
) -> None:
    run = run_scenario("plain", client=client_script(tmp_path, "print('hi'); sys.exit(0)"))
    assert run.saved_to is not None
    assert (run.saved_to / "client-stdout.txt").read_text().strip() == "hi"
    # A client that never starts a server fails that check.
    assert ("client", "server started") in failed(run)


def test_the_clients_output_is_kept_up_to_a_mebibyte(run_scenario: Callable[..., Any], tmp_path: Path) -> None:
    """A test runner's 300 KiB of output is kept whole (16 KiB were, and the run's first lines were lost)."""
    body = "print('FIRST LINE'); [print(f'{i:07d}' + 'y' * 92) for i in range(3000)]\n"
    body += "print('SUMMARY: 3 passed'); sys.exit(0)\n"
    run = run_scenario("plain", client=client_script(tmp_path, body))
    assert run.saved_to is not None
    text = (run.saved_to / "client-stdout.txt").read_text()
    assert text.startswith("FIRST LINE\n") and text.rstrip().endswith("SUMMARY: 3 passed"), text[:200]
    assert len(text) > 300_000


def test_the_clients_output_tail_is_bounded_and_says_what_it_cut() -> None:
    from harness.outside.runner import TAIL_BYTES, _Tail

    tail = _Tail()
    for i in range(48):  # 3 MiB in 64 KiB reads
        tail.add(bytes([ord("a") + i % 26]) * 65536)
    assert tail.size <= TAIL_BYTES + 65536
    text = tail.text()
    head, _, kept = text.partition("\n")
    assert head == f"[codex-harness: {48 * 65536 - TAIL_BYTES} earlier bytes not kept; the last {TAIL_BYTES} follow]"
    assert len(kept) == TAIL_BYTES and kept.endswith("v" * 65536)


def test_a_process_the_caller_already_had_is_never_swept(run_scenario: Callable[..., Any]) -> None:
    """Kill only what the run started: a child the caller started before the client survives its sweep."""
    import subprocess

    mine = subprocess.Popen(["sleep", "61"], stdin=subprocess.DEVNULL)
    try:
        run = run_scenario("command_approval", client=CARELESS)
        facts = run.record.meta["outside"]
        assert any("sleep 60" in k for k in facts["killed"])  # the careless client's own helper, killed
        assert not any("sleep 61" in k for k in facts["killed"]), facts["killed"]
        assert mine.poll() is None, "the caller's own process was killed by the sweep"
    finally:
        mine.kill()
        mine.wait(timeout=10)


def test_a_helper_that_escapes_by_setsid_and_a_clean_env_is_still_killed(
    run_scenario: Callable[..., Any], tmp_path: Path
) -> None:
    body = (
        "p = subprocess.Popen(['env', '-i', 'setsid', 'sleep', '45'], stdin=subprocess.DEVNULL,\n"
        "    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)\n"
        "print(p.pid, flush=True)\n"
    )
    run = run_scenario("plain", client=client_script(tmp_path, body))
    facts = run.record.meta["outside"]
    assert any("sleep 45" in k for k in facts["left_running"]), facts
    assert not [p for p in procs.descendants(os.getpid()) if "sleep 45" in procs.describe(p)]


def test_a_helper_that_setsids_and_changes_pid_every_ms_fails_the_check_and_dies_with_the_run(
    run_scenario: Callable[..., Any], tmp_path: Path
) -> None:
    """The escaper (tests/escaper.py: no marker, its own session, a new pid every millisecond)
    outlived the harness and ``nothing left running`` passed. Its tree now holds it."""
    heartbeat = tmp_path / "heartbeat"
    body = (
        f"subprocess.Popen({escaper.argv(heartbeat)!r}, stdin=subprocess.DEVNULL, start_new_session=True)\n"
        "time.sleep(0.5)\n"  # the escaper is in full flight when the client exits
    )
    try:
        run = run_scenario("plain", client=client_script(tmp_path, body))
        ended = time.time()
        check = next(c for c in run.checks if c.name == "nothing left running")
        assert check.status == "fail", check
        assert "alive after the client exited" in check.detail
        how = proctree.confinement()
        assert how.confined, f"this machine cannot confine a tree ({how.detail}): the run above proves nothing"
        assert f"tracked by {how.detail}" in check.detail
        late = escaper.last_beat_after(heartbeat, ended)
        assert late <= escaper.STOPS_WITHIN_S, f"the helper still beat {late:.2f} s after the run ended"
    finally:
        escaper.stop(heartbeat)


def test_the_pass_says_how_the_clients_tree_was_tracked(run_scenario: Callable[..., Any]) -> None:
    run = run_scenario("command_approval", client=CAREFUL)
    check = next(c for c in run.checks if c.name == "nothing left running")
    assert check.status == "pass"
    how = proctree.confinement()
    said = f"(tracked by {how.detail})" if how.confined else f"({how.detail})"  # "(not confined: why)"
    assert check.detail == f"no process of the run outlived the client {said}"


def test_invalid_result_file_fails_a_check(run_scenario: Callable[..., Any], tmp_path: Path) -> None:
    body = "open(os.environ['CODEX_HARNESS_RESULT'], 'w').write(json.dumps({'turns': [{'turn': 1, 'status': 'ok'}]}))\n"
    run = run_scenario("plain", client=client_script(tmp_path, body))
    check = next(c for c in run.checks if c.name == "result file")
    assert check.status == "fail" and "status" in check.detail


def test_reported_status_disagreeing_with_the_wire_fails(run_scenario: Callable[..., Any], tmp_path: Path) -> None:
    """A result file claiming completion for a turn the client never started."""
    result = {"turns": [{"turn": 1, "status": "completed"}]}
    body = f"open(os.environ['CODEX_HARNESS_RESULT'], 'w').write({orjson.dumps(result).decode()!r})\n"
    run = run_scenario("plain", client=client_script(tmp_path, body))
    check = next(c for c in run.checks if c.name == "reported statuses agree with the wire")
    assert check.status == "fail" and "not started" in check.detail


def test_plan_holds_no_expect_and_the_env_is_complete(run_scenario: Callable[..., Any], tmp_path: Path) -> None:
    out = tmp_path / "seen.json"
    body = (
        f"env = {{k: v for k, v in os.environ.items() if k.startswith(('CODEX', 'FAKE_CODEX', 'PATH'))}}\n"
        "env['plan'] = json.load(open(os.environ['CODEX_HARNESS_PLAN']))\n"
        "env['version'] = subprocess.run(['codex', '--version'], capture_output=True, text=True).stdout\n"
        f"open({str(out)!r}, 'w').write(json.dumps(env))\n"
    )
    run_scenario("command_approval", client=client_script(tmp_path, body))
    seen = orjson.loads(out.read_bytes())
    assert seen["version"].strip() == "codex-cli 0.171.0"
    assert Path(seen["CODEX_BIN"]).name == "codex" and seen["PATH"].startswith(str(Path(seen["CODEX_BIN"]).parent))
    assert Path(seen["FAKE_CODEX_SCENARIO"]).is_absolute()
    assert seen["CODEX_HARNESS_RUN_MARKER"]
    plan = seen["plan"]
    assert "expect" not in plan and plan["turns"][0]["input"] == "Run echo"
    assert set(plan["budgets"]) == {
        "interrupt_budget_ms",
        "request_timeout_ms",
        "turn_timeout_ms",
        "teardown_ms",
        "startup_timeout_ms",
    }


# --- the command line ---------------------------------------------------------------------------------------


def test_client_cmd_runs_on_fake_process_or_real(capsys: pytest.CaptureFixture[str]) -> None:
    cmd = " ".join(CAREFUL)
    assert main(["run", "--client-cmd", cmd, "--target", "fake", "--scenario", "plain"]) == USAGE
    assert "--target fake-process or real, not fake" in capsys.readouterr().err
    # A binary that cannot run stops the run at once.
    argv = ["run", "--client-cmd", cmd, "--target", "real", "--codex", "/nonexistent/codex", "--scenario", "plain"]
    assert main(argv) == USAGE
    assert "/nonexistent/codex" in capsys.readouterr().err


@pytest.mark.parametrize("cmd", ["/nonexistent/client", "", "'unbalanced", "/"])
def test_a_command_that_cannot_start_exits_3(cmd: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--client-cmd", cmd, "--scenario", "plain"]) == USAGE
    assert "Traceback" not in capsys.readouterr().err


def test_deadline_fails_the_run_and_kills_the_client(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The pid a client sees of itself may be its PID namespace's: its heartbeat says whether it still runs.
    beat = tmp_path / "beat"
    cmd = client_script(tmp_path, f"while True:\n    open({str(beat)!r}, 'w').write('x')\n    time.sleep(0.01)\n")
    code = main(["run", "--client-cmd", " ".join(cmd), "--client-deadline", "1", "--scenario", "plain", "--quiet"])
    ended = time.time()
    assert code == FAILED
    out = capsys.readouterr()
    assert "client / deadline" in out.out and "still running at its deadline of 1 s" in out.out
    assert "killed at its deadline" in out.err
    assert escaper.last_beat_after(beat, ended) <= 0.05


def test_cli_report_and_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "report"
    args = ["run", "--client-cmd", " ".join(CARELESS), "--scenario", "command_approval", "--quiet"]
    assert main([*args, "--report", str(report)]) == FAILED
    checks = orjson.loads((report / "checks.json").read_bytes())
    assert {(c["contract"], c["name"]) for c in checks if c["status"] == "fail"} == CARELESS_FAILS
    assert (report / "junit.xml").is_file()
    saved = report / "sessions" / "fake-process" / "command_approval"
    assert (saved / "record.json").is_file() and (saved / "client-stderr.txt").is_file()
    assert len(list((saved / "recording").glob("1-*/wire.jsonl"))) == 1
    # The known failures accepted: the same client passes against its baseline.
    assert main([*args, "--baseline", str(report / "checks.json")]) == OK
    capsys.readouterr()
    # show judges the recording and the saved record: exit 1 on the failing checks.
    assert main(["show", str(next((saved / "recording").glob("1-*")))]) == FAILED
    assert main(["show", str(saved)]) == FAILED
    assert "never answered" in capsys.readouterr().out


def test_scenarios_json_carries_what_an_adapter_needs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scenarios", "--json"]) == OK
    rows = {r["name"]: r for r in orjson.loads(capsys.readouterr().out)}
    row = rows["interrupt_pending_approval"]
    assert row["plan"]["turns"][0]["actions"][0]["do"] == "cancel"
    assert row["plan"]["budgets"]["interrupt_budget_ms"] > 0
    assert row["expect"]["turns"][0]["status"] == "aborted"
    assert "expect" not in row["plan"]


def test_unsupported_turns_are_skipped_not_failed(run_scenario: Callable[..., Any], tmp_path: Path) -> None:
    result = {"turns": [{"turn": 1, "status": "unsupported", "error": "cannot answer with an error"}]}
    body = f"open(os.environ['CODEX_HARNESS_RESULT'], 'w').write({orjson.dumps(result).decode()!r})\n"
    run = run_scenario("approval_error", client=client_script(tmp_path, body))
    turn = [c for c in run.checks if c.contract in ("terminal_status", "usage") and c.name.startswith("turn 1 ")]
    # What is never judged for an outside client keeps its own reason (Check.applies False).
    assert turn and all(c.status == "skip" and ("cannot answer" in c.detail or not c.applies) for c in turn)


def _writes_result(tmp_path: Path, result: dict[str, Any]) -> list[str]:
    body = f"open(os.environ['CODEX_HARNESS_RESULT'], 'w').write({orjson.dumps(result).decode()!r})\n"
    return client_script(tmp_path, body)


@pytest.mark.parametrize(
    ("turn", "reason"),
    [
        ({"usage": None}, "usage null"),
        ({}, "no usage in the result file"),
        ({"usage": "unsupported"}, "usage unsupported"),
    ],
)
def test_usage_the_client_does_not_report_is_not_judged_as_zeros(
    run_scenario: Callable[..., Any], tmp_path: Path, turn: dict[str, Any], reason: str
) -> None:
    """``plain`` declares usage 60/40/0/20: a client that reports none is not judged on it (not "input 0 != 60")."""
    result = {"turns": [{"turn": 1, "status": "completed", **turn}]}
    run = run_scenario("plain", client=_writes_result(tmp_path, result))
    usage = [c for c in run.checks if c.contract == "usage" and c.applies]
    assert [(c.name, c.status) for c in usage] == [("turn 1 usage", "skip")], usage
    assert reason in usage[0].detail and usage[0].detail.startswith("not judged"), usage[0].detail
    assert next(c for c in run.checks if c.name == "turn 1 status").status == "pass"  # the status still is


def test_status_alone_unsupported_keeps_the_reported_usage_judged(
    run_scenario: Callable[..., Any], tmp_path: Path
) -> None:
    usage = {"input": 60, "cache_read": 40, "cache_write": 0, "output": 20, "reasoning": 5}
    turn = {"turn": 1, "status": "unsupported", "error": "cannot answer with an error", "usage": usage}
    turns = [turn, {"turn": 2, "status": "completed", "usage": "unsupported"}]
    run = run_scenario("plain_two_turns", client=_writes_result(tmp_path, {"turns": turns}))
    judged = {c.name: c.status for c in run.checks if c.contract == "usage" and c.applies}
    # Judged against the wire: this client started no server, so the usage it reports is of nothing the server did.
    assert judged == {"turn 1 buckets consistent": "pass", "turn 1 usage": "fail", "turn 2 usage": "skip"}, judged
    usage_1 = next(c for c in run.checks if c.name == "turn 1 usage")
    assert "never reached the server" in usage_1.detail, usage_1.detail
    status = [c for c in run.checks if c.contract == "terminal_status" and c.name.startswith("turn 1 ") and c.applies]
    assert status and all(c.status == "skip" and "cannot answer" in c.detail for c in status)


_NEVER_READS = (
    "server = subprocess.Popen([os.environ['CODEX_BIN'], 'app-server'], stdin=subprocess.PIPE,\n"
    "                          stdout=subprocess.PIPE)\n"
    "def send(rid, method, params):\n"
    "    server.stdin.write(json.dumps({'id': rid, 'method': method, 'params': params}).encode() + b'\\n')\n"
    "    server.stdin.flush()\n"
    "send(1, 'initialize', {'clientInfo': {'name': 'deaf', 'version': '0'}})\n"
    "send(2, 'thread/start', {})\n"
    "for line in server.stdout:\n"
    "    message = json.loads(line)\n"
    "    if message.get('id') == 2:\n"
    "        thread = message['result']['thread']['id']\n"
    "        break\n"
    "send(3, 'turn/start', {'threadId': thread, 'input': [{'type': 'text', 'text': 'Say hello'}]})\n"
    "time.sleep(1.5)  # the turn runs and completes; nothing of it is ever read\n"
    "server.stdin.close()\n"
    "server.wait(timeout=20)\n"
    "result = {'turns': [{'turn': 1, 'status': 'completed', 'usage': None}]}\n"
    "open(os.environ['CODEX_HARNESS_RESULT'], 'w').write(json.dumps(result))\n"
)


def test_turn_completed_consumed_is_not_passed_for_a_client_that_never_read(
    run_scenario: Callable[..., Any], tmp_path: Path
) -> None:
    """Which turn/completed an outside client read is not on the wire: never a pass (it was "1 consumed")."""
    run = run_scenario("plain", client=client_script(tmp_path, _NEVER_READS))
    check = next(c for c in run.checks if c.name == "turn 1 turn/completed consumed")
    assert check.status == "skip" and "not on the wire" in check.detail, check


_ALL_UNSUPPORTED = (
    "plan = json.load(open(os.environ['CODEX_HARNESS_PLAN']))\n"
    "turns = [{'turn': t['turn'], 'status': 'unsupported', 'error': 'cannot'} for t in plan['turns']]\n"
    "if len(sys.argv) > 1:\n"
    "    p = subprocess.Popen([os.environ['CODEX_BIN'], 'app-server'], stdin=subprocess.PIPE,\n"
    "                         stdout=subprocess.DEVNULL)\n"
    "    p.stdin.close()\n"
    "    p.wait(timeout=20)\n"
    "open(os.environ['CODEX_HARNESS_RESULT'], 'w').write(json.dumps({'turns': turns}))\n"
)


@pytest.mark.parametrize("starts_a_server", [False, True])
def test_every_turn_unsupported_is_nothing_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], starts_a_server: bool
) -> None:
    """A client that claims it can do none of the plan is never green: every check a skip, the run exit 1."""
    cmd = " ".join(client_script(tmp_path, _ALL_UNSUPPORTED)) + (" start" if starts_a_server else "")
    report = tmp_path / "report"
    args = ["run", "--client-cmd", cmd, "--scenario", "plain", "--scenario", "plain_two_turns", "--report", str(report)]
    assert main([*args, "--quiet"]) == FAILED
    out = capsys.readouterr().out
    assert "RESULT: NOTHING JUDGED" in out, out
    checks = orjson.loads((report / "checks.json").read_bytes())
    assert {c["status"] for c in checks} == {"skip"}, [c for c in checks if c["status"] != "skip"]
    plan = [c for c in checks if c["name"] == "plan followed"]
    assert len(plan) == 2 and all("every turn unsupported" in c["detail"] for c in plan)


def test_a_leak_still_fails_when_every_turn_is_unsupported(run_scenario: Callable[..., Any], tmp_path: Path) -> None:
    body = _ALL_UNSUPPORTED + "subprocess.Popen(['sleep', '50'], start_new_session=True)\n"
    run = run_scenario("plain", client=client_script(tmp_path, body))
    assert failed(run) == {("client", "nothing left running")}


@pytest.mark.parametrize("scenario", builtin_names())
def test_a_client_that_plays_nothing_fails_every_scenario(run_scenario: Callable[..., Any], scenario: str) -> None:
    """``sh -c '$CODEX_BIN app-server </dev/null'``: a server started and ended, nothing played. It passed every
    check of 43 of the 51 built-in scenarios; plan followed fails it on each."""
    run = run_scenario(scenario, client=["sh", "-c", '"$CODEX_BIN" app-server </dev/null'])
    assert ("client", "plan followed") in failed(run), [c for c in run.checks if c.name == "plan followed"]


def test_baseline_from_runs_marks_flaky_checks() -> None:
    from conformance.clients.sdk import baseline_from_runs

    def check(name: str, status: str) -> dict[str, str]:
        return {"scenario": "s", "target": "fake-process", "contract": "client", "name": name, "status": status}

    runs = [[check("a", "fail"), check("b", "fail")], [check("a", "fail"), check("b", "pass")], [check("a", "fail")]]
    entries = baseline_from_runs(runs, [{**check("a", "fail"), "why": "known"}])
    assert [(e["name"], e["status"], e["why"].startswith("TODO")) for e in entries] == [
        ("a", "fail", False),
        ("b", "flaky", True),
    ]


@pytest.mark.parametrize("deadline", ["0", "-1", "nan", "1e9"])
def test_a_bad_client_deadline_exits_3(deadline: str, capsys: pytest.CaptureFixture[str]) -> None:
    cmd = " ".join(CAREFUL)
    assert main(["run", "--client-cmd", cmd, "--client-deadline", deadline, "--scenario", "plain"]) == USAGE
    assert "Traceback" not in capsys.readouterr().err


def test_an_unknown_release_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--client-cmd", " ".join(CAREFUL), "--release", "0.0.1", "--scenario", "plain"]) == USAGE
    assert "profiles:" in capsys.readouterr().err


def over_stdio(names: list[str]) -> list[str]:
    """The catalogue a stdio client plays (its websocket scenarios need a client that speaks ws)."""
    from contracts.faults import transport_problem
    from fake_server.catalogue import load_builtin

    return [n for n in names if transport_problem({f.kind for f in load_builtin(n).faults}, "stdio") is None]


@pytest.mark.parametrize("scenario", over_stdio(builtin_names()))
def test_the_careful_reference_client_passes_the_catalogue(run_scenario: Callable[..., Any], scenario: str) -> None:
    """No false positives: a client that does everything right fails no check on any built-in scenario."""
    run = run_scenario(scenario, client=CAREFUL)
    assert failed(run) == set(), [c for c in run.checks if c.status == "fail"]


def test_two_servers_are_judged_each(run_scenario: Callable[..., Any], tmp_path: Path) -> None:
    """One recording folder per server process; per-server checks carry the server's number."""
    body = (
        "for _ in range(2):\n"
        "    p = subprocess.Popen([os.environ['CODEX_BIN'], 'app-server'], stdin=subprocess.PIPE,\n"
        "                         stdout=subprocess.DEVNULL)\n"
        "    p.stdin.close()\n"
        "    p.wait(timeout=20)\n"
    )
    run = run_scenario("plain", client=client_script(tmp_path, body))
    assert len(run.record.meta["outside"]["servers"]) == 2
    assert len(list((run.saved_to / "recording").glob("*-*/end.json"))) == 2
    names = {c.name for c in run.checks}
    assert {"server 1: server ended", "server 2: server ended", "server started"} <= names
    # Two servers, each ended at once: the only failure is that the client played nothing of the plan.
    assert failed(run) == {("client", "plan followed")}
    assert main(["show", str(run.saved_to / "recording")]) == FAILED


_PASSES = (
    "import json, os, subprocess, sys\n"
    "p = subprocess.Popen([os.environ['CODEX_BIN'], *json.loads(sys.argv[1])], stdin=subprocess.PIPE,\n"
    "                     stdout=subprocess.DEVNULL, env=dict(os.environ, **json.loads(sys.argv[2])))\n"
    "p.stdin.close()\n"
    "p.wait(timeout=20)\n"
)


@pytest.mark.parametrize(
    ("args", "env", "changed"),
    [
        (["--release", "0.163.0", "app-server"], {}, "release '0.163.0' (set by --release), not '0.171.0'"),
        (["app-server", "--release", "0.169.0"], {}, "release '0.169.0' (set by --release), not '0.171.0'"),
        (["app-server", "--scenario", "hang_alive"], {}, "scenario 'hang_alive' with hash"),
        (["app-server", "--release", "0.171.0"], {}, None),  # the value given: nothing changed
        # The shim's own settings win over the client's environment.
        (["app-server"], {"FAKE_CODEX_RELEASE": "0.163.0", "FAKE_CODEX_SCENARIO": "hang_alive"}, None),
        (["app-server", "--record", "/nonexistent/elsewhere", "-c", "model=o3"], {}, None),  # still recorded here
    ],
)
def test_a_client_that_changes_what_the_fake_plays_is_caught(
    run_scenario: Callable[..., Any], tmp_path: Path, args: list[str], env: dict[str, str], changed: str | None
) -> None:
    """Whatever a client passes the shim, the server's recorded play identity is compared with the one given."""
    script = tmp_path / "passes.py"
    script.write_text(_PASSES)
    client = [sys.executable, str(script), orjson.dumps(args).decode(), orjson.dumps(env).decode()]
    run = run_scenario("plain", client=client)
    check = next(c for c in run.checks if c.name == "played as given")
    if changed is None:
        assert check.status == "pass", check
    else:
        assert check.status == "fail" and changed in check.detail, check
    assert len(run.record.meta["outside"]["servers"]) == 1  # recorded where the harness looks, --record or not


_SERVER_PER_TURN = """
plan = json.load(open(os.environ['CODEX_HARNESS_PLAN']))
for spec in plan['turns']:
    p = subprocess.Popen([os.environ['CODEX_BIN'], 'app-server'], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    def send(frame):
        p.stdin.write((json.dumps(frame) + '\\n').encode()); p.stdin.flush()
    def until(pred):
        for line in p.stdout:
            frame = json.loads(line)
            if pred(frame):
                return frame
    send({'id': 1, 'method': 'initialize', 'params': {'clientInfo': {'name': 'one-per-turn', 'version': '1'}}})
    until(lambda f: f.get('id') == 1)
    send({'method': 'initialized'})
    send({'id': 2, 'method': 'thread/start', 'params': {}})
    thread = until(lambda f: f.get('id') == 2)['result']['thread']['id']
    # The input split in two text items: the same content as the plan's.
    words = spec['input'].split(' ', 1)
    items = [{'type': 'text', 'text': words[0] + ' '}, {'type': 'text', 'text': words[1]}]
    send({'id': 3, 'method': 'turn/start', 'params': {'threadId': thread, 'input': items}})
    until(lambda f: f.get('method') == 'turn/completed')
    p.stdin.close()
    p.wait(timeout=20)
"""


def test_a_server_per_turn_follows_the_plan_and_show_agrees(
    run_scenario: Callable[..., Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A correct client may start a server for each turn and split its input: plan followed passes, and
    show on the saved record (which holds the first server's wire) reads the other servers' recordings too."""
    run = run_scenario("plain_two_turns", client=client_script(tmp_path, _SERVER_PER_TURN))
    plan = next(c for c in run.checks if c.name == "plan followed")
    assert plan.status == "pass" and "2 turn(s) started" in plan.detail, plan
    assert len(run.record.meta["outside"]["servers"]) == 2
    capsys.readouterr()
    assert main(["show", str(run.saved_to)]) == OK
    out = capsys.readouterr().out
    assert "server 2 pid" in out, out  # the second server's timeline and checks, not dropped
    assert f"{len(run.checks)} checks: 0 failed" in out, out


def test_client_env_carries_the_tests_marker(client_env: dict[str, str], no_leaked_processes: str) -> None:
    assert client_env[procs.MARKER_ENV] == no_leaked_processes


#: careful.py with one change of policy: an unknown server request is answered with an error (as careful does)
#: and the turn then ends as the server says, instead of failing it.
_COMPLETES_AFTER_UNKNOWN_REQUEST = (
    f"sys.path.insert(0, {str(CLIENTS)!r})\n"
    "import careful\n"
    "_answer = careful.Client.answer\n"
    "def answer(self, message, held):\n"
    "    _answer(self, message, held)\n"
    "    self.protocol_error = None\n"
    "careful.Client.answer = answer\n"
    "sys.exit(careful.main())\n"
)


def test_completing_the_turn_after_an_unknown_request_answered_with_an_error_passes(
    run_scenario: Callable[..., Any], tmp_path: Path
) -> None:
    """The error answer is what the protocol asks; failing the turn too is our own client's rule (docs/client.md)."""
    run = run_scenario("unknown_server_request", client=client_script(tmp_path, _COMPLETES_AFTER_UNKNOWN_REQUEST))
    assert failed(run) == set(), [c for c in run.checks if c.status == "fail"]
    status = next(c for c in run.checks if c.contract == "terminal_status" and c.name == "turn 1 status")
    assert status.status == "pass" and status.detail.startswith("Result completed"), status


#: careful.py, but the approval it holds for the plan's cancel is answered ``cancel`` right after the interrupt.
_ANSWERS_THE_HELD_APPROVAL = (
    f"sys.path.insert(0, {str(CLIENTS)!r})\n"
    "import careful\n"
    "held_ids = []\n"
    "_answer = careful.Client.answer\n"
    "def answer(self, message, held):\n"
    "    if message['method'] in careful.APPROVALS and self.approvals_seen + 1 in held:\n"
    "        held_ids.append(message['id'])\n"
    "    _answer(self, message, held)\n"
    "careful.Client.answer = answer\n"
    "_request = careful.Server.request\n"
    "def request(self, method, params):\n"
    "    rid = _request(self, method, params)\n"
    "    while method == 'turn/interrupt' and held_ids:\n"
    "        self.send({'id': held_ids.pop(), 'result': {'decision': 'cancel'}})\n"
    "    return rid\n"
    "careful.Server.request = request\n"
    "sys.exit(careful.main())\n"
)


def test_answering_an_approval_the_server_never_resolves_passes(
    run_scenario: Callable[..., Any], tmp_path: Path
) -> None:
    """resolved_never allows the approval to stay unanswered (the interrupt cleared it); answering it is as correct."""
    run = run_scenario("resolved_never", client=client_script(tmp_path, _ANSWERS_THE_HELD_APPROVAL))
    assert failed(run) == set(), [c for c in run.checks if c.status == "fail"]
    answered = next(c for c in run.checks if c.contract == "protocol" and c.name == "server requests answered")
    assert answered.status == "pass" and "0 unanswered_server_requests" in answered.detail, answered


#: careful.py that cannot do turn 1: it reports it unsupported and never starts it, then plays the others.
_SKIPS_TURN_1 = (
    f"sys.path.insert(0, {str(CLIENTS)!r})\n"
    "import careful\n"
    "_run = careful.Client.run_turn\n"
    "def run_turn(self, number, spec):\n"
    "    if number == 1:\n"
    "        return {'turn': 1, 'status': 'unsupported', 'error': 'cannot do turn 1'}\n"
    "    return _run(self, number, spec)\n"
    "careful.Client.run_turn = run_turn\n"
    "sys.exit(careful.main())\n"
)


@pytest.mark.parametrize("scenario", ["plain_two_turns", "resume", "experimental_unread"])
def test_an_unsupported_turn_never_started_exempts_what_it_shifted(
    run_scenario: Callable[..., Any], tmp_path: Path, scenario: str
) -> None:
    """The fake plays the scenario's turns in the order they start: after a turn the client never started, each
    later turn got an earlier turn's script, so its status and usage are not judged; the plan (matched by the
    turn ids the client reports) and the wire still are."""
    run = run_scenario(scenario, client=client_script(tmp_path, _SKIPS_TURN_1))
    assert failed(run) == set(), [c for c in run.checks if c.status == "fail"]
    turn_2 = [
        c
        for c in run.checks
        if c.contract in ("terminal_status", "usage") and c.name.startswith("turn 2 ") and "server" not in c.name
    ]
    assert turn_2 and all(c.status == "skip" and "never started" in c.detail for c in turn_2), turn_2
    passed = {(c.contract, c.name) for c in run.checks if c.status == "pass"}
    assert {("client", "plan followed"), ("client", "reported statuses agree with the wire")} <= passed


def test_reading_the_40_mib_line_whole_passes(run_scenario: Callable[..., Any], tmp_path: Path) -> None:
    """oversized_line has two correct courses ([[expect.or]]): the careful client's cap fails the turn cleanly, a
    client that reads the (valid) line whole completes it; each is judged against its own truth."""
    body = f"sys.path.insert(0, {str(CLIENTS)!r})\nimport careful\ncareful.MAX_LINE = 128 << 20\n"
    body += "sys.exit(careful.main())\n"
    run = run_scenario("oversized_line", client=client_script(tmp_path, body))
    assert failed(run) == set(), [c for c in run.checks if c.status == "fail"]
    status = next(c for c in run.checks if c.contract == "terminal_status" and c.name == "turn 1 status")
    assert status.status == "pass" and "read the 40 MiB line whole" in status.detail, status
    usage = next(c for c in run.checks if c.contract == "usage" and c.name == "turn 1 usage")
    assert usage.status == "pass" and "input 60" in usage.detail, usage


#: careful.py reporting no turn id (many clients keep none): the i-th reported turn is the i-th turn/start.
_NO_TURN_IDS = (
    f"sys.path.insert(0, {str(CLIENTS)!r})\n"
    "import careful\n"
    "_result = careful.Client.result\n"
    "def result(self, *args, **kwargs):\n"
    "    out = _result(self, *args, **kwargs)\n"
    "    out.pop('turn_id', None)\n"
    "    return out\n"
    "careful.Client.result = result\n"
    "sys.exit(careful.main())\n"
)


@pytest.mark.parametrize("scenario", ["plain_two_turns", "late_events_next_turn"])
def test_a_client_that_reports_no_turn_id_passes(
    run_scenario: Callable[..., Any], tmp_path: Path, scenario: str
) -> None:
    """Its turns are matched to the wire's by order: status, usage and final text are all judged, none fails
    (under --strict either)."""
    from contracts.report import judge

    run = run_scenario(scenario, client=client_script(tmp_path, _NO_TURN_IDS))
    assert failed(run) == set(), [c for c in run.checks if c.status == "fail"]
    judged = {c.name: c.status for c in run.checks if c.contract == "terminal_status" and c.name.startswith("turn 2")}
    assert judged["turn 2 status"] == "pass" and judged["turn 2 final text"] == "pass", judged
    assert judge(run.checks, strict=True).exit_code == OK


#: careful.py ending the server alone (stdin closed, the process waited for), not the server's process group.
_ENDS_THE_SERVER_ALONE = (
    f"sys.path.insert(0, {str(CLIENTS)!r})\n"
    "import careful\n"
    "def end(self, teardown_s):\n"
    "    self.proc.stdin.close()\n"
    "    self.proc.wait(timeout=teardown_s)\n"
    "careful.Server.end = end\n"
    "sys.exit(careful.main())\n"
)


def test_what_the_server_started_left_alive_is_a_should_and_a_helper_a_must(
    run_scenario: Callable[..., Any], tmp_path: Path
) -> None:
    """grandchild_holds_stdout: the server's grandchild outlives a client that ends the server's pid alone (the
    real binary's children die with it): a should. The careless client's own helper left alive: a must."""
    from contracts.report import judge

    run = run_scenario("grandchild_holds_stdout", client=client_script(tmp_path, _ENDS_THE_SERVER_ALONE))
    bad = [c for c in run.checks if c.status == "fail"]
    assert [(c.contract, c.name, c.level) for c in bad] == [("client", "server's descendants ended", "should")], bad
    assert "sleep 30" in bad[0].detail
    left = next(c for c in run.checks if c.name == "nothing left running")
    assert left.status == "pass" and "1 a server started itself" in left.detail, left
    assert judge(run.checks).exit_code == OK and judge(run.checks, strict=True).exit_code == FAILED
    careless = run_scenario("plain", client=CARELESS)
    helper = next(c for c in careless.checks if c.name == "nothing left running")
    assert (helper.status, helper.level) == ("fail", "must") and "sleep 60" in helper.detail, helper


def test_a_binary_that_cannot_run_stops_the_run_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "codex"
    broken.write_text("#!/bin/sh\nexit 1\n")
    broken.chmod(0o755)
    argv = ["run", "--client-cmd", " ".join(CAREFUL), "--target", "real", "--codex", str(broken)]
    assert main([*argv, "--scenario", "plain", "--report", str(tmp_path / "r")]) == USAGE
    assert "--version" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()  # nothing written, nothing played
