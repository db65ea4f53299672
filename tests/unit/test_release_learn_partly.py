"""``release learn`` does not claim success on a partly learned release: it names the sessions, says so in the
folder, and exits 1."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from contracts.exitcodes import FAILED, OK
from fake_server.catalogue import load_builtin
from harness.commands import release as release_command
from harness.learn import learner
from harness.learn.sessions import Session


def _learned(tmp_path: Path, remaining: dict[str, list[str]]) -> learner.Learned:
    plain = load_builtin("plain")
    sessions = [Session("transcripts", name, plain, record=object()) for name in ("plain", "steer", "resume")]  # type: ignore[arg-type]
    description = {
        "fake": {"switches": {"abort_leaves_tools_open": True}, "not_written": []},
        "trace": {"schema": 3, "payload_files": False, "closing_event": "recording_completed"},
        "methods": {},
        "learned_from": {"answers": "recorded"},
    }
    return learner.Learned("0.170.0", tmp_path, "0.169.0", description, sessions, remaining, {"record": 1.0})


@pytest.mark.parametrize(("remaining", "code"), [({}, OK), ({"steer": ["usage differs"]}, FAILED)])
def test_learn_exits_1_when_sessions_still_play_differently(
    remaining: dict[str, list[str]],
    code: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(learner, "learn", lambda *a, **k: _learned(tmp_path, remaining))
    monkeypatch.setattr("harness.fidelity_run.select_binary", lambda *a, **k: Path("/bin/true"))
    args = argparse.Namespace(store=tmp_path / "store", codex=None, reference=None, workers=1)
    assert release_command.run(args) == code
    out = capsys.readouterr().out
    if remaining:
        assert "PARTLY LEARNED: 1 of 3 learning sessions still play differently" in out and "steer" in out
    else:
        assert "every learning session compared plays as recorded (3 compared)" in out


def test_the_partly_learned_note_names_the_sessions_within_bounds() -> None:
    note = learner.partly_learned_note({"steer": ["x"], "resume": ["y"]}, 15)
    assert note == "partly learned: 2 of 15 learning sessions still play differently (resume, steer)"
    assert len(learner.partly_learned_note({f"s{i}": [] for i in range(500)}, 500)) <= 900
