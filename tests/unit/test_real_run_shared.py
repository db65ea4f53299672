"""The servers of one outside client's run on the real target share a run (issue 33 §3).

Before, each relayed server's mock played the scenario from turn 1 and had a ``CODEX_HOME`` of its own: a client
that starts a server per turn got turn 1's model answers on every turn and could not resume its thread. Now the
run's mocks share one turn count (:class:`fake_server.responses_api.RunTurnCounter`) and the run's servers one run
directory (:func:`harness.targets.real.shared_run`). The real binary's side: tests/real/test_outside_real.py.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from contracts.scenario import ClientFile, ClientPlan, Scenario, TurnScript
from fake_server.responses_api import ResponseSchedule, RunTurnCounter
from harness.targets.real import FAKE_BASE_URL, PROVIDER_ID, shared_run


def scenario(*turns: TurnScript) -> Scenario:
    return Scenario(name="t", description="", turns=turns)


def test_the_mocks_of_a_run_continue_its_turns(tmp_path: Path) -> None:
    play = scenario(TurnScript(), TurnScript(), TurnScript())
    counter = RunTurnCounter(tmp_path / "turns")
    first, second = ResponseSchedule(play, counter=counter), ResponseSchedule(play, counter=counter)
    assert first.next("turn-a")[:2] == (0, 0)
    assert first.next("turn-a")[:2] == (0, 1)  # the same turn's follow-up takes no turn of the run
    assert second.next("turn-b")[:2] == (1, 0)  # the next server's first turn is the run's second
    assert second.next("turn-c")[:2] == (2, 0)
    assert ResponseSchedule(play).next("turn-d")[:2] == (0, 0)  # a mock of its own still counts from its start


def test_a_counter_that_is_not_a_regular_file_is_left_for_the_mocks_own(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("7")
    os.symlink(target, tmp_path / "turns")
    schedule = ResponseSchedule(scenario(TurnScript()), counter=RunTurnCounter(tmp_path / "turns"))
    assert schedule.next("turn-a")[:2] == (0, 0) and schedule.counter is None
    assert target.read_text() == "7"  # never followed


def test_a_shared_run_has_one_home_with_the_mock_provider_and_the_files(tmp_path: Path) -> None:
    play = Scenario(
        name="t", description="", turns=(TurnScript(),), client=ClientPlan(files=(ClientFile("a.txt", "A"),))
    )
    run = shared_run(tmp_path / "run", play)
    assert all(d.is_dir() for d in (run.codex_home, run.home, run.tmpdir, run.workdir))
    config = tomllib.loads((run.codex_home / "config.toml").read_text())
    assert config["model_provider"] == PROVIDER_ID
    assert config["model_providers"][PROVIDER_ID]["base_url"] == FAKE_BASE_URL  # each server gets its mock by -c
    assert (run.workdir / "a.txt").read_text() == "A"
    with pytest.raises(FileExistsError):  # made once per run
        shared_run(tmp_path / "run", play)
