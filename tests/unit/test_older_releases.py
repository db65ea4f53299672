"""What releases older than the supported range do, judged right from sessions recorded on them
(tests/data/older-releases/; no binary needed)."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from support import paths

from codex_client.usage import UsageLedger
from contracts import releases, schema_store, stable_params
from contracts.checks.usage import wire_usage
from contracts.checks.wire_index import WireIndex
from contracts.record import WireEntry
from contracts.usage import UsageBuckets
from harness import runner, scenario_lookup

DATA = paths.DATA / "older-releases"
FIRST = UsageBuckets(input=60, cache_read=40, cache_write=0, output=20, reasoning=5)
SECOND = UsageBuckets(input=50, cache_read=100, cache_write=0, output=10, reasoning=0)


def _wire(path: Path) -> list[WireEntry]:
    return [WireEntry.from_json(orjson.loads(line)) for line in path.read_bytes().splitlines() if line.strip()]


def _turn_ids(wire: list[WireEntry]) -> list[str]:
    return [
        e.frame["params"]["turn"]["id"]
        for e in wire
        if e.dir == "s2c" and e.frame is not None and e.frame.get("method") == "turn/started"
    ]


def test_a_usage_re_report_at_a_response_start_counts_nothing_in_the_wire_truth() -> None:
    wire = _wire(DATA / "0.130.0" / "plain_two_turns.jsonl")
    first, second = _turn_ids(wire)
    index = WireIndex.build(wire)
    assert len(index.turn_frames("s2c", "thread/tokenUsage/updated", second)) == 2  # the re-report, then its own
    assert wire_usage(index, first) == FIRST
    assert wire_usage(index, second) == SECOND


def test_our_client_bills_a_re_reported_usage_once() -> None:
    ledger = UsageLedger()
    turns = []
    for entry in _wire(DATA / "0.130.0" / "plain_two_turns.jsonl"):
        frame = entry.frame
        if entry.dir != "s2c" or frame is None:
            continue
        if frame.get("method") == "turn/started":
            turns.append(ledger.turn_started(frame["params"]["turn"]["id"]))
        elif frame.get("method") == "thread/tokenUsage/updated":
            ledger.update(frame["params"])
    assert [t.buckets() for t in turns] == [FIRST, SECOND]


def test_the_careful_reference_client_bills_a_re_reported_usage_once() -> None:
    """careful.py is the known-good client: it counts as the wire truth does, on the same recorded session."""
    import sys

    sys.path.insert(0, str(paths.REPO / "conformance" / "clients"))
    import careful

    turns: list[list[dict]] = []
    before: list[dict | None] = []
    total = None
    for entry in _wire(DATA / "0.130.0" / "plain_two_turns.jsonl"):
        frame = entry.frame
        if entry.dir != "s2c" or frame is None:
            continue
        if frame.get("method") == "turn/started":
            turns.append([])
            before.append(total)
        elif frame.get("method") == "thread/tokenUsage/updated":
            turns[-1].append(frame["params"]["tokenUsage"])
            total = frame["params"]["tokenUsage"]["total"]
    billed = [careful.buckets(updates, start) for updates, start in zip(turns, before, strict=True)]
    assert [UsageBuckets(**b) for b in billed] == [FIRST, SECOND]


def test_a_params_field_the_release_gates_behind_experimental_api_is_read_from_its_pin() -> None:
    with schema_store.using_user_store(DATA / "0.150.0" / "pin"):
        assert not stable_params.takes_without_opt_in("0.150.0", "thread/resume", "excludeTurns")
        assert stable_params.takes_without_opt_in("0.150.0", "thread/resume", "cwd")
        assert stable_params.takes_without_opt_in("0.150.0", "thread/resume", "notAField")
    assert stable_params.takes_without_opt_in("0.163.0", "thread/resume", "excludeTurns")  # stable there
    assert stable_params.takes_without_opt_in("9.9.9", "thread/resume", "excludeTurns")  # no pin: the default


def _resume_params(tmp_path: Path) -> dict[str, object]:
    record = runner.play(scenario_lookup.resolve("resume"), "fake", work_dir=tmp_path)
    return next(
        e.frame["params"]
        for e in record.wire
        if e.dir == "c2s" and e.frame is not None and e.frame.get("method") == "thread/resume"
    )


def test_our_client_resumes_without_a_field_the_server_s_pin_gates(tmp_path: Path, monkeypatch) -> None:
    assert _resume_params(tmp_path / "default")["excludeTurns"] is True
    asked: list[tuple[object, ...]] = []

    def gated(release: object, method: str, name: str) -> bool:
        asked.append((release, method, name))
        return False

    monkeypatch.setattr(stable_params, "takes_without_opt_in", gated)
    assert "excludeTurns" not in _resume_params(tmp_path / "gated")
    assert asked == [(releases.default_version(), "thread/resume", "excludeTurns")]


@pytest.mark.real_codex
def test_the_real_0_150_0_resumes_the_thread_our_client_asks_for(tmp_path: Path) -> None:
    """On the binary (``CODEX_BIN_0_150_0``, ``make test`` installs it): no ``-32600``, the same thread back."""
    value = os.environ.get("CODEX_BIN_0_150_0")
    if not value:
        pytest.skip("codex 0.150.0 not selected (set CODEX_BIN_0_150_0)")
    with schema_store.using_user_store(DATA / "0.150.0" / "pin"):
        record = runner.play(scenario_lookup.resolve("resume"), "real", work_dir=tmp_path, codex=Path(value))
    frames = [(e.dir, e.frame) for e in record.wire if e.frame is not None]
    asked = next(f for d, f in frames if d == "c2s" and f.get("method") == "thread/resume")
    answer = next(f for d, f in frames if d == "s2c" and f.get("id") == asked["id"] and "method" not in f)
    assert "excludeTurns" not in asked["params"]
    assert "error" not in answer, answer
    assert answer["result"]["thread"]["id"] == asked["params"]["threadId"]
