"""``run --client-cmd --jobs N``: scenarios of an outside client played at once, every verdict as played alone.

The reference clients (careful, careless, buggy) over a part of the catalogue that holds what could depend
on the run next to it: a hang to the deadline, a client's silence rule, server requests never answered,
helpers left running, a request timeout, a cancel, several servers and approvals. Each is played one at a
time, then with ``--jobs``; every check must have the same status, in the same order.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support import paths

from codex_sandbox import proctree
from contracts.exitcodes import USAGE
from contracts.scenario import Scenario
from fake_server.catalogue import load_builtin
from harness.cli import main
from harness.outside.command import DEFAULT_JOBS, MAX_JOBS, run_clients
from harness.outside.runner import ClientSpec

CLIENTS = paths.REPO / "conformance" / "clients"
CAREFUL = [sys.executable, str(CLIENTS / "careful.py")]
CARELESS = [sys.executable, str(CLIENTS / "careless.py")]
BUGGY = [sys.executable, str(CLIENTS / "buggy.py")]


def _short(name: str) -> Scenario:
    """A built-in scenario with a 2 s turn timeout (5 s requests, a 10 s start-up: the run deadline counts them): a
    client that waits it out costs seconds, not a minute."""
    scenario = load_builtin(name)
    short = {"turn_timeout_ms": 2000, "request_timeout_ms": 5000, "startup_timeout_ms": 10000}
    client = dataclasses.replace(scenario.client, **short)
    return dataclasses.replace(scenario, name=f"{name}_short", client=client, source=None)


#: client → the scenarios it plays, chosen for what could change under load (see the module's docstring).
CASES: dict[str, tuple[list[str], list[str | Scenario]]] = {
    "careful": (CAREFUL, ["scripted_methods", "command_approval", "cancel_at_started", "plain_two_turns"]),
    "careless": (CARELESS, ["command_approval", "delayed_completion", "plain"]),
    "buggy": ([*BUGGY, "--no-turn-timeout"], [_short("hang_alive"), "plain"]),
}


def _statuses(runs: list[Any]) -> list[tuple[str, str, str, str]]:
    return [(c.scenario, c.contract, c.name, c.status) for r in runs for c in r.checks]


@pytest.mark.skipif(not proctree.confinement().confined, reason="--jobs plays one at a time where nothing confines")
@pytest.mark.parametrize("client", sorted(CASES))
def test_every_verdict_with_jobs_is_the_verdict_played_alone(client: str) -> None:
    argv, names = CASES[client]
    scenarios = [load_builtin(n) if isinstance(n, str) else n for n in names]
    spec = ClientSpec(argv)
    lines: list[tuple[str, int, int]] = []
    at_once = run_clients(
        spec, scenarios, report_dir=None, progress=lambda r, n, t: lines.append((r.scenario, n, t)), jobs=DEFAULT_JOBS
    )
    alone = run_clients(spec, scenarios, report_dir=None, progress=None, jobs=1)
    assert [r.scenario for r in at_once] == [s.name for s in scenarios]  # the catalogue's order, not the ends'
    assert _statuses(at_once) == _statuses(alone)
    # One progress line per scenario as it ends, numbered by how many ended.
    assert sorted(s for s, _, _ in lines) == sorted(s.name for s in scenarios)
    assert [n for _, n, _ in lines] == list(range(1, len(scenarios) + 1))
    assert all(t == len(scenarios) for _, _, t in lines)


def test_jobs_overlap_the_waits(tmp_path: Path) -> None:
    """Three clients that each wait 3 s end in about one wait with --jobs 3, not three."""
    if not proctree.confinement().confined:
        pytest.skip("--jobs plays one at a time where nothing confines")
    client = tmp_path / "slow.py"
    client.write_text("import time\ntime.sleep(3)\n")
    names = ["plain", "plain_two_turns", "command_approval"]
    started = time.monotonic()
    runs = run_clients(
        ClientSpec([sys.executable, str(client)]),
        [load_builtin(n) for n in names],
        report_dir=None,
        progress=None,
        jobs=3,
    )
    elapsed = time.monotonic() - started
    assert [r.scenario for r in runs] == names
    assert all(r.wall_s >= 3 for r in runs)
    assert elapsed < sum(r.wall_s for r in runs) - 2.5, (elapsed, [r.wall_s for r in runs])


def test_unconfined_jobs_run_one_at_a_time_saying_why(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """An unconfined tree is told by the harness's descendants, which scenarios at once share: one at a time."""
    monkeypatch.setenv(proctree.CONFINE_ENV, "none")
    client = tmp_path / "quick.py"
    client.write_text("")
    runs = run_clients(
        ClientSpec([sys.executable, str(client)]),
        [load_builtin("plain"), load_builtin("plain_two_turns")],
        report_dir=None,
        progress=None,
        jobs=4,
    )
    assert [r.scenario for r in runs] == ["plain", "plain_two_turns"]
    assert "--jobs 4: scenarios run one at a time (not confined" in capsys.readouterr().err


@pytest.mark.parametrize("jobs", ["0", str(MAX_JOBS + 1), "-2"])
def test_jobs_out_of_range_is_a_usage_error(jobs: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--client-cmd", f"{sys.executable} -c pass", "--scenario", "plain", "--jobs", jobs])
    assert code == USAGE
    assert f"--jobs must be in 1..{MAX_JOBS}" in capsys.readouterr().err


def test_jobs_without_a_client_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--scenario", "plain", "--jobs", "2"]) == USAGE
    assert "--jobs plays an outside client's scenarios at once: it needs --client-cmd" in capsys.readouterr().err


def test_the_run_says_its_wall_time_and_the_longest_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    if not proctree.confinement().confined:
        pytest.skip("--jobs plays one at a time where nothing confines")
    argv = ["run", "--client-cmd", f"{sys.executable} -c pass", "--scenario", "plain", "--scenario", "plain_two_turns"]
    main([*argv, "--jobs", "2"])
    err = capsys.readouterr().err
    assert "scenario run(s), up to 2 at once (the scenarios' own: " in err and "the longest " in err


def test_a_catalogue_against_its_baseline_names_each_new_and_stale_failure() -> None:
    from conformance.clients.pypi import against_baseline
    from contracts.checks import Check

    def check(scenario: str, name: str, status: str, level: str = "must") -> Check:
        return Check(scenario, "fake-process", "client", name, status, f"{name} detail", "", level=level)  # type: ignore[arg-type]

    checks = [
        check("plain", "deadline", "fail"),
        check("plain", "server ended", "pass"),
        check("hang", "x", "fail"),
        check("plain", "exit status", "fail", "should"),  # a recommendation not met: never new
    ]
    entry = {"target": "fake-process", "contract": "client", "why": "its bug"}
    entries = [
        {**entry, "scenario": "plain", "name": "server ended", "status": "fail"},  # passes now: stale
        {**entry, "scenario": "hang", "name": "x", "status": "flaky"},  # tolerated either way
        {**entry, "scenario": "ws_only", "name": "y", "status": "fail"},  # not played: not judged
    ]
    new, stale = against_baseline(checks, entries, {"plain", "hang"})
    assert new == ["plain: client / deadline: deadline detail"]
    assert stale == ["plain: client / server ended"]
