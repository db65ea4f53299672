"""Ingest throughput: notifications/s through the client's read path, as ratios to a bare orjson loop.

Usage: ``python bench/ingest.py [--deltas N] [--repeat K] [--quick] [--json PATH]``

One flooded turn (N agent message deltas, no delay) is read in three settings, each next to its own
baseline measured in the same run:

- ``mem``: the turn's bytes already in memory, fed in 256 KiB chunks (pure CPU: the codec's cost);
- ``pipe``: a child process (the blast server of ``bench/_flood.py``) writes the same bytes as fast
  as the pipe takes them, read with trio; the baseline is the bulk-split ``orjson`` loop;
- ``fake``: ``fake-codex app-server`` plays the ``flood`` scenario (what the fake itself can write).

The client rows go through the whole client (process transport, LineDecoder, validation off/on,
dispatch to the turn's event iterator) once ``client`` provides it. Target: the client with
validation on reads at least 0.3x the bare loop on the pipe.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _flood
from _common import Deadline, Row, arg_parser, fake_codex_argv, finish, ratio

from contracts.wire import LineDecoder, WireError

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


Run = tuple[int, float, float]  # (notifications, wall seconds, this process's CPU seconds)


@dataclass(slots=True)
class Measure:
    """One row: a way to read the flood, run in rounds interleaved with the others (best run counts)."""

    name: str
    unit: str
    run: Callable[[], Awaitable[Run]]
    baseline: str | None = None
    target: float | None = None
    note: str = ""
    wall: float = 0.0  # best notifications/s on the wall clock
    cpu: float = 0.0  # best notifications per CPU second of this process
    runs: int = 0
    error: str = ""


def mem_measure(name: str, data: bytes, make: Callable[[], _flood.Consumer], **kw: Any) -> Measure:
    chunks = [data[i : i + _flood.READ_SIZE] for i in range(0, len(data), _flood.READ_SIZE)]

    async def run() -> Run:
        consume = make()
        c0, t0 = time.process_time(), time.perf_counter()
        count = sum(len(consume(c)) for c in chunks)
        return count, time.perf_counter() - t0, time.process_time() - c0

    return Measure(name, "frames/s", run, **kw)


def raw_measure(name: str, argv: list[str], make: Callable[[], _flood.Consumer], timeout: float, **kw: Any) -> Measure:
    async def run() -> Run:
        r = await _flood.run_raw(argv, make(), timeout)
        return r.notifications, r.seconds, r.cpu

    return Measure(name, "notif/s", run, **kw)


def client_mem_measure(
    name: str, script: dict[str, Any], validate: bool, timeout: float, per_event: bool = False, **kw: Any
) -> Measure:
    async def run() -> Run:
        from _client_adapter import flood_in_memory

        return await flood_in_memory(script, validate=validate, timeout=timeout, per_event=per_event)

    return Measure(name, "frames/s", run, **kw)


def client_measure(
    name: str, argv: list[str], validate: bool, timeout: float, per_event: bool = False, **kw: Any
) -> Measure:
    async def run() -> Run:
        from _client_adapter import flood_through_client

        return await flood_through_client(argv, validate=validate, timeout=timeout, per_event=per_event)

    return Measure(name, "notif/s", run, **kw)


async def measure_rounds(measures: list[Measure], repeat: int, deadline: Deadline) -> int:
    """Round-robin, so a burst of load on a shared machine hits every row alike rather than one.

    At most ``repeat`` rounds; a round starts only if the previous one would fit again before the
    deadline (the first always runs). Returns the number of rounds run.
    """
    rounds = 0
    for _ in range(repeat):
        started = time.monotonic()
        for m in measures:
            if m.error or (m.runs and deadline.left < 5):
                continue
            try:
                count, wall, cpu = await m.run()
            except ImportError as exc:
                m.error = f"client not available: {exc}"
                continue
            except Exception as exc:  # a broken server or client is reported in its row, not a traceback
                m.error = f"{type(exc).__name__}: {str(exc)[:300]}"
                continue
            m.runs += 1
            m.wall = max(m.wall, count / wall if wall > 0 else 0.0)
            m.cpu = max(m.cpu, count / cpu if cpu > 0 else 0.0)
        rounds += 1
        if deadline.left < (time.monotonic() - started) * 1.2:
            break
    return rounds


def rows_of(measures: list[Measure]) -> list[Row]:
    by_name = {m.name: m for m in measures}
    rows = []
    for m in measures:
        row = Row(BENCH, m.name, m.wall, m.unit, m.baseline, note=m.error or m.note)
        base = by_name.get(m.baseline or "")
        if base is not None and m.runs and base.runs:
            row.ratio = ratio(m.wall, base.wall)
            row.cpu_ratio = ratio(m.cpu, base.cpu)
        if m.target is not None:
            row.target = f">= {m.target}x {m.baseline} (cpu)"
            row.ok = row.cpu_ratio is not None and row.cpu_ratio >= m.target
        row.extra = {"cpu_rate": m.cpu, "runs": m.runs}
        rows.append(row)
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


async def main_async(n: int, repeat: int, deadline: Deadline) -> tuple[list[Row], int]:
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        tmpdir = Path(tmp)
        fake = fake_argv(n, tmpdir)
        script: dict[str, Any] | None = None
        fake_note = ""
        if fake is not None:
            try:
                script = await _flood.capture_script(fake, timeout=min(30.0, deadline.left))
            except Exception as exc:  # the fake may not play the scenario yet: fall back, say so
                fake_note = f"; fake-codex flood failed ({type(exc).__name__}: {str(exc)[:120]}), synthetic frames used"
                fake = None
        if script is None:
            script = _flood.synthetic_script(n)
        script_path = tmpdir / "script.json"
        _flood.write_script(script, script_path)
        data = _flood.turn_bytes(script)
        blast = _flood.blast_argv(script_path)
        t = min(30.0, deadline.left)
        script = orjson.loads(script_path.read_bytes())  # as the blast server reads it: lines as text
        script["replies"] = {
            m: {"result": r["result"], "after": [line.encode() for line in r["after"]]}
            for m, r in script["replies"].items()
        }
        source = f"source: {script['source']}, {script['deltas']} deltas, {len(data) / 1e6:.1f} MB{fake_note}"
        measures = [
            mem_measure("mem bare", data, _flood.bare_consumer, note="bytes in memory, bulk split + orjson.loads"),
            mem_measure("mem LineDecoder", data, lambda: decoder_consumer(False), baseline="mem bare"),
            mem_measure("mem LineDecoder+validate", data, lambda: decoder_consumer(True), baseline="mem bare"),
            client_mem_measure("mem client validate off", script, False, t, baseline="mem bare"),
            client_mem_measure("mem client validate on", script, True, t, baseline="mem bare"),
            raw_measure("pipe bare", blast, _flood.bare_consumer, t, note=f"trio, 256 KiB reads, bulk split; {source}"),
            raw_measure("pipe LineDecoder", blast, lambda: decoder_consumer(False), t, baseline="pipe bare"),
            raw_measure("pipe LineDecoder+validate", blast, lambda: decoder_consumer(True), t, baseline="pipe bare"),
            client_measure("pipe client validate off", blast, False, t, baseline="pipe bare"),
            client_measure("pipe client validate on", blast, True, t, baseline="pipe bare", target=TARGET_RATIO),
            client_measure(
                "pipe client validate on, per event",
                blast,
                True,
                t,
                per_event=True,
                baseline="pipe bare",
                note="async for event in turn (one MessageDelta per delta) instead of Turn.batches()",
            ),
        ]
        if fake is not None:
            measures += [
                raw_measure("fake bare", fake, _flood.bare_consumer, t, baseline="pipe bare", note="fake-codex"),
                client_measure("fake client validate on", fake, True, t, baseline="fake bare"),
            ]
        rounds = await measure_rounds(measures, repeat, deadline)
        return rows_of(measures), rounds


def profile(n: int, top: int = 25) -> int:
    """cProfile of one flood through the client's in-memory transport (validation on): where the time goes.

    Then what-ifs, measured the same way: the client's batching undone, one piece at a time, in this process only.
    """
    import cProfile
    import pstats

    from _client_adapter import flood_in_memory

    script = _flood.synthetic_script(n)

    def us_per_notification(runs: int = 5) -> float:
        best = float("inf")
        for _ in range(runs):
            count, _, cpu = trio.run(lambda: flood_in_memory(script, validate=True, timeout=60))
            best = min(best, cpu / count * 1e6)
        return best

    print(f"client, in memory, validation on, no profiler: {us_per_notification():.2f} us CPU per notification")
    profiler = cProfile.Profile()
    profiler.enable()
    trio.run(lambda: flood_in_memory(script, validate=True, timeout=120))
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)
    _what_ifs(us_per_notification)
    return 0


def _what_ifs(measure: Callable[[], float]) -> None:
    """Undo the client's batching piece by piece (patched into this process only, never the files).

    Each patch counts its calls: a what-if whose patched name the read path no longer calls says so
    instead of printing a figure that measures nothing.
    """
    from codex_client.events import MessageDelta
    from codex_client.turncore import EventBuffer
    from codex_client.wirerecord import FrameChecker

    print(f"what-if baseline (as is):                         {measure():.2f} us")
    calls = {"check_deltas": 0, "put_deltas": 0}
    batched_check = FrameChecker.check_deltas
    batched_put = EventBuffer.put_deltas

    def check_one_by_one(self: FrameChecker, frames: list[dict[str, Any]]) -> list[int]:
        calls["check_deltas"] += 1
        validate = self.session_validator.validator.validate
        return [i for i, frame in enumerate(frames) if validate(frame, "s2c")]

    def put_one_by_one(self: EventBuffer, batch: Any) -> None:
        calls["put_deltas"] += 1
        for k, (item_id, delta) in enumerate(zip(batch.item_ids, batch.deltas, strict=True)):
            self.put(MessageDelta(batch.t, item_id, delta, batch.first_n + k))

    try:
        FrameChecker.check_deltas = check_one_by_one  # type: ignore[method-assign]
        figure = measure()
        print(_what_if_line("+ deltas validated one call per frame:", figure, calls["check_deltas"]))
        EventBuffer.put_deltas = put_one_by_one  # type: ignore[method-assign]
        figure = measure()
        print(_what_if_line("+ one MessageDelta event per delta:", figure, calls["put_deltas"]))
    finally:
        FrameChecker.check_deltas = batched_check  # type: ignore[method-assign]
        EventBuffer.put_deltas = batched_put  # type: ignore[method-assign]


def _what_if_line(label: str, figure: float, calls: int) -> str:
    if not calls:
        return f"{label:50s} not applicable: the read path never called the patched name"
    return f"{label:50s} {figure:.2f} us"


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=20_000, help="agent message deltas in the flood")
    parser.add_argument("--repeat", type=int, default=8, help="at most this many rounds (as fit in the minute)")
    parser.add_argument("--profile", action="store_true", help="cProfile the client's path instead of measuring")
    args = parser.parse_args(argv)
    n, repeat = (2000, 1) if args.quick else (args.deltas, args.repeat)
    if args.profile:
        return profile(n)
    deadline = Deadline(50.0)
    t0 = time.perf_counter()
    rows, rounds = trio.run(main_async, n, repeat, deadline)
    title = f"ingest: {n} deltas, best of {rounds} interleaved rounds, {time.perf_counter() - t0:.1f} s"
    return finish(rows, title, args.json)


if __name__ == "__main__":
    sys.exit(main())
