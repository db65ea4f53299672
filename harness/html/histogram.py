"""A latency distribution as an inline SVG histogram with p50 / p95 / p99 / max marked (nearest rank)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from contracts.report.latency import percentiles

WIDTH = 560
HEIGHT = 260
BINS = 30
_PAD_L, _PAD_R, _PAD_T, _PAD_B = 44, 16, 50, 40
MARKS = (("p50", "#2563eb"), ("p95", "#d97706"), ("p99", "#dc2626"), ("max", "#7c3aed"))


def _nice_step(span: float, ticks: int = 5) -> float:
    raw = span / ticks if span > 0 else 1.0
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def histogram_svg(title: str, values_ms: Sequence[float], *, bins: int = BINS) -> str:
    """The SVG of ``values_ms`` (milliseconds); an empty series draws an empty frame saying so."""
    values = [v for v in values_ms if v is not None and math.isfinite(v)]
    w, h = WIDTH, HEIGHT
    plot_w, plot_h = w - _PAD_L - _PAD_R, h - _PAD_T - _PAD_B
    out = [
        f'<svg class="hist" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
        f'data-n="{len(values)}">',
        f'<text class="htitle" x="{_PAD_L}" y="16">{escape(title)} (n={len(values)}, ms)</text>',
        f'<line class="axis" x1="{_PAD_L}" y1="{h - _PAD_B}" x2="{w - _PAD_R}" y2="{h - _PAD_B}"/>',
        f'<line class="axis" x1="{_PAD_L}" y1="{_PAD_T}" x2="{_PAD_L}" y2="{h - _PAD_B}"/>',
    ]
    if not values:
        out.append(f'<text class="empty" x="{w // 2}" y="{h // 2}">no samples</text></svg>')
        return "".join(out)
    lo, hi = 0.0, max(values)
    step = _nice_step(hi - lo)
    hi = max(step, math.ceil(hi / step) * step)
    width = (hi - lo) / bins
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - lo) / width))] += 1
    top = max(counts)

    def x_of(v: float) -> float:
        return _PAD_L + (v - lo) / (hi - lo) * plot_w

    bar_w = plot_w / bins
    for i, c in enumerate(counts):
        if not c:
            continue
        bh = c / top * plot_h
        out.append(
            f'<rect class="bar" x="{_PAD_L + i * bar_w + 0.5:.1f}" y="{h - _PAD_B - bh:.1f}" '
            f'width="{max(bar_w - 1, 1):.1f}" height="{bh:.1f}"><title>{lo + i * width:.2f}–'
            f"{lo + (i + 1) * width:.2f} ms: {c}</title></rect>"
        )
    tick = 0.0
    while tick <= hi + 1e-9:
        x = x_of(tick)
        out.append(f'<line class="tick" x1="{x:.1f}" y1="{h - _PAD_B}" x2="{x:.1f}" y2="{h - _PAD_B + 4}"/>')
        out.append(f'<text class="tlabel" x="{x:.1f}" y="{h - _PAD_B + 16}">{tick:g}</text>')
        tick += step
    out.append(f'<text class="tlabel" x="{_PAD_L - 6}" y="{_PAD_T + 4}" text-anchor="end">{top}</text>')
    stats = percentiles(values)
    for n, (name, colour) in enumerate(MARKS):
        v = stats[name]
        x = x_of(v)
        out.append(
            f'<g class="pmark {name}"><line x1="{x:.1f}" y1="{_PAD_T - 4}" x2="{x:.1f}" y2="{h - _PAD_B}" '
            f'stroke="{colour}"/><text x="{x + 3:.1f}" y="{_PAD_T + 8 + n * 12}" fill="{colour}">{name}</text>'
            f"<title>{name} {v:.2f} ms</title></g>"
        )
    legend = "  ".join(f"{name} {stats[name]:.2f}" for name, _ in MARKS)
    out.append(f'<text class="hlegend" x="{_PAD_L}" y="32">{escape(legend)} ms</text>')
    out.append("</svg>")
    return "".join(out)
