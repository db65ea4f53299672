"""Every built-in scenario, played by a plain-JSON client plan against the engine on a virtual clock:
its frames validate except what its faults declare, the server side of ``[expect]`` holds, and each
fault is observed on the wire or in the process."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import cache
from typing import Any

import orjson
import pytest
from support import paths
from support.plan import PlanRun, play

from contracts.faults import transport_problem
from contracts.messages import Message
from contracts.scenario import FAULT_KINDS
from contracts.scenario_file import ScenarioError
from contracts.validator import Validator
from contracts.wire import LineDecoder, WireError, WireErrorKind
from fake_server.catalogue import builtin_names, load_builtin, resolve

REQUIRED = [
    "plain",
    "plain_two_turns",
    "long_stream",
    "command_approval",
    "file_change_approval",
    "two_approvals",
    "running_command",
    "model_error",
    "stream_retry",
    "reasoning",
    "delayed_completion",
    "interrupt_ignored",
    "interrupt_pending_approval",
    "duplicated_usage",
    "crash_mid_turn",
    "crash_mid_line",
    "hang_alive",
    "stdout_closed",
    "grandchild_holds_stdout",
    "garbage_lines",
    "oversized_line",
    "stderr_flood",
    "late_events",
    "overload",
    "trace_unclosed_tool",
]


@cache
def played(name: str) -> tuple[PlanRun, list[Message], list[WireError]]:
    run = play(load_builtin(name))
    decoder = LineDecoder()
    items: list[Any] = []
    for out in run.server.out:
        payload = orjson.dumps(out.frame) if out.frame is not None else out.raw
        items += decoder.feed(payload if out.torn else payload + b"\n")  # the stdio wire of these messages
    items += decoder.feed_eof()
    return run, [i for i in items if not isinstance(i, WireError)], [i for i in items if isinstance(i, WireError)]


def frames(name: str) -> list[dict[str, Any]]:
    return [m.frame for m in played(name)[1]]


def methods(name: str) -> list[str]:
    return [f.get("method", "<response>") for f in frames(name)]


def test_catalogue_has_the_required_scenarios_each_with_a_one_line_description() -> None:
    names = builtin_names()
    assert set(REQUIRED) <= set(names)
    for name in names:
        s = load_builtin(name)
        assert s.description and "\n" not in s.description
        assert s.expect.turns, f"{name} declares no per-turn ground truth"


def test_every_fault_kind_appears_in_the_catalogue() -> None:
    used = {f.kind for name in builtin_names() for f in load_builtin(name).faults}
    # Request faults are declared on [[methods]] entries.
    used |= {o.fault.kind for name in builtin_names() for o in load_builtin(name).methods if o.fault is not None}
    assert used == set(FAULT_KINDS)


def test_resolve_names_paths_and_errors(tmp_path: Any) -> None:
    assert resolve(None).name == "plain"
    assert resolve("reasoning").name == "reasoning"
    copy = tmp_path / "mine.toml"
    copy.write_text((load_builtin("plain").source and open(load_builtin("plain").source).read()) or "")
    assert resolve(str(copy)).description == load_builtin("plain").description
    with pytest.raises(ScenarioError, match="built-in scenario name"):
        resolve("no_such_scenario")
    with pytest.raises(ScenarioError, match="readable"):
        resolve(str(tmp_path / "missing.toml"))


def _over_stdio(name: str) -> bool:
    return transport_problem({f.kind for f in load_builtin(name).faults}, "stdio") is None


@pytest.mark.parametrize("name", [n for n in builtin_names() if _over_stdio(n)])
def test_server_side_of_expect_holds(name: str) -> None:
    """Over stdio (the websocket scenarios' server side is judged in tests/unit/test_transport_ws.py)."""
    scenario = load_builtin(name)
    run = played(name)[0]
    expected = [t.server_status for t in scenario.expect.turns]
    assert run.server_statuses == expected
    if scenario.expect.server_exit is not None:
        assert run.server.exit_code == scenario.expect.server_exit


@pytest.mark.parametrize("name", builtin_names())
def test_frames_valid_except_declared(name: str) -> None:
    scenario = load_builtin(name)
    run, messages, wire_errors = played(name)
    validator = Validator.for_release("0.171.0", scenario.client.experimental_api)
    invalid = []
    for message in messages:
        frame = message.frame
        method = run.request_method(frame.get("id")) if "method" not in frame else None
        if validator.validate(frame, "s2c", request_method=method):
            invalid.append(frame.get("method") or method)
    declared_invalid = scenario.expect.allowance("schema", "server_frames_invalid")
    declared_wire = scenario.expect.allowance("schema", "wire_errors")
    assert len(invalid) == (declared_invalid.count if declared_invalid else 0), invalid
    assert len(wire_errors) == (declared_wire.count if declared_wire else 0), [w.describe() for w in wire_errors]


def _turn_completed(name: str) -> list[dict[str, Any]]:
    return [f for f in frames(name) if f.get("method") == "turn/completed"]


def _index(name: str, predicate: Callable[[dict[str, Any]], bool]) -> int:
    return next(i for i, f in enumerate(frames(name)) if predicate(f))


def _times(name: str) -> list[tuple[int, dict[str, Any]]]:
    return [(o.t_ms, o.frame) for o in played(name)[0].server.out if o.frame is not None]


def _interrupt_ids(name: str) -> list[Any]:
    return [rid for rid, m in played(name)[0].requests.items() if m == "turn/interrupt"]


def test_fault_crash_mid_turn() -> None:
    run = played("crash_mid_turn")[0]
    assert run.server.exit_code == 3 and run.server.crashed
    assert methods("crash_mid_turn").count("item/agentMessage/delta") == 2
    assert not _turn_completed("crash_mid_turn")


def test_fault_crash_mid_line() -> None:
    run, _, errors = played("crash_mid_line")
    assert run.server.exit_code == 2
    assert [e.kind for e in errors] == [WireErrorKind.TRUNCATED_AT_EOF]


def test_fault_hang_alive() -> None:
    run = played("hang_alive")[0]
    assert run.server.engine.hung and run.killed and run.server.exit_code == -9
    assert methods("hang_alive").count("item/agentMessage/delta") == 1


def test_fault_stdout_closed() -> None:
    run = played("stdout_closed")[0]
    assert run.server.stdout_closed and run.server.exit_code == 0
    assert methods("stdout_closed")[-1] == "turn/started"


def test_fault_grandchild_holds_stdout() -> None:
    assert played("grandchild_holds_stdout")[0].server.grandchild_hold_ms == 30000


@pytest.mark.parametrize(
    ("name", "kind", "count"),
    [
        ("garbage_lines", WireErrorKind.INVALID_JSON, 3),
        ("oversized_line", WireErrorKind.OVERSIZED_LINE, 1),
        ("invalid_utf8", WireErrorKind.INVALID_UTF8, 1),
    ],
)
def test_fault_bad_lines(name: str, kind: WireErrorKind, count: int) -> None:
    assert [e.kind for e in played(name)[2]] == [kind] * count


def test_fault_stderr_flood() -> None:
    assert sum(len(t) for t in played("stderr_flood")[0].server.stderr) >= 1024 * 1024


def test_fault_unknown_notification_and_request() -> None:
    assert methods("unknown_notification").count("x/unknownNotification") == 2
    requests = [f for f in frames("unknown_server_request") if f.get("method") == "x/unknownRequest"]
    assert len(requests) == 1 and "id" in requests[0]


def test_fault_late_events() -> None:
    found = methods("late_events")
    done = found.index("turn/completed")
    assert found[done + 1 :].count("item/agentMessage/delta") == 2


def test_fault_overload() -> None:
    first = frames("overload")[0]
    assert first["error"] == {"code": -32001, "message": "Server overloaded; retry later."}


def test_fault_duplicate_response_id() -> None:
    responses = [f["id"] for f in frames("duplicate_response_id") if "method" not in f]
    assert len(responses) == len(set(responses)) + 1


def test_fault_drop_turn_completed() -> None:
    assert not _turn_completed("drop_turn_completed")
    statuses = [
        f["params"]["status"]["type"]
        for f in frames("drop_turn_completed")
        if f.get("method") == "thread/status/changed"
    ]
    assert statuses[-1] == "idle"


def test_fault_delayed_completion() -> None:
    timed = _times("delayed_completion")
    last_item = max(t for t, f in timed if f.get("method") == "item/completed")
    completed = next(t for t, f in timed if f.get("method") == "turn/completed")
    assert completed - last_item >= 3000  # the scenario's delay_ms: more than "at once", less than the deadline


def test_fault_completion_after_interrupt() -> None:
    ids = _interrupt_ids("completion_after_interrupt")
    timed = _times("completion_after_interrupt")
    answered = next(t for t, f in timed if "method" not in f and f.get("id") in ids)
    completed = next(t for t, f in timed if f.get("method") == "turn/completed")
    assert completed - answered == 500


def test_fault_completion_never_after_interrupt() -> None:
    ids = _interrupt_ids("completion_never_after_interrupt")
    assert any("method" not in f and f.get("id") in ids for f in frames("completion_never_after_interrupt"))
    assert not _turn_completed("completion_never_after_interrupt")


def test_fault_interrupt_ignored() -> None:
    ids = _interrupt_ids("interrupt_ignored")
    assert ids and not any("method" not in f and f.get("id") in ids for f in frames("interrupt_ignored"))
    assert methods("interrupt_ignored").count("item/agentMessage/delta") > 3  # streaming went on


def test_fault_interrupt_answer_missing() -> None:
    ids = _interrupt_ids("interrupt_answer_missing")
    assert not any("method" not in f and f.get("id") in ids for f in frames("interrupt_answer_missing"))
    assert _turn_completed("interrupt_answer_missing")[0]["params"]["turn"]["status"] == "interrupted"


def test_interrupt_answer_precedes_turn_completed() -> None:
    ids = _interrupt_ids("long_stream")
    answered = _index("long_stream", lambda f: "method" not in f and f.get("id") in ids)
    assert answered < _index("long_stream", lambda f: f.get("method") == "turn/completed")


def test_fault_duplicated_usage() -> None:
    usage = [f for f in frames("duplicated_usage") if f.get("method") == "thread/tokenUsage/updated"]
    assert len(usage) == 3 and usage[0] == usage[1] == usage[2]


def test_fault_replay_usage() -> None:
    usage = [f["params"]["turnId"] for f in frames("replay_usage") if f.get("method") == "thread/tokenUsage/updated"]
    assert len(usage) == 3 and usage[2] == usage[0] != usage[1]


def test_fault_resolved_order() -> None:
    assert _index("resolved_before", lambda f: f.get("method") == "serverRequest/resolved") < _index(
        "resolved_before", lambda f: f.get("method") == "turn/completed"
    )
    assert _index("interrupt_pending_approval", lambda f: f.get("method") == "serverRequest/resolved") > _index(
        "interrupt_pending_approval", lambda f: f.get("method") == "turn/completed"
    )
    assert "serverRequest/resolved" not in methods("resolved_never")


def test_fault_trace_unclosed_tool() -> None:
    traces = played("trace_unclosed_tool")[0].server.traces
    pending = [t for t in traces if t.kind == "tool_pending_at_abort"]
    assert pending and pending[0].data["traced_end"] is False
    assert not any(t.kind == "tool_ended" for t in traces)


def test_pending_approval_interrupt_order_is_the_real_one() -> None:
    found = [m for m in methods("interrupt_pending_approval") if m != "account/rateLimits/updated"]
    start = found.index("item/commandExecution/requestApproval") + 1
    assert found[start:] == [
        "thread/tokenUsage/updated",
        "<response>",
        "thread/status/changed",
        "turn/completed",
        "serverRequest/resolved",
    ]


def test_a_large_message_is_a_small_file_read_and_written_back(tmp_path) -> None:
    """``repeat`` builds a 16 MiB agent message from a 16-byte text; writing the scenario back keeps it small."""
    import pytest

    from contracts.scenario_file import MAX_MESSAGE_BYTES, ScenarioError, dumps, load

    scenario = load_builtin("large_message_16mib")
    item = scenario.turns[0].responses[0].items[0]
    assert len(item.text) == 16 * 1024 * 1024 and item.deltas == (item.text,)
    text = dumps(scenario)
    assert len(text) < 4096
    path = tmp_path / "s.toml"
    path.write_text(text)
    assert dataclasses.replace(load(path), source=None) == dataclasses.replace(scenario, source=None)
    too_big = text.replace("repeat = 1048576", f"repeat = {MAX_MESSAGE_BYTES}")
    path.write_text(too_big)
    with pytest.raises(ScenarioError, match="repeat"):
        load(path)
    path.write_text(text.replace("chunks = 1", 'deltas = ["large frame 0123"]'))
    with pytest.raises(ScenarioError, match="deltas"):
        load(path)


#: Interrupt races recorded from the real binary (tests/data/real/0.171.0/interrupt_races/README.md).
RACES = paths.DATA / "real" / "0.171.0" / "interrupt_races" / "interrupt_races.jsonl"


def _recorded_races() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What 0.171.0 wrote, and its answers to turn/interrupt, in order."""
    entries = [orjson.loads(line) for line in RACES.read_bytes().splitlines() if line.strip()]
    sent = [e["msg"] for e in entries if e["dir"] == "s2c"]
    interrupts = {e["msg"]["id"] for e in entries if e["dir"] == "c2s" and e["msg"].get("method") == "turn/interrupt"}
    return sent, [f for f in sent if "method" not in f and f.get("id") in interrupts]


def _interrupt_answers(name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The server frames of ``name`` as the plan plays it, and among them the answers to turn/interrupt."""
    run = played(name)[0]
    sent = frames(name)
    return sent, [f for f in sent if "method" not in f and run.request_method(f.get("id")) == "turn/interrupt"]


def test_an_interrupt_of_a_finished_turn_is_refused_at_once_as_0171_answers_it() -> None:
    """0.171.0, observed (``record``): ``turn/interrupt`` naming the turn that just completed is answered at once
    with ``-32600 no active turn to interrupt``; the session carries on."""
    real_sent, real_answers = _recorded_races()
    real_completed = real_sent.index(next(f for f in real_sent if f.get("method") == "turn/completed"))
    assert real_sent.index(real_answers[0]) > real_completed  # the recording is the race
    sent, answers = _interrupt_answers("interrupt_after_completion")
    assert [a.get("error") for a in answers] == [real_answers[0]["error"]]
    completed = [i for i, f in enumerate(sent) if f.get("method") == "turn/completed"]
    assert len(completed) == 2 and completed[0] < sent.index(answers[0]) < completed[1]
    assert [f["params"]["turn"]["status"] for f in sent if f.get("method") == "turn/completed"] == ["completed"] * 2


def test_a_second_interrupt_while_the_first_lands_is_answered_with_it() -> None:
    """0.171.0, observed: two interrupts sent back to back are both answered ``{}`` when the abort lands, then
    idle and one ``turn/completed{interrupted}``; ``interrupt_delayed`` makes that window 500 ms on the fake."""
    real_sent, real_answers = _recorded_races()
    pair = real_answers[1:3]
    assert [a.get("result") for a in pair] == [{}, {}] and real_sent.index(pair[1]) == real_sent.index(pair[0]) + 1
    sent, answers = _interrupt_answers("interrupt_twice")
    assert [a.get("result") for a in answers] == [{}, {}]
    first = sent.index(answers[0])
    assert sent[first + 1] is answers[1]
    after = [f.get("method") for f in sent[first + 2 :] if f.get("method") != "account/rateLimits/updated"]
    assert after[:2] == ["thread/status/changed", "turn/completed"]
    ends = [f for f in sent if f.get("method") == "turn/completed"]
    assert len(ends) == 1 and ends[0]["params"]["turn"]["status"] == "interrupted"


def test_a_partial_line_then_silence_leaves_half_a_frame_and_nothing_after() -> None:
    """``partial_line``: the torn frame is the last thing the server writes; the reader sees it as a wire error."""
    run, _, errors = played("partial_line")
    assert run.server.out[-1].torn and len(errors) == 1
