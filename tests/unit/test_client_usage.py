"""Usage accounting (docs/client-rules.md §4): worked examples and hypothesis properties."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from codex_client.usage import TurnUsage, UsageLedger, breakdown
from contracts.usage import UsageBuckets

FIELDS = ("inputTokens", "cachedInputTokens", "cacheWriteInputTokens", "outputTokens", "reasoningOutputTokens")


def bd(inp: int, cached: int, out: int, write: int = 0, reasoning: int = 0) -> dict[str, int]:
    return {
        "totalTokens": inp + out,
        "inputTokens": inp,
        "cachedInputTokens": cached,
        "cacheWriteInputTokens": write,
        "outputTokens": out,
        "reasoningOutputTokens": reasoning,
    }


def update(turn_id: str, last: dict[str, int], total: dict[str, int]) -> dict[str, Any]:
    return {"threadId": "thr", "turnId": turn_id, "tokenUsage": {"last": last, "total": total}}


def test_plain_turn_two_charges_last_not_total() -> None:
    ledger = UsageLedger()
    usage = ledger.turn_started("t2")
    ledger.update(update("t2", bd(150, 100, 10), bd(250, 140, 30)))
    assert usage.buckets() == UsageBuckets(input=50, cache_read=100, cache_write=0, output=10)


def test_tool_round_trip_and_duplicate() -> None:
    ledger = UsageLedger()
    usage = ledger.turn_started("t1")
    ledger.update(update("t1", bd(100, 40, 20), bd(100, 40, 20)))
    ledger.update(update("t1", bd(100, 40, 20), bd(200, 80, 40)))
    ledger.update(update("t1", bd(100, 40, 20), bd(200, 80, 40)))  # duplicate
    assert usage.buckets() == UsageBuckets(input=120, cache_read=80, output=40)


def test_go_client_examples() -> None:
    usage = TurnUsage("t")
    usage.apply({"last": bd(100, 30, 10), "total": bd(100, 30, 10)})
    assert usage.buckets() == UsageBuckets(input=70, cache_read=30, output=10)
    fallback = TurnUsage("t")
    assert fallback.apply_completion_usage(
        {"input_tokens": 1000, "cached_input_tokens": 300, "output_tokens": 40, "reasoning_output_tokens": 10}
    )
    assert fallback.buckets() == UsageBuckets(input=700, cache_read=300, output=40, reasoning=10)


def test_cache_write_and_reasoning_buckets() -> None:
    usage = TurnUsage("t")
    usage.apply({"last": bd(100, 30, 50, write=20, reasoning=15), "total": bd(100, 30, 50, write=20, reasoning=15)})
    assert usage.buckets() == UsageBuckets(input=50, cache_read=30, cache_write=20, output=50, reasoning=15)
    assert usage.by_model(None) == {"unknown": usage.buckets()}
    assert TurnUsage("z").by_model("m") == {}


def test_replays_and_other_turns_are_rejected_late_usage_counts() -> None:
    ledger = UsageLedger()
    first = ledger.turn_started("t1")
    ledger.update(update("t1", bd(10, 0, 1), bd(10, 0, 1)))
    second = ledger.turn_started("t2")
    assert ledger.update(update("t1", bd(10, 0, 1), bd(10, 0, 1))) is None  # replay of turn 1
    assert ledger.update({"threadId": "thr", "tokenUsage": {}}) is None  # no turn id
    ledger.update(update("t2", bd(5, 0, 2), bd(15, 0, 3)))  # late, after t2's completion: still t2's
    assert first.buckets() == UsageBuckets(input=10, output=1)
    assert second.buckets() == UsageBuckets(input=5, output=2)
    assert ledger.rejected == 2


def test_counter_reset_counts_the_new_value() -> None:
    usage = TurnUsage("t")
    usage.apply({"last": bd(100, 0, 10), "total": bd(500, 0, 50)})
    usage.apply({"last": bd(30, 0, 5), "total": bd(30, 0, 60)})  # input went down: compaction reset
    assert usage.buckets() == UsageBuckets(input=130, output=20)


def test_bad_values_count_as_zero() -> None:
    assert breakdown({"inputTokens": -5, "outputTokens": True, "cachedInputTokens": "x"}) == {
        "totalTokens": 0,
        "inputTokens": 0,
        "cachedInputTokens": 0,
        "cacheWriteInputTokens": 0,
        "outputTokens": 0,
        "reasoningOutputTokens": 0,
    }
    usage = TurnUsage("t")
    usage.apply("garbage")
    usage.apply({"last": None, "total": None})
    assert usage.buckets() == UsageBuckets()


responses = st.lists(
    st.tuples(
        st.integers(0, 5000),  # input
        st.integers(0, 5000),  # cached (clipped to input)
        st.integers(0, 3000),  # output
        st.integers(0, 500),  # cache write (clipped)
        st.integers(0, 3000),  # reasoning (clipped to output)
    ),
    min_size=1,
    max_size=8,
)


def _normalise(resp: tuple[int, int, int, int, int]) -> dict[str, int]:
    inp, cached, out, write, reasoning = resp
    cached = min(cached, inp)
    write = min(write, inp - cached)
    return bd(inp, cached, out, write=write, reasoning=min(reasoning, out))


@settings(max_examples=150, deadline=None)
@given(
    earlier=st.lists(responses, max_size=3),
    turn=responses,
    duplicates=st.lists(st.integers(0, 3), min_size=8, max_size=8),
    replays=st.lists(st.booleans(), min_size=8, max_size=8),
)
def test_turn_usage_is_the_sum_of_its_responses(
    earlier: list[list[tuple[int, ...]]], turn: list[tuple[int, ...]], duplicates: list[int], replays: list[bool]
) -> None:
    """Whatever the thread did before, duplicates and replays: the turn is charged its own responses once."""
    ledger = UsageLedger()
    total = {f: 0 for f in (*FIELDS, "totalTokens")}
    earlier_updates: list[dict[str, Any]] = []
    for n, responses_of_turn in enumerate(earlier):
        ledger.turn_started(f"old{n}")
        for resp in responses_of_turn:
            last = _normalise(resp)  # type: ignore[arg-type]
            total = {k: total[k] + last[k] for k in total}
            earlier_updates.append(update(f"old{n}", last, dict(total)))
            ledger.update(earlier_updates[-1])
    current = ledger.turn_started("now")
    expected = {k: 0 for k in total}
    for i, resp in enumerate(turn):
        last = _normalise(resp)  # type: ignore[arg-type]
        total = {k: total[k] + last[k] for k in total}
        expected = {k: expected[k] + last[k] for k in expected}
        message = update("now", last, dict(total))
        for _ in range(1 + duplicates[i]):
            ledger.update(message)
        if replays[i] and earlier_updates:
            ledger.update(earlier_updates[i % len(earlier_updates)])
    assert current.buckets() == UsageBuckets.from_breakdown(expected)
    buckets = current.buckets()
    assert buckets.input + buckets.cache_read + buckets.cache_write == expected["inputTokens"]
    assert buckets.output == expected["outputTokens"]  # reasoning is inside output, never added


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), min_size=1, max_size=10))
def test_contributions_are_never_negative(totals: list[tuple[int, int]]) -> None:
    usage = TurnUsage("t")
    for inp, out in totals:
        added = usage.apply({"last": bd(inp, 0, out), "total": bd(inp, 0, out)})
        assert all(value >= 0 for value in added.values())
