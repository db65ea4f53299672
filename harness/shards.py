"""``--shard K/N``: a catalogue split across N machines, deterministically, each scenario in exactly one shard.

A scenario goes to shard ``1 + i mod N``, ``i`` its index in the catalogue sorted by name: the same list on every
machine gives the same split, whatever order the scenarios were named in, and the N shards together are the
whole catalogue (``codex-harness report merge`` joins their reports into one).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TypeVar

from contracts.exitcodes import UsageError

MAX_SHARDS = 1000
_SPEC = re.compile(r"^([0-9]{1,4})/([0-9]{1,4})$")  # ASCII digits only
T = TypeVar("T")


def parse(spec: str) -> tuple[int, int]:
    """``"2/3"`` → (2, 3); anything else a usage error."""
    m = _SPEC.match(spec)
    if m is None:
        raise UsageError(f"--shard {spec!r}: expected K/N, e.g. 2/3")
    k, n = int(m[1]), int(m[2])
    if not 1 <= n <= MAX_SHARDS or not 1 <= k <= n:
        raise UsageError(f"--shard {spec}: K must be in 1..N and N in 1..{MAX_SHARDS}")
    return k, n


def pick(items: Sequence[T], names: Sequence[str], k: int, n: int) -> list[T]:
    """The items of shard ``k`` of ``n``; ``names`` are the items' names, one each (the split is by name)."""
    order = sorted(range(len(items)), key=lambda i: names[i])
    mine = {i for rank, i in enumerate(order) if rank % n == k - 1}
    return [item for i, item in enumerate(items) if i in mine]
