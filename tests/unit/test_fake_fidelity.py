"""The fake replays every real 0.171.0 reference transcript structurally equal, with every frame valid.

The transcripts are the project's reference set (tests/data/real/0.171.0/, `make reference`); each is
replayed on the scenario it was recorded with (its model side), the client side coming from the file.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.replay import replay
from test_reference_set import reference, replayable_set, transcript

from contracts.fidelity import Difference, diff_server_sides, render, shape
from contracts.validator import Validator

NAMES = sorted(r.name for r in replayable_set())


def _replay(name: str) -> Any:
    return replay(transcript(name), reference(name).scenario())


def _request_methods(transcript: list[dict[str, Any]]) -> dict[Any, str]:
    out: dict[Any, str] = {}
    for entry in transcript:
        msg = entry.get("msg")
        if entry.get("dir") == "c2s" and isinstance(msg, dict) and "method" in msg and "id" in msg:
            out[msg["id"]] = msg["method"]
    return out


@pytest.mark.parametrize("name", NAMES)
def test_transcript_replays_structurally_equal(name: str) -> None:
    result = _replay(name)
    assert result.differences == [], render(result.differences)


@pytest.mark.parametrize("name", NAMES)
def test_replayed_frames_validate_against_the_pinned_schema(name: str) -> None:
    experimental = name == "experimental_optout"
    validator = Validator.for_release("0.171.0", experimental)
    methods = _request_methods(transcript(name))
    result = _replay(name)
    problems = []
    for frame in result.fake:
        assert frame is not None
        method = methods.get(frame.get("id")) if "method" not in frame else None
        for violation in validator.validate(frame, "s2c", request_method=method):
            problems.append(f"{frame.get('method') or method}: {violation}")
    assert problems == []


def test_late_answer_after_interrupt_only_logs() -> None:
    result = _replay("approval_interrupt")
    assert "could not find callback for Integer(0)" in "".join(result.server.stderr)
    last = result.fake[-1]
    assert last is not None and last.get("method") == "serverRequest/resolved"


def test_stdin_eof_exits_zero_promptly() -> None:
    result = _replay("stdin_eof")
    assert result.exit_code == 0


def test_fidelity_ignores_ids_texts_and_ambient() -> None:
    real = transcript("plain")
    frames = [e["msg"] for e in real if e["dir"] == "s2c"]
    mangled = [
        {**f, "emittedAtMs": 1} if "method" in f else f
        for f in frames
        if f.get("method") not in ("configWarning", "account/rateLimits/updated")
    ]
    assert diff_server_sides(frames, mangled) == []


def test_fidelity_reports_a_missing_and_a_changed_frame() -> None:
    real = [e["msg"] for e in transcript("plain") if e["dir"] == "s2c"]
    dropped = [f for f in real if f.get("method") != "thread/started"]
    diffs = diff_server_sides(real, dropped)
    assert [d.what for d in diffs] == ["missing"] and diffs[0].expected == (("thread/started",),)
    changed = [
        {**f, "params": {**f["params"], "turn": {**f["params"]["turn"], "status": "failed"}}}
        if f.get("method") == "turn/completed"
        else f
        for f in real
    ]
    diffs = diff_server_sides(real, changed)
    assert len(diffs) == 2 and all(isinstance(d, Difference) and d.what == "changed" for d in diffs)
    assert "turn/completed" in render(diffs)


def test_fidelity_resolved_is_unordered_within_its_turn_but_counted() -> None:
    real = [e["msg"] for e in transcript("approval_interrupt") if e["dir"] == "s2c"]
    resolved = [f for f in real if f.get("method") == "serverRequest/resolved"]
    others = [f for f in real if f.get("method") != "serverRequest/resolved"]
    completed_at = next(i for i, f in enumerate(others) if f.get("method") == "turn/completed")
    moved = others[:completed_at] + resolved + others[completed_at:]
    assert diff_server_sides(real, moved) == []
    diffs = diff_server_sides(real, others)
    assert [d.what for d in diffs] == ["resolved count"]


def test_shape_of_odd_frames() -> None:
    assert shape(None) == ("not-a-frame",)
    assert shape({"id": 1, "error": {"code": -32600, "message": "x"}}) == ("response", "error", -32600)
    assert shape({"method": "warning", "params": {}}) is None
    assert shape({"method": "item/started", "params": "weird"}) == ("item/started", None, None)


def test_collapse_deltas_forgives_chunking() -> None:
    a = [{"method": "item/agentMessage/delta", "params": {}}] * 4
    assert diff_server_sides(a, a[:1]) != []
    assert diff_server_sides(a, a[:1], collapse_deltas=True) == []


def _swap_status_around_item(frames: list[dict]) -> list[dict]:
    """Move the thread/status/changed that follows a declined item/completed in front of it."""
    out = list(frames)
    for i in range(len(out) - 1):
        item = out[i].get("params", {}).get("item", {}) if out[i].get("method") == "item/completed" else {}
        if item.get("status") == "declined" and out[i + 1].get("method") == "thread/status/changed":
            out[i], out[i + 1] = out[i + 1], out[i]
            return out
    raise AssertionError("no declined item followed by a status change")


def test_fidelity_forgives_the_real_status_race_after_a_declined_approval_only() -> None:
    real = [e["msg"] for e in transcript("approval_decline") if e["dir"] == "s2c"]
    assert diff_server_sides(real, _swap_status_around_item(real)) == []
    # The same swap around a completed (accepted) item is a real difference.
    accepted = [e["msg"] for e in transcript("approval_accept") if e["dir"] == "s2c"]
    completed_at = next(
        i
        for i, f in enumerate(accepted)
        if f.get("method") == "item/completed" and f["params"]["item"]["type"] == "commandExecution"
    )
    moved = list(accepted)
    status = {
        "method": "thread/status/changed",
        "params": {"threadId": "t", "status": {"type": "active", "activeFlags": []}},
    }
    moved.insert(completed_at + 1, status)
    reordered = list(accepted)
    reordered.insert(completed_at, status)
    assert diff_server_sides(moved, reordered) != []


def test_fidelity_places_the_turn_start_answer_that_lost_its_race_before_turn_started() -> None:
    """Loaded, 0.169.0 once wrote turn/started before the turn/start answer; other moves stay differences."""
    real = [e["msg"] for e in transcript("approval_decline") if e["dir"] == "s2c"]
    started = next(i for i, f in enumerate(real) if f.get("method") == "turn/started")
    answer = next(i for i in range(started, -1, -1) if "result" in real[i])  # unloaded: before the status change
    assert real[answer + 1].get("method") == "thread/status/changed"
    raced = list(real)
    raced.insert(started, raced.pop(answer))  # now right after turn/started
    assert raced[started - 1].get("method") == "turn/started" and "result" in raced[started]
    assert diff_server_sides(real, raced) == []
    later = list(real)
    later.insert(started + 2, later.pop(answer))  # further into the turn: not the race
    assert diff_server_sides(real, later) != []


def test_fidelity_reads_a_status_repeated_right_after_itself_as_one() -> None:
    """Loaded, 0.171.0 wrote notLoaded twice for one thread/archive; other repeats stay differences."""
    real = [e["msg"] for e in transcript("threads_after_turn") if e["dir"] == "s2c"]
    at = next(
        i
        for i, f in enumerate(real)
        if f.get("method") == "thread/status/changed" and f["params"]["status"]["type"] == "notLoaded"
    )
    doubled = [*real[: at + 1], {**real[at], "emittedAtMs": 1}, *real[at + 1 :]]
    assert diff_server_sides(real, doubled) == []
    other_thread = {**real[at], "params": {**real[at]["params"], "threadId": "another"}}
    assert diff_server_sides(real, [*real[: at + 1], other_thread, *real[at + 1 :]]) != []
    apart = [*real[: at + 2], real[at], *real[at + 2 :]]  # not adjacent: a second change, announced again
    assert diff_server_sides(real, apart) != []
