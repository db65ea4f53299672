"""The HTML report of a run (``DIR/index.html``) and of one recorded session (``show --html``).

:func:`write_index_html` is the one call a command needs: the checks of the run and, when it has them, the
session records (else the records saved under ``DIR/sessions/<target>/<scenario>/`` are loaded). The page
holds the summary table (scenario × contract, linking down the page), then one section per session with
its sequence diagram and its failed checks, then every failed check with its detail.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path

from contracts.checks import Check, shown
from contracts.checks.client_run import client_end
from contracts.record import RecordFormatError, SessionRecord
from contracts.report import Report, Verdict, judge
from contracts.safe_dir import SafeDir, write_file
from contracts.text import clip
from harness.html import diagram, sequence
from harness.html.page import LEGEND, e, page

INDEX = "index.html"
_DETAIL = 600
#: A cell's word: its worst status; ``should`` (drawn as a warning) when every failure in it is a recommendation.
_CELL = {"pass": "✓ pass", "fail": "✗ FAIL", "skip": "– skip", "warn": "! warn", "should": "! should"}


def session_id(scenario: str, target: str) -> str:
    return "s-" + re.sub(r"[^A-Za-z0-9_-]", "_", f"{target}-{scenario}")


def _as_report(subject: Report | Sequence[Check]) -> Report:
    return subject if isinstance(subject, Report) else Report(checks=list(subject))


def _clip(text: str, width: int = _DETAIL) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def summary_table(subject: Report | Sequence[Check], with_records: set[tuple[str, str]]) -> str:
    report = _as_report(subject)
    contracts = report.contracts()
    groups = report.groups()
    multi = len(report.targets) > 1
    head = "".join(f"<th>{e(c)}</th>" for c in contracts)
    out = [f'<table class="sum"><tr><th>scenario{" [target]" if multi else ""}</th>{head}</tr>']
    for group in groups:
        scenario, target = group.scenario, group.target
        sid = session_id(scenario, target)
        label = f"{scenario} [{target}]" if multi else scenario
        name = f'<a href="#{sid}">{e(label)}</a>' if (scenario, target) in with_records else e(label)
        by_contract: dict[str, list[Check]] = {}
        for c in group.checks:
            by_contract.setdefault(c.contract, []).append(c)
        cells = []
        for contract in contracts:
            mine = by_contract.get(contract, [])
            if not mine:
                cells.append("<td></td>")
                continue
            status = shown(mine)
            link = f"#{sid}-{contract}" if status in ("fail", "should") else f"#{sid}"
            text = _CELL[status]
            inner = f'<a href="{link}">{text}</a>' if (scenario, target) in with_records else text
            cells.append(f'<td class="{"warn" if status == "should" else status}">{inner}</td>')
        out.append(f"<tr><td>{name}</td>{''.join(cells)}</tr>")
    out.append("</table>")
    return "".join(out)


def _check_item(check: Check, sid: str | None, *, anchor: bool = False) -> str:
    ref = f' <span class="ref">[{e(check.citation)}]</span>' if check.citation else ""
    # The level of every check shown: a should failure is a recommendation (it fails a run only under --strict).
    ref = f' <span class="level {check.level}">{check.level}</span>{ref}'
    where = ""
    if check.at and sid is not None:
        links = ", ".join(f'<a href="#{sid}-L{n}">{n}</a>' for n in check.at[:8])
        where = f' <span class="ref">wire line {links}{" …" if len(check.at) > 8 else ""}</span>'
    ident = f' id="{sid}-{e(check.contract)}"' if anchor and sid else ""
    return (
        f'<li{ident}><span class="badge {check.status}">{check.status}</span> <b>{e(check.contract)}</b> / '
        f'{e(check.name)}: <span class="detail">{e(_clip(check.detail))}</span>{ref}{where}</li>'
    )


def session_section(
    record: SessionRecord, checks: Sequence[Check], *, link: str | None = None, lazy: bool = False
) -> str:
    """One session: heading, what happened, the sequence diagram, its failed checks.

    ``lazy``: the browser renders the section only when it comes near the screen (a run's many sessions).
    """
    sid = session_id(record.scenario, record.target)
    status = shown(checks) if checks else "skip"  # "should": its only failures are recommendations
    turns = ", ".join(f"turn {r.index + 1} {r.status}" for r in sorted(record.results, key=lambda r: r.index))
    clock = "virtual time (MockClock): times are not measured" if record.virtual_time else "real time"
    d = diagram.build(record, checks)
    folded = f"; {d.folded_frames:,} frames folded into ⋯ rows (see wire.jsonl)" if d.folded_frames else ""
    target = {
        "fake": "fake app-server (in process)",
        "fake-process": "fake-codex app-server",
        "real": "codex app-server",
    }
    svg = sequence.render(d, sid=sid, target_label=target.get(record.target, "server"))
    model = f" and {len(record.model):,} model events" if record.model else ""
    lazy_class = ' class="lazy"' if lazy else ""
    wire_link = f' · <a href="{e(link)}/wire.jsonl">wire.jsonl</a>' if link else ""
    out = [
        f'<section id="{sid}"{lazy_class}><h2>{e(clip(record.scenario, 120))} '
        f'<span class="ref">[{e(clip(record.target, 40))}]</span>'
        f'<span class="badge {"warn" if status == "should" else status}">{status}</span></h2>',
        f'<p class="meta">{e(turns or "no Result")}; server exit {e(record.server_exit)}; {clock}; '
        f"{d.frames:,} wire frames{model} drawn as {d.arrows:,} arrows{e(folded)}{wire_link}</p>",
        f'<div class="scroll">{svg}</div>',
    ]
    bad = [c for c in checks if c.status in ("fail", "warn")]
    seen: set[str] = set()
    if bad:
        items = []
        for c in bad:
            items.append(_check_item(c, sid, anchor=c.contract not in seen))
            seen.add(c.contract)
        out.append(f'<ul class="checks">{"".join(items)}</ul>')
    elif checks:
        out.append(f'<p class="meta">{sum(c.status == "pass" for c in checks)} checks passed.</p>')
    out += _outside_client(record)
    if record.client_errors:
        out.append(f"<pre>{e(chr(10).join(x[:2000] for x in record.client_errors[:5]))}</pre>")
    if record.not_copied:
        out.append(f'<p class="meta">not copied into the report: {e("; ".join(record.not_copied[:20]))}</p>')
    out.append("</section>")
    return "".join(out)


#: Lines of an outside client's stderr a session shows when it exited non-zero or started no server.
STDERR_SHOWN = 20


def client_command(record: SessionRecord) -> str | None:
    """The outside client's command line a record judged (``meta.outside.client_cmd``), or None."""
    facts = record.meta.get("outside")
    argv = facts.get("client_cmd") if isinstance(facts, dict) else None
    if not isinstance(argv, list) or not argv:
        return None
    return clip(shlex.join(str(a) for a in argv[:64]), 500)


def _outside_client(record: SessionRecord) -> list[str]:
    """An outside client's command and how it ended; the end of its stderr when it exited non-zero, was killed
    or started no server (the whole tail is in the session's client-stderr.txt)."""
    facts = record.meta.get("outside")
    if not isinstance(facts, dict) or not facts.get("primary", True):
        return []
    command = client_command(record)
    end = client_end(facts)
    if command is None and end is None:
        return []
    said = f"client <code>{e(command)}</code>" if command else "client"
    out = [f'<p class="meta">{said}{"; it " + e(end) if end else ""}</p>']
    tail = facts.get("stderr_tail")
    troubled = facts.get("client_exit") not in (0, None) or facts.get("deadline_hit") or not facts.get("servers")
    if troubled and isinstance(tail, str):
        lines = [line.rstrip() for line in tail.splitlines() if line.strip()][-STDERR_SHOWN:]
        shown_tail = "\n".join(clip(line, 400) for line in lines) or "(its stderr was empty)"
        out.append(f'<p class="meta">the client\'s stderr ends:</p><pre>{e(shown_tail)}</pre>')
    return out


def _load_saved(report_dir: Path) -> tuple[list[SessionRecord], list[str]]:
    """The records saved under ``report_dir/sessions/``, and a line per record that could not be read."""
    records, problems = [], []
    for record_json in sorted((report_dir / "sessions").glob("*/*/record.json")):
        try:
            records.append(SessionRecord.load(record_json.parent))
        except (OSError, ValueError, KeyError, TypeError, RecordFormatError) as exc:
            problems.append(f"{record_json.parent.relative_to(report_dir)}: {exc}")
    return records, problems


def render_index(
    subject: Report | Sequence[Check],
    records: Iterable[SessionRecord],
    *,
    title: str = "codex-harness report",
    result: str | None = None,
    links: dict[tuple[str, str], str] | None = None,
    unreadable: Sequence[str] = (),
    verdict: Verdict | None = None,
) -> str:
    """The whole index page as a string. ``result``: the verdict word (PASS / FAIL / …); by default the
    report's own (:func:`contracts.report.judge`)."""
    report = _as_report(subject)
    checks = report.checks
    records = list(records)
    groups = report.groups()
    by_key = {(g.scenario, g.target): g.checks for g in groups}
    order = {key: i for i, key in enumerate(by_key)}
    records.sort(key=lambda r: order.get((r.scenario, r.target), len(order)))
    with_records = {(r.scenario, r.target) for r in records}
    counts = report.counts
    if result is None:
        result = (verdict or judge(report)).result
    css = {"PASS": "pass", "FAIL": "fail"}.get(result, "none")
    body = [
        f"<h1>{e(title)}</h1>",
        *([f'<p class="judged">{e(report.judged_line())}</p>'] if report.judged else []),
        f'<p><span class="verdict {css}">RESULT: {e(result)}</span> &nbsp; {len(groups)} scenario run(s), '
        f"{len(checks)} checks: {counts.passed} passed, {counts.failed_text()}, {counts.warned} warnings, "
        f"{counts.skipped} skipped</p>",
        summary_table(report, with_records),
    ]
    if report.budgets:
        from harness.report.terminal import budget_text

        text = f"Budgets the client declared (every scenario judged with them): {budget_text(report)}"
        body.insert(2, f'<p class="meta">{e(text)}</p>')
    failed = report.of_status("fail")
    must = [c for c in failed if c.level != "should"]
    should = [c for c in failed if c.level == "should"]
    strict = " (--strict: they fail the run)" if verdict is not None and verdict.strict else ""
    sections = [
        ("failures", f"Failed checks ({len(must)})", must),
        ("should", f"Recommendations not met, should ({len(should)}){strict}", should),
    ]
    for anchor, heading, shown_checks in sections:
        if not shown_checks:
            continue
        body.append(f'<h2 id="{anchor}">{e(heading)}</h2><ul class="checks">')
        for c in shown_checks:
            sid = session_id(c.scenario, c.target) if (c.scenario, c.target) in with_records else None
            where = (
                f'<a href="#{sid}">{e(c.scenario)} [{e(c.target)}]</a>' if sid else f"{e(c.scenario)} [{e(c.target)}]"
            )
            body.append(f"{_check_item(c, sid)[:-5]} — {where}</li>")
        body.append("</ul>")
    reasons = report.skipped_scenarios()
    if reasons:
        body.append(f'<h3>Skipped scenarios ({len(reasons)})</h3><ul class="checks">')
        body += [f"<li>{e(s)} [{e(t)}]: {e(_clip(r, 300))}</li>" for (s, t), r in reasons.items()]
        body.append("</ul>")
    if unreadable:
        body.append(f'<h3>Records not drawn ({len(unreadable)})</h3><ul class="checks">')
        body += [f"<li>{e(_clip(p, 300))}</li>" for p in unreadable]
        body.append("</ul>")
    if records:
        body.append(f"<h2>Sessions</h2>{LEGEND}")
    for record in records:
        key = (record.scenario, record.target)
        body.append(session_section(record, by_key.get(key, []), link=(links or {}).get(key), lazy=True))
    return page(title, "".join(body))


def write_index_html(
    report_dir: str | Path,
    subject: Report | Sequence[Check],
    records: Iterable[SessionRecord] | None = None,
    *,
    title: str = "codex-harness report",
    result: str | None = None,
    into: SafeDir | None = None,
    verdict: Verdict | None = None,
) -> Path:
    """Write ``report_dir/index.html`` and return its path.

    ``records``: the sessions to draw; None loads those saved under ``report_dir/sessions/``.
    ``result`` / ``verdict``: the run's verdict (with its baseline and --strict); by default the report's own.
    ``into``: ``report_dir`` held (the run's report); else it is opened here. Written whole, never through a link.
    """
    out_dir = Path(report_dir)
    unreadable: list[str] = []
    if records is None:
        chosen, unreadable = _load_saved(out_dir)
    else:
        chosen = list(records)
    links = {}
    for r in chosen:
        saved = out_dir / "sessions" / r.target / r.scenario
        if (saved / "wire.jsonl").is_file():
            links[(r.scenario, r.target)] = f"sessions/{r.target}/{r.scenario}"
    page_text = render_index(
        subject, chosen, title=title, result=result, links=links, unreadable=unreadable, verdict=verdict
    )
    if into is not None:
        return into.write_text(INDEX, page_text)
    with SafeDir.open(out_dir) as held:
        return held.write_text(INDEX, page_text)


def render_session_page(record: SessionRecord, checks: Sequence[Check]) -> str:
    title = f"{clip(record.scenario, 120)} [{clip(record.target, 40)}] — codex-harness"  # a record anyone wrote
    return page(title, f"<h1>{e(title)}</h1>{LEGEND}{session_section(record, checks)}")


def write_session_html(path: str | Path, record: SessionRecord, checks: Sequence[Check]) -> Path:
    return write_file(path, render_session_page(record, checks).encode("utf-8"))
