"""Ingest throughput: notifications/s through the client's read path, as ratios to a bare orjson loop.

Usage: ``python bench/ingest.py [--deltas N] [--repeat K] [--quick] [--json PATH]``

One flooded turn (N agent message deltas, no delay) is read in three settings, each next to its own
baseline measured in the same run:

- ``mem``: the turn's bytes already in memory, fed in 256 KiB chunks (pure CPU: the codec's cost);
- ``pipe``: a child process (the blast server of ``bench/_flood.py``) writes the same bytes as fast
  as the pipe takes them, read with trio; the baseline is the bulk-split ``orjson`` loop;
- ``fake``: ``fake-codex app-server`` plays the ``flood`` scenario (what the fake itself can write).

The client rows go through the whole client (process transport, LineDecoder, validation off/on,
dispatch to the turn's event iterator) once ``harness.client`` provides it. Target: the client with
validation on reads at least 0.3x the bare loop on the pipe.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _flood
from _common import Deadline, Row, arg_parser, best_rate, fake_codex_argv, finish, ratio

from harness.wire import LineDecoder, WireError

BENCH = "ingest"
TARGET_RATIO = 0.3
FLOOD_SCENARIO_TEMPLATE = """\
name = "flood"
description = "One turn whose agent message streams {n} deltas with no delay (ingest benchmark)."
targets = ["fake", "fake-process"]

[[turns]]
input = "Flood me"

[[turns.responses]]
items = [{{ type = "message", text = "{text}", chunks = {n} }}]
usage = {{ input = 100, cached = 40, output = 20 }}
"""


def decoder_consumer(validate: bool) -> _flood.Consumer:
    """The client's decode path: LineDecoder (and the validator on every frame, as the client does)."""
    decoder = LineDecoder()
    feed = decoder.feed
    if not validate:

        def consume(chunk: bytes) -> list[dict[str, Any]]:
            return [item.frame for item in feed(chunk) if not isinstance(item, WireError)]

        return consume
    from contracts.validator import Validator

    validator = Validator.for_release()
    check = validator.validate

    def consume_validated(chunk: bytes) -> list[dict[str, Any]]:
        out = []
        for item in feed(chunk):
            if isinstance(item, WireError):
                continue
            if check(item.frame, "s2c"):
                raise AssertionError(f"flood frame invalid: {item.frame}")
            out.append(item.frame)
        return out

    return consume_validated


def mem_rows(data: bytes, repeat: int) -> list[Row]:
    chunks = [data[i : i + _flood.READ_SIZE] for i in range(0, len(data), _flood.READ_SIZE)]

    def run(make: Callable[[], _flood.Consumer]) -> Callable[[], int]:
        def once() -> int:
            consume = make()
            return sum(len(consume(c)) for c in chunks)

        return once

    bare, _ = best_rate(run(_flood.bare_consumer), repeat)
    dec, _ = best_rate(run(lambda: decoder_consumer(False)), repeat)
    val, _ = best_rate(run(lambda: decoder_consumer(True)), repeat)
    base = "mem bare"
    return [
        Row(BENCH, base, bare, "frames/s", note="bytes in memory, bulk split + orjson.loads per line"),
        Row(BENCH, "mem LineDecoder", dec, "frames/s", base, ratio(dec, bare)),
        Row(BENCH, "mem LineDecoder+validate", val, "frames/s", base, ratio(val, bare)),
    ]


async def best_raw(argv: list[str], make: Callable[[], _flood.Consumer], repeat: int, timeout: float) -> float:
    best = 0.0
    for _ in range(repeat):
        run = await _flood.run_raw(argv, make(), timeout)
        best = max(best, run.rate)
    return best


async def pipe_rows(argv: list[str], repeat: int, timeout: float, label: str) -> tuple[list[Row], float]:
    bare = await best_raw(argv, _flood.bare_consumer, repeat, timeout)
    dec = await best_raw(argv, lambda: decoder_consumer(False), repeat, timeout)
    val = await best_raw(argv, lambda: decoder_consumer(True), repeat, timeout)
    base = f"{label} bare"
    rows = [
        Row(BENCH, base, bare, "notif/s", note="trio, 256 KiB reads, bulk split + orjson.loads"),
        Row(BENCH, f"{label} LineDecoder", dec, "notif/s", base, ratio(dec, bare)),
        Row(BENCH, f"{label} LineDecoder+validate", val, "notif/s", base, ratio(val, bare)),
    ]
    return rows, bare


async def client_rate(argv: list[str], validate: bool, repeat: int, timeout: float) -> float:
    """Notifications/s through the client: process transport -> decode -> validate -> turn event iterator."""
    from _client_adapter import flood_through_client

    best = 0.0
    for _ in range(repeat):
        count, seconds = await flood_through_client(argv, validate=validate, timeout=timeout)
        best = max(best, count / seconds)
    return best


async def client_rows(argv: list[str], repeat: int, timeout: float, label: str, bare: float) -> list[Row]:
    rows = []
    base = f"{label} bare"
    try:
        for validate in (False, True):
            rate = await client_rate(argv, validate, repeat, timeout)
            r = ratio(rate, bare)
            name = f"{label} client validate {'on' if validate else 'off'}"
            row = Row(BENCH, name, rate, "notif/s", base, r)
            if validate:
                row.target = f">= {TARGET_RATIO}x {base}"
                row.ok = r is not None and r >= TARGET_RATIO
            rows.append(row)
    except ImportError as exc:
        rows.append(Row(BENCH, f"{label} client", 0.0, "notif/s", note=f"client not available: {exc}"))
    return rows


def flood_scenario(n: int, directory: Path) -> Path:
    path = directory / "flood.toml"
    path.write_text(FLOOD_SCENARIO_TEMPLATE.format(n=n, text=_flood.DELTA_TEXT * n), encoding="utf-8")
    return path


def fake_argv(n: int, directory: Path) -> list[str] | None:
    base = fake_codex_argv()
    if base is None:
        return None
    return [*base, "app-server", "--scenario", str(flood_scenario(n, directory))]


async def main_async(n: int, repeat: int, deadline: Deadline) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        tmpdir = Path(tmp)
        fake = fake_argv(n, tmpdir)
        script: dict[str, Any] | None = None
        fake_note = ""
        if fake is not None:
            try:
                script = await _flood.capture_script(fake, timeout=min(30.0, deadline.left))
            except Exception as exc:  # the fake may not play the scenario yet: fall back, say so
                fake_note = f"fake-codex flood failed ({type(exc).__name__}: {exc}); synthetic frames used"
                fake = None
        if script is None:
            script = _flood.synthetic_script(n)
        script_path = tmpdir / "script.json"
        _flood.write_script(script, script_path)
        data = _flood.turn_bytes(script)

        rows += mem_rows(data, repeat)
        blast = _flood.blast_argv(script_path)
        pipe, bare = await pipe_rows(blast, repeat, min(30.0, deadline.left), "pipe")
        pipe[0].note += f"; source: {script['source']}, {script['deltas']} deltas, {len(data) / 1e6:.1f} MB"
        if fake_note:
            pipe[0].note += f"; {fake_note}"
        rows += pipe
        rows += await client_rows(blast, repeat, min(30.0, deadline.left), "pipe", bare)
        if fake is not None and not deadline.expired():
            fake_bare = await best_raw(fake, _flood.bare_consumer, 1, min(30.0, deadline.left))
            rows.append(
                Row(BENCH, "fake bare", fake_bare, "notif/s", "pipe bare", ratio(fake_bare, bare), note="fake-codex")
            )
            rows += await client_rows(fake, 1, min(30.0, deadline.left), "fake", fake_bare)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=100_000, help="agent message deltas in the flood")
    parser.add_argument("--repeat", type=int, default=3, help="runs per row; the best counts")
    args = parser.parse_args(argv)
    n, repeat = (2000, 1) if args.quick else (args.deltas, args.repeat)
    deadline = Deadline(55.0)
    t0 = time.perf_counter()
    rows = trio.run(main_async, n, repeat, deadline)
    title = f"ingest: {n} deltas, best of {repeat}, {time.perf_counter() - t0:.1f} s, pid {os.getpid()}"
    return finish(rows, title, args.json)


if __name__ == "__main__":
    sys.exit(main())
