"""Headless Chromium (Debian's ``chromium`` package) for the browser test, the report benchmark and the
screenshots in docs/: load a page, read back what its script reported, take a screenshot, count pixels.

Only the standard library: the DOM comes back through ``--dump-dom`` (the page's script writes what it
saw into ``<body data-…>`` attributes and ``#js-errors``), console errors also through Chromium's own log
(``--enable-logging=stderr``), and the PNG is decoded with ``zlib``. Every run is bounded and gets a
fresh profile directory; nothing reaches the network (the pages are files and self-contained).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
TIMEOUT_S = 30.0
_CONSOLE = re.compile(r"CONSOLE\(\d+\)\]|Uncaught|console\.error", re.IGNORECASE)


class BrowserError(Exception):
    """Chromium did not run, or did not produce what was asked."""


def find_chromium() -> str | None:
    """The Chromium executable (``$CHROMIUM`` first), None when none is installed."""
    explicit = os.environ.get("CHROMIUM")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    return next((p for name in CANDIDATES if (p := shutil.which(name))), None)


def _run(binary: str, args: list[str], *, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """One headless run in its own process group with a fresh profile; past ``timeout`` the whole group
    (Chromium's zygote and renderers too) is killed."""
    with tempfile.TemporaryDirectory(prefix="codex-harness-chromium-") as profile:
        argv = [binary, *FLAGS, f"--user-data-dir={profile}", *args]
        try:
            proc = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",
                cwd=profile,
                start_new_session=True,
            )
        except OSError as exc:
            raise BrowserError(f"cannot start {binary}: {exc.strerror}") from exc
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise BrowserError(f"chromium did not finish within {timeout:g} s") from exc
        finally:
            _kill_group(proc)  # helpers Chromium left behind, if any
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.poll() is None:
        proc.wait(timeout=5)


@dataclass(slots=True)
class Loaded:
    """What a page reported after loading."""

    dom: str
    attrs: dict[str, str] = field(default_factory=dict)  # the body's data-* attributes
    js_errors: list[str] = field(default_factory=list)  # the page's own hook (#js-errors)
    console: list[str] = field(default_factory=list)  # console / uncaught errors in Chromium's log

    @property
    def errors(self) -> list[str]:
        return self.js_errors + self.console

    def number(self, name: str) -> float:
        value = self.attrs.get(name)
        if value is None:
            raise BrowserError(f"the page did not report data-{name} (its script did not run to the end)")
        return float(value)


def load(
    page: Path,
    *,
    binary: str | None = None,
    screenshot: Path | None = None,
    width: int = 1280,
    height: int = 900,
    budget_ms: int = 5000,
    selftest: bool = True,
) -> Loaded:
    """Load ``page`` headless, return its DOM after the load event and every error it logged; with
    ``screenshot``, also write a PNG of the top ``width`` × ``height`` pixels there (same run).
    ``selftest``: open it as ``#selftest`` so the page also counts its drawn arrows (after ``load-ms``)."""
    binary = binary or find_chromium()
    if binary is None:
        raise BrowserError("no Chromium installed (apt-get install chromium)")
    shot: list[str] = []
    if screenshot is not None:
        screenshot = screenshot.resolve()
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        screenshot.unlink(missing_ok=True)
        shot = [f"--screenshot={screenshot}"]
    args = ["--enable-logging=stderr", "--v=0", f"--virtual-time-budget={budget_ms}", f"--window-size={width},{height}"]
    url = page.resolve().as_uri() + ("#selftest" if selftest else "")
    proc = _run(binary, [*args, *shot, "--dump-dom", url])
    if screenshot is not None and not screenshot.is_file():
        raise BrowserError(f"chromium wrote no screenshot (exit {proc.returncode}): {proc.stderr[-500:]}")
    dom = proc.stdout
    if "<body" not in dom:
        raise BrowserError(f"chromium returned no DOM (exit {proc.returncode}): {proc.stderr[-500:]}")
    body = re.search(r"<body([^>]*)>", dom)
    attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body.group(1))) if body else {}
    hook = re.search(r'<div id="js-errors"[^>]*>(.*?)</div>', dom, re.DOTALL)
    js_errors = [line for line in (hook.group(1).splitlines() if hook else []) if line.strip()]
    console = [line.strip() for line in proc.stderr.splitlines() if _CONSOLE.search(line)]
    return Loaded(dom, attrs, js_errors, console)


def screenshot(page: Path, out: Path, *, width: int = 1280, height: int = 900, binary: str | None = None) -> Path:
    """A PNG of the top ``width`` × ``height`` pixels of ``page``."""
    load(page, binary=binary, screenshot=out, width=width, height=height)
    return out.resolve()


# --- PNG -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Image:
    width: int
    height: int
    channels: int
    rows: list[bytes]  # unfiltered scanlines, ``width * channels`` bytes each

    def pixel(self, x: int, y: int) -> tuple[int, ...]:
        row = self.rows[y]
        return tuple(row[x * self.channels : (x + 1) * self.channels])


def decode_png(data: bytes) -> Image:
    """An 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes), decoded with zlib."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise BrowserError("not a PNG")
    pos, idat, header = 8, bytearray(), None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        chunk = data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        elif kind == b"IEND":
            break
    if header is None:
        raise BrowserError("PNG without IHDR")
    width, height, depth, colour, _, _, interlace = header
    channels = {2: 3, 6: 4}.get(colour)
    if depth != 8 or channels is None or interlace:
        raise BrowserError(f"unsupported PNG (depth {depth}, colour type {colour}, interlace {interlace})")
    raw = zlib.decompress(bytes(idat))
    stride = width * channels
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        _unfilter(kind, line, prev, channels)
        rows.append(bytes(line))
        prev = line
    return Image(width, height, channels, rows)


def _unfilter(kind: int, line: bytearray, prev: bytearray, bpp: int) -> None:
    if kind == 0:
        return
    n = len(line)
    if kind == 1:
        for i in range(bpp, n):
            line[i] = (line[i] + line[i - bpp]) & 0xFF
    elif kind == 2:
        for i in range(n):
            line[i] = (line[i] + prev[i]) & 0xFF
    elif kind == 3:
        for i in range(n):
            left = line[i - bpp] if i >= bpp else 0
            line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
    elif kind == 4:
        for i in range(n):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            line[i] = (line[i] + pred) & 0xFF
    else:
        raise BrowserError(f"bad PNG filter {kind}")


def ink_ratio(image: Image) -> float:
    """The share of pixels that differ from the background (the most common colour)."""
    from collections import Counter

    ch = image.channels
    counts: Counter[bytes] = Counter()
    for row in image.rows:
        counts.update(row[i : i + 3] for i in range(0, len(row), ch))
    total = image.width * image.height
    background = counts.most_common(1)[0][1] if counts else 0
    return (total - background) / total if total else 0.0


def chromium_or_skip() -> str:
    """Chromium's path for a test; skips when none is installed, fails instead under
    ``CODEX_HARNESS_REQUIRE_BROWSER=1`` (CI installs it, so a missing one there is a broken setup)."""
    import pytest  # here: bench/ uses this module without pytest

    binary = find_chromium()
    if binary is None:
        reason = "no Chromium installed (apt-get install chromium; .ci/run installs it)"
        if os.environ.get("CODEX_HARNESS_REQUIRE_BROWSER") == "1":
            pytest.fail(f"CODEX_HARNESS_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    return binary

