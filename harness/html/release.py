"""``validate-release``'s report as HTML, beside report.md: the verdict, the schema diff, the contracts
(summary table and a sequence diagram per session, with the mock model's lane), the fidelity diffs and
the latency histograms."""

from __future__ import annotations

from contracts.checks import Check
from contracts.report import Report, Verdict, judge
from harness.html.histogram import histogram_svg
from harness.html.latency import DRAWN, TITLES
from harness.html.page import LEGEND, e, page
from harness.html.report import session_section, summary_table
from harness.report.releases import headline


def render_release(report: Report, markdown: str, verdict: Verdict | None = None) -> str:
    """``report``: a release report (it has a release part); ``markdown``: its report.md (kept as the text part)."""
    verdict = verdict or judge(report)
    release, schema, fidelity = report.release, report.schema, report.fidelity
    assert release is not None
    body = [
        f"<h1>codex-cli {e(release.version)}</h1>",
        f'<p><span class="verdict {"pass" if verdict.ok else "fail"}">{e(headline(report, verdict))}</span> '
        f'<span class="meta">binary {e(release.codex)}; {round(report.wall_s, 1)} s</span></p>',
        "<h2>Wire schema</h2>",
        f"<p>pinned: {e(schema.pin if schema else '')} ({e(schema.store if schema else '')})</p>",
    ]
    if schema is not None and schema.diff is not None:
        body.append(
            f"<p>compared with {e(schema.compared_with)} ({e(schema.baseline)}): {len(schema.diff.changes)} change(s), "
            f"{len(schema.breaking)} breaking</p>"
        )
        if schema.breaking:
            body.append('<ul class="checks">' + "".join(f"<li>{e(b)}</li>" for b in schema.breaking[:200]) + "</ul>")
    body.append("<h2>Contracts on the real binary</h2>")
    if report.checks:
        keys = {(r.scenario, r.target) for r in report.records}
        body.append(summary_table(report, keys))
    body.append("<h2>Fidelity (fake vs real, structural: server sides and trace bundles)</h2>")
    if release.profile_note:
        body.append(f"<p>The fake played release profile {e(release.profile)}: {e(release.profile_note)}.</p>")
    body.append('<ul class="checks">')
    for f in fidelity.entries if fidelity is not None else []:
        css = "pass" if f.equal else ("skip" if f.skipped else "fail")
        diffs = "".join(f"<li>{e(d)}</li>" for d in f.differences[:20])
        diffs += "".join(f"<li>invalid: {e(x)}</li>" for x in f.invalid_frames[:5])
        diffs += "".join(f"<li>trace bundle: {e(x)}</li>" for x in f.trace_differences[:20])
        body.append(
            f'<li><span class="badge {css}">{e(f.state)}</span> {e(f.scenario)}'
            + (f'<ul class="checks">{diffs}</ul>' if diffs else "")
            + "</li>"
        )
    body.append("</ul><h2>Interrupt latency</h2>")
    if report.latency is not None and report.latency.cases:
        for case in report.latency.cases:
            values = {m: [v for s in case.samples if (v := s.metric(m)) is not None] for m in DRAWN}
            body.append(f"<h3>{e(case.scenario)}</h3>" + "".join(histogram_svg(TITLES[m], values[m]) for m in DRAWN))
    else:
        body.append("<p>not measured</p>")
    if report.records:
        by_key: dict[tuple[str, str], list[Check]] = {(g.scenario, g.target): g.checks for g in report.groups()}
        body.append(f"<h2>Sessions</h2>{LEGEND}")
        body += [session_section(r, by_key.get((r.scenario, r.target), [])) for r in report.records]
    body.append(f"<h2>report.md</h2><pre>{e(markdown)}</pre>")
    return page(f"codex-cli {release.version} — validate-release", "".join(body))
