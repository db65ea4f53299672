"""Replay the client side of a recorded transcript against the fake, on a virtual clock.

Before each client line the fake is given (virtual) time until it has sent as many structural frames
as the recorded server had at that point, so the client's actions land where they did in the
recording (an interrupt after the third delta stays after the third delta). Ids the recorded server
minted (threads, turns) are mapped to the fake's by aligning the two server sides, then substituted
into the client's lines.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from contracts.fidelity import Difference, diff_server_sides, shape
from contracts.scenario import Scenario
from support.virtual import VirtualServer

MAX_CATCH_UP_MS = 120_000
SETTLE_MS = 5_000


@dataclass(slots=True)
class ReplayResult:
    server: VirtualServer
    recorded: list[Any]  # the recorded server side (None for a line that was not a frame)
    differences: list[Difference] = field(default_factory=list)
    exit_code: int | None = None

    @property
    def fake(self) -> list[Any]:
        return [o.frame for o in self.server.out]


def _structural(frames: Iterable[Any]) -> list[Any]:
    return [f for f in frames if shape(f) is not None]


def _ids_of(frame: Any) -> list[str]:
    if not isinstance(frame, dict):
        return []
    found: list[str] = []
    for container in (frame.get("result"), frame.get("params")):
        if not isinstance(container, dict):
            continue
        for key in ("threadId", "turnId", "itemId"):
            if isinstance(container.get(key), str):
                found.append(container[key])
        for key in ("thread", "turn", "item"):
            inner = container.get(key)
            if isinstance(inner, dict) and isinstance(inner.get("id"), str):
                found.append(inner["id"])
    return found


def _learn_ids(recorded: list[Any], fake: list[Any], idmap: dict[str, str]) -> None:
    for real, mine in zip(_structural(recorded), _structural(fake), strict=False):
        for a, b in zip(_ids_of(real), _ids_of(mine), strict=False):
            idmap.setdefault(a, b)


def _substitute(value: Any, idmap: dict[str, str]) -> Any:
    if isinstance(value, str):
        return idmap.get(value, value)
    if isinstance(value, list):
        return [_substitute(v, idmap) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, idmap) for k, v in value.items()}
    return value


def replay(transcript: Iterable[dict[str, Any]], scenario: Scenario, *, collapse_deltas: bool = False) -> ReplayResult:
    server = VirtualServer(scenario)
    recorded: list[Any] = []
    idmap: dict[str, str] = {}
    for entry in transcript:
        direction, msg = entry.get("dir"), entry.get("msg")
        if direction == "s2c":
            recorded.append(None if isinstance(msg, dict) and "_raw" in msg else msg)
            continue
        need = len(_structural(recorded))
        server.run_until_state(lambda need=need: len(_structural(server.frames)) >= need, within_ms=MAX_CATCH_UP_MS)
        _learn_ids(recorded, server.frames, idmap)
        if direction == "note":
            note = str(msg.get("note", "")) if isinstance(msg, dict) else str(msg)
            if "stdin closed" in note:
                server.close_input()
            continue
        if isinstance(msg, dict) and "_raw" in msg:
            raw = str(msg["_raw"])
            for real, mine in idmap.items():
                raw = raw.replace(real, mine)
            server.send_raw(raw.encode() + b"\n")
        else:
            server.send_raw(orjson.dumps(_substitute(msg, idmap)) + b"\n")
    need = len(_structural(recorded))
    server.run_until_state(lambda: len(_structural(server.frames)) >= need, within_ms=MAX_CATCH_UP_MS)
    server.settle(SETTLE_MS)
    result = ReplayResult(server, recorded, exit_code=server.exit_code)
    result.differences = diff_server_sides(recorded, result.fake, collapse_deltas=collapse_deltas)
    return result


def load_transcript(path: str) -> list[dict[str, Any]]:
    with open(path, "rb") as fh:
        return [orjson.loads(line) for line in fh if line.strip()]
