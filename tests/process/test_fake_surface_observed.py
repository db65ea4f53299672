"""What fake-codex answers beside the turn core, against what each real release was observed to answer
(``tests/surface_observe.py``: config/read from an empty home and from a home's own config.toml / ``-c``,
archived threads listed and unarchived, the restored token usage after thread/resume).

On every run the fake plays each release's observation and must give the same reduced answers; under
``real_codex`` the live binary is observed again and must give what the fake gives.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import surface_observe
from support import paths

REAL = paths.DATA / "real"
OBSERVED = {p.parent.parent.name: p for p in sorted(REAL.glob("*/surface/observed.json"))}
_FAKE: dict[str, dict[str, Any]] = {}


def _answers(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # The notifications before an answer are left out (which answer a late one lands behind is timing); the ones
    # just after a thread/resume (``after``) are kept: the restored usage is among them.
    return [{k: v for k, v in step.items() if k != "notes"} for step in steps]


def _fake(release: str) -> dict[str, Any]:
    if release not in _FAKE:
        _FAKE[release] = surface_observe.run(lambda tmp: surface_observe.fake_home(tmp, release), together=True)
    return _FAKE[release]


def _observed(release: str) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads(OBSERVED[release].read_bytes())
    return data


CASES = [(release, case) for release in OBSERVED for case in sorted(_observed(release))]


def test_every_shipped_release_was_observed() -> None:
    from contracts import releases

    assert {r.version for r in releases.playable()} <= set(OBSERVED)


@pytest.mark.parametrize(("release", "case"), CASES, ids=[f"{r}-{c}" for r, c in CASES])
def test_the_fake_answers_as_the_release_was_observed(release: str, case: str) -> None:
    assert _answers(_fake(release)[case]) == _answers(_observed(release)[case])


def test_the_observation_is_not_blind() -> None:
    """What the fake answered before this was observed differs from the observation, step for step."""
    real = _observed("0.171.0")
    empty = next(s for s in real["config: empty home"] if s.get("params") == {})
    assert empty["config"]["analytics"] is None and empty["config"]["check_for_update_on_startup"] is None
    assert "plugins" not in empty["config"]["features"] and empty["origins"] == {}
    archived = [s for s in real["archive"] if s.get("params") == {"archived": True}]
    assert len(archived[0]["data"]) == 3, "every archived thread is listed, with a turn or not"
    unarchived = [s["thread"]["model"] for s in real["archive"] if s.get("method") == "thread/unarchive"]
    assert None in unarchived
    resumed = [s["after"] for s in real["resume"] if s.get("method") == "thread/resume"]
    assert ["thread/tokenUsage/updated", "thread/goal/cleared"] in resumed


@pytest.mark.real_codex
def test_the_live_binary_answers_as_the_fake(codex_bin: Path, tmp_path: Path) -> None:
    """Observed again on the live binary (in a network namespace of its own where ``unshare`` can), against
    the fake playing that release."""
    out = tmp_path / "observed.json"
    script = Path(surface_observe.__file__)
    done = subprocess.run(
        [sys.executable, str(script), "--codex", str(codex_bin), "--out", str(out)],
        capture_output=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    live = orjson.loads(out.read_bytes())
    version = subprocess.run([str(codex_bin), "--version"], capture_output=True, text=True, check=True, timeout=60)
    release = version.stdout.split()[-1]
    fake = _fake(release) if release in OBSERVED else _fake("0.171.0")
    for case, steps in live.items():
        assert _answers(steps) == _answers(fake[case]), case


def test_release_learn_records_no_empty_home_without_a_network_namespace(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without ``unshare`` the binary is never started with no config (it would reach for the network)."""
    from harness.learn import empty_home

    monkeypatch.setattr(empty_home.shutil, "which", lambda _name: None)
    assert empty_home.record(tmp_path / "no-such-codex", tmp_path) is None


@pytest.mark.real_codex
def test_release_learn_records_the_shipped_empty_home_answers(codex_bin: Path, tmp_path: Path) -> None:
    """What ``release learn`` records from an empty home is what the release folder ships."""
    from contracts import releases
    from harness.learn import empty_home

    found = empty_home.record(codex_bin, tmp_path)
    if found is None:
        pytest.skip("no network namespace can be made here (unshare --net)")
    version = subprocess.run([str(codex_bin), "--version"], capture_output=True, text=True, check=True, timeout=60)
    shipped = releases.get(version.stdout.split()[-1]).data("answers.json")
    assert found == {key: shipped[key] for key in empty_home.KEYS}
