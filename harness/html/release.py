"""``validate-release``'s report as HTML, beside report.md: the verdict, the schema diff, the contracts
(summary table and a sequence diagram per session, with the mock model's lane), the fidelity diffs and
the latency histograms."""

from __future__ import annotations

from typing import Any

from harness.html.histogram import histogram_svg
from harness.html.latency import DRAWN, TITLES
from harness.html.page import LEGEND, e, page
from harness.html.report import session_section, summary_table


def render_release(report: Any, markdown: str) -> str:
    """``report``: a ``validate_release.ReleaseReport``; ``markdown``: its report.md (kept as the text part)."""
    data = report.to_json()
    ok = report.verdict == "ok"
    verdict = "no client-breaking change found" if ok else "BREAKS CLIENTS"
    body = [
        f"<h1>codex-cli {e(report.version)}</h1>",
        f'<p><span class="verdict {"pass" if ok else "fail"}">{e(verdict)}</span> '
        f'<span class="meta">binary {e(report.codex)}; {data["wall_s"]} s</span></p>',
        "<h2>Wire schema</h2>",
        f"<p>pinned: {e(report.pin_state)} ({e(report.schema_store)})</p>",
    ]
    if report.schema is not None:
        body.append(
            f"<p>compared with {e(report.compared_with)}: {len(report.schema.changes)} change(s), "
            f"{len(report.breaking)} breaking</p>"
        )
        if report.breaking:
            body.append('<ul class="checks">' + "".join(f"<li>{e(b)}</li>" for b in report.breaking[:200]) + "</ul>")
    body.append("<h2>Contracts on the real binary</h2>")
    if report.checks:
        keys = {(r.scenario, r.target) for r in report.records}
        body.append(summary_table(report.checks, keys))
    body.append("<h2>Fidelity (fake vs real, structural: server sides and trace bundles)</h2>")
    if getattr(report, "profile_note", ""):
        body.append(f"<p>The fake played release profile {e(report.profile)}: {e(report.profile_note)}.</p>")
    body.append('<ul class="checks">')
    for f in report.fidelity:
        state = "equal" if f["equal"] else ("skipped: " + f["skipped"] if f["skipped"] else "DIFFERENT")
        css = "pass" if f["equal"] else ("skip" if f["skipped"] else "fail")
        diffs = "".join(f"<li>{e(d['text'])}</li>" for d in f.get("differences", [])[:20])
        diffs += "".join(f"<li>invalid: {e(x)}</li>" for x in f.get("invalid_frames", [])[:5])
        diffs += "".join(f"<li>trace bundle: {e(x)}</li>" for x in f.get("trace_differences", [])[:20])
        body.append(
            f'<li><span class="badge {css}">{e(state)}</span> {e(f["scenario"])}'
            + (f'<ul class="checks">{diffs}</ul>' if diffs else "")
            + "</li>"
        )
    body.append("</ul><h2>Interrupt latency</h2>")
    if report.latency_cases:
        for case in report.latency_cases:
            values = {m: [v for s in case.samples if (v := s.metric(m)) is not None] for m in DRAWN}
            body.append(f"<h3>{e(case.scenario)}</h3>" + "".join(histogram_svg(TITLES[m], values[m]) for m in DRAWN))
    else:
        body.append("<p>not measured</p>")
    if report.records:
        by_key: dict[tuple[str, str], list[Any]] = {}
        for c in report.checks:
            by_key.setdefault((c.scenario, c.target), []).append(c)
        body.append(f"<h2>Sessions</h2>{LEGEND}")
        body += [session_section(r, by_key.get((r.scenario, r.target), [])) for r in report.records]
    body.append(f"<h2>report.md</h2><pre>{e(markdown)}</pre>")
    return page(f"codex-cli {report.version} — validate-release", "".join(body))
