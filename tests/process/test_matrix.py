"""``codex-harness matrix``: usage errors, and the table it renders (Markdown, JSON, HTML) from release reports.
The real three-release run is docs/releases.md (regenerated with the command written there)."""

from __future__ import annotations

import dataclasses
import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from contracts import schema_store
from contracts.checks.base import Check
from contracts.report import FidelityEntry, LatencyPart, Report, judge, release_report
from contracts.report.latency import CaseResult, Sample
from contracts.schema_diff import diff_bundles
from harness.commands.matrix import matrix_report, neighbours
from harness.html.matrix import render_matrix
from harness.report.documents import matrix_json, release_json
from harness.report.markdown import render_markdown
from harness.targets.fake import fake_codex_argv


def harness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def fake_binary(tmp_path: Path, release: str) -> Path:
    """A ``codex`` that answers --version as ``release`` (fake-codex playing that profile)."""
    path = tmp_path / f"codex-{release}"
    argv = " ".join(fake_codex_argv())
    path.write_text(f'#!/bin/sh\nexec {argv} --release {release} "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_matrix_refuses_two_binaries_of_one_release(tmp_path: Path) -> None:
    a, b = fake_binary(tmp_path, "0.169.0"), tmp_path / "other"
    b.write_text(a.read_text())
    b.chmod(0o755)
    out = harness("matrix", "--codex", str(a), "--codex", str(b), "--store", str(tmp_path / "s"))
    assert out.returncode == 3, out
    assert "both codex-cli 0.169.0" in out.stderr


def test_matrix_refuses_a_binary_that_does_not_run(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    out = harness("matrix", "--codex", str(fake_binary(tmp_path, "0.169.0")), "--codex", str(missing))
    assert out.returncode == 3 and "Traceback" not in out.stderr


def report(version: str, *, failed: bool = False) -> Report:
    r = release_report(version, f".tools/codex-{version}/codex")
    assert r.release is not None
    r.release.profile = version
    status = "fail" if failed else "pass"
    r.checks = [
        Check("plain", "real", "schema", "server_frames_invalid", "pass", "ok", ""),
        Check("approval_cancel", "real", "trace_closure", "server trace", status, "verdict x", ""),
    ]
    r.fidelity.entries = [  # type: ignore[union-attr]
        FidelityEntry({"scenario": "plain", "equal": True, "skipped": None, "differences": []}),
        FidelityEntry({"scenario": "file_change_approval", "equal": not failed, "skipped": None, "differences": []}),
    ]
    # 10 samples: nearest-rank p50 6.2 ms, p99 9.4 ms
    values = [1.0, 2.0, 3.0, 4.0, 6.2, 6.5, 7.0, 8.0, 9.0, 9.4]
    r.latency = LatencyPart([CaseResult("long_stream", "real", [Sample("aborted", v, v + 0.5) for v in values])])
    r.wall_s = 70.0
    return r


def test_the_table_has_releases_as_columns_and_marks_failures() -> None:
    m = matrix_report([report("0.163.0", failed=True), report("0.169.0")], neighbours(["0.163.0", "0.169.0"]), "cmd")
    md = render_markdown(m)
    header = md.splitlines()[0]
    assert header == "| | codex-cli 0.163.0 | codex-cli 0.169.0 |"
    rows = {line.split(" | ")[0].lstrip("| "): line for line in md.splitlines() if line.startswith("| ")}
    assert rows["contract trace_closure"] == "| contract trace_closure | 0 pass, **1 FAIL** | 1 pass |"
    assert "1/2 equal; **1 differ**" in rows["fidelity to its profile"]
    assert "- codex-cli 0.163.0: fidelity differs on file_change_approval" in md
    assert "6 / 9 (n=10)" in rows["interrupt latency p50 / p99 ms: long_stream"]
    expected = diff_bundles(schema_store.load_bundle("0.163.0"), schema_store.load_bundle("0.169.0"))
    assert f"from 0.163.0: {len(expected.breaking)} breaking" in rows["wire schema vs previous column"]
    assert "### codex-cli 0.163.0 -> 0.169.0" in md
    assert "modelProvider/list" in md
    assert not judge(m).ok and judge(m).result == "FAIL"
    data = json.loads(json.dumps(matrix_json(m), default=str))
    assert data["releases"] == ["0.163.0", "0.169.0"] and data["ok"] is False and data["result"] == "FAIL"
    assert data["neighbours"][0]["changes"] == len(expected.changes)
    assert [r["verdict"] for r in data["reports"]] == ["server violates a contract", "ok"]
    assert data["verdict"] == "breaks clients" and data["headline"] == "BREAKS CLIENTS"  # 0.163 -> 0.169: breaking
    html = render_matrix(m)
    assert "<th>codex-cli 0.169.0</th>" in html and 'class="fail"' in html


def test_a_release_without_a_pin_is_said_in_its_cell() -> None:
    m = matrix_report([report("0.169.0"), report("0.170.0")], neighbours(["0.169.0", "0.170.0"]))
    assert m.neighbours[0].diff is None
    release = m.columns[1].release
    assert release is not None
    note = "no profile for 0.170.0, so the closest by measured behaviour: 5 scenarios recorded on the binary"
    release.profile, release.profile_note = "0.169.0", note
    md = render_markdown(m)
    assert "not compared" in md and "0.169.0 (closest measured)" in md
    assert f"- codex-cli 0.170.0: the fake played 0.169.0; {note}" in md
    assert judge(m).ok


@pytest.mark.parametrize("n", [0, 1])
def test_too_few_binaries_is_a_usage_error(n: int, tmp_path: Path) -> None:
    args = [a for i in range(n) for a in ("--codex", str(fake_binary(tmp_path, "0.169.0")))]
    out = harness("matrix", *args)
    assert out.returncode == 3
    assert "between 2 and 8 --codex PATH" in out.stderr


def test_a_release_report_names_the_trace_events_that_differ() -> None:
    from harness.html.release import render_release

    r = report("0.169.0")
    line = "after event 6 (protocol_event_observed turn_started): fake history_item_accepted msg_*; real nothing"
    assert r.fidelity is not None
    entry = r.fidelity.entries[1]
    r.fidelity.entries[1] = FidelityEntry({**entry.data, "equal": False, "trace_differences": [line]})
    md = render_markdown(r)
    assert "- file_change_approval: DIFFERENT" in md and f"  - trace bundle: {line}" in md
    assert "trace bundle: after event 6" in render_release(r, md)


def test_matrix_checks_its_out_folder_before_the_work(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "matrix.md").mkdir(parents=True)  # a folder where the report goes
    a, b = fake_binary(tmp_path, "0.163.0"), fake_binary(tmp_path, "0.169.0")
    done = harness("matrix", "--codex", str(a), "--codex", str(b), "--out", str(out), "--store", str(tmp_path / "s"))
    assert done.returncode == 3, done
    assert "matrix.md" in done.stderr and "Traceback" not in done.stderr


def test_a_release_step_lists_what_the_real_servers_did_differently() -> None:
    """Real against real, per scenario: one turn/diff/updated fewer on the newer release, in the output."""
    from contracts.report import SchemaChanges
    from harness.commands.matrix import behaviour_changes
    from harness.report.releases import step_groups

    def frames(diffs: int) -> list[dict]:
        turn = [{"method": "turn/started", "params": {"turn": {"status": "inProgress"}}}]
        turn += [{"method": "turn/diff/updated", "params": {}}, {"method": "item/completed", "params": {}}] * diffs
        return [*turn, {"method": "turn/completed", "params": {"turn": {"status": "completed"}}}]

    old, new = report("0.163.0"), report("0.171.0")
    assert old.fidelity is not None and new.fidelity is not None
    for column, n in ((old, 3), (new, 2)):
        for entry in column.fidelity.entries:
            entry.real_frames = frames(n if entry.scenario == "file_change_approval" else 1)
            entry.real_trace = ["rollout_started", "rollout_ended completed"]
    found = {b.scenario: b for b in behaviour_changes(old, new)}
    assert not found["plain"].changed
    [line] = found["file_change_approval"].wire
    assert "only on 0.163.0" in line and "turn/diff/updated" in line
    step = SchemaChanges("0.163.0", "0.171.0", None, "x", list(found.values()))
    assert step.counts()["behaviour changes"] == 1
    assert any("turn/diff/updated" in x for _, entries, _ in step_groups(step) for x in entries) is False  # no diff
    step.diff = diff_bundles(schema_store.load_bundle("0.163.0"), schema_store.load_bundle("0.171.0"))
    groups = {title.split(" (")[0]: entries for title, entries, _ in step_groups(step)}
    assert any("turn/diff/updated" in x for x in groups["behaviour changes on the wire"])
    assert step.counts()["wire changes"] == 1 and step.counts()["trace changes"] == 0
    assert any("CodexErrorInfo" in x for x in groups["exhaustive-match risk"])


def test_validate_release_from_and_matrix_judge_a_pair_alike() -> None:
    """One verdict vocabulary: the step's breaking changes fail both (the same report model), counts equal."""
    from harness.report.releases import step_cell

    cols = [report("0.163.0"), report("0.169.0")]
    m = matrix_report(cols, neighbours(["0.163.0", "0.169.0"], cols))
    v = judge(m)
    assert not v.ok and all("breaking 0.163.0 -> 0.169.0" in f.what for f in v.failed_findings)
    expected = diff_bundles(schema_store.load_bundle("0.163.0"), schema_store.load_bundle("0.169.0"))
    assert len(v.failed_findings) == len(expected.breaking)
    assert f"{len(expected.breaking)} breaking" in step_cell(m.neighbours[0])


SCRIPT = "<script>alert(1)</script> & <img src=x onerror=alert(2)>"


def test_matrix_md_carries_a_binarys_stderr_as_text_not_html(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """matrix.md held a binary's stderr raw: a Markdown renderer ran its HTML. Escaped as matrix.html escapes it."""
    from harness.release_step import write_matrix

    failing = report("0.163.0", failed=True)
    failing.checks[1] = dataclasses.replace(failing.checks[1], detail=f"the binary said {SCRIPT}")
    m = matrix_report([failing, report("0.169.0")], neighbours(["0.163.0", "0.169.0"]), "cmd")
    write_matrix(m, tmp_path / "out")
    md = (tmp_path / "out" / "matrix.md").read_text(encoding="utf-8")
    assert "<script" not in md and "<img" not in md, md
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;img" in md
    assert "<script>alert" not in (tmp_path / "out" / "matrix.html").read_text(encoding="utf-8")
    capsys.readouterr()


def test_the_json_verdict_says_whose_failure_it_is() -> None:
    """"breaks" only for a breaking change: a server violation and the fake's own difference have their words."""
    violating = report("0.169.1", failed=True)
    assert release_json(violating)["verdict"] == "server violates a contract"
    differing = report("0.169.1")
    differing.fidelity.entries[1].data["equal"] = False  # type: ignore[union-attr]
    body = release_json(differing)
    assert (body["result"], body["verdict"]) == ("FAIL", "fake differs"), body["headline"]
    assert release_json(report("0.169.1"))["verdict"] == "ok"
