"""Interrupt overhead: the client's cancel->Result minus the server's interrupt->turn/completed.

Usage: ``python bench/interrupt.py [--samples N] [--quick] [--json PATH]``

Each sample is one turn that streams slowly; after its first delta the caller cancels. The client
sends ``turn/interrupt`` and delivers the turn's Result once ``turn/completed`` arrives. Both ends
of the server's part are wire timestamps of the client's session record (interrupt frame written,
turn/completed frame read), so ``overhead = (cancel -> Result) - (interrupt sent -> turn/completed
read)`` is what the client itself adds: scheduling the shielded interrupt, decoding, dispatching,
closing open items and building the Result. Target: p99 <= 2 ms.

The baseline measured in the same run is a bare loop doing the same by hand against the same
server (write turn/interrupt, bulk-split + ``orjson`` until turn/completed): the wire round trip
alone. Servers: the hold server of ``bench/_flood.py`` (answers at once, like the real server) and
``fake-codex`` when it is installed.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _flood
from _common import Deadline, Row, arg_parser, fake_codex_argv, finish, percentile

BENCH = "interrupt"
TARGET_P99_MS = 2.0
SLOW_TURN = """
[[turns]]
input = "Stream slowly"

[[turns.responses]]
items = [{{ type = "message", text = "{text}", chunks = {chunks}, delay_ms = {delay} }}]
usage = {{ input = 100, cached = 40, output = 20 }}
"""


def slow_scenario(turns: int, directory: Path, chunks: int = 400, delay_ms: int = 5) -> Path:
    """``turns`` turns, each streaming for ``chunks * delay_ms`` ms unless interrupted."""
    head = 'name = "interrupt-bench"\ndescription = "Slow turns to interrupt (bench)."\n'
    head += 'targets = ["fake", "fake-process"]\n'
    body = "".join(SLOW_TURN.format(text="ab" * chunks, chunks=chunks, delay=delay_ms) for _ in range(turns))
    path = directory / "interrupt-bench.toml"
    path.write_text(head + body, encoding="utf-8")
    return path


async def bare_samples(argv: list[str], samples: int, timeout: float) -> list[float]:
    """Wire round trips (ms) of turn/interrupt -> turn/completed, by hand, one session."""
    proc = await trio.lowlevel.open_process(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True
    )
    out: list[float] = []
    try:
        with trio.fail_after(timeout):
            session = _flood.RawSession(proc, _flood.bare_consumer())
            thread_id = await session.handshake()
            for _ in range(samples):
                session.pending.clear()
                await session.request("turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": "x"}]})
                turn_id = await _first_delta(session)
                t0 = time.perf_counter()
                await session.request("turn/interrupt", {"threadId": thread_id, "turnId": turn_id})
                await _until_completed(session)
                out.append((time.perf_counter() - t0) * 1000)
            assert proc.stdin is not None
            await proc.stdin.aclose()
            with trio.move_on_after(2):
                await proc.wait()
    finally:
        _flood.kill_group(proc)
    return out


async def _first_delta(session: _flood.RawSession) -> str:
    turn_id = ""
    while True:
        frames, session.pending = session.pending or await session.read(), []
        for i, frame in enumerate(frames):
            method = frame.get("method")
            if method == "turn/started":
                turn_id = frame["params"]["turn"]["id"]
            elif method == _flood.FLOOD_METHOD:
                session.pending = frames[i + 1 :]
                return turn_id or frame["params"]["turnId"]


async def _until_completed(session: _flood.RawSession) -> None:
    while True:
        frames, session.pending = session.pending or await session.read(), []
        for frame in frames:
            if frame.get("method") == "turn/completed":
                return


def stats_rows(label: str, bare: list[float], pairs: list[tuple[float, float]] | None, note: str) -> list[Row]:
    rows = [
        Row(BENCH, f"{label} bare interrupt->completed p50", percentile(bare, 50), "ms", note=note),
        Row(BENCH, f"{label} bare interrupt->completed p99", percentile(bare, 99), "ms"),
    ]
    if pairs is None:
        return rows
    client = [c for c, _ in pairs]
    server = [s for _, s in pairs]
    overhead = [c - s for c, s in pairs]
    p50, p99 = percentile(overhead, 50), percentile(overhead, 99)
    rows += [
        Row(BENCH, f"{label} client cancel->Result p50", percentile(client, 50), "ms"),
        Row(BENCH, f"{label} client cancel->Result p99", percentile(client, 99), "ms"),
        Row(BENCH, f"{label} wire interrupt->completed p50", percentile(server, 50), "ms"),
        Row(BENCH, f"{label} wire interrupt->completed p99", percentile(server, 99), "ms"),
        Row(
            BENCH,
            f"{label} overhead p50",
            p50,
            "ms",
            f"{label} bare interrupt->completed p50",
            p50 / max(percentile(bare, 50), 1e-9),
        ),
        Row(BENCH, f"{label} overhead p95", percentile(overhead, 95), "ms"),
        Row(
            BENCH,
            f"{label} overhead p99",
            p99,
            "ms",
            f"{label} bare interrupt->completed p99",
            p99 / max(percentile(bare, 99), 1e-9),
            target=f"<= {TARGET_P99_MS} ms",
            ok=p99 <= TARGET_P99_MS,
            note=f"{len(pairs)} samples; overhead = (cancel->Result) - (wire interrupt->turn/completed), per sample",
        ),
    ]
    return rows


async def client_pairs(argv: list[str], samples: int, timeout: float) -> tuple[list[tuple[float, float]] | None, str]:
    try:
        from _client_adapter import interrupt_samples
    except ImportError as exc:
        return None, f"client not available: {exc}"
    try:
        return await interrupt_samples(argv, samples, timeout), ""
    except Exception as exc:  # report it in the table (the smoke test shows the note) rather than lose the rows
        return None, f"client not measured: {type(exc).__name__} {exc}"


async def main_async(samples: int, deadline: Deadline) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-interrupt-") as tmp:
        script_path = Path(tmp) / "hold.json"
        _flood.write_script(_flood.synthetic_interrupt_script(), script_path)
        hold = _flood.blast_argv(script_path)
        bare = await bare_samples(hold, samples, min(20.0, deadline.left))
        pairs, note = await client_pairs(hold, samples, min(20.0, deadline.left))
        rows += stats_rows("hold", bare, pairs, note or "hold server: answers turn/interrupt at once")
        fake = fake_codex_argv()
        if fake is not None and not deadline.expired():
            argv = [*fake, "app-server", "--scenario", str(slow_scenario(samples, Path(tmp)))]
            try:
                fbare = await bare_samples(argv, samples, min(20.0, deadline.left))
                fpairs, fnote = await client_pairs(argv, samples, min(20.0, deadline.left))
                rows += stats_rows("fake", fbare, fpairs, fnote or "fake-codex app-server, slow-stream turns")
            except Exception as exc:  # a fake that cannot play the scenario yet: report, keep the other rows
                rows.append(Row(BENCH, "fake", 0.0, "ms", note=f"fake-codex not measured: {type(exc).__name__} {exc}"))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100, help="interrupted turns per server")
    args = parser.parse_args(argv)
    samples = 5 if args.quick else args.samples
    t0 = time.perf_counter()
    rows = trio.run(main_async, samples, Deadline(55.0))
    return finish(rows, f"interrupt: {samples} samples per server, {time.perf_counter() - t0:.1f} s", args.json)


if __name__ == "__main__":
    sys.exit(main())
