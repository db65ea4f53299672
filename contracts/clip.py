"""A saved record stays readable and bounded: a string longer than a bound is kept as its head and tail, with its
length and hash in between (``…[cut 16777216 chars, sha256 9f86d0…]…``), so a 16 MiB agent message costs a
report a few KiB, not three copies of 16 MiB, and anyone can still tell which text it was.

Only what is saved is cut: every check judged the whole session in memory before it was saved, and ``show``
repeats that verdict (``checks.json`` beside the record).
"""

from __future__ import annotations

import hashlib
from typing import Any

#: Strings up to this many characters are kept whole.
MAX_SAVED_STRING = 256 * 1024
KEEP = 2048  # characters kept at each end of a cut string
MAX_DEPTH = 64  # a frame is nested far less; deeper is kept as it is (the wire reader bounded it already)


def cut_text(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{text[:KEEP]}…[cut {len(text)} chars, sha256 {digest}]…{text[-KEEP:]}"


def clip(value: Any, cuts: list[int], depth: int = 0) -> Any:
    """``value`` with every over-long string cut; each cut string's length is appended to ``cuts``."""
    if isinstance(value, str):
        if len(value) > MAX_SAVED_STRING:
            cuts.append(len(value))
            return cut_text(value)
        return value
    if depth >= MAX_DEPTH:
        return value
    if isinstance(value, dict):
        return {k: clip(v, cuts, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clip(v, cuts, depth + 1) for v in value]
    return value
