"""An index over a record's wire transcript: requests, answers and turn events by id and position."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import orjson

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
    if value is None or isinstance(value, str | bool | float):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, int):
        return f"int:{value:x}"  # hex: no digit limit for a huge int (repr refuses past 4300 digits)
    # Not a JSON-RPC id (those are strings and numbers), but a hostile line may hold one nested 1000 deep:
    # repr would recurse past the interpreter's limit; orjson stops at its own.
    try:
        return f"{type(value).__name__}:{orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()}"
    except (orjson.JSONEncodeError, TypeError):
        return f"{type(value).__name__}:<too deep {id(value)}>"


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
    """Positions are indices into ``entries``; ``c2s``/``s2c`` requests are keyed by :func:`id_key`.

    Built in one pass; every query reads a list grouped at build time (by direction and method, or by
    turn id), so a contract that asks once per turn stays linear in the session's size.
    """

    entries: list[WireEntry]
    client_requests: dict[str, Request] = field(default_factory=dict)  # c2s requests, answered s2c
    server_requests: dict[str, Request] = field(default_factory=dict)  # s2c requests, answered c2s
    #: answers with no request of that id in the other direction: (pos, direction, frame)
    orphan_answers: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    #: repeated request ids in one direction: (pos, direction, frame)
    duplicate_requests: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    # The groups hold positions (ints), not (pos, entry) tuples: ints are not tracked by the cyclic
    # collector, so a 10,000-turn index adds no work to each full collection of a heap that big.
    #: (direction, method or None) → positions in order; None holds every frame of that direction
    _by_method: dict[tuple[str, str | None], list[int]] = field(default_factory=dict)
    #: turn id → positions of its turn/completed frames (s2c)
    _completions: dict[str, list[int]] = field(default_factory=dict)
    #: turn id → its turn/interrupt requests (c2s) in order
    _interrupts: dict[str, list[Request]] = field(default_factory=dict)
    #: (direction, method, params.turnId) → positions (notifications such as thread/tokenUsage/updated)
    _by_turn_id: dict[tuple[str, str, str], list[int]] = field(default_factory=dict)

    @classmethod
    def build(cls, entries: list[WireEntry]) -> WireIndex:
        """The index of ``entries``; inside :func:`shared`, built once per list and handed to every caller."""
        cache = _SHARED.get()
        if cache is not None:
            hit = cache.get(id(entries))
            if hit is not None and hit.entries is entries:
                return hit
        index = cls._build(entries)
        if cache is not None:
            cache[id(entries)] = index
        return index

    @classmethod
    def _build(cls, entries: list[WireEntry]) -> WireIndex:
        index = cls(entries)
        for pos, entry in enumerate(entries):
            frame = entry.frame
            if entry.dir == "note" or not isinstance(frame, dict):
                continue
            index._group(pos, entry, frame)
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
        for request in index.client_requests.values():
            turn = request.params.get("turnId")
            if request.method == "turn/interrupt" and isinstance(turn, str):
                index._interrupts.setdefault(turn, []).append(request)
        return index

    def _group(self, pos: int, entry: WireEntry, frame: dict[str, Any]) -> None:
        self._by_method.setdefault((entry.dir, None), []).append(pos)
        method = frame.get("method")
        if not isinstance(method, str):  # a hostile frame's method may be unhashable; no str query matches it
            return
        self._by_method.setdefault((entry.dir, method), []).append(pos)
        params = frame.get("params")
        turn = params.get("turnId") if isinstance(params, dict) else None
        if isinstance(turn, str):
            self._by_turn_id.setdefault((entry.dir, method, turn), []).append(pos)
        if entry.dir == "s2c" and method == "turn/completed":
            turn_id = _turn_id_of(frame)
            if isinstance(turn_id, str):
                self._completions.setdefault(turn_id, []).append(pos)

    def frames(self, direction: str, method: str | None = None) -> list[tuple[int, WireEntry]]:
        """Frames of one direction (and one method when given), in order."""
        return self._at(self._by_method.get((direction, method), ()))

    def _at(self, positions: list[int] | tuple[()]) -> list[tuple[int, WireEntry]]:
        entries = self.entries
        return [(pos, entries[pos]) for pos in positions]

    def turn_frames(self, direction: str, method: str, turn_id: str) -> list[tuple[int, WireEntry]]:
        """Frames of one direction and method whose ``params.turnId`` is ``turn_id``, in order."""
        return self._at(self._by_turn_id.get((direction, method, turn_id), ()))

    def request_method(self, entry: WireEntry) -> str | None:
        """For an answer frame, the method of the request it answers (sent the other way)."""
        frame = entry.frame
        if not isinstance(frame, dict) or not is_response(frame):
            return None
        requests = self.server_requests if entry.dir == "c2s" else self.client_requests
        request = requests.get(id_key(frame["id"]))
        return request.method if request is not None else None

    def turn_completions(self, turn_id: str) -> list[tuple[int, WireEntry]]:
        return self._at(self._completions.get(turn_id, ()))

    def interrupts(self, turn_id: str) -> list[Request]:
        return list(self._interrupts.get(turn_id, ()))


_SHARED: ContextVar[dict[int, WireIndex] | None] = ContextVar("wire_index_shared", default=None)


@contextmanager
def shared() -> Iterator[None]:
    """One index per wire list while the contracts judge one record (they only read it and the index):
    six contracts built six indexes of the same 10,000-turn wire."""
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


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
