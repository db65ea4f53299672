"""``matrix``'s table as HTML (``matrix.html``): the releases as columns, the same rows as matrix.md, then each
pair of neighbours' wire-schema changes."""

from __future__ import annotations

from contracts.report import Report, Verdict, judge
from harness.html.page import e, page
from harness.report.releases import matrix_rows


def render_matrix(matrix: Report, verdict: Verdict | None = None) -> str:
    verdict = verdict or judge(matrix)
    head = "".join(f"<th>codex-cli {e(c.version())}</th>" for c in matrix.columns)
    body_rows = []
    for label, cells in matrix_rows(matrix):
        tds = "".join(
            f'<td class="{"fail" if "FAIL" in c or "differ" in c else ""}">{e(c.replace("**", ""))}</td>'
            for c in cells
        )
        body_rows.append(f"<tr><th>{e(label)}</th>{tds}</tr>")
    words = "every release holds its contracts and matches its profile" if verdict.ok else "SOME RELEASE FAILS"
    parts = [
        "<h1>codex releases side by side</h1>",
        f'<p><span class="verdict {"pass" if verdict.ok else "fail"}">{e(words)}</span> '
        f'<span class="meta">{e(matrix.command)}; {matrix.wall_s:.0f} s</span></p>',
        f'<table class="sum"><thead><tr><th></th>{head}</tr></thead><tbody>{"".join(body_rows)}</tbody></table>',
    ]
    for n in matrix.neighbours:
        data = n.to_json()
        parts.append(f"<h2>Wire schema {e(n.old)} &rarr; {e(n.new)}</h2>")
        if n.diff is None:
            parts.append(f"<p>not compared: {e(n.error)}</p>")
            continue
        parts.append(f"<p>{data['changes']} change(s), {len(data['breaking'])} breaking</p>")
        items = "".join(f"<li>{e(t)}</li>" for t in data["all"][:500])
        parts.append(f'<ul class="checks">{items}</ul>')
    return page("codex releases side by side", "".join(parts))
