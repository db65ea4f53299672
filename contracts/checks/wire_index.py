"""An index over a record's wire transcript: requests, answers and turn events by id and position."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from contracts.record import WireEntry

_MISSING = object()


def is_request(frame: dict[str, Any]) -> bool:
    return "method" in frame and "id" in frame


def is_notification(frame: dict[str, Any]) -> bool:
    return "method" in frame and "id" not in frame


def is_response(frame: dict[str, Any]) -> bool:
    return "method" not in frame and "id" in frame and ("result" in frame or "error" in frame)


def id_key(value: Any) -> str:
    """Ids compare by JSON value: 1 and "1" are different ids."""
    return f"{type(value).__name__}:{value!r}"


@dataclass(slots=True)
class Request:
    pos: int
    t: float
    method: str
    id: Any
    params: dict[str, Any]
    answers: list[tuple[int, float, dict[str, Any]]] = field(default_factory=list)


@dataclass(slots=True)
class WireIndex:
    """Positions are indices into ``entries``; ``c2s``/``s2c`` requests are keyed by :func:`id_key`."""

    entries: list[WireEntry]
    client_requests: dict[str, Request] = field(default_factory=dict)  # c2s requests, answered s2c
    server_requests: dict[str, Request] = field(default_factory=dict)  # s2c requests, answered c2s
    #: answers with no request of that id in the other direction: (pos, direction, frame)
    orphan_answers: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    #: repeated request ids in one direction: (pos, direction, frame)
    duplicate_requests: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)

    @classmethod
    def build(cls, entries: list[WireEntry]) -> WireIndex:
        index = cls(entries)
        for pos, entry in enumerate(entries):
            frame = entry.frame
            if entry.dir == "note" or not isinstance(frame, dict):
                continue
            own = index.client_requests if entry.dir == "c2s" else index.server_requests
            other = index.server_requests if entry.dir == "c2s" else index.client_requests
            if is_request(frame):
                key = id_key(frame["id"])
                if key in own:
                    index.duplicate_requests.append((pos, entry.dir, frame))
                    continue
                params = frame.get("params")
                own[key] = Request(
                    pos, entry.t, str(frame["method"]), frame["id"], params if isinstance(params, dict) else {}
                )
            elif is_response(frame):
                request = other.get(id_key(frame["id"]))
                if request is None or request.pos > pos:
                    index.orphan_answers.append((pos, entry.dir, frame))
                else:
                    request.answers.append((pos, entry.t, frame))
        return index

    def frames(self, direction: str, method: str | None = None) -> list[tuple[int, WireEntry]]:
        """Frames of one direction (and one method when given), in order."""
        out = []
        for pos, entry in enumerate(self.entries):
            if entry.dir != direction or not isinstance(entry.frame, dict):
                continue
            if method is None or entry.frame.get("method") == method:
                out.append((pos, entry))
        return out

    def request_method(self, entry: WireEntry) -> str | None:
        """For an answer frame, the method of the request it answers (sent the other way)."""
        frame = entry.frame
        if not isinstance(frame, dict) or not is_response(frame):
            return None
        requests = self.server_requests if entry.dir == "c2s" else self.client_requests
        request = requests.get(id_key(frame["id"]))
        return request.method if request is not None else None

    def turn_completions(self, turn_id: str) -> list[tuple[int, WireEntry]]:
        return [
            (pos, e)
            for pos, e in self.frames("s2c", "turn/completed")
            if _turn_id_of(e.frame) == turn_id  # type: ignore[arg-type]
        ]

    def interrupts(self, turn_id: str) -> list[Request]:
        return [
            r
            for r in self.client_requests.values()
            if r.method == "turn/interrupt" and r.params.get("turnId") == turn_id
        ]


def _turn_id_of(frame: dict[str, Any]) -> Any:
    params = frame.get("params")
    if not isinstance(params, dict):
        return _MISSING
    turn = params.get("turn")
    if isinstance(turn, dict) and "id" in turn:
        return turn["id"]
    return params.get("turnId", _MISSING)


def turn_id_of(frame: dict[str, Any]) -> str | None:
    value = _turn_id_of(frame)
    return value if isinstance(value, str) else None
