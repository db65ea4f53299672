"""The literal projections in test_real_codex match the reference transcripts of the repository."""

from __future__ import annotations

import pytest
from test_real_codex import REFERENCE
from test_real_driver import project
from test_reference_set import transcript


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_projection_matches_the_transcript(name: str) -> None:
    log = [(entry["dir"], entry["msg"]) for entry in transcript(name) if entry["dir"] != "note"]
    assert project(log) == REFERENCE[name]
