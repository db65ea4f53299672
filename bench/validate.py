"""Frames validated per second on the real transcripts, next to bare ``orjson.loads`` in the same run.

    python bench/validate.py [--seconds S]

Each measurement repeats the whole corpus until about S seconds have passed (best of 5 runs);
the validator is warmed first so compiling the per-method schemas is not counted.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from contracts.validator import SessionValidator, Validator

REPO = Path(__file__).resolve().parents[1]
TRANSCRIPTS = REPO.parent / "shared" / "reference" / "real-transcripts"
TARGET_RATE = 200_000
TARGET_RATIO = 0.25


def corpus() -> list[tuple[bytes, str, str | None]]:
    """(line, direction, method answered) for every wire frame of every transcript."""
    files = sorted(TRANSCRIPTS.glob("*.jsonl"))
    if not files:
        sys.exit(f"no transcripts in {TRANSCRIPTS} (shared/ must sit beside the repository)")
    frames: list[tuple[bytes, str, str | None]] = []
    for path in files:
        session = SessionValidator()
        for line in path.read_bytes().splitlines():
            entry = orjson.loads(line)
            if entry["dir"] == "note":
                continue
            msg = entry["msg"]
            if "_raw" in msg:
                try:
                    msg = orjson.loads(msg["_raw"])
                except orjson.JSONDecodeError:
                    continue
            frames.append((orjson.dumps(msg), entry["dir"], session.answered_method(msg, entry["dir"])))
    return frames


def rate(run_once: Callable[[], None], frames: int, seconds: float) -> float:
    best = float("inf")
    for _ in range(5):
        rounds = 0
        start = time.perf_counter()
        while True:
            run_once()
            rounds += 1
            elapsed = time.perf_counter() - start
            if elapsed >= seconds / 5:
                break
        best = min(best, elapsed / rounds)
    return frames / best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement (default 3)")
    args = parser.parse_args()

    items = corpus()
    lines = [line for line, _, _ in items]
    parsed = [(orjson.loads(line), d, m) for line, d, m in items]
    validator = Validator.for_release()
    started = time.perf_counter()
    invalid = sum(1 for frame, d, m in parsed if validator.validate(frame, d, m))
    warmup = time.perf_counter() - started

    loads = orjson.loads
    validate = validator.validate

    def parse_only() -> None:
        for line in lines:
            loads(line)

    def validate_only() -> None:
        for frame, d, m in parsed:
            validate(frame, d, m)

    def parse_and_validate() -> None:
        for line, d, m in items:
            validate(loads(line), d, m)

    n = len(items)
    base = rate(parse_only, n, args.seconds)
    val = rate(validate_only, n, args.seconds)
    both = rate(parse_and_validate, n, args.seconds)
    print(
        f"corpus: {n} frames from {TRANSCRIPTS} ({invalid} invalid, first pass incl. compiling {warmup * 1e3:.0f} ms)"
    )
    print(f"orjson.loads alone       {base:>12,.0f} frames/s")
    print(f"validate (parsed frame)  {val:>12,.0f} frames/s   {val / base:.2f}x orjson.loads")
    print(f"orjson.loads + validate  {both:>12,.0f} frames/s   {both / base:.2f}x orjson.loads")
    ok = val >= TARGET_RATE and val / base >= TARGET_RATIO
    verdict = "met" if ok else "NOT met"
    print(f"target >= {TARGET_RATE:,} frames/s and >= {TARGET_RATIO}x orjson.loads: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
