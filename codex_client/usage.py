"""Token usage accounting of one turn, exactly as ``docs/client-rules.md`` §4 says (pure, no I/O).

- Attribution: the session accepts a ``thread/tokenUsage/updated`` for a turn only when its ``turnId``
  is the turn's id (see :class:`UsageLedger`); the last turn keeps accepting after its
  ``turn/completed``, so late usage still counts, and replays from earlier turns never do.
- First accepted update contributes its ``last`` (nothing when its ``total`` is the thread's total as its
  previous update left it: a re-report of usage already counted, which 0.130.0 sends as each model response
  starts); each later one the per-field non-negative
  difference of its ``total`` against the previous accepted ``total`` (a field that went down is a
  counter reset: its new value counts). Duplicates therefore add nothing, and the thread's earlier
  turns, which ``total`` includes, are never charged.
- Buckets (:class:`contracts.usage.UsageBuckets`) are computed from the accumulated wire fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from contracts.usage import WIRE_FIELDS, UsageBuckets

Fields = dict[str, int]

#: snake_case aliases for usage carried on ``turn/completed`` (``turn.usage``) or legacy events
_ALIASES: dict[str, tuple[str, ...]] = {
    "totalTokens": ("totalTokens", "total_tokens"),
    "inputTokens": ("inputTokens", "input_tokens", "input", "prompt_tokens"),
    "cachedInputTokens": (
        "cachedInputTokens",
        "cached_input_tokens",
        "cache_read_tokens",
        "cache_read_input_tokens",
    ),
    "cacheWriteInputTokens": (
        "cacheWriteInputTokens",
        "cache_write_tokens",
        "cache_write_input_tokens",
        "cache_creation_input_tokens",
    ),
    "outputTokens": ("outputTokens", "output_tokens", "output", "completion_tokens"),
    "reasoningOutputTokens": ("reasoningOutputTokens", "reasoning_output_tokens", "reasoning_tokens"),
}


def zero() -> Fields:
    return dict.fromkeys(WIRE_FIELDS, 0)


def _count(value: Any) -> int:
    # bool is an int subclass but never a token count; negative counts are nonsense: read as 0
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return max(0, int(value))


def breakdown(obj: Any, *, aliases: bool = False) -> Fields | None:
    """The six wire fields of a ``TokenUsageBreakdown`` (missing fields are 0), or None if not an object."""
    if not isinstance(obj, Mapping):
        return None
    if not aliases:
        return {f: _count(obj.get(f)) for f in WIRE_FIELDS}
    out = zero()
    for wire_name, names in _ALIASES.items():
        for name in names:
            if name in obj:
                out[wire_name] = _count(obj[name])
                break
    return out


def add(a: Fields, b: Fields) -> Fields:
    return {f: a[f] + b[f] for f in WIRE_FIELDS}


def total_delta(previous: Fields, current: Fields) -> Fields:
    """Per-field non-negative difference; a field that went down is a counter reset and counts its new value."""
    return {f: (current[f] - previous[f]) if current[f] >= previous[f] else current[f] for f in WIRE_FIELDS}


def four_buckets_zero(buckets: UsageBuckets) -> bool:
    return not (buckets.input or buckets.cache_read or buckets.cache_write or buckets.output)


@dataclass(slots=True)
class TurnUsage:
    """The usage of one turn, fed with the ``tokenUsage`` objects the session attributed to it."""

    turn_id: str
    fields: Fields = field(default_factory=zero)
    previous_total: Fields | None = None
    accepted: int = 0  # updates applied (duplicates included: they add zero)
    from_completion: bool = False  # fields came from turn.usage on turn/completed (no live update)
    #: the thread's ``total`` as its last update before this turn's first left it (None: not seen)
    thread_total: Fields | None = None

    def apply(self, token_usage: Any) -> Fields:
        """Apply one ``tokenUsage {total, last}``; returns what it added (all zero for a duplicate)."""
        if not isinstance(token_usage, Mapping):
            return zero()
        last = breakdown(token_usage.get("last"))
        total = breakdown(token_usage.get("total"))
        if self.from_completion:
            # a live update after turn/completed supersedes the completion's fallback numbers
            self.fields = zero()
            self.from_completion = False
        if self.accepted == 0 and total is not None and total == self.thread_total:
            delta = zero()  # a re-report of usage already counted (0.130.0 opens each response with one)
        elif self.accepted == 0:
            delta = last if last is not None else zero()
        elif total is None or self.previous_total is None:
            delta = zero()  # no running total to diff: counting `last` again could double-charge
        else:
            delta = total_delta(self.previous_total, total)
        if total is not None:
            self.previous_total = total
        self.accepted += 1
        self.fields = add(self.fields, delta)
        return delta

    def apply_completion_usage(self, usage: Any) -> bool:
        """Source 2: ``turn.usage`` on ``turn/completed`` (snake_case aliases), only if no live update came."""
        if self.accepted:
            return False
        fields = breakdown(usage, aliases=True)
        if fields is None:
            return False
        self.fields = fields
        self.from_completion = True
        return True

    def buckets(self) -> UsageBuckets:
        return UsageBuckets.from_breakdown(self.fields)

    def by_model(self, model: str | None) -> dict[str, UsageBuckets]:
        """The Result's usage map: one key (the model, else "unknown"); empty when the four buckets are zero."""
        buckets = self.buckets()
        if four_buckets_zero(buckets):
            return {}
        return {model or "unknown": buckets}


#: threads whose last total the ledger keeps (the oldest is forgotten first)
MAX_THREADS = 256


@dataclass(slots=True)
class UsageLedger:
    """Attribution by ``turnId`` across a session: only the latest turn accepts updates, even after it ended."""

    current: TurnUsage | None = None
    rejected: int = 0  # updates for another (earlier, replayed, sub-agent) turn or without a turn id
    #: threadId -> the ``total`` of its last update (any turn's): what a re-report repeats
    totals: dict[Any, Fields] = field(default_factory=dict)

    def turn_started(self, turn_id: str) -> TurnUsage:
        if self.current is None or self.current.turn_id != turn_id:
            self.current = TurnUsage(turn_id)
        return self.current

    def update(self, params: Any) -> tuple[TurnUsage, Fields] | None:
        """Apply a ``thread/tokenUsage/updated`` params object; None when it is not attributed."""
        if not isinstance(params, Mapping):
            self.rejected += 1
            return None
        usage = params.get("tokenUsage")
        thread = params.get("threadId")
        before = self.totals.get(thread) if isinstance(thread, str) else None
        total = breakdown(usage.get("total")) if isinstance(usage, Mapping) else None
        if total is not None and isinstance(thread, str):
            if thread not in self.totals and len(self.totals) >= MAX_THREADS:
                del self.totals[next(iter(self.totals))]  # a hostile server's thread ids stay bounded
            self.totals[thread] = total
        if self.current is None or params.get("turnId") != self.current.turn_id:
            self.rejected += 1
            return None
        if self.current.accepted == 0:
            self.current.thread_total = before
        return self.current, self.current.apply(usage)
