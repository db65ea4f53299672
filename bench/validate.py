"""Frames validated per second on the real transcripts, next to bare ``orjson.loads`` in the same run.

    python bench/validate.py [--seconds S]

Each measurement repeats the whole corpus for about S seconds, in bursts interleaved with the
other measurements (best burst counts); the validator is warmed first so compiling the per-method
schemas is not counted.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from contracts.releases import default_version
from contracts.validator import SessionValidator, Validator

REPO = Path(__file__).resolve().parents[1]
#: The reference set recorded from the real binary (`make reference`): its listing and its transcripts.
LISTING = REPO / "tests" / "data" / "real" / "reference.txt"
TRANSCRIPTS = REPO / "tests" / "data" / "real" / default_version()
TARGET_RATE = 200_000
TARGET_RATIO = 0.25


def corpus() -> list[tuple[bytes, str, str | None]]:
    """(line, direction, method answered) for every wire frame of every transcript."""
    listed = [line.split() for line in LISTING.read_text().splitlines() if line.strip() and not line.startswith("#")]
    files = [TRANSCRIPTS / set_name / f"{name}.jsonl" for set_name, name, _scenario in listed]
    missing = [str(path) for path in files if not path.is_file()]
    if not files or missing:
        sys.exit(f"reference transcripts missing: {', '.join(missing) or LISTING} (part of the repository)")
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


def rates(runs: dict[str, Callable[[], None]], frames: int, seconds: float, repeats: int = 15) -> dict[str, float]:
    """Best frames/s of each run. The runs take turns in short bursts, so a busy machine slows
    them alike and the ratios stay meaningful even when the absolute rates do not."""
    best = dict.fromkeys(runs, float("inf"))
    burst = seconds / repeats
    for _ in range(repeats):
        for name, run_once in runs.items():
            rounds = 0
            start = time.perf_counter()
            while True:
                run_once()
                rounds += 1
                elapsed = time.perf_counter() - start
                if elapsed >= burst:
                    break
            best[name] = min(best[name], elapsed / rounds)
    return {name: frames / per_round for name, per_round in best.items()}


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
    measured = rates({"loads": parse_only, "validate": validate_only, "both": parse_and_validate}, n, args.seconds)
    base, val, both = measured["loads"], measured["validate"], measured["both"]
    print(
        f"corpus: {n} frames from {TRANSCRIPTS.relative_to(REPO)} ({invalid} invalid, "
        f"first pass incl. compiling {warmup * 1e3:.0f} ms)"
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
