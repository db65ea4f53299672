"""The trace writer: ordering, consumed handles, context-manager ends, faults, rotation, round trip, prefixes."""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contracts.trace.closure import check_bundle
from contracts.trace.errors import WindowAlreadyEnded, WriterClosed
from contracts.trace.reader import read_bundle
from contracts.trace.writer import TraceWriter


def counter_clock(start: int = 1_000_000) -> itertools.count[int]:
    return itertools.count(start)


def make_writer(path: Path, **kw: object) -> TraceWriter:
    clock = counter_clock()
    return TraceWriter(path, rollout_id="thread-root", now_ms=lambda: next(clock), **kw)  # type: ignore[arg-type]


def test_manifest_and_sequence(tmp_path: Path) -> None:
    w = make_writer(tmp_path / "b")
    thread = w.start_thread("thread-root")
    turn = thread.start_turn("turn-1")
    turn.start_tool_call("call_1").complete({"ok": True})
    turn.end()
    w.complete()
    trace = read_bundle(tmp_path / "b")
    assert trace.manifest["schema_version"] == 3
    assert trace.manifest["rollout_id"] == "thread-root"
    assert trace.recording_status == "complete" and trace.status == "completed"
    assert trace.shards[1].finished and trace.shards[1].has_checksum
    assert check_bundle(tmp_path / "b").verdict == "closed"


def test_create_names_the_bundle_like_the_real_binary(tmp_path: Path) -> None:
    w = TraceWriter.create(tmp_path, rollout_id="r1", trace_id="t1")
    w.complete()
    assert w.path == tmp_path / "trace-t1-r1"
    assert check_bundle(w.path).verdict == "closed"


def test_second_end_raises(tmp_path: Path) -> None:
    w = make_writer(tmp_path / "b")
    thread = w.start_thread("thread-root")
    turn = thread.start_turn("turn-1")
    tool = turn.start_tool_call("call_1")
    tool.complete()
    with pytest.raises(WindowAlreadyEnded):
        tool.fail()
    with pytest.raises(WindowAlreadyEnded):
        tool.abort()
    inference = turn.start_inference("inf-1")
    inference.complete(response_id="r")
    with pytest.raises(WindowAlreadyEnded):
        inference.cancel()
    turn.end()
    with pytest.raises(WindowAlreadyEnded):
        turn.end("failed")
    w.complete()
    with pytest.raises(WindowAlreadyEnded):
        thread.end()
    assert check_bundle(w.path).verdict == "closed"


def test_context_exit_without_end_records_aborted(tmp_path: Path) -> None:
    w = make_writer(tmp_path / "b")
    with w.start_thread("thread-root") as thread:
        with thread.start_turn("turn-1") as turn:
            with turn.start_tool_call("call_1"):
                pass
            with pytest.raises(RuntimeError), turn.start_tool_call("call_2"):
                raise RuntimeError("dispatch future dropped")
            with turn.start_inference("inf-1"):
                pass
    w.complete()
    trace = read_bundle(w.path)
    assert trace.tool_calls["call_1"].status == "aborted"
    assert trace.tool_calls["call_2"].status == "aborted"
    assert trace.inference_calls["inf-1"].status == "cancelled"
    assert trace.codex_turns["turn-1"].status == "aborted"
    assert trace.threads["thread-root"].status == "aborted"
    assert all(not m.has_result_payload for m in trace.tool_calls["call_1"].ends)
    assert check_bundle(w.path).verdict == "closed"


def test_complete_closes_what_is_open_like_a_graceful_shutdown(tmp_path: Path) -> None:
    w = make_writer(tmp_path / "b")
    thread = w.start_thread("thread-root")
    turn = thread.start_turn("turn-1")
    turn.start_tool_call("call_1")  # awaiting approval when the server shuts down
    w.complete()
    trace = read_bundle(w.path)
    assert trace.tool_calls["call_1"].status == "aborted"
    assert trace.codex_turns["turn-1"].status == "cancelled"
    assert trace.tool_calls["call_1"].ended_seq < trace.codex_turns["turn-1"].ended_seq  # type: ignore[operator]
    assert [e.event_type for e in trace.protocol_events] == ["turn_aborted", "shutdown_complete"]
    assert check_bundle(w.path).verdict == "closed"


def test_leaked_tool_reproduces_the_pre_fix_bug(tmp_path: Path) -> None:
    """The fake's `trace_unclosed_tool` fault: approval pending, turn interrupted, no tool_call_ended."""
    w = make_writer(tmp_path / "b")
    thread = w.start_thread("thread-root")
    turn = thread.start_turn("turn-1")
    tool = turn.start_tool_call("call_1")
    tool.leak()
    turn.interrupt()
    w.complete()
    with pytest.raises(WindowAlreadyEnded):
        tool.abort()
    verdict = check_bundle(w.path)
    assert verdict.recording_status == "complete"
    assert verdict.verdict == "violation"
    assert {(p.kind, p.id) for p in verdict.problems} == {("tool_call", "call_1")}


def test_leaked_runtime_stays_open_after_its_call_ends(tmp_path: Path) -> None:
    """What 0.171.0 writes for a cancelled patch: the call ends ``aborted``, its runtime never ends."""
    w = make_writer(tmp_path / "b")
    thread = w.start_thread("thread-root")
    turn = thread.start_turn("turn-1")
    tool = turn.start_tool_call("call_1", tool_name="apply_patch")
    runtime = tool.start_runtime(kind="apply_patch")
    runtime.leak()
    tool.abort()
    turn.end("completed")
    w.complete()
    assert runtime.ended
    with pytest.raises(WindowAlreadyEnded):
        runtime.end("completed")
    verdict = check_bundle(w.path)
    assert verdict.recording_status == "complete"
    assert verdict.verdict == "violation"
    assert [p.id for p in verdict.problems] == ["call_1"]
    assert "tool_call" not in {p.kind for p in verdict.problems}


def test_abandon_leaves_a_readable_unclosed_prefix(tmp_path: Path) -> None:
    w = make_writer(tmp_path / "b")
    thread = w.start_thread("thread-root")
    turn = thread.start_turn("turn-1")
    turn.start_tool_call("call_1", arguments={"cmd": "touch x"})
    w.abandon()
    with pytest.raises(WriterClosed):
        turn.end()
    verdict = check_bundle(w.path)
    assert verdict.verdict == "unclosed"
    assert verdict.trace is not None and not verdict.trace.shards[1].finished
    assert verdict.trace.tool_calls["call_1"].status == "running"


def test_rotation_writes_several_finished_shards(tmp_path: Path) -> None:
    w = make_writer(tmp_path / "b", shard_max_bytes=200)
    thread = w.start_thread("thread-root")
    turn = thread.start_turn("turn-1")
    for i in range(20):
        turn.start_tool_call(f"call_{i}", arguments={"blob": "x" * 300 + str(i)}).complete({"out": str(i) * 50})
    turn.end()
    w.complete()
    trace = read_bundle(w.path)
    assert len(trace.shards) > 5
    assert all(s.finished and s.has_checksum for s in trace.shards.values())
    assert check_bundle(w.path).verdict == "closed"


def test_wall_time_never_decreases_with_a_clock_going_backwards(tmp_path: Path) -> None:
    times = iter([5000, 4000, 6000, 1000, 1000, 7000] + [7000] * 50)
    w = TraceWriter(tmp_path / "b", rollout_id="r", now_ms=lambda: next(times))
    thread = w.start_thread("r")
    thread.start_turn("t").end()
    w.complete()
    walls = [e for e in (tmp_path / "b" / "trace.jsonl").read_text().splitlines()]
    import json

    values = [json.loads(line)["wall_time_unix_ms"] for line in walls]
    assert values == sorted(values)
    assert check_bundle(w.path).verdict == "closed"


def test_concurrent_writers_share_one_sequence(tmp_path: Path) -> None:
    w = TraceWriter(tmp_path / "b", rollout_id="r")
    thread = w.start_thread("r")
    turn = thread.start_turn("t")

    def worker(n: int) -> None:
        for i in range(50):
            with turn.start_tool_call(f"call_{n}_{i}") as tool:
                tool.complete({"n": n, "i": i})

    workers = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(timeout=30)
    turn.end()
    w.complete()
    trace = read_bundle(w.path)
    assert len(trace.tool_calls) == 200
    assert check_bundle(w.path).verdict == "closed"


async def test_deterministic_under_trio_mock_clock(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    async def write(path: Path) -> bytes:
        w = TraceWriter(path, rollout_id="r", trace_id="t", now_ms=lambda: int(trio.current_time() * 1000))
        thread = w.start_thread("r")
        turn = thread.start_turn("turn")

        async def tool(n: int) -> None:
            with turn.start_tool_call(f"call_{n}") as call:
                await trio.sleep(n * 0.5)
                call.complete({"n": n})

        async with trio.open_nursery() as nursery:
            for n in range(3):
                nursery.start_soon(tool, n)
        turn.end()
        w.complete()
        return (path / "trace.jsonl").read_bytes()

    await write(tmp_path / "a")
    assert check_bundle(tmp_path / "a").verdict == "closed"
    trace = read_bundle(tmp_path / "a")
    ends = {t.id: t.ended_at_unix_ms - t.started_at_unix_ms for t in trace.tool_calls.values()}  # type: ignore[operator]
    assert ends == {"call_0": 0, "call_1": 500, "call_2": 1000}


# -- generated window trees ---------------------------------------------------------------------------
INFERENCE_ENDS = ("complete", "fail", "cancel", "open", "ctx_exit")
TOOL_ENDS = ("complete", "fail", "abort", "ctx_exit")
TURN_ENDS = ("completed", "failed", "interrupt", "ctx_exit")

action = st.one_of(
    st.tuples(st.just("inference"), st.sampled_from(INFERENCE_ENDS), st.just(False)),
    st.tuples(st.just("tool"), st.sampled_from(TOOL_ENDS), st.booleans()),
)
turn_spec = st.tuples(st.lists(action, max_size=5), st.sampled_from(TURN_ENDS))
tree = st.lists(st.lists(turn_spec, max_size=3), min_size=1, max_size=2)  # threads of turns


@dataclass
class Recorded:
    statuses: dict[tuple[str, str], str] = field(default_factory=dict)
    snapshots: list[tuple[int, dict[int, int]]] = field(default_factory=list)


def write_tree(path: Path, threads: list[list[tuple[list[tuple[str, str, bool]], str]]], **kw: object) -> Recorded:
    rec = Recorded()
    clock = counter_clock()

    def snapshot(seq: int) -> None:
        shards = {int(p.stem): p.stat().st_size for p in (path / "payloads").glob("*.zst")}
        rec.snapshots.append(((path / "trace.jsonl").stat().st_size, shards))

    w = TraceWriter(path, rollout_id="t0", now_ms=lambda: next(clock), on_event=snapshot, **kw)  # type: ignore[arg-type]
    ids = itertools.count()
    for n, turns in enumerate(threads):
        thread_id = "t0" if n == 0 else f"t{n}"
        thread = w.start_thread(thread_id, agent_path="/root" if n == 0 else f"/root/child{n}")
        rec.statuses[("thread", thread_id)] = "completed"
        for actions, turn_end in turns:
            turn_id = f"turn{next(ids)}"
            with thread.start_turn(turn_id) as turn:
                for kind, end, runtime in actions:
                    wid = f"{kind}{next(ids)}"
                    if kind == "inference" and end == "open":
                        turn.start_inference(wid)  # left open: its turn's end closes it (cancelled)
                        rec.statuses[("inference_call", wid)] = "cancelled"
                    elif kind == "inference":
                        with turn.start_inference(wid) as inf:
                            if end == "complete":
                                inf.complete(response_id=f"resp-{wid}")
                            elif end == "fail":
                                inf.fail("boom")
                            elif end == "cancel":
                                inf.cancel("user")
                        status = {"complete": "completed", "fail": "failed"}.get(end, "cancelled")
                        rec.statuses[("inference_call", wid)] = status
                    else:
                        with turn.start_tool_call(wid, arguments={"n": wid}) as tool:
                            if runtime:
                                tool.start_runtime().end("completed")
                                rec.statuses[("terminal_operation", wid)] = "completed"
                            if end == "complete":
                                tool.complete({"out": wid})
                            elif end == "fail":
                                tool.fail({"err": wid})
                            elif end == "abort":
                                tool.abort()
                        rec.statuses[("tool_call", wid)] = {"complete": "completed", "fail": "failed"}.get(
                            end, "aborted"
                        )
                if turn_end == "interrupt":
                    turn.interrupt()
                elif turn_end != "ctx_exit":
                    turn.end(turn_end)
                rec.statuses[("codex_turn", turn_id)] = {"interrupt": "cancelled", "ctx_exit": "aborted"}.get(
                    turn_end, turn_end
                )
    w.complete()
    return rec


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(threads=tree, shard_max=st.sampled_from([64, 1024, 1 << 20]))
def test_writer_round_trips_through_the_reader(tmp_path_factory: pytest.TempPathFactory, threads, shard_max) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("rt") / "bundle"
    rec = write_tree(path, threads, shard_max_bytes=shard_max)
    verdict = check_bundle(path)
    assert verdict.verdict == "closed", verdict.to_json()
    assert verdict.trace is not None
    got = {(w.kind, w.id): w.status for w in verdict.trace.windows()}
    assert got == rec.statuses
    for w in verdict.trace.windows():
        assert w.ended_seq is not None and w.ended_seq > w.started_seq


def _cut(path: Path, dest: Path, snapshot: tuple[int, dict[int, int]]) -> None:
    import shutil

    shutil.copytree(path, dest)
    log_size, shards = snapshot
    with open(dest / "trace.jsonl", "r+b") as f:
        f.truncate(log_size)
    for shard in (dest / "payloads").glob("*.zst"):
        n = int(shard.stem)
        if n not in shards:
            shard.unlink()
        else:
            with open(shard, "r+b") as f:
                f.truncate(shards[n])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(threads=tree, shard_max=st.sampled_from([64, 1 << 20]), data=st.data())
def test_every_prefix_a_killed_writer_leaves_reads_as_unclosed(  # type: ignore[no-untyped-def]
    tmp_path_factory: pytest.TempPathFactory, threads, shard_max, data
) -> None:
    base = tmp_path_factory.mktemp("prefix")
    rec = write_tree(base / "full", threads, shard_max_bytes=shard_max)
    # every whole-line prefix before recording_completed, cut where the writer stood after that line
    cuts = data.draw(st.lists(st.integers(0, len(rec.snapshots) - 2), min_size=1, max_size=6, unique=True))
    for k in cuts:
        dest = base / f"cut{k}"
        _cut(base / "full", dest, rec.snapshots[k])
        verdict = check_bundle(dest)
        # the writer shards its payloads: only recording_completed closes such a bundle, rollout_ended before it
        # does not (the sharded writer's own reducer calls that recording unclosed)
        assert verdict.verdict == "unclosed", (k, verdict.to_json())
    assert check_bundle(base / "full").verdict == "closed"


def test_resumed_thread_needs_a_new_end(tmp_path: Path) -> None:
    w = make_writer(tmp_path / "b")
    thread = w.start_thread("thread-root")
    with pytest.raises(ValueError):
        w.resume_thread("thread-root")  # not ended yet
    thread.start_turn("t1").end()
    thread.end()
    resumed = w.resume_thread("thread-root")
    resumed.start_turn("t2").end()
    w.abandon()
    verdict = check_bundle(w.path)
    assert verdict.verdict == "unclosed"
    assert verdict.trace is not None and verdict.trace.threads["thread-root"].status == "running"
    w2 = make_writer(tmp_path / "c")
    t = w2.start_thread("thread-root")
    t.end()
    w2.resume_thread("thread-root")
    w2.complete()  # ends the resumed thread once more
    verdict = check_bundle(w2.path)
    assert verdict.verdict == "closed", verdict.to_json()
    assert verdict.trace is not None and verdict.trace.threads["thread-root"].started_seq == 2


def test_compaction_and_code_cell_windows(tmp_path: Path) -> None:
    from contracts.trace.writer import Payload

    w = make_writer(tmp_path / "b")
    thread = w.start_thread("thread-root")
    turn = thread.start_turn("t1")
    ctx = {"thread_id": "thread-root", "codex_turn_id": "t1"}
    w.emit_raw(
        {
            "type": "compaction_request_started",
            "compaction_id": "c1",
            "compaction_request_id": "cr1",
            "thread_id": "thread-root",
            "codex_turn_id": "t1",
            "model": "m",
            "provider_name": "p",
        },
        payloads={"request_payload": Payload("compaction_request", {"input": []})},
        **ctx,
    )
    w.emit_raw(
        {"type": "code_cell_started", "runtime_cell_id": "cell1", "model_visible_call_id": "v", "source_js": "1"}, **ctx
    )
    w.emit_raw({"type": "code_cell_ended", "runtime_cell_id": "cell1", "status": "completed"}, **ctx)
    for _ in range(2):  # a double end the reducer would let pass
        w.emit_raw(
            {"type": "compaction_request_completed", "compaction_id": "c1", "compaction_request_id": "cr1"},
            payloads={"response_payload": Payload("compaction_response", {"output": []})},
            **ctx,
        )
    turn.end()
    w.complete()
    verdict = check_bundle(w.path)
    assert verdict.trace is not None
    assert verdict.trace.code_cells["cell1"].status == "completed"
    assert verdict.trace.compaction_requests["cr1"].status == "completed"
    assert verdict.verdict == "violation"
    assert [(p.kind, p.id, p.invariant) for p in verdict.problems] == [("compaction_request", "cr1", 3)]
