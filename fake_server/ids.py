"""Deterministic ids shaped like the real ones (UUIDv7 for threads, turns and user messages)."""

from __future__ import annotations

import hashlib


class IdMaker:
    """UUIDv7 strings from the engine's notion of now plus a counter, so a run replays identically."""

    def __init__(self, seed: str = "fake-codex") -> None:
        self._seed = seed
        self._counter = 0

    def uuid7(self, now_ms: int) -> str:
        self._counter += 1
        rand = hashlib.sha256(f"{self._seed}/{self._counter}".encode()).hexdigest()
        ms = f"{now_ms & 0xFFFFFFFFFFFF:012x}"
        variant = "89ab"[int(rand[3], 16) % 4]
        return f"{ms[:8]}-{ms[8:12]}-7{rand[:3]}-{variant}{rand[4:7]}-{rand[7:19]}"

    def uuid4(self) -> str:
        self._counter += 1
        rand = hashlib.sha256(f"{self._seed}/v4/{self._counter}".encode()).hexdigest()
        variant = "89ab"[int(rand[3], 16) % 4]
        return f"{rand[:8]}-{rand[8:12]}-4{rand[13:16]}-{variant}{rand[17:20]}-{rand[20:32]}"


_HEX = set("0123456789abcdefABCDEF")


def uuid_error(text: str) -> str | None:
    """Why ``text`` is not a UUID, worded like the ``uuid`` crate; None when it is one."""
    body = text[9:] if text.lower().startswith("urn:uuid:") else text
    for i, ch in enumerate(body, start=1):
        if ch not in _HEX and ch != "-":
            return (
                "invalid character: expected an optional prefix of `urn:uuid:` followed by [0-9a-fA-F-], "
                f"found `{ch}` at {i}"
            )
    digits = body.replace("-", "")
    if len(body) == 36 and [len(g) for g in body.split("-")] == [8, 4, 4, 4, 12]:
        return None
    if len(body) == 32 and "-" not in body:
        return None
    if "-" in body:
        return f"invalid group count: expected 5, found {len(body.split('-'))}"
    return f"invalid length: expected length 32 for simple format, found {len(digits)}"
