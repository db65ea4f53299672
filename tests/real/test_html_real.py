"""The mock model's lane: a real-binary session records the mock Responses API's traffic (model.jsonl) and
the diagram draws it between the server and the model."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.record import SessionRecord
from harness.html import diagram
from harness.html.report import render_session_page
from harness.runner import run_one
from harness.scenario_lookup import resolve


@pytest.mark.real_codex
def test_real_session_has_a_model_lane(codex_bin: Path, tmp_path: Path) -> None:
    run = run_one(resolve("two_approvals"), "real", codex=codex_bin, save_dir=tmp_path / "rec")
    assert run.record is not None, run.checks[:1]
    assert (tmp_path / "rec" / "model.jsonl").is_file()
    record = SessionRecord.load(tmp_path / "rec")
    requests = [e for e in record.model if e.dir == "c2m"]
    assert len(requests) >= 2 and all(e.msg["path"] == "/v1/responses" for e in requests)
    assert any(e.msg.get("event") == "response.completed" for e in record.model)
    # On the session's clock: the model's traffic falls between the turn's start and its end on the wire.
    assert record.wire[0].t <= requests[0].t <= record.wire[-1].t
    d = diagram.build(record, run.checks)
    assert d.lanes == ("client", "server", "model")
    model_rows = [r for r in d.rows if r.kind == "model"]
    assert any("POST /v1/responses (turn 1, response 1)" in r.label for r in model_rows)
    assert "mock model (Responses API)" in render_session_page(record, run.checks)
