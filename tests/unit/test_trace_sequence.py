"""The fake's trace bundles against the real binary's, event by event (contracts.trace.sequence).

Every real bundle of the reference sets (tests/data/real/<release>/trace-bundles/, recorded by
``make reference`` and, for the older releases, ``codex-harness record``) is compared with the bundle the
fake writes for the same scenario, playing that release's profile. The ``real_codex`` tests do the same for
every model-level built-in scenario on the live binaries (``codex-harness diff``: tests/real/test_real_fidelity.py
and tests/real/test_real_releases.py).
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from support import paths

from contracts.trace.errors import TraceLimitExceeded
from contracts.trace.reader import ReadLimits
from contracts.trace.sequence import canonical, diff_sequences, event_shape, event_shapes
from harness import scenario_lookup
from harness.runner import play

REPO = paths.REPO
REAL = REPO / "tests" / "data" / "real"
#: Real bundles the fake does not write alike, and why (a test below keeps each reason true).
NOT_ALIKE = {
    ("0.171.0", "goal"): "thread/goal/set starts model turns by itself on the real binary; the fake answers it only",
}


def _spec(name: str) -> str:
    for line in (REAL / "reference.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            _, listed, spec = line.split()
            if listed == name:
                return str(REPO / spec) if spec.endswith(".toml") else spec
    return name  # the older releases' bundles are named after built-in scenarios


def _real_bundles() -> list[tuple[str, str]]:
    out = []
    for release_dir in sorted(p for p in REAL.iterdir() if p.is_dir() and p.name[0].isdigit()):
        for bundle in sorted((release_dir / "trace-bundles").iterdir()):
            # real-as-*: shutdowns and SIGKILLs no scenario has (see that folder's README)
            if (bundle / "manifest.json").is_file() and not bundle.name.startswith("real-as-"):
                out.append((release_dir.name, bundle.name))
    return out


def _fake_shapes(release: str, name: str, tmp_path: Path) -> list[str]:
    record = play(scenario_lookup.resolve(_spec(name)), "fake", work_dir=tmp_path, release=release)
    assert record.server_trace is not None, f"{name}: the fake wrote no trace bundle"
    return event_shapes(record.server_trace)


def test_the_reference_sets_have_bundles_of_every_release() -> None:
    releases = {release for release, _ in _real_bundles()}
    assert releases == {"0.163.0", "0.169.0", "0.171.0"}
    assert len(_real_bundles()) >= 35


@pytest.mark.parametrize(("release", "name"), [b for b in _real_bundles() if b not in NOT_ALIKE], ids=lambda v: str(v))
def test_the_fake_writes_the_real_events(release: str, name: str, tmp_path: Path) -> None:
    real = event_shapes(REAL / release / "trace-bundles" / name)
    differences = diff_sequences(real, _fake_shapes(release, name, tmp_path))
    assert differences == [], f"{name} on {release}, fake against real:\n" + "\n".join(differences)


@pytest.mark.parametrize(("release", "name"), sorted(NOT_ALIKE))
def test_each_bundle_left_out_still_differs(release: str, name: str, tmp_path: Path) -> None:
    real = event_shapes(REAL / release / "trace-bundles" / name)
    assert diff_sequences(real, _fake_shapes(release, name, tmp_path)) != [], f"{name}: now alike; take it off"


# --- the shapes and the races read in one order ------------------------------------------------------


def _event(kind: str, **payload: object) -> dict[str, object]:
    return {"seq": 1, "payload": {"type": kind, **payload}}


def test_an_event_shape_keeps_kind_status_and_which_item() -> None:
    assert event_shape(_event("codex_turn_ended", status="cancelled")) == "codex_turn_ended cancelled"
    assert event_shape(_event("protocol_event_observed", event_type="warning")) == "protocol_event_observed warning"
    made_up = _event("history_item_accepted", item_id="msg_01a2310a-796a-71b1-b0ce-dbf00d6c5900")
    assert event_shape(made_up) == "history_item_accepted msg_*"
    output = _event("history_item_accepted", item_id="fco_1", tool_output_payload={})
    assert event_shape(output) == "history_item_accepted fco_*+output"
    assert event_shape(_event("history_item_accepted", item_id="msg-12")) == "history_item_accepted msg-#"
    assert event_shape(_event("history_item_accepted", item_id="fc_call_echo")) == "history_item_accepted fc_call_echo"
    assert event_shape([1]) == event_shape({"payload": 5}) == "?"


def test_an_inference_ending_after_its_streamed_output_reads_in_one_order() -> None:
    raced = ["inference_started", "history_item_accepted fc_call_patch", "tool_call_started", "inference_completed"]
    settled = ["inference_started", "inference_completed", "history_item_accepted fc_call_patch", "tool_call_started"]
    assert canonical(raced) == settled
    assert diff_sequences(settled, raced) == []
    # Not the race: the inference ends after the call's own end (something else came between).
    late = ["inference_started", "tool_call_started", "tool_call_ended completed", "inference_completed"]
    assert canonical(late) == late
    assert diff_sequences(settled, late) != []


def test_calls_settled_together_read_as_a_set_and_one_call_nearly_in_order() -> None:
    one_first = [
        "tool_call_ended failed",
        "history_item_accepted fco_*",
        "tool_call_runtime_started",
        "tool_call_runtime_ended completed",
        "tool_call_ended completed",
        "history_item_accepted fco_*",
    ]
    two_first = [
        "tool_call_runtime_started",
        "tool_call_ended failed",
        "history_item_accepted fco_*",
        "tool_call_runtime_ended completed",
        "tool_call_ended completed",
        "history_item_accepted fco_*",
    ]
    assert diff_sequences(one_first, two_first) == []
    # One call: its runtime end may follow its end and output; a runtime started after the end may not.
    ended_last = ["tool_call_runtime_started", "tool_call_runtime_ended completed", "tool_call_ended completed"]
    reaped_after = ["tool_call_runtime_started", "tool_call_ended completed", "tool_call_runtime_ended completed"]
    assert diff_sequences(ended_last, reaped_after) == []
    accepted_first = [*reaped_after[:2], "history_item_accepted fco_*", reaped_after[2]]  # 0.171.0, loaded
    assert diff_sequences([*ended_last, "history_item_accepted fco_*"], accepted_first) == []
    started_after = ["tool_call_ended completed", "tool_call_runtime_started", "tool_call_runtime_ended completed"]
    assert diff_sequences(ended_last, started_after) != []


def test_a_runtime_reaped_after_its_aborted_turn_reads_at_the_abort() -> None:
    at_abort = [
        "codex_turn_ended cancelled",
        "protocol_event_observed turn_aborted",
        "tool_call_runtime_ended failed",
        "protocol_event_observed shutdown_complete",
        "rollout_ended completed",
    ]
    reaped_late = [
        "codex_turn_ended cancelled",
        "protocol_event_observed turn_aborted",
        "protocol_event_observed shutdown_complete",
        "rollout_ended completed",
        "tool_call_runtime_ended failed",
    ]
    assert diff_sequences(at_abort, reaped_late) == []
    next_turn = ["protocol_event_observed turn_aborted", "codex_turn_started", "tool_call_runtime_ended failed"]
    assert canonical(next_turn) == next_turn  # another turn began: not the reaped runtime of the aborted one


def test_a_missing_history_item_is_named_where_it_was_due() -> None:
    real = event_shapes(REAL / "0.171.0" / "trace-bundles" / "plain")
    without = list(real)
    without.remove("history_item_accepted msg-#")  # the first turn's answer
    [line] = diff_sequences(real, without)
    assert line.startswith("after event") and "expected history_item_accepted msg-#; got nothing" in line


def test_reading_is_bounded_and_skips_a_torn_last_line(tmp_path: Path) -> None:
    lines = [orjson.dumps(_event("rollout_started")), orjson.dumps(_event("recording_completed"))]
    (tmp_path / "trace.jsonl").write_bytes(b"\n".join(lines) + b'\n{"seq": 3, "pay')
    assert event_shapes(tmp_path) == ["rollout_started", "recording_completed"]
    with pytest.raises(TraceLimitExceeded):
        event_shapes(tmp_path, ReadLimits(max_events=1))
