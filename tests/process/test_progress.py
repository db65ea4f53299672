"""Progress of a long run: a line per scenario as it ends, and what still runs (a live line on a terminal)."""

from __future__ import annotations

import io
import time

import pytest

from harness import progress
from harness.progress import Progress


def test_a_log_gets_a_line_naming_what_still_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.05)
    out = io.StringIO()
    with Progress(3, stream=out, live=False) as shown:
        shown.started("plain", "fake-process")
        shown.started("hang_alive", "fake-process")
        shown.ended("plain", "fake-process", "[1/3] plain [fake-process] PASS")
        time.sleep(0.3)
    text = out.getvalue()
    assert "[1/3] plain [fake-process] PASS\n" in text
    still = [line for line in text.splitlines() if line.startswith("still ")]
    assert still and "hang_alive [fake-process]" in still[-1] and "[1/3]" in still[-1]
    assert "plain [fake-process]" not in still[-1]  # it ended
    assert "left" in still[-1]  # an estimate once one scenario ended
    assert "\x1b" not in text and "\r" not in text  # a log is plain lines


def test_a_terminal_gets_one_live_line_redrawn_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "LIVE_REDRAW_S", 0.05)
    out = io.StringIO()
    with Progress(2, stream=out, live=True) as shown:
        shown.started("evil\x1b]0;title\x07", "fake")
        time.sleep(0.2)
        shown.ended("evil\x1b]0;title\x07", "fake", "[1/2] done")
    text = out.getvalue()
    assert "\r\x1b[K[0/2] running 1: evil\\x1b]0;title\\x07 [fake]" in text  # a name is escaped, never obeyed
    assert "\r\x1b[K[1/2] done\n" in text  # an ended line replaces the live line, not beside it
    assert text.endswith("\r\x1b[K")  # and the live line is gone when the run ends
