"""``codex-harness show`` on what ``fake-codex --record`` wrote, or on a saved ``--client-cmd`` record.

A recording is judged by the wire contracts (:mod:`contracts.checks.client_run` and the per-server
contracts) against the scenario named in its ``start.json``; what a recording alone cannot show (the
deadline, what was left running, the result file) is a skip with that reason. Judged as ``run`` judges (one
report model, one verdict function): the ``RESULT:`` line, exit 1 on a failing check or when nothing was judged;
``--no-checks`` shows the timeline only (exit 0).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from contracts.checks import Check
from contracts.exitcodes import OK, UsageError
from contracts.record import SessionRecord
from contracts.report import Report
from contracts.report import judge as verdict_of
from contracts.text import one_line
from harness import scenario_lookup
from harness.outside.plan import adapter_plan, budgets
from harness.outside.record import (
    RecordingError,
    ServerRecording,
    cut_recordings,
    is_recording,
    not_cut,
    read_recording,
    read_recordings,
    saved_other_servers,
    server_facts,
    server_record,
)
from harness.timeline import render


def is_outside(path: Path) -> bool:
    """A recording folder, a ``--record`` root holding recordings, or a saved outside-client record."""
    if not path.is_dir():
        return False
    if is_recording(path) or ((path / "recording").is_dir() and (path / "record.json").is_file()):
        return True
    return any(is_recording(p) for p in path.iterdir() if p.is_dir())


def _records_of_recordings(servers: list[ServerRecording], problems: list[str]) -> list[SessionRecord]:
    first = servers[0]
    ref = first.start.get("scenario_ref") or first.start.get("scenario")
    try:
        scenario = scenario_lookup.resolve(str(ref))
    except scenario_lookup.ScenarioError as exc:
        raise UsageError(f"{first.folder}: cannot judge, the recorded scenario {ref!r} is not found: {exc}") from None
    zero = min(float(s.start.get("started_t") or 0.0) for s in servers)
    plan = adapter_plan(scenario)
    from fake_server.recording import play_identity

    facts: dict[str, Any] = {
        "deadline_s": None,  # a recording alone does not know the client's deadline or its processes
        "left_running": None,
        # Nobody gave a release: whoever ran fake-codex chose it; the scenario is what the recording names.
        "expected_play": {"scenario_hash": play_identity(scenario, "")["scenario_hash"]},
        "plan_turns": plan["turns"],
        "plan": {k: plan[k] for k in ("approvals", "experimental_api", "opt_out_notifications")},
        "budgets": budgets(scenario.client),
        "servers": [server_facts(s, zero, False) for s in servers],
        "result": {"state": "absent"},
        "recording_cut": problems,
    }
    return [
        server_record(scenario, s, zero=zero, facts=dict(facts, primary=k == 0, server=facts["servers"][k]))
        for k, s in enumerate(servers)
    ]


def show_outside(args: argparse.Namespace, path: Path, saved: list[Check] | None = None) -> int:
    """``saved``: the verdict ``run`` gave this record (repeated, not judged again), else it is judged here."""
    from harness.outside.runner import judge

    try:
        if (path / "record.json").is_file():
            primary = SessionRecord.load(path)
            if not isinstance(primary.meta.get("outside"), dict):
                raise UsageError(f"{path}: not a record of an outside client")
            records = [primary, *saved_other_servers(primary, path)]
        else:
            single = is_recording(path)
            cut, cut_folders = cut_recordings(path.parent if single else path)
            if single:  # one server's folder: its own cut only
                cut = [p for p in cut if p.startswith(f"server {path.name.split('-', 1)[0]} ")]
            unread: list[str] = []
            servers = [read_recording(path)] if single else read_recordings(path, problems=unread)
            unread = not_cut(unread, cut_folders)
            if unread:
                raise RecordingError(unread[0])
            if not servers:
                raise UsageError(f"{path}: no fake-codex recording in it" + (f" ({'; '.join(cut)})" if cut else ""))
            records = _records_of_recordings(servers, cut)
    except RecordingError as exc:
        raise UsageError(str(exc)) from None
    checks: list[Check] = [] if args.no_checks else saved if saved is not None else judge(records)
    validator = None
    if not args.no_schema:
        from contracts.validator import Validator

        try:
            validator = Validator.for_release(records[0].schema_release, records[0].experimental_api)
        except Exception:  # an unpinned release still shows its timeline, unmarked
            validator = None
    for k, record in enumerate(records):
        server = record.meta["outside"].get("server") or {}
        end = server.get("end") or {}
        how = f"ended {end.get('reason')} at {end.get('t')}" if end else "no end line (killed)"
        title = f"{record.scenario}: server {server.get('n')} pid {server.get('pid')}, {how}"
        mine = [c for c in checks if k == 0 or c.name.startswith(f"server {server.get('n')}:")]
        print(render(record.wire, checks=mine, validator=validator, title=title), end="")
    if getattr(args, "html", None):
        from harness.html.show import write_show_html

        print(f"HTML: {write_show_html(Path(args.html), records[0], records[0].wire, checks, path)}")
    failed = [c for c in checks if c.status == "fail"]
    for c in checks:
        if c.status == "skip" and c.contract in ("client", "protocol", "schema"):  # failures are in the timeline
            print(f"  {c.status.upper()} {one_line(c.contract)} / {one_line(c.name)}: {one_line(c.detail, 400)}")
    if not checks:
        print("\nchecks not run (--no-checks)")
        return OK
    from harness.report import result_line

    verdict = verdict_of(Report(checks=checks, records=records))
    print(f"\n{len(checks)} checks: {len(failed)} failed\n{result_line(verdict)}")
    return verdict.exit_code


__all__ = ["is_outside", "show_outside"]
