"""``latency --report DIR``: each case's two distributions (interrupt→turn/completed on the wire,
cancel→Result on the client's clock) as SVG histograms with p50 / p95 / p99 / max marked, next to the
numbers, in ``DIR/latency.html``; the samples in ``DIR/latency.json``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import orjson

from contracts.report import LatencyPart
from contracts.report.latency import METRICS, CaseResult
from contracts.safe_dir import SafeDir
from harness.html.histogram import histogram_svg
from harness.html.page import e, page
from harness.report.documents import latency_file_json

DRAWN = ("interrupt_to_completed", "cancel_to_result")
TITLES = {"interrupt_to_completed": "interrupt → turn/completed (wire)", "cancel_to_result": "cancel → Result (client)"}


def _ms(v: float) -> str:
    return "–" if v is None or math.isnan(v) else f"{v:.2f}"


def _case(result: CaseResult) -> str:
    rows = []
    for metric in METRICS:
        s = result.summary(metric)
        rows.append(
            f"<tr><td>{e(metric)}</td><td>{s['n']}</td>"
            + "".join(f"<td>{_ms(s[k])}</td>" for k in ("p50", "p95", "p99", "max"))
            + "</tr>"
        )
    table = (
        '<table class="sum"><tr><th>metric (ms)</th><th>n</th><th>p50</th><th>p95</th><th>p99</th><th>max</th></tr>'
        + "".join(rows)
        + "</table>"
    )
    charts = "".join(
        histogram_svg(TITLES[m], [v for s in result.samples if (v := s.metric(m)) is not None]) for m in DRAWN
    )
    bad = [s for s in result.samples + result.warmups if s.status != "aborted"]
    note = f'<p class="meta">{len(bad)} sample(s) not aborted</p>' if bad else ""
    return (
        f'<section id="{e(result.scenario)}"><h2>{e(result.scenario)} '
        f'<span class="ref">[{e(result.target)}]</span></h2>'
        f'<p class="meta">{len(result.samples)} samples, {len(result.warmups)} warm-ups discarded; nearest-rank '
        f"percentiles</p>{note}{table}<div>{charts}</div></section>"
    )


def _part(results: LatencyPart | Sequence[CaseResult]) -> LatencyPart:
    return results if isinstance(results, LatencyPart) else LatencyPart(list(results), decides=True)


def render_latency(results: LatencyPart | Sequence[CaseResult]) -> str:
    body = "<h1>Interrupt latency</h1>" + "".join(_case(r) for r in _part(results).cases)
    return page("codex-harness latency", body)


def write_latency_report(report_dir: str | Path, results: LatencyPart | Sequence[CaseResult]) -> Path:
    part = _part(results)
    with SafeDir.open(report_dir) as out:  # each file written whole, never through a link
        out.write("latency.json", orjson.dumps(latency_file_json(part), option=orjson.OPT_INDENT_2))
        return out.write_text("latency.html", render_latency(part))
