"""The plugin's fixtures work as documented: fake_codex, codex_session, run_scenario."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

import pytest
import trio

from conformance.fixtures import FakeCodex
from contracts.releases import default_version


def test_fake_codex_answers_like_the_real_binary(fake_codex: FakeCodex) -> None:
    out = subprocess.run([*fake_codex.argv, "--version"], capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.strip() == f"codex-cli {default_version()}"
    assert fake_codex.app_server("plain")[-3:] == ["app-server", "--scenario", "plain"]
    assert fake_codex.env("plain", {})["FAKE_CODEX_SCENARIO"] == "plain"


def test_fake_codex_serves_a_session_on_stdio(fake_codex: FakeCodex) -> None:
    init = b'{"id":0,"method":"initialize","params":{"clientInfo":{"name":"t","version":"1"}}}\n'
    proc = subprocess.run(fake_codex.app_server("plain"), input=init, capture_output=True, timeout=30, check=False)
    assert proc.returncode == 0
    assert b'"id":0' in proc.stdout.splitlines()[0]


async def test_codex_session_plays_plain(codex_session: Any, autojump_clock: trio.testing.MockClock) -> None:
    await codex_session.start_thread(cwd="/RUN/workdir")
    async with codex_session.turn("Say hello") as turn:
        async for _ in turn:
            pass
    assert turn.result.status == "completed"
    assert turn.result.final_text


@pytest.mark.codex_scenario("model_error")
async def test_codex_session_takes_the_scenario_marker(
    codex_session: Any, autojump_clock: trio.testing.MockClock
) -> None:
    await codex_session.start_thread(cwd="/RUN/workdir")
    async with codex_session.turn("Say hello") as turn:
        async for _ in turn:
            pass
    assert turn.result.status == "failed"


def test_run_scenario_returns_a_judged_run(run_scenario: Callable[..., Any]) -> None:
    run = run_scenario("plain")
    assert run.record is not None and run.saved_to is not None and (run.saved_to / "record.json").is_file()
    assert {c.contract for c in run.checks} >= {"terminal_status", "usage", "schema", "protocol"}
    skipped = run_scenario("crash_mid_turn", "real")
    assert skipped.skipped and "fake" in skipped.skipped
