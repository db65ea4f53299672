"""What a long run says while it runs: a line per scenario as it ends, and what still runs.

On a terminal one live line is kept at the bottom (the scenarios running now, how many are done, an estimate of
the time left), redrawn in place; in a log (CI), plain lines as scenarios end, and every
:data:`HEARTBEAT_S` a line naming what still runs, so a long silence is never a mystery. Everything goes to
stderr; stdout keeps the table.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from contracts.text import TerminalStream, escape

HEARTBEAT_S = 10.0
LIVE_REDRAW_S = 1.0
_NAMED = 4  # scenarios named on the running line before "+N more"


class Progress:
    """Told when each (scenario, target) starts and ends; says so on ``stream``. Use it as a context manager: the
    heartbeat thread ends with the block."""

    def __init__(self, total: int, *, stream: TextIO | None = None, live: bool | None = None) -> None:
        self.total = total
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        # The live line's control sequences go to the terminal itself; the text in it is escaped here.
        self._raw = self.stream.inner if isinstance(self.stream, TerminalStream) else self.stream
        self.started_at = time.monotonic()
        self.done = 0
        self.running: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._shown_live = False

    def __enter__(self) -> Progress:
        self._thread = threading.Thread(target=self._beat, name="codex-harness-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * LIVE_REDRAW_S)
        with self._lock:
            self._clear_live()

    def started(self, scenario: str, target: str) -> None:
        with self._lock:
            self.running[(scenario, target)] = time.monotonic()
            if self.live:
                self._draw_live()

    def ended(self, scenario: str, target: str, line: str) -> None:
        """``line``: what the scenario's end says (its verdict and counts), printed above the live line."""
        with self._lock:
            self.running.pop((scenario, target), None)
            self.done += 1
            self._clear_live()
            print(line, file=self.stream, flush=True)
            if self.live:
                self._draw_live()

    def running_line(self) -> str:
        """``[5/56] running 3: plain [fake-process] 12s, … ~40s left``."""
        now = time.monotonic()
        rows = sorted(self.running.items(), key=lambda kv: kv[1])
        names = ", ".join(f"{s} [{t}] {now - since:.0f}s" for (s, t), since in rows[:_NAMED])
        more = f" +{len(rows) - _NAMED} more" if len(rows) > _NAMED else ""
        elapsed = now - self.started_at
        left = ""
        if self.done:
            estimate = elapsed / self.done * (self.total - self.done)
            left = f", about {estimate:.0f}s left"
        what = f"running {len(rows)}: {names}{more}" if rows else "starting"
        return f"[{self.done}/{self.total}] {what} ({elapsed:.0f}s{left})"

    def _beat(self) -> None:
        every = LIVE_REDRAW_S if self.live else HEARTBEAT_S
        while not self._stop.wait(every):
            with self._lock:
                if self.live:
                    self._draw_live()
                elif self.running:
                    print(f"still {self.running_line()}", file=self.stream, flush=True)

    def _draw_live(self) -> None:
        self._raw.write("\r\x1b[K" + escape(self.running_line()[:200]))
        self._raw.flush()
        self._shown_live = True

    def _clear_live(self) -> None:
        if self._shown_live:
            self._raw.write("\r\x1b[K")
            self._raw.flush()
            self._shown_live = False
