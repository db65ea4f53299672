"""The literal projections in test_real_codex match the recorded real transcripts they were taken from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_real_codex import REFERENCE
from test_real_driver import project

TRANSCRIPTS = Path(__file__).resolve().parents[2] / "shared" / "reference" / "real-transcripts"


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_projection_matches_the_transcript(name: str) -> None:
    path = TRANSCRIPTS / f"{name}.jsonl"
    if not path.is_file():
        pytest.skip(f"reference transcripts not beside the checkout ({path})")
    log = []
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        if entry["dir"] != "note":
            log.append((entry["dir"], entry["msg"]))
    assert project(log) == REFERENCE[name]
