"""The fake's ``--listen ws://`` and ``unix://`` answer as 0.171.0 does: the HTTP side (``/readyz``,
``/healthz``, refused upgrades), both auth modes (no token, a wrong token, an expired or wrongly-signed JWT…),
the start-up errors and the banner, and the websocket's frames (pings, binary and non-JSON frames, fragments,
a frame over 16 MiB, a close frame), compared with ``tests/data/real/0.171.0/transports/observed.json`` (what
the real binary did, recorded by ``tests/transport_observe.py``) on every run, and with the live binary under
``real_codex``. A session (initialize, thread/start, a turn) over ws and unix has the same server side on both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from support import paths
from transport_observe import fake_start, observe, real_start

from contracts.fidelity import diff_server_sides, render
from fake_server.catalogue import resolve
from harness.runner import play

RECORDED = paths.DATA / "real" / "0.171.0" / "transports" / "observed.json"


def differences(real: Any, fake: Any, path: str = "") -> list[str]:
    if isinstance(real, dict) and isinstance(fake, dict):
        return [d for k in sorted(set(real) | set(fake)) for d in differences(real.get(k), fake.get(k), f"{path}/{k}")]
    return [] if real == fake else [f"{path}: real {json.dumps(real)[:200]}, fake {json.dumps(fake)[:200]}"]


def test_the_fake_answers_as_the_recorded_real_binary(tmp_path: Path) -> None:
    recorded = json.loads(RECORDED.read_text())
    observed = trio.run(observe, fake_start(tmp_path), tmp_path)
    assert differences(recorded, observed) == []


def test_the_recording_covers_what_a_client_meets() -> None:
    """The observations a user relies on are in the file (a re-recording that lost a part fails here)."""
    recorded = json.loads(RECORDED.read_text())
    assert recorded["http"]["GET /readyz"] == {"status": 200, "body": ""}
    assert recorded["auth"]["capability a wrong token"] == {"status": 401, "body": "invalid websocket bearer token"}
    assert recorded["auth"]["jwt expired"] == {"status": 401, "body": "expired websocket jwt"}
    assert recorded["auth"]["jwt wrongly signed"] == {"status": 401, "body": "invalid websocket jwt"}
    assert recorded["startup"]["non-loopback without auth"]["exit"] == 1
    assert recorded["frames"]["pongs per ping"] == 2
    assert recorded["unix"]["GET /readyz"] == {"status": None}
    assert recorded["banner"][1] == "  listening on: ws://127.0.0.1:PORT"


@pytest.mark.real_codex
def test_the_live_binary_answers_as_the_fake(codex_bin: Path, tmp_path: Path) -> None:
    real = trio.run(observe, real_start(codex_bin, tmp_path / "real"), tmp_path)
    fake = trio.run(observe, fake_start(tmp_path / "fake"), tmp_path)
    assert differences(real, fake) == []


@pytest.mark.real_codex
@pytest.mark.parametrize("transport", ["ws", "unix"])
def test_a_session_over_a_socket_has_the_real_server_side(codex_bin: Path, tmp_path: Path, transport: str) -> None:
    """initialize, thread/start and a turn (``plain``; ``command_approval`` for a server request) on the real
    binary and on fake-codex, each over ``transport``: the same server side, structurally."""
    for name in ("plain", "command_approval"):
        scenario = resolve(name)
        real = play(scenario, "real", work_dir=tmp_path / f"{name}-real", codex=codex_bin, transport=transport)
        fake = play(scenario, "fake-process", work_dir=tmp_path / f"{name}-fake", transport=transport)
        assert real.meta["transport"] == fake.meta["transport"] == transport
        assert real.results and real.results[0].status == "completed", real.client_errors
        found = diff_server_sides(
            [e.frame for e in real.wire if e.dir == "s2c"], [e.frame for e in fake.wire if e.dir == "s2c"]
        )
        assert found == [], render(found)
