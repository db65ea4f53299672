"""A client that dies, or never starts a server, is one clear finding per scenario (issue 33 §2).

Before: a client that exits at import was reported only as ``server started`` and ``plan followed`` failures of
every scenario, its exit status and traceback nowhere but ``client-stderr.txt``; schema and protocol passed on an
empty wire. Now ``client / server started`` names how it ended, the end of its stderr and a ``codex`` it ran that
was not the shim; what it was to do on a server is not judged (a skip naming that finding); a client that exits
non-zero after playing gets ``client / exit status`` (a should). The terminal says it once per distinct ending,
with the stderr's last lines, and the HTML names the client command and shows the stderr's end.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from support import paths

from contracts.exitcodes import FAILED
from harness.cli import main

CLIENTS = paths.REPO / "conformance" / "clients"
CAREFUL = CLIENTS / "careful.py"


def failed(run: Any) -> dict[tuple[str, str], str]:
    return {(c.contract, c.name): c.detail for c in run.checks if c.status == "fail"}


def crashing_client(tmp_path: Path) -> list[str]:
    path = tmp_path / "client.py"
    path.write_text("import json\nimport no_such_module_of_the_client\n")
    return [sys.executable, str(path)]


def test_a_client_that_dies_at_import_is_one_finding(run_scenario: Callable[..., Any], tmp_path: Path) -> None:
    run = run_scenario("plain_two_turns", client=crashing_client(tmp_path))
    fails = failed(run)
    assert list(fails) == [("client", "server started")], fails
    detail = fails[("client", "server started")]
    assert "the client exited 1 after" in detail
    assert "its stderr ends: ModuleNotFoundError: No module named 'no_such_module_of_the_client'" in detail
    assert "Traceback (most recent call last)" in detail
    assert "the shim was never run" in detail
    # Nothing was played: the wire's contracts and the plan are not passed (nor failed) on an empty wire.
    for check in run.checks:
        if check.contract in ("schema", "protocol") or check.name in ("plan followed", "exit status"):
            assert check.status == "skip" and "never started a server" in check.detail, check


def test_a_client_that_exits_non_zero_after_playing_says_so(run_scenario: Callable[..., Any], tmp_path: Path) -> None:
    script = f'"{sys.executable}" "{CAREFUL}"; echo "the adapter gave up: boom" >&2; exit 3'
    run = run_scenario("plain", client=["sh", "-c", script])
    fails = failed(run)
    assert list(fails) == [("client", "exit status")], fails
    (check,) = [c for c in run.checks if c.name == "exit status"]
    assert check.level == "should"
    assert "the client exited 3 after" in check.detail and "its stderr ends: the adapter gave up: boom" in check.detail


def test_a_client_that_exits_zero_passes_exit_status(run_scenario: Callable[..., Any]) -> None:
    run = run_scenario("plain", client=[sys.executable, str(CAREFUL)])
    (check,) = [c for c in run.checks if c.name == "exit status"]
    assert check.status == "pass" and check.detail.startswith("the client exited 0 after"), check


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["app-server"], "it started a server around the codex it was given, not recorded: "),
        (["login", "status"], "a codex that is not the shim ran in its process tree: "),
    ],
)
def test_a_codex_that_is_not_the_shim_is_named(
    run_scenario: Callable[..., Any], tmp_path: Path, args: list[str], said: str
) -> None:
    """A client that resolves its own bundled codex (ignoring PATH and CODEX_BIN): the finding names it. The watch
    samples the tree every 0.1 s: the bundled codex lives 3 s, so a loaded host still sees it."""
    bundled = tmp_path / "node_modules" / "@openai" / "codex" / "bin" / "codex"
    bundled.parent.mkdir(parents=True)
    bundled.write_text("#!/bin/sh\necho 'codex: not logged in' >&2\nsleep 3\nexit 1\n")
    bundled.chmod(0o755)
    client = tmp_path / "client.py"
    client.write_text(
        "import subprocess, sys\n"
        f"code = subprocess.run([{str(bundled)!r}, *{args!r}]).returncode\n"
        "sys.exit(f'the bundled codex exited {code}')\n"
    )
    run = run_scenario("plain", client=[sys.executable, str(client)])
    fails = failed(run)
    assert list(fails) == [("client", "server started")], fails
    detail = fails[("client", "server started")]
    assert said in detail and f"/bin/sh {bundled}" in detail, detail
    assert "bundled @openai/codex ignores PATH and CODEX_BIN" in detail
    assert "the shim was never run" in detail
    assert "its stderr ends: the bundled codex exited 1" in detail


def test_what_the_client_asked_the_shim_is_said(run_scenario: Callable[..., Any]) -> None:
    run = run_scenario("plain", client=["sh", "-c", '"$CODEX_BIN" --version >/dev/null; exit 0'])
    detail = failed(run)[("client", "server started")]
    assert "the client exited 0 after" in detail
    assert "the shim was run 1 time(s), no server recorded: --version" in detail
    assert "its stderr was empty" in detail


@pytest.mark.parametrize("target", ["fake-process"])
def test_the_terminal_and_the_reports_show_it_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    client = crashing_client(tmp_path)
    report = tmp_path / "out"
    argv = ["run", "--client-cmd", " ".join(client), "--target", target, "--report", str(report)]
    code = main([*argv, "--scenario", "plain", "--scenario", "plain_two_turns"])
    assert code == FAILED
    out, err = capsys.readouterr()
    said = f"codex-harness run: the client exited 1 without starting a server in 2 scenario run(s): plain [{target}]"
    assert err.count("codex-harness run: the client exited 1") == 1 and said in err, err
    assert "  stderr: ModuleNotFoundError: No module named 'no_such_module_of_the_client'" in err
    assert out.count("(must)") == 2 and "ModuleNotFoundError" in out  # one failure per scenario, on the last screen
    checks = orjson.loads((report / "checks.json").read_bytes())
    fails = [c for c in checks if c["status"] == "fail"]
    assert [(c["scenario"], c["name"]) for c in fails] == [
        ("plain", "server started"),
        ("plain_two_turns", "server started"),
    ]
    assert all("ModuleNotFoundError" in c["detail"] for c in fails)
    assert "ModuleNotFoundError" in (report / "junit.xml").read_text()
    page = (report / "index.html").read_text()
    assert f"Judged: the command &#x27;{client[0]} {client[1]}&#x27;" in page  # the run's Judged line
    assert f"client <code>{client[0]} {client[1]}</code>; it exited 1 after" in page  # and each session's
    assert "the client's stderr ends:</p><pre>Traceback (most recent call last):" in page


def test_a_server_started_through_the_shim_but_never_recorded_is_not_the_clients_failure(
    run_scenario: Callable[..., Any], tmp_path: Path
) -> None:
    """A client whose request budget is shorter than the fake's start-up on a loaded host kills its server before
    fake-codex records anything (per_turn.py on scripted_methods, 2 s): it did start a server through the shim
    (the shim noted it), so ``server started`` does not fail it, and nothing of that server is judged. Here the
    server cannot start at all (a module it imports is broken in the environment the client gives it)."""
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "orjson.py").write_text("raise ImportError('broken on purpose')\n")
    result = {"turns": [{"turn": 1, "status": "completed"}]}
    script = (
        f'PYTHONPATH="{broken}" "$CODEX_BIN" app-server </dev/null 2>/dev/null;'
        f" printf '%s' '{orjson.dumps(result).decode()}' > \"$CODEX_HARNESS_RESULT\""
    )
    run = run_scenario("plain", client=["sh", "-c", script])
    assert failed(run) == {}, failed(run)
    (started,) = [c for c in run.checks if c.name == "server started"]
    assert started.status == "skip" and started.applies, started
    assert (
        "the client started the shim as a server 1 time(s) (app-server), but no server was recorded" in started.detail
    )
    for check in run.checks:
        if check.contract in ("terminal_status", "usage", "schema", "protocol") or check.name == "plan followed":
            assert check.status == "skip" and "never recorded" in check.detail, check
