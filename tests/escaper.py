"""A helper that tries to outlive whoever started it: ``python escaper.py HEARTBEAT``.

It leaves its parent's session (fork, ``setsid``), then changes pid every millisecond (fork, the parent
exits), each generation rewriting HEARTBEAT with its pid. A scan of ``/proc`` seldom catches it: by the
time its entry is read it is gone and its child has a new pid. Started through ``env -i`` it carries no
run marker either. It ends itself when HEARTBEAT becomes a directory (how a test cleans up after a
harness that could not end it) or after ``LIFETIME_S``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

LIFETIME_S = 120.0
SCRIPT = Path(__file__).resolve()
#: How long after the harness exits the heartbeat may still change (within 1 s).
STOPS_WITHIN_S = 1.0


def argv(heartbeat: Path) -> list[str]:
    """Start it with an empty environment: no run marker, nothing inherited."""
    return ["env", "-i", sys.executable, str(SCRIPT), str(heartbeat)]


def last_beat_after(heartbeat: Path, since_wall: float) -> float:
    """Seconds between ``since_wall`` (a ``time.time()``) and the last heartbeat, observed over
    :data:`STOPS_WITHIN_S` + 0.3 s of real time: > STOPS_WITHIN_S means the helper outlived the harness."""
    deadline = since_wall + STOPS_WITHIN_S + 0.3
    while time.time() < deadline:
        time.sleep(0.05)  # a real process needs real time to show it is gone; bounded by the deadline
    try:
        return heartbeat.stat().st_mtime - since_wall
    except FileNotFoundError:
        return float("-inf")  # it never beat


def stop(heartbeat: Path) -> None:
    """End an escaper that outlived its harness: its next write finds a directory and it exits."""
    for _ in range(1000):  # bounded: it rewrites the file every millisecond
        if heartbeat.is_dir():
            return
        try:
            heartbeat.unlink(missing_ok=True)
            heartbeat.mkdir()
            return
        except FileExistsError:
            time.sleep(0.001)


def main(heartbeat: str) -> None:
    born = time.monotonic()
    if os.fork():
        os._exit(0)
    os.setsid()
    while time.monotonic() - born < LIFETIME_S:
        if os.fork():
            os._exit(0)
        try:
            with open(heartbeat, "w") as beat:
                beat.write(f"{os.getpid()}\n")
        except OSError:
            os._exit(0)
        time.sleep(0.001)


if __name__ == "__main__":
    main(sys.argv[1])
