"""An outside client on the real binary (``run --client-cmd CMD --target real``), through the recorder relay.

The reference clients get the verdicts they get on the fake; a client that starts two servers gets each relayed and
recorded; one that runs the binary around the ``codex`` it was given fails ``client / server started``; the
deadline and the leak checks hold; both targets in one run give one row per (scenario, target). Kept few: each
real run costs seconds.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from support import paths

from contracts.exitcodes import OK
from harness.cli import main

pytestmark = pytest.mark.real_codex

CLIENTS = paths.REPO / "conformance" / "clients"
CAREFUL = [sys.executable, str(CLIENTS / "careful.py")]
CARELESS = [sys.executable, str(CLIENTS / "careless.py")]


def verdicts(run: Any) -> set[tuple[str, str, str]]:
    """What a run decided, the target aside: (contract, check, status) of every check that applies."""
    return {(c.contract, c.name, c.status) for c in run.checks if c.applies}


def failed(run: Any) -> set[tuple[str, str]]:
    return {(c.contract, c.name) for c in run.checks if c.status == "fail"}


def client_script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "client.py"
    path.write_text("import json, os, subprocess, sys, time\n" + body)
    return [sys.executable, str(path)]


def test_the_reference_clients_get_on_the_real_binary_what_they_get_on_the_fake(
    run_scenario: Callable[..., Any], codex_bin: Path
) -> None:
    # The careful client passes on both: test_both_targets_in_one_run_give_a_row_each_and_show_reads_the_record.
    careless = run_scenario("command_approval", client=CARELESS, target="real", codex=codex_bin)
    assert careless.record.target == "real" and careless.record.server_version
    assert careless.record.model, "the mock's traffic: the report's third lane"
    fake = run_scenario("command_approval", client=CARELESS, target="fake-process")
    assert failed(careless) == failed(fake) != set(), [c for c in careless.checks if c.status == "fail"]
    killed = careless.record.meta["outside"]["killed"]
    assert any("sleep 60" in k for k in killed)  # its helper, named and killed: nothing left running
    assert any("relay" in k for k in killed)  # the server it never ended: the relay and the binary


def test_each_server_of_the_client_is_relayed_and_recorded(
    run_scenario: Callable[..., Any], codex_bin: Path, tmp_path: Path
) -> None:
    init = b'{"id":1,"method":"initialize","params":{"clientInfo":{"name":"t","version":"1"}}}\n'
    body = (
        f"INIT = {init!r}\n"
        "for _ in range(2):\n"
        "    p = subprocess.Popen([os.environ['CODEX_BIN'], 'app-server'], stdin=subprocess.PIPE,\n"
        "                         stdout=subprocess.PIPE)\n"
        "    p.stdin.write(INIT)\n"
        "    p.stdin.flush()\n"
        "    p.stdout.readline()\n"
        "    p.stdin.close()\n"
        "    p.wait(timeout=30)\n"
    )
    run = run_scenario("plain", client=client_script(tmp_path, body), target="real", codex=codex_bin)
    servers = run.record.meta["outside"]["servers"]
    assert len(servers) == 2
    assert all(s["end"]["reason"] == "stdin_closed" for s in servers)
    names = {c.name for c in run.checks}
    assert {"server 1: server ended", "server 2: server ended"} <= names
    answers = [e.frame for e in run.record.wire if e.dir == "s2c"]
    assert answers and answers[0].get("id") == 1 and "result" in answers[0]  # the real binary's answer, recorded
    assert failed(run) == {("client", "plan followed")}


def test_a_client_that_runs_the_binary_around_its_codex_fails_server_started(
    run_scenario: Callable[..., Any], codex_bin: Path, tmp_path: Path
) -> None:
    body = (
        f"p = subprocess.Popen([{str(codex_bin)!r}, 'app-server'], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,\n"
        "                     stderr=subprocess.DEVNULL)\n"
        "time.sleep(1.5)\n"
        "p.stdin.close()\n"
        "p.wait(timeout=30)\n"
    )
    run = run_scenario("plain", client=client_script(tmp_path, body), target="real", codex=codex_bin)
    started = next(c for c in run.checks if c.name == "server started")
    assert started.status == "fail" and "around the codex it was given" in started.detail, started
    assert str(Path(codex_bin).name) in started.detail or "codex" in started.detail


def test_a_client_that_takes_the_binary_away_from_the_mock_fails_played_as_given(
    run_scenario: Callable[..., Any], codex_bin: Path, tmp_path: Path
) -> None:
    # Its arguments reach the real binary (the fake ignores -c): here a base URL that stays on this machine.
    body = (
        "url = 'model_providers.mock_provider.base_url=http://127.0.0.1:9/v1'\n"
        "p = subprocess.Popen([os.environ['CODEX_BIN'], '-c', url, 'app-server'], stdin=subprocess.PIPE,\n"
        "                     stdout=subprocess.DEVNULL)\n"
        "p.stdin.close()\n"
        "p.wait(timeout=30)\n"
    )
    run = run_scenario("plain", client=client_script(tmp_path, body), target="real", codex=codex_bin)
    check = next(c for c in run.checks if c.name == "played as given")
    assert check.status == "fail" and "set by -c model_providers" in check.detail, check
    assert "not 'mock_provider'" in check.detail, check


def test_a_client_past_its_deadline_is_killed_with_its_server(
    run_scenario: Callable[..., Any], codex_bin: Path, tmp_path: Path
) -> None:
    body = (
        "p = subprocess.Popen([os.environ['CODEX_BIN'], 'app-server'], stdin=subprocess.PIPE, stdout=subprocess.PIPE)\n"
        "time.sleep(120)\n"
    )
    run = run_scenario("plain", client=client_script(tmp_path, body), target="real", codex=codex_bin, client_deadline=4)
    assert ("client", "deadline") in failed(run)
    killed = run.record.meta["outside"]["killed"]
    assert any("codex" in k for k in killed), killed  # the real binary itself, not only the relay
    # (the autouse no-leak check fails the test if anything of it is still alive)


def test_both_targets_in_one_run_give_a_row_each_and_show_reads_the_record(
    tmp_path: Path, codex_bin: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report"
    cmd = " ".join(CAREFUL)
    argv = ["run", "--client-cmd", cmd, "--target", "fake-process", "--target", "real", "--codex", str(codex_bin)]
    assert main([*argv, "--scenario", "plain", "--scenario", "crash_mid_turn", "--report", str(report)]) == OK
    out = capsys.readouterr().out
    rows = [line.split()[:2] for line in out.splitlines() if line.startswith(("plain ", "crash_mid_turn "))]
    assert len(rows) == 4, out
    assert (report / "sessions" / "real" / "plain" / "record.json").is_file()
    assert (report / "sessions" / "fake-process" / "plain" / "record.json").is_file()
    html = (report / "index.html").read_text()
    assert "mock model" in html.lower() or "model" in html
    assert main(["show", str(report / "sessions" / "real" / "plain")]) == OK
    assert "0 failed" in capsys.readouterr().out


PER_TURN = [sys.executable, str(CLIENTS / "per_turn.py")]


@pytest.mark.parametrize("scenario", ["plain_two_turns", "experimental_unread"])
def test_a_server_per_turn_continues_the_runs_timeline_on_the_real_binary(
    run_scenario: Callable[..., Any], codex_bin: Path, scenario: str
) -> None:
    """per_turn.py starts one server per turn and resumes its thread in the next: the run's servers share one
    CODEX_HOME (the thread is found) and one turn count (the mock of the N-th server plays turn N, not turn 1:
    before, turn 4 of experimental_unread got turn 1's HTTP error, and every later turn found no thread). It
    passes on the real binary what it passes on the fake."""
    real = run_scenario(scenario, client=PER_TURN, target="real", codex=codex_bin)
    fake = run_scenario(scenario, client=PER_TURN, target="fake-process")
    assert failed(real) == failed(fake) == set(), [c for c in real.checks if c.status == "fail"]
    servers = real.record.meta["outside"]["servers"]
    assert len(servers) == len(real.record.results) > 1
    played = []  # the turn each server's mock played: 0, 1, … across the servers
    for model in sorted(
        Path(real.saved_to).glob("recording/*/model.jsonl"), key=lambda p: int(p.parent.name.split("-")[0])
    ):
        lines = [orjson.loads(line) for line in model.read_bytes().splitlines()]
        played.append(sorted({m["msg"]["turn"] for m in lines if m["dir"] == "c2m" and "turn" in m["msg"]}))
    assert played == [[n] for n in range(len(servers))], played
