"""Trace-bundle write and check throughput (MB/s), next to a bare decode of the same bytes in the same run.

    python bench/trace.py [--turns N] [--seconds S]

The bundle is written by :class:`contracts.trace.writer.TraceWriter` with a realistic mix (prompts of tens
of KB, tool calls with small invocations and results, protocol events). Logical bytes = event-log bytes
+ decompressed payload bytes: what the checker has to look at. The baseline is the least a reader can do
with the same bundle: zstd-decompress every shard and ``orjson.loads`` every event line. Target: check
>= 50 MB/s.
"""

from __future__ import annotations

import argparse
import itertools
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import orjson
import zstandard

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from contracts.trace.closure import check_bundle  # noqa: E402
from contracts.trace.writer import TraceWriter  # noqa: E402

TARGET_CHECK_MBPS = 50.0
WORDS = [
    "".join(random.Random(i).choice("abcdefghijklmnopqrstuvwxyz") for _ in range(random.Random(i).randint(2, 10)))
    for i in range(2000)
]


def text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def write_bundle(path: Path, turns: int, seed: int = 7, *, mix: str = "realistic") -> int:
    """Write one bundle; returns the logical bytes written (event lines + payload bodies)."""
    rng = random.Random(seed)
    clock = itertools.count(1_796_000_000_000)
    w = TraceWriter(path, rollout_id="bench-thread", now_ms=lambda: next(clock))
    thread = w.start_thread("bench-thread", metadata={"cwd": "/bench", "notes": text(rng, 50)})
    # Like the real binary, every inference request carries the full instructions (tens of KB).
    instructions = text(rng, 4000 if mix == "realistic" else 20)
    w.protocol_event_observed("session_configured", {"type": "session_configured", "doc": text(rng, 150)})
    for t in range(turns):
        with thread.start_turn(f"turn-{t}") as turn:
            w.protocol_event_observed("turn_started", {"type": "task_started", "turn_id": f"turn-{t}"})
            for i in range(3):
                turn.history_item_accepted(f"msg-{t}-{i}")
            items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text(rng, 400)}]}]
            request = {"model": "mock-model", "instructions": instructions, "input": items, "stream": True}
            with turn.start_inference(f"inf-{t}", prompt_items=items, request=request) as inference:
                inference.complete(response_id=f"resp-{t}", output_items=[{"type": "message", "text": text(rng, 80)}])
            for c in range(2):
                with turn.start_tool_call(f"call-{t}-{c}", arguments={"cmd": text(rng, 8)}) as tool:
                    tool.complete({"output": text(rng, 120), "exit_code": 0})
            turn.end("completed")
            w.protocol_event_observed("turn_complete", {"type": "turn_complete", "turn_id": f"turn-{t}"})
    w.complete()
    return logical_bytes(path)


def logical_bytes(path: Path) -> int:
    total = (path / "trace.jsonl").stat().st_size
    for shard in sorted((path / "payloads").glob("*.zst")):
        total += len(zstandard.ZstdDecompressor().decompressobj().decompress(shard.read_bytes()))
    return total


def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def baseline(path: Path) -> None:
    """The floor: decompress every shard, parse every event line."""
    for shard in sorted((path / "payloads").glob("*.zst")):
        zstandard.ZstdDecompressor().decompressobj(read_across_frames=True).decompress(shard.read_bytes())
    loads = orjson.loads
    with open(path / "trace.jsonl", "rb") as f:
        for line in f:
            loads(line)


def best_seconds(fn, budget: float, minimum: int = 3) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    end = time.monotonic() + budget
    runs = 0
    while runs < minimum or time.monotonic() < end:
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        runs += 1
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300, help="turns in the bundle (default 300)")
    parser.add_argument("--seconds", type=float, default=4.0, help="time per measurement (default 4)")
    parser.add_argument(
        "--mix",
        choices=("realistic", "small"),
        default="realistic",
        help="realistic: requests carry tens of KB of instructions, as the real binary's do; "
        "small: tiny payloads, so per-event cost dominates (the worst case for MB/s)",
    )
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="trace-bench-"))
    try:
        bundle = tmp / "bundle"
        counter = itertools.count()

        def write_once() -> None:
            dest = tmp / f"w{next(counter)}"
            write_bundle(dest, args.turns, mix=args.mix)
            shutil.rmtree(dest)

        write_bundle(bundle, args.turns, mix=args.mix)
        logical = logical_bytes(bundle)
        on_disk = disk_bytes(bundle)
        verdict = check_bundle(bundle)
        if verdict.verdict != "closed":
            print(f"bench bundle is not closed: {verdict.to_json()}", file=sys.stderr)
            return 1
        events = verdict.trace.event_count if verdict.trace else 0

        write_s = best_seconds(write_once, args.seconds)
        check_s = best_seconds(lambda: check_bundle(bundle), args.seconds)
        base_s = best_seconds(lambda: baseline(bundle), args.seconds)
        mb = logical / 1e6
        write_rate, check_rate, base_rate = mb / write_s, mb / check_s, mb / base_s
        print(f"trace bundle ({args.mix} mix): {events} events, {mb:.1f} MB logical, {on_disk / 1e6:.1f} MB on disk")
        print("| measure | MB/s (logical) | events/s | ratio vs baseline | target | met |")
        print("|---|---|---|---|---|---|")
        base = "baseline: zstd decompress + orjson.loads per line"
        print(f"| {base} | {base_rate:.1f} | {events / base_s:,.0f} | 1.00x | | |")
        ok = "yes" if check_rate >= TARGET_CHECK_MBPS else "NO"
        print(
            f"| check (strict replay + closure) | {check_rate:.1f} | {events / check_s:,.0f} | "
            f"{check_rate / base_rate:.2f}x | >= {TARGET_CHECK_MBPS:.0f} MB/s | {ok} |"
        )
        print(
            f"| write (TraceWriter, zstd level 3, flush per record) | {write_rate:.1f} | {events / write_s:,.0f} | "
            f"{write_rate / base_rate:.2f}x | | |"
        )
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
