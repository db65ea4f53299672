"""A :class:`~harness.html.diagram.Diagram` as inline SVG: lanes, arrows, brackets, marks (plain strings).

Geometry: one row every :data:`ROW_H` px under the lane headers. Left of the lanes, a gutter of brackets
pairs each request with its answer (grey: the client's requests, amber: the server's, dashed red: never
answered); right of the last lane, the interrupt → turn/completed intervals (violet) and the failed checks
pointing at a row (red, the row shaded). Each arrow is a ``<g class="arrow">`` whose ``data-frames`` says
how many wire frames it stands for and whose ``<title>`` holds the full text.
"""

from __future__ import annotations

import math

from contracts.text import clip
from harness.html.diagram import Diagram, Row
from harness.html.page import e

ROW_H = 22
HEAD = 46
GUTTER_COL = 7
GUTTER_COLS = 8
LINE_RIGHT = 92  # wire line numbers
TIME_RIGHT = 158
LANE_X = {2: (230, 690), 3: (230, 620, 920)}
ANNOT_W = 330
CHAR_W = 6.4  # px per label character at 11 px, on average (generous: labels must not cross the lanes)


#: A tooltip (``<title>``) is cut here: the labels are clipped where they are made, this bounds the rest.
TITLE_WIDTH = 2000


def _e(text: object) -> str:
    return e(clip(str(text), TITLE_WIDTH))


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def lane_positions(diagram: Diagram) -> dict[str, int]:
    return dict(zip(diagram.lanes, LANE_X[len(diagram.lanes)], strict=True))


def width_of(diagram: Diagram) -> int:
    return LANE_X[len(diagram.lanes)][-1] + ANNOT_W


def height_of(diagram: Diagram) -> int:
    return HEAD + ROW_H * (len(diagram.rows) + 1 + (1 if diagram.open_at_end else 0)) + 8


def _time(diagram: Diagram, row: Row) -> str:
    if "untimed" in row.css:
        return "time not known"
    ms = (row.t - diagram.t0) * 1000
    return f"{ms:,.1f} ms" if ms < 100_000 else f"{ms / 1000:,.1f} s"


def render(diagram: Diagram, *, sid: str, target_label: str = "server") -> str:
    """The SVG element; ``sid`` prefixes element ids (``{sid}-L{line}`` for the row of a wire line)."""
    lanes = lane_positions(diagram)
    width, height = width_of(diagram), height_of(diagram)
    last_lane = max(lanes.values())
    annot_x = last_lane + 22
    out = [
        f'<svg class="seq" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" data-arrows="{diagram.arrows}" data-frames="{diagram.frames}" '
        f'data-rows="{len(diagram.rows)}">'
    ]
    bottom = height - 6
    names = {"client": "client", "server": target_label, "model": "mock model (Responses API)"}
    for lane, x in lanes.items():
        out.append(f'<line class="life" x1="{x}" y1="{HEAD - 12}" x2="{x}" y2="{bottom}"/>')
        out.append(f'<rect class="lanehead" x="{x - 80}" y="6" width="160" height="24" rx="4"/>')
        out.append(f'<text class="lanename" x="{x}" y="22">{_e(names[lane])}</text>')
    # Shading first, so arrows draw over it.
    for i, row in enumerate(diagram.rows):
        top = HEAD + i * ROW_H
        if row.failed:
            out.append(f'<rect class="failband" x="0" y="{top}" width="{width}" height="{ROW_H}"/>')
    out += _pairs(diagram)
    for i, row in enumerate(diagram.rows):
        out.append(_row(diagram, i, row, lanes, sid, width, annot_x))
    out += _intervals(diagram, annot_x)
    if diagram.open_at_end:
        y = HEAD + len(diagram.rows) * ROW_H + 15
        text = "open at the end: " + ", ".join(diagram.open_at_end[:6])
        if len(diagram.open_at_end) > 6:
            text += f" (+{len(diagram.open_at_end) - 6} more)"
        out.append(f'<text class="openend" x="{lanes["client"]}" y="{y}">{_e(_clip(text, 140))}</text>')
    out.append("</svg>")
    return "".join(out)


def _row(diagram: Diagram, i: int, row: Row, lanes: dict[str, int], sid: str, width: int, annot_x: int) -> str:
    top = HEAD + i * ROW_H
    y = top + 16
    parts: list[str] = []
    anchor = f' id="{_e(sid)}-L{row.first + 1}"' if row.first >= 0 else ""
    lines = f"{row.first + 1}" if row.first == row.last else f"{row.first + 1}-{row.last + 1}"
    time = f'<text class="time" x="{TIME_RIGHT}" y="{top + 14}">{_e(_time(diagram, row))}</text>'
    if row.first >= 0:
        number = f"{row.first + 1}" if row.first == row.last else f"{row.first + 1}…"
        time += f'<text class="line" x="{LINE_RIGHT}" y="{top + 14}">{number}</text>'
    left, right = min(lanes.values()), max(lanes.values())
    if row.kind in ("msg", "model"):
        x1, x2 = lanes[row.src], lanes[row.dst]
        step = 6 if x2 > x1 else -6
        css = " ".join(("arrow", *row.css, *(("run",) if row.count > 1 else ())))
        frames = row.count if row.kind == "msg" else 0
        title = f"{row.label}\n{row.detail}\nwire line(s) {lines}" if row.first >= 0 else f"{row.label}\n{row.detail}"
        text = row.label
        if row.detail and "decision" not in row.css:
            text = f"{row.label}  {row.detail}"
        text = _clip(text, max(20, int(abs(x2 - x1) / CHAR_W)))
        parts.append(
            f'<g class="{_e(css)}"{anchor} data-frames="{frames}" data-lines="{lines if row.first >= 0 else ""}">'
            f"<title>{_e(title.strip())}</title>"
            f'<line x1="{x1 + step}" y1="{y}" x2="{x2 - step}" y2="{y}"/>'
            f'<text x="{(x1 + x2) // 2}" y="{top + 11}">{_e(text)}</text>'
        )
        parts.append("</g>")
        parts.append(time)
    elif row.kind == "note":
        parts.append(
            f'<g class="note"{anchor}><title>{_e(row.label)} (wire line {lines})</title>'
            f'<circle cx="{lanes["client"]}" cy="{y - 4}" r="4"/>'
            f'<text x="{(left + right) // 2}" y="{y}">— {_e(row.label)} —</text></g>{time}'
        )
    elif row.kind == "result":
        css = " ".join(("result", *row.css[1:]))
        parts.append(
            f'<g class="{css}"><title>{_e(row.label)}</title>'
            f'<rect x="{lanes["client"] - 40}" y="{top + 3}" width="{min(right - left + 40, 520)}" '
            f'height="{ROW_H - 6}" rx="8"/><text x="{lanes["client"] - 32}" y="{top + 15}">{_e(row.label)}</text>'
            f"</g>{time}"
        )
    elif row.kind == "fault":
        parts.append(
            f'<g class="fault"><title>{_e(row.label)}: struck after wire line {row.first + 1}</title>'
            f'<rect x="{left - 30}" y="{top + 2}" width="{right - left + 60}" height="{ROW_H - 4}" rx="3"/>'
            f'<text x="{(left + right) // 2}" y="{top + 15}">{_e(row.label)}</text></g>'
        )
    elif row.kind == "fold":
        summary = _clip(row.label + " · " + row.detail, int((right - left + 50) / CHAR_W))
        parts.append(
            f'<g class="fold" data-frames="{row.count}"{anchor}><title>{_e(row.label)}\n{_e(row.detail)}</title>'
            f'<rect x="{left - 30}" y="{top + 2}" width="{right - left + 60}" height="{ROW_H - 4}" rx="3"/>'
            f'<text x="{(left + right) // 2}" y="{top + 15}">{_e(summary)}</text>'
            f"</g>{time}"
        )
    if row.marks:
        text = "; ".join(row.marks)
        parts.append(
            f'<text class="mark" x="{annot_x + 14}" y="{top + 15}">{_e(_clip(text, 52))}'
            f"<title>{_e(text)}</title></text>"
        )
    return "".join(parts)


def _pairs(diagram: Diagram) -> list[str]:
    """Brackets in the left gutter, one column per overlapping pair."""
    ends: list[float] = []  # per column, the last row it is busy until
    out = []
    bottom_row = len(diagram.rows)
    for pair in sorted(diagram.pairs, key=lambda p: p.start):
        end = pair.end if pair.end is not None else bottom_row
        col = next((c for c, busy in enumerate(ends) if busy < pair.start), None)
        if col is None:
            if len(ends) < GUTTER_COLS:
                ends.append(-1)
                col = len(ends) - 1
            else:
                col = GUTTER_COLS - 1
        ends[col] = end
        x = 8 + col * GUTTER_COL
        y1 = HEAD + pair.start * ROW_H + 16
        y2 = HEAD + end * ROW_H + (16 if pair.end is not None else 0)
        css = "pair server" if pair.server else "pair"
        if pair.end is None:
            css += " open"
        title = pair.label + (" — never answered" if pair.end is None else "")
        out.append(f'<path class="{css}" d="M{x + 6},{y1} H{x} V{y2} H{x + 6}"><title>{_e(title)}</title></path>')
    return out


def _intervals(diagram: Diagram, annot_x: int) -> list[str]:
    out = []
    for n, iv in enumerate(diagram.intervals):
        x = annot_x + (n % 3) * 4
        y1 = HEAD + iv.start * ROW_H + 16
        y2 = HEAD + iv.end * ROW_H + 16
        mid = (y1 + y2) // 2 + 4
        css = "interval" if not math.isnan(iv.ms) else "interval open"
        out.append(
            f'<g class="{css}"><title>{_e(iv.label)}</title>'
            f'<path d="M{x - 6},{y1} H{x} V{y2} H{x - 6}"/>'
            f'<text x="{x + 8}" y="{mid if y2 - y1 > ROW_H else y1 + 4}">{_e(iv.label)}</text></g>'
        )
    return out
