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

OBSERVED = Path(__file__).parent / "data" / "real" / "0.171.0" / "transports" / "ws_lifetime.json"


def test_the_fake_keeps_a_thread_going_after_its_connection_as_the_real() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        fake = trio.run(ws_lifetime_observe.observe, ws_lifetime_observe.fake_start(Path(tmp)))
    assert fake == orjson.loads(OBSERVED.read_bytes())


def test_the_observation_is_not_blind() -> None:
    real = orjson.loads(OBSERVED.read_bytes())
    assert real["loaded after the close"] == [True]
    assert real["first turn, read by connection 2"] == [
        {"status": "completed", "text": "one two three four five six seven eight nine ten "}
    ]
    assert real["next turn, connection 2"]["text"] == ["The second answer."]  # not the first turn again


@pytest.mark.real_codex
def test_the_live_binary_keeps_a_thread_going_as_observed(codex_bin: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        live = trio.run(ws_lifetime_observe.observe, ws_lifetime_observe.real_start(codex_bin, Path(tmp)))
    assert live == orjson.loads(OBSERVED.read_bytes())
