"""The fault ledger: which scripted faults struck, for the harness's ``fault_not_struck`` check.

In process the harness reads :attr:`fake_server.inprocess.InProcessServer.faults_struck`; a
``fake-codex`` process appends one JSON line per strike to the file named by
:data:`FAULT_LEDGER_ENV` (one ``os.write`` each, so a crash or SIGKILL leaves whole lines).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import orjson

from contracts import bounded_parse, safe_read
from fake_server.effects import FaultStruck

FAULT_LEDGER_ENV: Final = "FAKE_CODEX_FAULT_LEDGER"
#: A ledger longer than this is not ours (a scenario has far fewer faults); the rest is ignored.
MAX_LEDGER_BYTES: Final = 1024 * 1024


def append(path: str, effect: FaultStruck) -> None:
    line = orjson.dumps(
        {
            "turn": effect.turn,
            "index": effect.index,
            "kind": effect.kind,
            "at": effect.at,
            "sent": effect.sent,
            "received": effect.received,
        }
    )
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line + b"\n")
        finally:
            os.close(fd)
    except OSError:
        pass  # the ledger is for the harness; a server never dies of it


def read(path: Path) -> list[tuple[int, ...]]:
    """(turn, fault index, lines sent, lines received) per line, or (turn, fault index) from a server that
    did not count lines; a missing file is an empty ledger, a torn line is skipped."""
    try:  # the fake wrote it; a link, a FIFO or /dev/zero in its place is never followed nor read
        data = safe_read.read_prefix(path, MAX_LEDGER_BYTES)
    except OSError:
        return []
    out: list[tuple[int, ...]] = []
    for line in data.splitlines():
        try:
            entry = bounded_parse.loads_json(line)
            struck: tuple[int, ...] = (int(entry["turn"]), int(entry["index"]))
            if "sent" in entry and "received" in entry:
                struck += (int(entry["sent"]), int(entry["received"]))
            out.append(struck)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            continue
    return out
