"""Hand-made session records for the contract tests (and the round trip of a record through a directory).

``RecordBuilder`` writes schema-valid frames shaped like codex-cli 0.171.0's (see the shared real
transcripts); tests then break one thing at a time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contracts.expect import Allowance, Expect, ExpectTurn
from contracts.record import Budgets, SessionRecord, TeardownStep, TurnResult, WireEntry
from contracts.usage import UsageBuckets

THREAD = "thr-1"


def _turn(turn_id: str, status: str, error: Any = None) -> dict[str, Any]:
    return {
        "id": turn_id,
        "items": [],
        "itemsView": "notLoaded",
        "status": status,
        "error": error,
        "startedAt": None,
        "completedAt": None,
        "durationMs": None,
    }


def breakdown(inp: int, cached: int, out: int, reasoning: int = 0) -> dict[str, int]:
    return {
        "totalTokens": inp + out,
        "inputTokens": inp,
        "cachedInputTokens": cached,
        "cacheWriteInputTokens": 0,
        "outputTokens": out,
        "reasoningOutputTokens": reasoning,
    }


class RecordBuilder:
    def __init__(self, scenario: str = "hand_made", target: str = "fake") -> None:
        self.scenario, self.target = scenario, target
        self.wire: list[WireEntry] = []
        self.results: list[TurnResult] = []
        self.t = 0.0
        self.next_id = 0
        self.next_server_id = 0
        self.total = [0, 0, 0, 0]

    # --- raw ---------------------------------------------------------------------------------
    def at(self, dt: float = 0.001) -> float:
        self.t += dt
        return self.t

    def c2s(self, frame: dict[str, Any], dt: float = 0.001) -> RecordBuilder:
        self.wire.append(WireEntry(self.at(dt), "c2s", frame=frame))
        return self

    def s2c(self, frame: dict[str, Any], dt: float = 0.001) -> RecordBuilder:
        self.wire.append(WireEntry(self.at(dt), "s2c", frame=frame))
        return self

    def note(self, text: str, dt: float = 0.001) -> RecordBuilder:
        self.wire.append(WireEntry(self.at(dt), "note", note=text))
        return self

    def garbage(self, text: str = "this is not JSON", dt: float = 0.001) -> RecordBuilder:
        self.wire.append(WireEntry(self.at(dt), "s2c", error="not_json", raw=text, size=len(text)))
        return self

    def request(self, method: str, params: dict[str, Any], dt: float = 0.001) -> int:
        rid = self.next_id
        self.next_id += 1
        self.c2s({"id": rid, "method": method, "params": params}, dt)
        return rid

    def notify(self, method: str, params: dict[str, Any], dt: float = 0.001) -> RecordBuilder:
        return self.s2c({"method": method, "params": params, "emittedAtMs": 1796022741708}, dt)

    # --- turn pieces ----------------------------------------------------------------------------
    def start_turn(self, index: int) -> tuple[str, float]:
        turn_id = f"turn-{index + 1}"
        started = self.t + 0.001
        rid = self.request("turn/start", {"threadId": THREAD, "input": [{"type": "text", "text": "Say hello"}]})
        self.s2c({"id": rid, "result": {"turn": _turn(turn_id, "inProgress")}})
        self.notify("thread/status/changed", {"threadId": THREAD, "status": {"type": "active", "activeFlags": []}})
        self.notify("turn/started", {"threadId": THREAD, "turn": _turn(turn_id, "inProgress")})
        return turn_id, started

    def delta(self, turn_id: str, text: str = "Hello", dt: float = 0.001) -> RecordBuilder:
        return self.notify(
            "item/agentMessage/delta", {"threadId": THREAD, "turnId": turn_id, "itemId": "msg-1", "delta": text}, dt
        )

    def usage(self, turn_id: str, inp: int, cached: int, out: int, reasoning: int = 0) -> RecordBuilder:
        self.total = [self.total[0] + inp, self.total[1] + cached, self.total[2] + out, self.total[3] + reasoning]
        return self.raw_usage(turn_id, breakdown(inp, cached, out, reasoning), breakdown(*self.total))

    def raw_usage(self, turn_id: str, last: dict[str, int], total: dict[str, int]) -> RecordBuilder:
        token_usage = {"total": total, "last": last, "modelContextWindow": 258400}
        return self.notify(
            "thread/tokenUsage/updated", {"threadId": THREAD, "turnId": turn_id, "tokenUsage": token_usage}
        )

    def complete(self, turn_id: str, status: str = "completed", dt: float = 0.001) -> RecordBuilder:
        self.notify("thread/status/changed", {"threadId": THREAD, "status": {"type": "idle"}}, dt)
        return self.notify("turn/completed", {"threadId": THREAD, "turn": _turn(turn_id, status)})

    def approval(self, turn_id: str) -> int:
        rid = self.next_server_id
        self.next_server_id += 1
        params = {
            "threadId": THREAD,
            "turnId": turn_id,
            "itemId": f"call_{rid}",
            "startedAtMs": 1796022749906,
            "command": "/bin/bash -lc true",
            "cwd": "/tmp",
            "reason": "The model wants to run this command",
        }
        self.s2c({"id": rid, "method": "item/commandExecution/requestApproval", "params": params})
        return rid

    def answer(self, rid: int, decision: str = "accept", dt: float = 0.001) -> RecordBuilder:
        return self.c2s({"id": rid, "result": {"decision": decision}}, dt)

    def resolved(self, rid: int, dt: float = 0.001) -> RecordBuilder:
        return self.notify("serverRequest/resolved", {"threadId": THREAD, "requestId": rid}, dt)

    def result(self, index: int, status: str, turn_id: str | None, started: float, **kw: Any) -> TurnResult:
        result = TurnResult(
            index=index,
            status=status,  # type: ignore[arg-type]
            thread_id=THREAD,
            turn_id=turn_id,
            started_at=started,
            ended_at=self.t,
            completed_consumed=kw.pop("completed_consumed", 1),
            server_status=kw.pop("server_status", None),
            **kw,
        )
        self.results.append(result)
        return result

    def build(self, expect: Expect, **kw: Any) -> SessionRecord:
        return SessionRecord(self.scenario, self.target, expect, wire=list(self.wire), results=list(self.results), **kw)


PLAIN_USAGE = UsageBuckets(input=60, cache_read=40, cache_write=0, output=20)


def plain_record(turns: int = 1) -> SessionRecord:
    """A healthy plain session: each turn streams, reports usage 100/40/20 and completes."""
    b = RecordBuilder("plain")
    for i in range(turns):
        turn_id, started = b.start_turn(i)
        b.delta(turn_id, "Hello ").delta(turn_id, "world")
        b.usage(turn_id, 100, 40, 20)
        b.complete(turn_id)
        usage = {"mock-model": PLAIN_USAGE}
        b.result(i, "completed", turn_id, started, usage=usage, server_status="completed", final_text="Hello world")
    b.note("stdin closed")
    expect = Expect(turns=tuple(ExpectTurn("completed", PLAIN_USAGE, "completed") for _ in range(turns)))
    return b.build(expect, teardown=[TeardownStep("close_stdin", b.t, b.t + 0.01, "done")])


def interrupted_record(answer_first: bool = True, server_delay: float = 0.010) -> SessionRecord:
    """A streaming turn cancelled by the client; the server honours the interrupt."""
    b = RecordBuilder("long_stream")
    turn_id, started = b.start_turn(0)
    b.delta(turn_id)
    cancel_at = b.at(0.1)
    rid = b.request("turn/interrupt", {"threadId": THREAD, "turnId": turn_id}, dt=0.0005)
    sent = b.t
    b.usage(turn_id, 100, 40, 20)
    if answer_first:
        b.s2c({"id": rid, "result": {}}, dt=server_delay / 2)
        b.complete(turn_id, "interrupted", dt=server_delay / 2)
    else:
        b.complete(turn_id, "interrupted", dt=server_delay / 2)
        b.s2c({"id": rid, "result": {}}, dt=server_delay / 2)
    completed = b.t
    b.at(0.0005)
    b.result(
        0,
        "aborted",
        turn_id,
        started,
        usage={"mock-model": PLAIN_USAGE},
        server_status="interrupted",
        cancel_at=cancel_at,
        interrupt_sent_at=sent,
        interrupt_answered_at=completed,
        turn_completed_at=completed,
    )
    b.note("stdin closed")
    log = [{"t": completed, "level": "info", "msg": "codex turn interrupted", "turn_id": turn_id, "latency": 0.012}]
    return b.build(Expect(turns=(ExpectTurn("aborted", PLAIN_USAGE, "interrupted"),)), budgets=Budgets(), log=log)


def approval_record(answer: bool = True) -> SessionRecord:
    b = RecordBuilder("command_approval")
    turn_id, started = b.start_turn(0)
    rid = b.approval(turn_id)
    if answer:
        b.answer(rid)
        b.resolved(rid)
    b.usage(turn_id, 100, 40, 20)
    b.complete(turn_id)
    b.result(0, "completed", turn_id, started, usage={"mock-model": PLAIN_USAGE}, server_status="completed")
    return b.build(Expect(turns=(ExpectTurn("completed", PLAIN_USAGE),)))


def allow(contract: str, what: str, count: int | None = None) -> Allowance:
    return Allowance(contract, what, count, "declared by the test")


# --- the record round trip ----------------------------------------------------------------------


def test_record_round_trips_through_a_directory(tmp_path: Path) -> None:
    record = interrupted_record()
    record.save(tmp_path / "rec")
    loaded = SessionRecord.load(tmp_path / "rec")
    assert loaded.expect == record.expect
    assert [e.to_json() for e in loaded.wire] == [e.to_json() for e in record.wire]
    assert [r.to_json() for r in loaded.results] == [r.to_json() for r in record.results]


def test_builder_frames_are_schema_valid() -> None:
    from contracts.checks import schema

    for record in (plain_record(2), interrupted_record(), approval_record()):
        assert {c.status for c in schema.check(record)} == {"pass"}, schema.check(record)


def test_a_saved_record_keeps_an_over_long_string_as_head_tail_length_and_hash(tmp_path: Path) -> None:
    import hashlib

    from contracts.clip import KEEP, MAX_SAVED_STRING

    record = plain_record()
    huge = "a" * KEEP + "b" * (4 * MAX_SAVED_STRING) + "z" * KEEP
    delta = {"method": "item/agentMessage/delta", "params": {"delta": huge}}
    record.wire.append(WireEntry(t=1.0, dir="s2c", frame=delta))
    record.results[0].final_text = huge
    saved = record.save(tmp_path / "rec")
    assert (saved / "wire.jsonl").stat().st_size < 64 * 1024  # not the 1 MiB string
    assert (saved / "record.json").stat().st_size < 64 * 1024
    body = (saved / "record.json").read_text()
    assert '"cut_strings"' in body and f'"chars": {2 * len(huge)}' in body
    back = SessionRecord.load(saved)
    kept = back.wire[-1].frame["params"]["delta"]  # type: ignore[index]
    digest = hashlib.sha256(huge.encode()).hexdigest()
    assert kept.startswith("a" * KEEP) and kept.endswith("z" * KEEP)
    assert f"cut {len(huge)} chars, sha256 {digest}" in kept
    assert [e.frame for e in back.wire[:-1]] == [e.frame for e in record.wire[:-1]]  # the rest whole
