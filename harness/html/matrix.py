"""``matrix``'s table as HTML (``matrix.html``): the releases as columns, the same rows as matrix.md (counts in
the cells, so the table fits a 1400 px window), then each release step folded: its wire-schema changes by client
impact (breaking ones marked) and the behaviour changes of the real servers per scenario."""

from __future__ import annotations

from contracts.report import Report, Verdict, judge
from harness.html.page import e, page
from harness.report.releases import fidelity_differing, headline, matrix_rows, step_cell, step_groups

#: Entries shown in one folded list (matrix.json has them all).
SHOWN = 500


def _cell(text: str) -> str:
    css = "fail" if "**" in text or "FAIL" in text else ""
    return f'<td class="{css}">{e(text.replace("**", ""))}</td>'


def render_matrix(matrix: Report, verdict: Verdict | None = None) -> str:
    verdict = verdict or judge(matrix)
    head = "".join(f"<th>codex-cli {e(c.version())}</th>" for c in matrix.columns)
    body_rows = [
        f"<tr><th>{e(label)}</th>{''.join(_cell(c) for c in cells)}</tr>" for label, cells in matrix_rows(matrix)
    ]
    words = "no release step breaks clients, every release holds" if verdict.ok else headline(matrix, verdict)
    parts = [
        f"<h1>{e(matrix.title)}</h1>",
        f'<p><span class="verdict {"pass" if verdict.ok else "fail"}">{e(words)}</span> '
        f'<span class="meta">{e(matrix.command)}; {matrix.wall_s:.0f} s</span></p>',
        f'<table class="sum matrix"><thead><tr><th></th>{head}</tr></thead><tbody>{"".join(body_rows)}</tbody></table>',
    ]
    for column in matrix.columns:
        names = fidelity_differing(column)
        if names:
            items = "".join(f"<li>{e(n)}</li>" for n in names)
            parts.append(
                f"<details><summary>codex-cli {e(column.version())}: fidelity differs on {len(names)} scenario(s)"
                f'</summary><ul class="checks">{items}</ul></details>'
            )
    for n in matrix.neighbours:
        parts.append(f"<h2>codex-cli {e(n.old)} &rarr; {e(n.new)}</h2>")
        parts.append(f"<p>{e(step_cell(n).replace('**', ''))}</p>")
        for title, entries, breaking in step_groups(n):
            css = ' class="breaking"' if breaking else ""
            items = "".join(f"<li{css}>{e(x)}</li>" for x in entries[:SHOWN])
            more = f"<li>... and {len(entries) - SHOWN} more (matrix.json)</li>" if len(entries) > SHOWN else ""
            is_open = " open" if breaking and entries else ""
            parts.append(
                f'<details{is_open}><summary>{e(title)}</summary><ul class="checks">{items}{more}</ul></details>'
            )
    return page(matrix.title, "".join(parts))
