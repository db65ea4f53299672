"""The sans-IO engine on a virtual clock: errors as the real server words them, busy-turn folding and
steer, resume, opt-out and experimental gating, server request ids, and no input crashes it."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from support.virtual import VirtualServer

from fake_server.builder import command, message, response, scenario, turn, usage
from fake_server.catalogue import load_builtin
from fake_server.effects import Send, Wake
from fake_server.engine import Engine
from fake_server.profiles import default as default_profile

INIT = {"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}}
SLOW = scenario(
    "slow",
    "a slow stream",
    turn(response(message("abcdefghij", chunks=10, delay_ms=100), usage=usage(100, 40, 20))),
    turn(response(message("second", chunks=2), usage=usage(10, 0, 5))),
)


def session(s: Any = None, init: dict[str, Any] | None = None) -> tuple[VirtualServer, str]:
    server = VirtualServer(s or load_builtin("plain"))
    server.send(init or INIT)
    server.send({"id": 1, "method": "thread/start", "params": {}})
    thread_id = next(f for f in server.frames if f.get("id") == 1)["result"]["thread"]["id"]
    return server, thread_id


def answer(server: VirtualServer, rid: Any) -> dict[str, Any]:
    found = server.run_until(lambda f: "method" not in f and f.get("id") == rid, within_ms=1000)
    assert found is not None, rid
    return found


def error_of(server: VirtualServer, frame: dict[str, Any]) -> tuple[int, str]:
    server.send(frame)
    got = answer(server, frame["id"])
    return got["error"]["code"], got["error"]["message"]


def turn_start(thread_id: str, rid: Any = 2, text: str = "hi") -> dict[str, Any]:
    return {
        "id": rid,
        "method": "turn/start",
        "params": {"threadId": thread_id, "input": [{"type": "text", "text": text}]},
    }


def test_errors_before_and_after_initialize() -> None:
    server = VirtualServer(load_builtin("plain"))
    assert error_of(server, {"id": 5, "method": "thread/start", "params": {}}) == (-32600, "Not initialized")
    assert error_of(server, {"id": 6, "method": "thread/start"})[1] == "Invalid request: missing field `params`"
    code, text = error_of(server, {"id": 7, "method": "no/such", "params": {}})
    assert code == -32600 and text.startswith(
        "Invalid request: unknown variant `no/such`, expected one of `initialize`"
    )
    assert all(f"`{m}`" in text for m in default_profile().methods.client)
    assert (
        error_of(server, {"id": 8, "method": "initialize", "params": {}})[1]
        == "Invalid request: missing field `clientInfo`"
    )
    assert error_of(server, {"id": 9, "method": "initialize", "params": {"clientInfo": {"name": "t"}}})[1] == (
        "Invalid request: missing field `version`"
    )
    server.send(INIT)
    assert error_of(server, {**INIT, "id": 10}) == (-32600, "Already initialized")


def test_thread_and_turn_errors() -> None:
    server, thread_id = session()
    unknown = "00000000-0000-0000-0000-000000000000"
    assert error_of(server, turn_start(unknown, 3))[1] == f"thread not found: {unknown}"
    assert error_of(server, turn_start("nope", 4))[1].startswith("invalid thread id: invalid character")
    assert error_of(server, {"id": 5, "method": "turn/start", "params": {"input": []}})[1] == (
        "Invalid request: missing field `threadId`"
    )
    interrupt = {"id": 6, "method": "turn/interrupt", "params": {"threadId": thread_id, "turnId": "x"}}
    assert error_of(server, interrupt) == (-32600, "no active turn to interrupt")
    steer = {"id": 7, "method": "turn/steer", "params": {"threadId": thread_id, "input": [], "expectedTurnId": "x"}}
    assert error_of(server, steer) == (-32600, "no active turn to steer")
    resume = {"id": 8, "method": "thread/resume", "params": {"threadId": thread_id}}
    assert error_of(server, resume) == (-32600, f"no rollout found for thread id {thread_id}")
    read = {"id": 9, "method": "thread/read", "params": {"threadId": thread_id, "includeTurns": True}}
    assert error_of(server, read) == (-32601, "list_turns is not supported yet")
    missing = {"id": 13, "method": "thread/settings/update", "params": {}}
    assert error_of(server, missing) == (-32600, "Invalid request: missing field `threadId`")
    gated = {"id": 10, "method": "thread/settings/update", "params": {"threadId": thread_id}}
    assert error_of(server, gated) == (-32600, "thread/settings/update requires experimentalApi capability")
    bad_input = {"id": 11, "method": "turn/start", "params": {"threadId": thread_id, "input": [{"type": "bogus"}]}}
    assert error_of(server, bad_input)[1].startswith("Invalid request: unknown variant `bogus`, expected one of `text`")
    server.send({"id": 12, "method": "model/list", "params": {}})  # answered as 0.171.0 does (fake_server.surface)
    assert server.run_until(lambda f: f.get("id") == 12 and "result" in f) is not None


def test_string_ids_echoed_and_bad_lines_ignored() -> None:
    server = VirtualServer(load_builtin("plain"))
    server.send_raw(
        b'{"jsonrpc":"2.0","id":"init-1","method":"initialize","params":{"clientInfo":{"name":"t","version":"1"}}}\n'
    )
    assert server.frames[0]["id"] == "init-1"
    before = len(server.frames)
    server.send_raw(b'this is not json\n{"id": 78}\n\xff\xfe\n')
    assert len(server.frames) == before
    assert "Failed to deserialize JSONRPCMessage" in "".join(server.stderr)


def test_wrong_turn_interrupt_and_steer() -> None:
    server, thread_id = session(SLOW)
    server.send(turn_start(thread_id))
    turn_id = answer(server, 2)["result"]["turn"]["id"]
    got = error_of(server, {"id": 3, "method": "turn/interrupt", "params": {"threadId": thread_id, "turnId": "other"}})
    assert got == (-32600, f"expected active turn id other but found {turn_id}")
    steer = {"id": 4, "method": "turn/steer", "params": {"threadId": thread_id, "input": [], "expectedTurnId": "w"}}
    assert error_of(server, steer) == (-32600, f"expected active turn id `w` but found `{turn_id}`")


def test_turn_start_while_busy_folds_into_the_active_turn() -> None:
    server, thread_id = session(SLOW)
    server.send(turn_start(thread_id))
    turn_id = answer(server, 2)["result"]["turn"]["id"]
    server.advance(250)
    server.send(turn_start(thread_id, 3, "more"))
    assert answer(server, 3)["result"]["turn"]["id"] == turn_id
    done = server.run_until(lambda f: f.get("method") == "turn/completed")
    assert done is not None and done["params"]["turn"]["id"] == turn_id
    methods = server.methods()
    assert methods.count("turn/started") == 1 and methods.count("turn/completed") == 1
    users = [
        f for f in server.frames if f.get("method") == "item/completed" and f["params"]["item"]["type"] == "userMessage"
    ]
    assert len(users) == 2
    messages = [
        f["params"]["item"]["id"]
        for f in server.frames
        if f.get("method") == "item/started" and f["params"]["item"]["type"] == "agentMessage"
    ]
    completed = [
        f["params"]["item"]["id"]
        for f in server.frames
        if f.get("method") == "item/completed" and f["params"]["item"]["type"] == "agentMessage"
    ]
    assert len(messages) == 2 and completed == messages[1:]  # the abandoned stream never completes


def test_steer_answers_the_turn_id() -> None:
    server, thread_id = session(SLOW)
    server.send(turn_start(thread_id))
    turn_id = answer(server, 2)["result"]["turn"]["id"]
    server.advance(150)
    server.send(
        {
            "id": 3,
            "method": "turn/steer",
            "params": {"threadId": thread_id, "input": [{"type": "text", "text": "s"}], "expectedTurnId": turn_id},
        }
    )
    assert answer(server, 3)["result"] == {"turnId": turn_id}
    assert server.run_until(lambda f: f.get("method") == "turn/completed")["params"]["turn"]["status"] == "completed"


def test_resume_after_a_turn_and_usage_total_accumulates() -> None:
    server, thread_id = session(load_builtin("plain_two_turns"))
    server.send(turn_start(thread_id))
    server.run_until(lambda f: f.get("method") == "turn/completed")
    server.send({"id": 3, "method": "thread/resume", "params": {"threadId": thread_id}})
    assert answer(server, 3)["result"]["thread"]["id"] == thread_id
    server.send(turn_start(thread_id, 4))
    server.run_until(lambda f: f.get("method") == "turn/completed", start=len(server.frames))
    usage_frames = [f["params"]["tokenUsage"] for f in server.frames if f.get("method") == "thread/tokenUsage/updated"]
    # thread/resume reports the usage so far again (observed: tests/data/real/*/surface/observed.json)
    assert [u["total"]["totalTokens"] for u in usage_frames] == [120, 120, 280]
    assert usage_frames[1] == usage_frames[0]
    assert usage_frames[2]["last"]["inputTokens"] == 150


def test_opt_out_and_experimental() -> None:
    init = {
        **INIT,
        "params": {
            **INIT["params"],
            "capabilities": {
                "experimentalApi": True,
                "optOutNotificationMethods": ["item/agentMessage/delta", "thread/started"],
            },
        },
    }
    server, thread_id = session(init=init)
    server.send(turn_start(thread_id))
    server.run_until(lambda f: f.get("method") == "turn/completed")
    methods = server.methods()
    assert "item/agentMessage/delta" not in methods and "thread/started" not in methods
    assert methods.index("thread/readState/changed") < methods.index("turn/completed")
    assert all("emittedAtMs" in f for f in server.frames if "method" in f and "id" not in f)


def test_server_request_ids_start_at_zero_per_connection() -> None:
    two = scenario(
        "two",
        "two approvals",
        turn(response(command("echo a", approval=True), command("echo b", approval=True), usage=usage(1, 0, 1))),
    )
    for _ in range(2):
        server, thread_id = session(two)
        server.send(turn_start(thread_id))
        requests = [f for f in server.frames if f.get("method") == "item/commandExecution/requestApproval"]
        assert [r["id"] for r in requests] == [0, 1]
        flags = [f["params"]["status"] for f in server.frames if f.get("method") == "thread/status/changed"]
        assert flags[-1] == {"type": "active", "activeFlags": ["waitingOnApproval"]}


def test_engine_never_reads_a_clock() -> None:
    engine = Engine(SLOW)
    out = engine.receive([orjson.dumps(INIT)], 1234)
    assert all(f.frame.get("emittedAtMs", 1234) == 1234 for f in out if isinstance(f, Send))
    engine.receive([b'{"id":1,"method":"thread/start","params":{}}'], 1234)
    thread_id = engine.world.threads and next(iter(engine.world.threads))
    out = engine.receive([orjson.dumps(turn_start(thread_id))], 5000)
    wakes = [e for e in out if isinstance(e, Wake)]
    assert wakes and wakes[0].after_ms == 100
    later = engine.timer(wakes[0].token, 5100)
    assert any(isinstance(e, Send) and e.frame.get("emittedAtMs") == 5100 for e in later)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
thread_params = st.fixed_dictionaries(
    {"threadId": st.just("THREAD")},
    optional={
        "turnId": st.text(max_size=4) | json_values,
        "expectedTurnId": st.text(max_size=4) | json_values,
        "input": st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=4)}), max_size=2)
        | json_values,
    },
)
frames = st.fixed_dictionaries(
    {},
    optional={
        "id": st.integers(0, 5) | st.text(max_size=3) | json_values,
        "method": st.sampled_from(
            [
                "initialize",
                "thread/start",
                "turn/start",
                "turn/interrupt",
                "turn/steer",
                "thread/resume",
                "thread/read",
                "x/y",
            ]
        )
        | json_values,
        "params": json_values | thread_params,
        "result": json_values | st.fixed_dictionaries({"decision": json_values | st.just("accept")}),
        "error": json_values,
    },
)


@settings(max_examples=300, deadline=None)
@given(st.lists(frames | st.binary(max_size=40), max_size=12))
def test_nothing_a_client_sends_crashes_the_engine(inputs: list[Any]) -> None:
    server, thread_id = session(SLOW)
    server.send(turn_start(thread_id))
    for item in inputs:
        if isinstance(item, bytes):
            server.send_raw(item + b"\n")
        else:
            text = orjson.dumps(item).decode().replace("THREAD", thread_id)
            server.send_raw(text.encode() + b"\n")
        server.advance(50)
    server.settle(10_000)
    assert "internal error" not in "".join(server.stderr)
    assert "request handler failed" not in "".join(server.stderr)
    assert "turn program failed" not in "".join(server.stderr)


def test_model_failures_word_errors_like_the_real_binary() -> None:
    s = scenario(
        "http",
        "http errors then a dropped stream",
        turn(response(end="http_error", http_status=500)),
        turn(response(end="http_error", http_status=429)),
        turn(response(end="http_error", http_status=401)),
        turn(response(end="disconnect")),
        turn(response(end="failed", error="boom")),
    )
    server, thread_id = session(s)
    for rid in range(2, 7):
        server.send(turn_start(thread_id, rid))
        server.run_until(lambda f: f.get("method") == "turn/completed", start=len(server.frames))
    errors = [f["params"] for f in server.frames if f.get("method") == "error"]
    assert [e["willRetry"] for e in errors] == [False] * 5
    assert [(e["error"]["message"][:40], e["error"]["codexErrorInfo"]) for e in errors] == [
        ("We\u2019re currently experiencing high demand", "internalServerError"),
        ("exceeded retry limit, last status: 429 T", {"responseTooManyFailedAttempts": {"httpStatusCode": 429}}),
        ("unexpected status 401 Unauthorized: mode", {"httpConnectionFailed": {"httpStatusCode": 401}}),
        ("stream disconnected before completion: s", "other"),
        ("stream disconnected before completion: b", "other"),
    ]
    statuses = [f["params"]["status"]["type"] for f in server.frames if f.get("method") == "thread/status/changed"]
    assert statuses.count("systemError") == 5
