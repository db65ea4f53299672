"""The HTML report without a browser: check locations, the versioned record, the diagram's collapsing and
folding, self-containment, the histogram."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from support import paths

from contracts.checks import Check, run_all
from contracts.expect import Expect
from contracts.record import ModelEntry, RecordFormatError, SessionRecord, WireEntry
from harness.html import diagram, write_index_html
from harness.html.histogram import histogram_svg
from harness.html.report import render_index, render_session_page
from harness.report import read_checks_json, write_checks_json

DELTA = "item/agentMessage/delta"


def _req(t: float, d: str, i: int, method: str, **params: object) -> WireEntry:
    return WireEntry(t, d, frame={"id": i, "method": method, "params": dict(params)})  # type: ignore[arg-type]


def _ans(t: float, d: str, i: int, result: object) -> WireEntry:
    return WireEntry(t, d, frame={"id": i, "result": result})  # type: ignore[arg-type]


def _note(t: float, d: str, method: str, **params: object) -> WireEntry:
    return WireEntry(t, d, frame={"method": method, "params": dict(params)})  # type: ignore[arg-type]


def _session(deltas: int = 3) -> list[WireEntry]:
    wire = [
        _req(0.0, "c2s", 1, "initialize", clientInfo={"name": "t", "version": "1"}),
        _ans(0.001, "s2c", 1, {}),
        _req(0.002, "c2s", 2, "turn/start", threadId="th", input=[{"type": "text", "text": "hi"}]),
        _ans(0.003, "s2c", 2, {"turn": {"id": "tu", "status": "inProgress"}}),
        _note(0.004, "s2c", "turn/started", threadId="th", turn={"id": "tu", "status": "inProgress"}),
    ]
    wire += [_note(0.005 + i * 1e-6, "s2c", DELTA, delta="x", itemId="m") for i in range(deltas)]
    wire.append(_note(0.9, "s2c", "turn/completed", threadId="th", turn={"id": "tu", "status": "completed"}))
    return wire


def _record(wire: list[WireEntry], **meta: object) -> SessionRecord:
    return SessionRecord("unit", "fake", Expect(), wire=wire, meta=dict(meta))


# --- check locations -------------------------------------------------------------------------------


def test_check_location_round_trips_and_old_checks_json_has_none(tmp_path: Path) -> None:
    check = Check("s", "fake", "protocol", "n", "fail", "d", "", (3, 7))
    assert Check.from_dict(check.to_dict()) == check
    old = {k: v for k, v in check.to_dict().items() if k != "at"}
    assert Check.from_dict(old).at == ()
    assert Check.from_dict({**old, "at": ["x", -1, True, 4]}).at == (4,)
    write_checks_json([check], tmp_path / "checks.json")
    assert orjson.loads((tmp_path / "checks.json").read_bytes())[0]["at"] == [3, 7]
    assert read_checks_json(tmp_path / "checks.json") == [check]


def test_unanswered_server_request_points_at_its_line() -> None:
    wire = _session(0)
    wire.insert(5, _req(0.01, "s2c", 0, "item/commandExecution/requestApproval", itemId="c", threadId="th"))
    checks = [c for c in run_all(_record(wire)) if c.contract == "protocol" and c.name == "server requests answered"]
    assert checks[0].status == "fail"
    assert checks[0].at == (6,)  # wire.jsonl line 6: the request nobody answered


# --- the record format -----------------------------------------------------------------------------


def test_model_traffic_saved_as_model_jsonl_and_loaded(tmp_path: Path) -> None:
    record = _record(_session())
    record.model = [
        ModelEntry(0.003, "c2m", {"method": "POST", "path": "/v1/responses", "turn": 0, "response": 0, "status": 200}),
        ModelEntry(0.004, "m2c", {"event": "response.output_text.delta"}),
    ]
    record.save(tmp_path / "r")
    assert (tmp_path / "r" / "model.jsonl").is_file()
    assert orjson.loads((tmp_path / "r" / "record.json").read_bytes())["format"] == 2
    assert SessionRecord.load(tmp_path / "r").model == record.model


def test_format_1_record_still_loads_and_a_newer_one_is_refused(tmp_path: Path) -> None:
    record = _record(_session())
    record.save(tmp_path / "r")
    body = orjson.loads((tmp_path / "r" / "record.json").read_bytes())
    (tmp_path / "r" / "record.json").write_bytes(orjson.dumps({**body, "format": 1}))
    assert SessionRecord.load(tmp_path / "r").model == []
    del body["format"]  # the very first records had no format field
    (tmp_path / "r" / "record.json").write_bytes(orjson.dumps(body))
    assert len(SessionRecord.load(tmp_path / "r").wire) == len(record.wire)
    (tmp_path / "r" / "record.json").write_bytes(orjson.dumps({**body, "format": 99}))
    with pytest.raises(RecordFormatError, match="format 99"):
        SessionRecord.load(tmp_path / "r")


# --- the diagram -----------------------------------------------------------------------------------


def test_a_stream_of_deltas_is_one_arrow_with_its_count() -> None:
    d = diagram.build(_record(_session(1000)))
    runs = [r for r in d.rows if r.count > 1]
    assert [(r.method, r.count) for r in runs] == [(DELTA, 1000)]
    assert d.arrows == 7 and sum(r.frames for r in d.rows) == d.frames == 1006
    assert [(p.start, p.end) for p in d.pairs] == [(0, 1), (2, 3)]


def test_a_failed_check_splits_the_stream_at_its_frame() -> None:
    record = _record(_session(10))
    check = Check("unit", "fake", "schema", "server_frames_invalid", "fail", "bad", "", (9,))
    d = diagram.build(record, [check])
    counts = [r.count for r in d.rows if r.method == DELTA]
    assert counts == [3, 1, 6]
    marked = [r for r in d.rows if r.failed]
    assert len(marked) == 1 and marked[0].first == 8 and "schema / server_frames_invalid" in marked[0].marks[0]


def test_a_fault_is_drawn_after_the_frame_it_struck_at_and_ends_the_stream() -> None:
    record = _record(_session(4), faults=[{"turn": 0, "kind": "crash", "at": "delta", "n": 2}])
    d = diagram.build(record)
    kinds = [(r.kind, r.count) for r in d.rows if r.kind == "fault" or r.method == DELTA]
    assert kinds == [("msg", 2), ("fault", 0), ("msg", 2)]
    fault = next(r for r in d.rows if r.kind == "fault")
    assert "crash at delta #2" in fault.label and fault.first == 6


def test_interrupt_interval_and_open_windows() -> None:
    wire = _session(50)  # the stream collapses: rows are not wire positions
    wire.insert(-1, _req(0.5, "c2s", 3, "turn/interrupt", threadId="th", turnId="tu"))
    wire.append(_req(1.0, "c2s", 4, "thread/read", threadId="th"))  # never answered
    d = diagram.build(_record(wire))
    assert len(d.intervals) == 1 and d.intervals[0].ms == pytest.approx(400.0)
    assert d.rows[d.intervals[0].start].label.startswith("turn/interrupt #3")
    assert d.rows[d.intervals[0].end].label.startswith("turn/completed")
    assert any("thread/read #4" in w for w in d.open_at_end)
    assert any(p.end is None for p in d.pairs)


def test_a_long_session_folds_without_losing_a_frame() -> None:
    wire = _session(0)
    methods = ("thread/status/changed", "item/started", "item/completed", "thread/tokenUsage/updated")
    wire[5:5] = [_note(0.01, "s2c", methods[i % 4], item={"id": str(i), "type": "x"}) for i in range(3000)]
    d = diagram.build(_record(wire))
    assert len(d.rows) <= diagram.MAX_ROWS
    assert any(r.kind == "fold" for r in d.rows)
    assert sum(r.frames for r in d.rows) == d.frames == len(wire)
    assert any(r.label.startswith("turn/completed") for r in d.rows)  # the turn's end is kept


def test_100k_deltas_render_as_one_arrow() -> None:
    d = diagram.build(_record(_session(100_000)))
    assert d.arrows == len(d.rows) == 7
    page = render_session_page(_record(_session(100_000)), [])
    assert len(page) < 100_000 and "×100,000" in page


# --- pages -----------------------------------------------------------------------------------------


def test_index_is_self_contained_and_links_down_the_page(tmp_path: Path) -> None:
    record = _record(_session(5))
    failed = Check("unit", "fake", "protocol", "x", "fail", "went wrong <b>", "", (6,))
    html = render_index([failed, Check("unit", "fake", "usage", "y", "pass")], [record])
    assert not re.search(r"""(src=|<link|@import|url\((?!#)|href=["']https?:)""", html)
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert 'href="#s-fake-unit-protocol"' in html and 'id="s-fake-unit-protocol"' in html
    assert 'href="#s-fake-unit-L6"' in html and 'id="s-fake-unit-L6"' in html
    assert "went wrong &lt;b&gt;" in html
    assert "RESULT: FAIL" in html


def test_write_index_html_loads_saved_records(tmp_path: Path) -> None:
    record = _record(_session(2))
    record.save(tmp_path / "sessions" / "fake" / "unit")
    path = write_index_html(tmp_path, [Check("unit", "fake", "usage", "y", "pass")])
    html = path.read_text()
    assert path == tmp_path / "index.html" and 'id="s-fake-unit"' in html
    assert 'href="sessions/fake/unit/wire.jsonl"' in html


def test_histogram_marks_the_percentiles() -> None:
    svg = histogram_svg("t", [float(i) for i in range(1, 101)])
    for name, value in (("p50", "50.00"), ("p95", "95.00"), ("p99", "99.00"), ("max", "100.00")):
        assert f"<title>{name} {value} ms</title>" in svg
    assert "no samples" in histogram_svg("t", [])


# --- the commands ----------------------------------------------------------------------------------


def test_show_html_writes_one_session_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from contracts.exitcodes import OK, USAGE
    from contracts.report import judge
    from harness.cli import main

    _record(_session(4)).save(tmp_path / "rec")
    verdict = judge(run_all(SessionRecord.load(tmp_path / "rec")))  # show judges as run does: the same exit code
    assert main(["show", str(tmp_path / "rec"), "--no-schema", "--html", str(tmp_path / "s.html")]) == verdict.exit_code
    out = capsys.readouterr().out
    assert f"HTML: {tmp_path / 's.html'}" in out and f"RESULT: {verdict.result}" in out
    page = (tmp_path / "s.html").read_text()
    assert "<svg" in page and "item/agentMessage/delta" in page
    assert main(["show", str(tmp_path / "rec" / "wire.jsonl"), "--no-schema", "--html", str(tmp_path / "w.html")]) == OK
    assert "<svg" in (tmp_path / "w.html").read_text()
    assert main(["show", str(tmp_path / "rec"), "--html", str(tmp_path / "no" / "dir" / "x.html")]) == USAGE
    assert "cannot write" in capsys.readouterr().err


def test_latency_report_draws_both_distributions(tmp_path: Path) -> None:
    from harness.html.latency import write_latency_report
    from harness.latency import CaseResult, Sample

    result = CaseResult(
        "long_stream", "fake-process", [Sample("aborted", 1.0 + i / 10, 2.0 + i / 10) for i in range(30)]
    )
    path = write_latency_report(tmp_path / "lat", [result])
    page = path.read_text()
    assert page.count('<svg class="hist"') == 2 and "<title>p99 3.90 ms</title>" in page
    assert orjson.loads((tmp_path / "lat" / "latency.json").read_bytes())[0]["scenario"] == "long_stream"


def test_release_report_as_html() -> None:
    from contracts.report import release_report
    from harness.html.release import render_release
    from harness.report.markdown import render_markdown

    record = _record(_session(2))
    report = release_report("0.171.0", "/x/codex")
    report.schema.pin = "pinned"  # type: ignore[union-attr]
    report.checks = [Check("unit", "fake", "usage", "y", "pass")]
    report.records = [record]
    html = render_release(report, render_markdown(report))
    assert "no client-breaking change found" in html and 'id="s-fake-unit"' in html and "report.md" in html


def test_hostile_text_is_escaped_and_unreadable_records_are_named(tmp_path: Path) -> None:
    wire = _session(1)
    wire.insert(5, _note(0.01, "s2c", "</svg><script>alert(1)</script>", x="<b>"))
    html = render_index([Check("unit", "fake", "usage", "y", "pass")], [_record(wire)])
    assert "<script>alert(1)" not in html and "&lt;/svg&gt;&lt;script&gt;" in html
    _record(_session(1)).save(tmp_path / "sessions" / "fake" / "unit")
    (tmp_path / "sessions" / "fake" / "broken").mkdir(parents=True)
    (tmp_path / "sessions" / "fake" / "broken" / "record.json").write_text('{"format": 7}')
    page = write_index_html(tmp_path, [Check("unit", "fake", "usage", "y", "pass")]).read_text()
    assert "Records not drawn (1)" in page and "record format 7" in page


def _played(name: str, tmp_path: Path, target: str = "fake") -> SessionRecord:
    from fake_server.catalogue import load_builtin
    from harness.runner import run_one

    run = run_one(load_builtin(name), target, work_root=tmp_path)
    assert run.record is not None
    return run.record


def test_the_fault_ledger_places_a_fault_where_it_struck(tmp_path: Path) -> None:
    """delayed_completion holds the turn's end 3 s: the marker is drawn before the gap, where the fake
    struck, not after the status change that came 3 s later (where counting frames on the wire put it)."""
    record = _played("delayed_completion", tmp_path)
    [(where, texts)] = diagram.fault_positions(record).items()
    assert texts == ["⚡ delayed_completion delay_ms=3000 at end (turn 1)"]
    after = next(e for e in record.wire[where + 1 :] if e.dir == "s2c")
    assert after.t - record.wire[where].t == pytest.approx(3.0)
    # Without the ledger's line counts (an older record) the wire count is all there is: after the gap.
    record.meta["faults_struck"] = [x[:2] for x in record.meta["faults_struck"]]
    [(guessed, _)] = diagram.fault_positions(record).items()
    assert guessed > where


@pytest.mark.parametrize("target", ["fake", "fake-process"])  # the process writes its ledger to a file
def test_the_fault_ledger_places_a_fault_whose_point_never_shows(tmp_path: Path, target: str) -> None:
    record = _played("drop_turn_completed", tmp_path, target)
    [(where, texts)] = diagram.fault_positions(record).items()
    assert texts == ["⚡ drop_turn_completed at end (turn 1)"]  # not "its point is not on the wire"
    assert record.wire[where].frame["method"] == "account/rateLimits/updated"  # the turn's last frame before it


def test_a_fault_the_ledger_says_never_struck_is_drawn_saying_so() -> None:
    faults = [{"turn": 0, "kind": "crash", "at": "delta", "n": 2}, {"turn": 0, "kind": "hang", "at": "delta", "n": 3}]
    record = _record(_session(4), faults=faults, faults_struck=[[0, 0, 5, 3]])
    placed = diagram.fault_positions(record)
    assert placed[6] == ["⚡ crash at delta #2 (turn 1)"]  # 5 server lines, 3 client lines: after wire line 7
    [(end, texts)] = [(p, t) for p, t in placed.items() if p != 6]
    assert texts == ["⚡ hang at delta #3 (turn 1): never struck"]
    assert end == max(p for p, e in enumerate(record.wire) if e.dir != "note")


def test_the_ledger_file_carries_the_line_counts(tmp_path: Path) -> None:
    from fake_server import ledger
    from fake_server.effects import FaultStruck

    path = tmp_path / "faults-struck.jsonl"
    ledger.append(str(path), FaultStruck(0, 1, "crash", "delta", 2, sent=7, received=3))
    with path.open("ab") as f:
        f.write(b'{"turn": 1, "index": 0}\n{"turn": 2, "ind')  # a server without counts; a torn line
    assert ledger.read(path) == [(0, 1, 7, 3), (1, 0)]


def test_every_page_carries_a_policy_that_allows_exactly_its_own_scripts_and_style() -> None:
    """The Content-Security-Policy names the sha256 of each inline script and of the style sheet, never
    'unsafe-inline'; it comes before the first script; no other module writes a script, a style element or a
    style attribute (they would be blocked). The browser test loads a page under it."""
    import base64
    import hashlib

    from harness.html.page import page

    html = page("a title", "<p>body</p>")
    found = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', html)
    assert found is not None
    policy = dict(d.strip().split(" ", 1) for d in found.group(1).split(";"))
    assert policy["default-src"] == "'none'" and "unsafe-inline" not in found.group(1)
    assert html.index("Content-Security-Policy") < html.index("<script")

    def source(text: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"

    scripts = re.findall(r"<script>(.*?)</script>", html, re.S)
    styles = re.findall(r"<style>(.*?)</style>", html, re.S)
    assert len(scripts) == 2 and len(styles) == 1
    assert sorted(policy["script-src"].split()) == sorted(source(s) for s in scripts)
    assert policy["style-src"].split() == [source(styles[0])]
    assert " style=" not in html
    root = paths.REPO
    writers = [p for p in (root / "harness").rglob("*.py") if re.search(r'<script|<style| style="', p.read_text())]
    assert writers == [root / "harness" / "html" / "page.py"]


def test_the_html_cell_shows_what_was_judged() -> None:
    record = _record(_session(2))
    checks = [Check("unit", "fake", "usage", "turn 1 usage", "pass"), Check("unit", "fake", "usage", "x", "skip")]
    html = render_index(checks, [record])
    assert '<td class="pass">' in html and '<td class="skip">' not in html


def test_a_result_the_client_reported_without_a_time_is_not_drawn_before_the_session() -> None:
    """An outside client's Result (from its result file) has no time: it was drawn at the client's start,
    -300 ms before the first frame; it goes last, its time said to be unknown."""
    from dataclasses import replace as copy

    from harness.outside.result import ReadResult, turn_results

    wire = [copy(e, t=e.t + 0.3) for e in _session(2)]  # the client's start is 0; its first frame 300 ms later
    record = _record(wire)
    record.results = turn_results(ReadResult("valid", [], [{"turn": 1, "status": "completed"}]))
    d = diagram.build(record)
    result = d.rows[-1]
    assert result.kind == "result" and "untimed" in result.css, [r.kind for r in d.rows]
    svg = render_session_page(record, [])
    assert "time not known" in svg and "-300.0 ms" not in svg
