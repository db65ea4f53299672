"""Cross-check with the real reducer: ``codex debug trace-reduce`` on our writer's bundles and the corpus.

The reducer must accept every bundle our writer produces and replay the same window statuses as our
reader; on the mutation corpus accept/reject must agree with ours except where our checker is stricter
by design (closure violations and missing checksums, which the reducer accepts).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from test_trace_support import MUTATIONS, Mutation, build
from test_trace_writer import write_tree

from contracts.trace.closure import check_bundle

pytestmark = pytest.mark.real_codex

_STATE_KINDS = {
    "threads": "thread",
    "codex_turns": "codex_turn",
    "inference_calls": "inference_call",
    "tool_calls": "tool_call",
}


def reduce(codex_bin: Path, bundle: Path, out: Path) -> tuple[int, str, dict | None]:
    proc = subprocess.run(
        [str(codex_bin), "debug", "trace-reduce", str(bundle), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    state = json.loads(out.read_text()) if proc.returncode == 0 else None
    return proc.returncode, proc.stderr, state


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.name)
def test_reducer_agrees_on_the_corpus(mutation: Mutation, tmp_path: Path, codex_bin: Path) -> None:
    bundle = build(mutation, tmp_path)
    ours = check_bundle(bundle)
    code, err, state = reduce(codex_bin, bundle, tmp_path / "state.json")
    assert ("accept" if code == 0 else "reject") == mutation.reducer, err
    if mutation.reducer == "reject":
        assert ours.verdict == "invalid"
    elif mutation.verdict != "invalid":
        assert state is not None and state["recording_status"] == ours.recording_status


TREES = [
    [[([("inference", "complete", False), ("tool", "complete", True)], "completed")]],
    [[([("tool", "abort", False)], "interrupt"), ([("inference", "open", False)], "completed")]],
    [
        [([("inference", "fail", False), ("tool", "ctx_exit", False)], "ctx_exit")],
        [([("tool", "fail", True), ("inference", "cancel", False)], "failed")],
    ],
]


@pytest.mark.parametrize("tree", TREES)
@pytest.mark.parametrize("shard_max", [64, 1 << 20])
def test_reducer_replays_our_writer(tree: list, shard_max: int, tmp_path: Path, codex_bin: Path) -> None:
    path = tmp_path / "bundle"
    write_tree(path, tree, shard_max_bytes=shard_max)
    ours = check_bundle(path)
    assert ours.verdict == "closed", ours.to_json()
    code, err, state = reduce(codex_bin, path, tmp_path / "state.json")
    assert code == 0, err
    assert state is not None and state["recording_status"] == "complete" and state["status"] == "completed"
    assert ours.trace is not None
    for key, kind in _STATE_KINDS.items():
        theirs = {wid: (w["execution"]["status"], w["execution"]["ended_seq"]) for wid, w in state[key].items()}
        mine = {w.id: (w.status, w.ended_seq) for w in ours.trace.windows_of(kind).values()}
        assert theirs == mine, key
