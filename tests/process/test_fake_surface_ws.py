"""A websocket server's threads outlive their connection: fake-codex against what the real binary was observed to do
(``tests/ws_lifetime_observe.py``): the turn goes on after its connection closed, a second connection finds the
thread loaded with that turn completed and continues the scenario (its second turn, not its first again), and
SIGTERM closes the traces (exit 0)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import orjson
import pytest
import trio
import ws_lifetime_observe
from support import paths

REAL = paths.DATA / "real"
OBSERVED = {p.parent.parent.name: p for p in sorted(REAL.glob("*/transports/ws_lifetime.json"))}


@pytest.mark.parametrize("release", sorted(OBSERVED))
def test_the_fake_keeps_a_thread_going_after_its_connection_as_the_real(release: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        fake = trio.run(ws_lifetime_observe.observe, ws_lifetime_observe.fake_start(Path(tmp), release))
    assert fake == orjson.loads(OBSERVED[release].read_bytes())


def test_the_observation_is_not_blind() -> None:
    real = orjson.loads(OBSERVED["0.171.0"].read_bytes())
    assert real["loaded after the close"] == [True]
    assert real["first turn, read by connection 2"] == [
        {"status": "completed", "text": "one two three four five six seven eight nine ten "}
    ]
    assert real["next turn, connection 2"]["text"] == ["The second answer."]  # not the first turn again


@pytest.mark.real_codex
def test_the_live_binary_keeps_a_thread_going_as_observed(codex_bin: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        live = trio.run(ws_lifetime_observe.observe, ws_lifetime_observe.real_start(codex_bin, Path(tmp)))
    from harness.codex_bin import codex_version

    release = codex_version(codex_bin)
    if release not in OBSERVED:
        pytest.skip(f"codex-cli {release} was not observed (tests/ws_lifetime_observe.py records it)")
    assert live == orjson.loads(OBSERVED[release].read_bytes())
