"""Shared helpers of the benchmarks: timing, percentiles, the result table, the machine.

Every benchmark measures its baseline in the same run and reports ratios, because the machines
here are noisy: an absolute figure from one run says little, a ratio to a loop measured a second
earlier says what the harness costs. Each script prints its table and, with ``--json PATH``,
writes the same rows for ``bench/run_all.py``.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parent.parent


@dataclass(slots=True)
class Row:
    """One measured figure. ``ratio`` is ``value / baseline`` (higher is better for rates)."""

    bench: str
    name: str
    value: float
    unit: str
    baseline: str | None = None  # name of the row this one is compared with
    ratio: float | None = None
    cpu_ratio: float | None = None  # the same ratio on this process's CPU time (robust on a loaded machine)
    target: str = ""  # human text, e.g. ">= 0.3x bare"
    ok: bool | None = None  # None: no target
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0..100) with linear interpolation between closest ranks."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * p / 100.0
    lo, hi = math.floor(rank), math.ceil(rank)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


def best_rate(fn: Callable[[], int], repeat: int) -> tuple[float, list[float]]:
    """Run ``fn`` (which returns how many units it handled) ``repeat`` times; best units/s and all rates.

    The best of several runs is the least disturbed one, which is what a ratio between two loops
    should compare on a shared machine.
    """
    rates: list[float] = []
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        units = fn()
        dt = time.perf_counter() - t0
        rates.append(units / dt if dt > 0 else float("inf"))
    return max(rates), rates


def ratio(value: float, baseline: float) -> float | None:
    return value / baseline if baseline else None


def fmt_value(value: float, unit: str) -> str:
    if unit.endswith("/s") and value >= 1e6:
        return f"{value / 1e6:.2f} M{unit}"
    if unit.endswith("/s") and value >= 1e4:
        return f"{value / 1e3:.1f} k{unit}"
    if unit in ("ms", "s"):
        return f"{value:.3f} {unit}"
    return f"{value:,.1f} {unit}"


def table(rows: Sequence[Row], title: str = "") -> str:
    """A plain-text table (also valid Markdown) of the rows.

    ``per CPU s``: for throughput rows, units per CPU second of the measuring process (its reading
    work alone; the wall-clock ``value`` also waits for the server and for a busy machine).
    """
    header = ["bench", "measure", "value", "per CPU s", "ratio", "target", "met"]
    body = []
    for r in rows:
        rt = "" if r.ratio is None else f"{r.ratio:.3f}x {r.baseline}" if r.baseline else f"{r.ratio:.3f}x"
        if r.cpu_ratio is not None:
            rt += f" (cpu {r.cpu_ratio:.3f}x)"
        cpu_rate = r.extra.get("cpu_rate") if r.extra else None
        per_cpu = fmt_value(cpu_rate, r.unit) if cpu_rate else ""
        met = "" if r.ok is None else ("yes" if r.ok else "NO")
        body.append([r.bench, r.name, fmt_value(r.value, r.unit), per_cpu, rt, r.target, met])
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(header)]
    lines = []
    if title:
        lines.append(title)
    lines.append("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for b in body:
        lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)) + " |")
    notes = [f"- {r.name}: {r.note}" for r in rows if r.note]
    if notes:
        lines.append("")
        lines.extend(notes)
    return "\n".join(lines)


def machine() -> dict[str, str]:
    """What the figures were measured on."""
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "nproc": str(os.cpu_count() or "?"),
        "cpu": cpu or "unknown",
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
    }


def arg_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks the script runs, not the speed")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON to PATH")
    return parser


def finish(rows: Sequence[Row], title: str, json_path: str | None) -> int:
    """Print the table, write the JSON, and return the exit code (0: ran; targets are reported, not enforced)."""
    print(table(rows, title))
    if json_path:
        Path(json_path).write_bytes(
            orjson.dumps({"machine": machine(), "rows": [asdict(r) for r in rows]}, option=orjson.OPT_INDENT_2)
        )
    sys.stdout.flush()
    return 0


def fake_codex_argv() -> list[str] | None:
    """How to start ``fake-codex``: the console script next to this interpreter, else on PATH."""
    here = Path(sys.executable).parent / "fake-codex"
    if here.exists():
        return [str(here)]
    found = shutil.which("fake-codex")
    return [found] if found else None


class Deadline:
    """A wall-clock budget for a whole benchmark script (each must finish in under a minute)."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    @property
    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.end


def median(values: Sequence[float]) -> float:
    return statistics.median(values)
