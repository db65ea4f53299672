"""Trace bundles of every profiled release are read and judged: schema 1 (0.163.0), 2 (0.169.0), 3 (0.171.0).

The bundles under tests/data/real/<version>/trace-bundles/ were written by each real release
(`codex-harness record --trace-out`). The closure invariants are the same for all; only the envelope
differs (payload files vs zstd shards, fields written, the closing event).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import orjson
import pytest
from support import paths

from contracts.releases import trace_formats as formats
from contracts.trace import check_bundle, read_bundle
from contracts.trace.errors import TraceInvalid

DATA = paths.DATA / "real"
RELEASES = {"0.163.0": 1, "0.169.0": 2, "0.171.0": 3}


def bundle(release: str, name: str) -> Path:
    path = DATA / release / "trace-bundles" / name
    assert path.is_dir(), f"missing test data {path} (record it: see tests/data/real/README.set.md)"
    return path


def copy(release: str, name: str, tmp_path: Path) -> Path:
    dest = tmp_path / f"{release}-{name}"
    shutil.copytree(bundle(release, name), dest)
    return dest


def lines(path: Path) -> list[bytes]:
    return (path / "trace.jsonl").read_bytes().splitlines()


def write_lines(path: Path, rows: list[bytes]) -> None:
    (path / "trace.jsonl").write_bytes(b"".join(row + b"\n" for row in rows))


def test_every_release_has_a_format() -> None:
    assert {f.schema: f.release for f in formats().values()} == {s: r for r, s in RELEASES.items()}


@pytest.mark.parametrize(("release", "schema"), sorted(RELEASES.items()))
def test_a_graceful_bundle_of_each_release_is_closed(release: str, schema: int) -> None:
    name = "command_approval" if release != "0.171.0" else "approval_accept"
    trace = read_bundle(bundle(release, name))
    assert trace.schema_version == schema
    report = check_bundle(bundle(release, name))
    assert report.verdict == "closed", report.problems
    assert trace.tool_calls and all(w.status == "completed" for w in trace.tool_calls.values())


@pytest.mark.parametrize("release", ["0.163.0", "0.169.0"])
def test_older_releases_leave_the_pending_approvals_tool_call_open(release: str) -> None:
    """The bug 0.171.0 fixed: an interrupt while an approval is pending never ends the tool call."""
    report = check_bundle(bundle(release, "interrupt_pending_approval"))
    assert report.verdict == "violation"
    assert {p.invariant for p in report.problems} == {3, 5}
    assert all(p.kind == "tool_call" for p in report.problems)


@pytest.mark.parametrize("release", ["0.163.0", "0.169.0"])
def test_a_planted_unclosed_bundle_is_unclosed(release: str, tmp_path: Path) -> None:
    path = copy(release, "command_approval", tmp_path)
    closing = formats()[RELEASES[release]].closing_event
    rows = lines(path)
    # rollout_ended closes a log that has no recording_completed: both go
    ends = {closing, "rollout_ended"}
    keep = [r for r in rows if orjson.loads(r)["payload"]["type"] not in ends]
    assert len(keep) == len(rows) - len(ends)
    write_lines(path, keep)
    report = check_bundle(path)
    assert report.verdict == "unclosed"
    assert not report.closed


def test_a_payload_path_leaving_the_bundle_is_refused(tmp_path: Path) -> None:
    path = copy("0.169.0", "command_approval", tmp_path)
    rows = lines(path)
    event = orjson.loads(rows[1])
    event["payload"]["metadata_payload"]["path"] = "payloads/../../secret.json"
    rows[1] = orjson.dumps(event)
    write_lines(path, rows)
    with pytest.raises(TraceInvalid, match="path"):
        read_bundle(path)


def test_a_missing_payload_file_is_invalid(tmp_path: Path) -> None:
    path = copy("0.163.0", "command_approval", tmp_path)
    victim = sorted((path / "payloads").iterdir())[0]
    victim.unlink()
    with pytest.raises(TraceInvalid, match="missing payload"):
        read_bundle(path)


def test_a_payload_file_that_is_not_json_is_invalid(tmp_path: Path) -> None:
    path = copy("0.169.0", "command_approval", tmp_path)
    (path / "payloads" / "1.json").write_bytes(b"{not json")
    with pytest.raises(TraceInvalid, match="invalid payload"):
        read_bundle(path)


def test_an_event_of_another_schema_than_the_manifest_is_invalid(tmp_path: Path) -> None:
    path = copy("0.169.0", "command_approval", tmp_path)
    rows = lines(path)
    event = orjson.loads(rows[2])
    event["schema_version"] = 3
    rows[2] = orjson.dumps(event)
    write_lines(path, rows)
    with pytest.raises(TraceInvalid, match="unsupported trace event schema 3"):
        read_bundle(path)


def test_a_field_the_older_schema_writes_is_still_required(tmp_path: Path) -> None:
    """Schema 1 lacks the runtime's kind and the prepared prompt, not the fields its reducer requires."""
    path = copy("0.163.0", "command_approval", tmp_path)
    rows = lines(path)
    i = next(i for i, r in enumerate(rows) if orjson.loads(r)["payload"]["type"] == "inference_started")
    event = orjson.loads(rows[i])
    del event["payload"]["request_payload"]
    rows[i] = orjson.dumps(event)
    write_lines(path, rows)
    with pytest.raises(TraceInvalid, match="missing field `request_payload`"):
        read_bundle(path)


def test_an_unknown_manifest_schema_names_the_readable_ones(tmp_path: Path) -> None:
    path = copy("0.169.0", "command_approval", tmp_path)
    manifest = orjson.loads((path / "manifest.json").read_bytes())
    manifest["schema_version"] = 9
    (path / "manifest.json").write_bytes(orjson.dumps(manifest))
    with pytest.raises(TraceInvalid, match=r"readable: 1 \(codex 0.163.0\), 2 \(codex 0.169.0\), 3"):
        read_bundle(path)


def _release_binary(release: str) -> Path | None:
    value = os.environ.get("CODEX_BIN_" + release.replace(".", "_"))
    return Path(value) if value else None


@pytest.mark.real_codex
@pytest.mark.parametrize("release", ["0.163.0", "0.169.0"])
def test_each_releases_own_reducer_agrees(release: str, tmp_path: Path) -> None:
    """What the release's `codex debug trace-reduce` accepts, we read; what it rejects, we reject."""
    binary = _release_binary(release)
    if binary is None:
        if os.environ.get("CODEX_HARNESS_REQUIRE_REAL") == "1":
            pytest.fail(f"CODEX_BIN_{release.replace('.', '_')} is not set (make test installs codex {release})")
        pytest.skip(f"codex {release} not selected (set CODEX_BIN_{release.replace('.', '_')})")
    good = copy(release, "command_approval", tmp_path)
    bad = copy(release, "interrupt_pending_approval", tmp_path)
    rows = lines(bad)
    event = orjson.loads(rows[1])
    del event["payload"]["thread_id"]
    rows[1] = orjson.dumps(event)
    write_lines(bad, rows)
    for path, accepted in ((good, True), (bad, False)):
        out = tmp_path / f"{path.name}.state.json"
        result = subprocess.run(
            [str(binary), "debug", "trace-reduce", str(path), "-o", str(out)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (result.returncode == 0) is accepted, result.stderr[-500:]
        if accepted:
            read_bundle(path)
        else:
            with pytest.raises(TraceInvalid):
                read_bundle(path)


# Releases the fake has no profile of, whose bundles the reader must still read right: what their own
# `codex debug trace-reduce` said of each bundle is kept beside it (reducer.json).
UNPROFILED = ("0.165.0", "0.166.0")
FORMATS = paths.DATA / "trace-formats"


@pytest.mark.parametrize("release", UNPROFILED)
@pytest.mark.parametrize("name", ["command_approval", "interrupt_pending_approval"])
def test_a_release_without_a_folder_reads_as_its_own_reducer_does(release: str, name: str) -> None:
    """0.165.0 and 0.166.0 write schema 2 with no recording_completed (0.165.0 also without schema 2's runtime
    `kind`); the closing event and the fields are read from the bundle, so closed sessions read closed."""
    reduced = orjson.loads((FORMATS / release / "reducer.json").read_bytes())[name]
    path = FORMATS / release / name
    trace = read_bundle(path)
    assert trace.schema_version == 2 and reduced["accepted"]
    assert trace.closed_by == "rollout_ended" and trace.status == reduced["status"] == "completed"
    report = check_bundle(path)
    assert report.recording_status == "complete"  # the recording closed, whatever the server left open in it
    still_open = sorted(k for k, w in trace.tool_calls.items() if w.status == "running")
    assert still_open == reduced["open_tool_calls"]
    # the server's own bug stays a failure: a tool call left open by the aborted turn (fixed in 0.171.0)
    assert report.verdict == ("violation" if still_open else "closed"), report.problems
    if still_open:
        assert {p.invariant for p in report.problems} == {3, 5}


def test_a_schema_2_bundle_closes_with_whichever_event_it_has(tmp_path: Path) -> None:
    """Nothing after recording_completed; without it, rollout_ended closes and a late event is replayed."""
    path = tmp_path / "b"
    shutil.copytree(FORMATS / "0.166.0" / "command_approval", path)
    rows = lines(path)
    late = orjson.loads(rows[-1])
    late["seq"] += 1
    late["payload"] = {"type": "recording_completed"}
    write_lines(path, [*rows, orjson.dumps(late)])
    assert read_bundle(path).closed_by == "recording_completed"
    late["seq"] += 1
    write_lines(path, [*rows, orjson.dumps({**late, "seq": late["seq"] - 1}), orjson.dumps(late)])
    with pytest.raises(TraceInvalid, match="after recording completed"):
        read_bundle(path)
