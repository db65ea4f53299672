"""Token usage buckets, mutually exclusive, as a robust client bills them.

Codex's ``inputTokens`` include cache reads and writes, ``outputTokens`` include reasoning, so:
input (uncached) = inputTokens - cachedInputTokens - cacheWriteInputTokens (never below 0),
cache_read = cachedInputTokens, cache_write = cacheWriteInputTokens, output = outputTokens.
``reasoning`` is informational only: it is already inside ``output`` and never added to it.

A client may expose usage in another style (an outside client declares it in its result file,
``usage_style``): ``input`` ``with_cache`` counts the cached and cache-written tokens in ``input`` (the
server's ``inputTokens``, an OpenAI-style ``prompt_tokens``); ``scope`` ``last_request`` is the usage of the
turn's last model request only (the ``last`` of its final update).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

WIRE_FIELDS = (
    "totalTokens",
    "inputTokens",
    "cachedInputTokens",
    "cacheWriteInputTokens",
    "outputTokens",
    "reasoningOutputTokens",
)

#: usage_style: what ``input`` holds (the buckets above: ``uncached``), and what a report covers
INPUT_STYLES = ("uncached", "with_cache")
SCOPES = ("turn", "last_request")


@dataclass(frozen=True, slots=True)
class UsageBuckets:
    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    reasoning: int = 0  # inside `output`; kept to check consistency, never summed into it

    @classmethod
    def from_breakdown(cls, breakdown: dict[str, Any]) -> UsageBuckets:
        """Buckets of one wire ``TokenUsageBreakdown`` (``last`` or ``total``)."""
        inp = int(breakdown.get("inputTokens") or 0)
        cached = int(breakdown.get("cachedInputTokens") or 0)
        write = int(breakdown.get("cacheWriteInputTokens") or 0)
        return cls(
            input=max(0, max(0, inp - cached) - write),
            cache_read=cached,
            cache_write=write,
            output=int(breakdown.get("outputTokens") or 0),
            reasoning=int(breakdown.get("reasoningOutputTokens") or 0),
        )

    def __add__(self, other: UsageBuckets) -> UsageBuckets:
        return UsageBuckets(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def is_zero(self) -> bool:
        return not any(getattr(self, f.name) for f in fields(self))

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> UsageBuckets:
        return cls(**{f.name: int(data.get(f.name, 0)) for f in fields(cls)})
