"""Pending input as 0.171.0 times it: a turn/start on the busy thread and a turn/steer are answered at once,
their user messages appear when the next model request begins, together and in order.

The recordings (tests/data/real/0.171.0/probes/pending_*.jsonl) were taken from the real binary: both
orders of a turn/start and a steer sent while the model streams, a wrong ``expectedTurnId`` then a
right one, and a steer while a command approval is pending. The fake replays each and must write the
same server side (contracts.fidelity: shapes in order, deltas collapsed); under ``real_codex`` the
real binary replays them live too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import probe_replay
import pytest
from support import paths

from contracts.fidelity import diff_server_sides, render
from contracts.scenario import Scenario
from fake_server.catalogue import resolve

REPO = paths.REPO


def _scenario(name: str) -> Scenario:
    spec = probe_replay.PENDING_PROBES[name]
    return resolve(str(REPO / spec) if spec.endswith(".toml") else spec)


def _fake(name: str, tmp_path: Path) -> list[dict[str, Any]]:
    workdir = tmp_path / "workdir"
    workdir.mkdir(exist_ok=True)
    return probe_replay.play_fake(probe_replay.load(name), _scenario(name), workdir).frames


def _user_texts(frames: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [
        (i, f["params"]["item"]["content"][0]["text"])
        for i, f in enumerate(frames)
        if f.get("method") == "item/completed" and f["params"]["item"]["type"] == "userMessage"
    ]


@pytest.mark.parametrize("name", sorted(probe_replay.PENDING_PROBES))
def test_the_fake_times_pending_input_like_the_recording(name: str, tmp_path: Path) -> None:
    recorded = probe_replay.load(name).received
    differences = diff_server_sides(recorded, _fake(name, tmp_path), collapse_deltas=True)
    assert differences == [], render(differences)


@pytest.mark.parametrize(
    ("name", "order"),
    [("pending_start_then_steer", ["more", "steer"]), ("pending_steer_then_start", ["steer", "more"])],
)
def test_both_inputs_come_together_in_order_after_both_answers(name: str, order: list[str], tmp_path: Path) -> None:
    frames = _fake(name, tmp_path)
    answers = [i for i, f in enumerate(frames) if f.get("id") in (4, 5) and "method" not in f]
    users = _user_texts(frames)[1:]  # the first is the turn's own input
    assert [t for _, t in users] == order
    assert all(i > max(answers) for i, _ in users)
    # the abandoned stream's message never completes; the next response follows the pending input
    completed = [f["params"]["item"]["id"] for f in frames if f.get("method") == "item/completed"]
    assert "msg-1" not in completed
    first_agent = next(
        i
        for i, f in enumerate(frames)
        if f.get("method") == "item/started"
        and f["params"]["item"]["type"] == "agentMessage"
        and f["params"]["item"]["id"] != "msg-1"
    )
    assert first_agent > users[-1][0]
    assert sum(1 for f in frames if f.get("method") == "turn/completed") == 1


def test_a_steer_during_an_approval_waits_for_the_tool(tmp_path: Path) -> None:
    frames = _fake("pending_steer_during_approval", tmp_path)
    steer_answer = next(i for i, f in enumerate(frames) if f.get("id") == 4 and "method" not in f)
    tool_done = next(
        i
        for i, f in enumerate(frames)
        if f.get("method") == "item/completed" and f["params"]["item"]["type"] == "commandExecution"
    )
    ((at, text),) = _user_texts(frames)[1:]
    assert text == "steer" and steer_answer < tool_done < at


def test_a_steer_right_after_a_folded_turn_start_finds_the_turn_running(tmp_path: Path) -> None:
    """The old fake restarted at once, so a steer a millisecond later found no active turn."""
    frames = _fake("pending_start_then_steer", tmp_path)
    steer = next(f for f in frames if f.get("id") == 5 and "method" not in f)
    assert "result" in steer, steer


@pytest.mark.parametrize("name", ["pending_start_then_steer", "pending_steer_during_approval"])
async def test_fake_codex_times_pending_input_like_the_recording(name: str, tmp_path: Path) -> None:
    spec = probe_replay.PENDING_PROBES[name]
    scenario = REPO / spec if spec.endswith(".toml") else Path(_scenario(name).source or spec)
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    replay = await probe_replay.play_fake_codex(probe_replay.load(name), scenario, workdir)
    differences = diff_server_sides(probe_replay.load(name).received, replay.frames, collapse_deltas=True)
    assert differences == [], render(differences)


@pytest.mark.real_codex
@pytest.mark.parametrize("name", sorted(probe_replay.PENDING_PROBES))
async def test_the_real_binary_still_times_pending_input_so(name: str, codex_bin: Path, tmp_path: Path) -> None:
    real = await probe_replay.play_real(probe_replay.load(name), _scenario(name), codex_bin)
    differences = diff_server_sides(real.frames, _fake(name, tmp_path), collapse_deltas=True)
    assert differences == [], render(differences)
