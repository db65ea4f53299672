"""The HTML report in a real browser (headless Chromium from Debian's ``chromium`` package).

Skipped with the reason when no Chromium is installed; ``CODEX_HARNESS_REQUIRE_BROWSER=1`` (set by
``.ci/run``) turns that skip into a failure. The arrow count the page draws is compared with a count
made here, from the saved wire.jsonl files, by the collapsing rule the report documents.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from support import browser

from harness.html import write_index_html
from harness.html.page import sha256 as page_sha256
from harness.runner import run_many
from harness.scenario_lookup import resolve

SCENARIOS = ("interrupt_pending_approval", "flood")  # an approval, an interrupt, a 5,000-delta stream; no fault
#: Notifications that are always an arrow of their own (events, not stream items).
EVENTS = {"turn/started", "turn/completed", "serverRequest/resolved", "error"}


@pytest.fixture(scope="module")
def chromium() -> str:
    return browser.chromium_or_skip()


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    runs = run_many([resolve(name) for name in SCENARIOS], ["fake"], report_dir=out)
    assert all(r.record is not None for r in runs), [r.skipped or r.checks[:1] for r in runs]
    checks = [c for r in runs for c in r.checks]
    assert not [c for c in checks if c.status == "fail"], "the page under test should hold passing sessions"
    return write_index_html(out, checks, [r.record for r in runs if r.record is not None])


def expected_arrows(wire_jsonl: Path) -> int:
    """One arrow per frame, except that consecutive notifications of one method in one direction (and
    consecutive non-frames of one error kind) share one; notes are not arrows."""
    arrows, previous = 0, None
    for line in wire_jsonl.read_bytes().splitlines():
        entry = orjson.loads(line)
        msg = entry["msg"]
        if entry["dir"] == "note":
            previous = None
            continue
        if "_raw" in msg:
            key = (entry["dir"], "raw", msg.get("_error"))
        elif "method" in msg and "id" not in msg and msg["method"] not in EVENTS:
            key = (entry["dir"], "method", msg["method"])
        else:
            key = None
        if key is None or key != previous:
            arrows += 1
        previous = key
    return arrows


def test_report_loads_draws_every_arrow_and_is_drawn(chromium: str, report: Path, tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    loaded = browser.load(report, binary=chromium, screenshot=shot, width=1200, height=900)
    assert loaded.errors == []  # a Content-Security-Policy violation would be one (page.ERROR_HOOK reports it)
    assert "Content-Security-Policy" in report.read_text(encoding="utf-8")
    assert loaded.attrs.get("ready") == "1"
    expected = sum(expected_arrows(p) for p in sorted(report.parent.glob("sessions/*/*/wire.jsonl")))
    assert expected > 20
    assert loaded.number("drawn-arrows") == expected
    # Reported; the 1 s target is measured by bench/report_html.py (a loaded CI machine would make it flaky here).
    assert 0 < loaded.number("load-ms") < 10_000
    image = browser.decode_png(shot.read_bytes())
    assert (image.width, image.height) == (1200, 900)
    assert browser.ink_ratio(image) >= 0.02


def _planted(html: str, script: str, *, allowed: bool) -> str:
    """The page with ``script`` before ``</body>``; ``allowed``: its hash added to the page's policy."""
    if allowed:
        html = html.replace("script-src ", f"script-src {page_sha256(script)} ", 1)
    return html.replace("</body>", f"<script>{script}</script></body>")


def test_a_planted_js_error_fails_the_check(chromium: str, report: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.html"
    html = report.read_text(encoding="utf-8")
    broken.write_text(_planted(html, "window.notAFunction();", allowed=True), encoding="utf-8")
    loaded = browser.load(broken, binary=chromium)
    assert loaded.errors, "a JavaScript error on the page must be seen"
    assert any("notAFunction" in e for e in loaded.errors)


def test_the_policy_blocks_a_script_without_its_hash_and_says_so(chromium: str, report: Path, tmp_path: Path) -> None:
    """The page's own scripts run under its Content-Security-Policy (the first test: no violation, every
    arrow counted); one planted without a hash (what a string smuggled past the escaping would be) does
    not run, and the page reports the violation."""
    html = report.read_text(encoding="utf-8")
    assert "Content-Security-Policy" in html and "unsafe-inline" not in html
    planted = tmp_path / "planted.html"
    script = "document.body.setAttribute('data-planted','1');"
    planted.write_text(_planted(html, script, allowed=False), encoding="utf-8")
    loaded = browser.load(planted, binary=chromium)
    assert "planted" not in loaded.attrs, "an inline script without a hash in the policy must not run"
    assert any(e.startswith("csp: script-src") for e in loaded.js_errors), loaded.errors
    assert loaded.attrs.get("ready") == "1"  # the page's own scripts still ran
    allowed = tmp_path / "allowed.html"
    allowed.write_text(_planted(html, script, allowed=True), encoding="utf-8")
    assert browser.load(allowed, binary=chromium).attrs.get("planted") == "1"  # the planting itself works


def test_png_decoder_reads_filters() -> None:
    import struct
    import zlib

    # 2x2 RGB, one row filtered Sub, one Paeth: decoded by hand.
    raw = bytes([1, 10, 20, 30, 5, 5, 5]) + bytes([4, 1, 1, 1, 0, 0, 0])
    ihdr = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    image = browser.decode_png(png)
    assert image.pixel(0, 0) == (10, 20, 30) and image.pixel(1, 0) == (15, 25, 35)
    assert image.pixel(0, 1) == (11, 21, 31) and image.pixel(1, 1) == (15, 25, 35)
