"""The HTML report of a full run: its size, its render time and its load time in headless Chromium, next to
the text table of the same checks measured in the same run.

    python bench/report_html.py [--quick] [--json PATH] [--no-browser]

Plays every built-in scenario on the in-process fake (``--quick``: five), then measures:

- render: ``render_index`` (diagrams of every session) against ``render_table`` (the terminal table);
- size: ``index.html`` against the text table's bytes; target <= 5 MB for the 50 scenarios;
- load: ``data-load-ms`` (navigation start → load event, layout done; sessions off screen are left for
  when they are scrolled to) in headless Chromium, median of 3, against the same page shell holding only
  the text table; target <= 1 s;
- a synthetic session of 100,000 deltas (one turn): render, size and load, the same way.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # support: the headless-Chromium driver of the tests

from support import browser  # noqa: E402

from bench._common import Row, arg_parser, finish  # noqa: E402
from contracts.expect import Expect  # noqa: E402
from contracts.record import SessionRecord, WireEntry  # noqa: E402
from harness import scenario_lookup  # noqa: E402
from harness.html.page import e, page  # noqa: E402
from harness.html.report import render_index, render_session_page  # noqa: E402
from harness.report import render_table  # noqa: E402
from harness.runner import run_many  # noqa: E402

MAX_BYTES = 5 * 1024 * 1024
MAX_LOAD_MS = 1000.0
BENCH = "report_html"


def best_seconds(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def load_ms(path: Path, times: int = 3, *, every_section: bool = False) -> float:
    """Median load time; ``every_section``: the page lays out every diagram too (its #selftest)."""

    def once() -> float:
        started = time.perf_counter()
        loaded = browser.load(path, selftest=every_section)
        if not every_section:
            return loaded.number("load-ms")
        loaded.number("drawn-arrows")  # the count ran: every section was laid out
        return (time.perf_counter() - started) * 1000

    return statistics.median(once() for _ in range(times))


def delta_session(n: int) -> SessionRecord:
    """One turn whose agent message streams ``n`` deltas, 10 µs apart, as the fake would record it."""
    wire = [
        WireEntry(
            0.0, "c2s", {"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "b", "version": "1"}}}
        ),
        WireEntry(0.001, "s2c", {"id": 1, "result": {}}),
        WireEntry(0.002, "c2s", {"id": 2, "method": "turn/start", "params": {"threadId": "th", "input": []}}),
        WireEntry(0.003, "s2c", {"id": 2, "result": {"turn": {"id": "tu", "status": "inProgress"}}}),
        WireEntry(0.004, "s2c", {"method": "turn/started", "params": {"turn": {"id": "tu", "status": "inProgress"}}}),
        WireEntry(0.005, "s2c", {"method": "item/started", "params": {"item": {"id": "m", "type": "agentMessage"}}}),
    ]
    t = 0.005
    for i in range(n):
        t += 1e-5
        wire.append(
            WireEntry(t, "s2c", {"method": "item/agentMessage/delta", "params": {"itemId": "m", "delta": f"w{i} "}})
        )
    wire += [
        WireEntry(
            t + 0.001, "s2c", {"method": "item/completed", "params": {"item": {"id": "m", "type": "agentMessage"}}}
        ),
        WireEntry(
            t + 0.002, "s2c", {"method": "turn/completed", "params": {"turn": {"id": "tu", "status": "completed"}}}
        ),
        WireEntry(t + 0.003, "note", note="stdin closed"),
    ]
    return SessionRecord("deltas_100k", "fake", Expect(), wire=wire)


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--no-browser", action="store_true", help="skip the load-time rows (no Chromium)")
    args = parser.parse_args()
    names = scenario_lookup.builtin_names()
    if args.quick:
        names = names[:5]
    repeat = 2 if args.quick else 5
    use_browser = not args.no_browser and browser.find_chromium() is not None
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="report-html-bench-") as tmp:
        out = Path(tmp)
        runs = run_many([scenario_lookup.resolve(n) for n in names], ["fake"], report_dir=out / "run")
        checks = [c for r in runs for c in r.checks]
        records = [r.record for r in runs if r.record is not None]
        frames = sum(len(r.wire) for r in records)
        html = render_index(checks, records)
        text = render_table(checks)
        index, text_page = out / "index.html", out / "table.html"
        index.write_text(html, encoding="utf-8")
        text_page.write_text(page("table", f"<pre>{e(text)}</pre>"), encoding="utf-8")
        html_s = best_seconds(lambda: render_index(checks, records), repeat)
        text_s = best_seconds(lambda: render_table(checks), repeat)
        size = len(html.encode())
        what = f"{len(records)} sessions, {frames:,} wire lines"
        rows.append(Row(BENCH, "render text table (baseline)", text_s * 1000, "ms", note=what))
        rows.append(
            Row(
                BENCH,
                "render index.html",
                html_s * 1000,
                "ms",
                "render text table",
                html_s / text_s if text_s else None,
            )
        )
        rows.append(Row(BENCH, "text table size (baseline)", len(text.encode()) / 1024, "KB"))
        rows.append(
            Row(
                BENCH,
                "index.html size",
                size / 1024,
                "KB",
                "text table size",
                size / len(text.encode()),
                target="<= 5 MB",
                ok=size <= MAX_BYTES,
            )
        )
        big = delta_session(10_000 if args.quick else 100_000)
        big_page = out / "deltas.html"
        big_html = render_session_page(big, [])
        big_page.write_text(big_html, encoding="utf-8")
        big_s = best_seconds(lambda: render_session_page(big, []), repeat)
        n_deltas = len(big.wire) - 9
        rows.append(
            Row(BENCH, f"render a {n_deltas:,}-delta session", big_s * 1000, "ms", note=f"{len(big_html):,} bytes")
        )
        if use_browser:
            base_ms = load_ms(text_page)
            index_ms = load_ms(index)
            big_ms = load_ms(big_page)
            base_wall = load_ms(text_page, every_section=True)
            full_wall = load_ms(index, every_section=True)
            rows.append(Row(BENCH, "load the text table page (baseline)", base_ms, "ms"))
            rows.append(
                Row(
                    BENCH,
                    "load index.html",
                    index_ms,
                    "ms",
                    "load the text table page",
                    index_ms / base_ms if base_ms else None,
                    target="<= 1 s",
                    ok=index_ms <= MAX_LOAD_MS,
                )
            )
            rows.append(Row(BENCH, "chromium run, text table page (baseline)", base_wall, "ms"))
            rows.append(
                Row(
                    BENCH,
                    "chromium run, index.html with every diagram laid out",
                    full_wall,
                    "ms",
                    "chromium run, text table page",
                    full_wall / base_wall if base_wall else None,
                    note="wall time of a whole headless run (start, load, lay out all, dump): an upper bound",
                )
            )
            rows.append(
                Row(
                    BENCH,
                    f"load the {n_deltas:,}-delta session",
                    big_ms,
                    "ms",
                    "load the text table page",
                    big_ms / base_ms if base_ms else None,
                    target="<= 1 s",
                    ok=big_ms <= MAX_LOAD_MS,
                )
            )
    title = f"HTML report of {len(names)} scenarios on the in-process fake"
    if not use_browser:
        title += " (no Chromium: load times not measured)"
    return finish(rows, title, args.json)


if __name__ == "__main__":
    sys.exit(main())
