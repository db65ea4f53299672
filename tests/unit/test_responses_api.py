"""The mock Responses API: SSE shapes per model step, scheduling across turns, HTTP behaviour, loopback only."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import PurePosixPath
from typing import Any

import h11
import orjson
import pytest
import trio
import zstandard

from contracts.scenario import (
    FOLLOW_UP_RESPONSE,
    CommandItem,
    FileChangeItem,
    MessageItem,
    ModelResponse,
    ReasoningItem,
    Scenario,
    TurnScript,
    Usage,
)
from fake_server.responses_api import (
    MAX_REQUEST_BYTES,
    NotLoopback,
    ResponseSchedule,
    serve_responses_api,
    turn_key,
)
from fake_server.sse import IdCounter, apply_patch_command, build_stream, sse_event

WORKDIR = PurePosixPath("/run/workdir")


def events(plan_chunks: Any) -> list[dict[str, Any]]:
    out = []
    for chunk in plan_chunks:
        head, data, blank = chunk.data.split(b"\n", 2)
        assert head.startswith(b"event: ") and data.startswith(b"data: ") and blank == b"\n"
        payload = json.loads(data[len(b"data: ") :])
        assert payload["type"] == head[len(b"event: ") :].decode()
        out.append(payload)
    return out


def parse_sse(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(block.split(b"\ndata: ", 1)[1]) for block in body.split(b"\n\n") if block.strip()]


def scenario(*turns: TurnScript) -> Scenario:
    return Scenario(name="t", description="", turns=turns)


# --- SSE shapes (sans-IO) --------------------------------------------------------------------


def test_sse_event_format() -> None:
    assert sse_event("response.created", {"response": {"id": "r"}}) == (
        b'event: response.created\ndata: {"type":"response.created","response":{"id":"r"}}\n\n'
    )


def test_message_stream_with_usage_and_delays() -> None:
    response = ModelResponse(
        items=(MessageItem("Hello world", ("Hello ", "world"), delay_ms=250),), usage=Usage(100, 40, 20, 5)
    )
    plan = build_stream(response, response_id="resp-1", workdir=WORKDIR, ids=IdCounter())
    got = events(plan.chunks)
    assert [e["type"] for e in got] == [
        "response.created",
        "response.output_item.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_item.done",
        "response.completed",
    ]
    assert [c.delay_s for c in plan.chunks] == [0, 0, 0.25, 0.25, 0, 0]
    assert got[1]["item"] == {"type": "message", "role": "assistant", "id": "msg-1", "content": []}
    assert got[4]["item"]["content"] == [{"type": "output_text", "text": "Hello world"}]
    assert got[5]["response"]["usage"] == {
        "input_tokens": 100,
        "input_tokens_details": {"cached_tokens": 40},
        "output_tokens": 20,
        "output_tokens_details": {"reasoning_tokens": 5},
        "total_tokens": 120,
    }
    assert plan.ending == "complete" and plan.http_error is None


def test_no_usage_means_no_usage_key() -> None:
    plan = build_stream(ModelResponse(items=()), response_id="r", workdir=WORKDIR, ids=IdCounter())
    assert "usage" not in events(plan.chunks)[-1]["response"]


def test_reasoning_summary_events() -> None:
    response = ModelResponse(items=(ReasoningItem("**Thinking** hard", ("**Thinking**", " hard")),))
    got = events(build_stream(response, response_id="r", workdir=WORKDIR, ids=IdCounter()).chunks)
    assert [e["type"] for e in got[1:-1]] == [
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.output_item.done",
    ]
    assert got[-2]["item"]["id"] == "rs_1"
    assert got[-2]["item"]["summary"] == [{"type": "summary_text", "text": "**Thinking** hard"}]


def test_escalated_command_arguments() -> None:
    item = CommandItem("echo hi", call_id="call_echo", approval=True, justification="why")
    got = events(build_stream(ModelResponse(items=(item,)), response_id="r", workdir=WORKDIR, ids=IdCounter()).chunks)
    call = got[1]["item"]
    assert call["type"] == "function_call" and call["name"] == "exec_command" and call["call_id"] == "call_echo"
    args = json.loads(call["arguments"])
    assert args["cmd"] == "echo hi" and args["workdir"] == "/run/workdir"
    assert args["sandbox_permissions"] == "require_escalated" and args["justification"] == "why"


def test_plain_running_command_waits_for_its_duration() -> None:
    item = CommandItem("sleep 30", duration_ms=30000)
    got = events(build_stream(ModelResponse(items=(item,)), response_id="r", workdir=WORKDIR, ids=IdCounter()).chunks)
    args = json.loads(got[1]["item"]["arguments"])
    assert "sandbox_permissions" not in args and "justification" not in args
    assert args["yield_time_ms"] == 30000


def test_file_change_is_an_apply_patch_heredoc() -> None:
    item = FileChangeItem("hello.txt", "line one\nline two")
    got = events(build_stream(ModelResponse(items=(item,)), response_id="r", workdir=WORKDIR, ids=IdCounter()).chunks)
    args = json.loads(got[1]["item"]["arguments"])
    assert args["cmd"] == apply_patch_command("hello.txt", "line one\nline two")
    assert args["cmd"].startswith(
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: hello.txt\n+line one\n+line two\n"
    )
    assert "sandbox_permissions" not in args


def test_parallel_calls_get_distinct_ids_across_the_session() -> None:
    ids = IdCounter()
    response = ModelResponse(items=(CommandItem("a", approval=True), CommandItem("b", approval=True)))
    first = events(build_stream(response, response_id="r1", workdir=WORKDIR, ids=ids).chunks)
    second = events(build_stream(response, response_id="r2", workdir=WORKDIR, ids=ids).chunks)
    assert [e["item"]["call_id"] for e in first[1:3]] == ["call_1", "call_2"]
    assert [e["item"]["call_id"] for e in second[1:3]] == ["call_3", "call_4"]
    assert [e["output_index"] for e in first[1:3]] == [0, 1]


def test_failures() -> None:
    http = build_stream(
        ModelResponse(end="http_error", http_status=503), response_id="r", workdir=WORKDIR, ids=IdCounter()
    )
    assert http.http_error is not None and http.http_error.status == 503 and not http.chunks
    failed = events(
        build_stream(
            ModelResponse(end="failed", error="boom"), response_id="r", workdir=WORKDIR, ids=IdCounter()
        ).chunks
    )
    assert failed[-1] == {
        "type": "response.failed",
        "response": {"id": "r", "error": {"code": "server_error", "message": "boom"}},
    }


def test_disconnect_leaves_items_open_and_never_completes() -> None:
    response = ModelResponse(items=(MessageItem("partial", ("par", "tial")), CommandItem("x")), end="disconnect")
    got = events(build_stream(response, response_id="r", workdir=WORKDIR, ids=IdCounter()).chunks)
    types = [e["type"] for e in got]
    assert "response.completed" not in types and "response.output_item.done" not in types
    assert types.count("response.output_text.delta") == 2


def test_relative_workdir_refused() -> None:
    with pytest.raises(ValueError, match="absolute"):
        build_stream(
            ModelResponse(items=(CommandItem("x"),)), response_id="r", workdir=PurePosixPath("w"), ids=IdCounter()
        )


# --- scheduling --------------------------------------------------------------------------------


def test_schedule_follows_turn_ids_and_defaults() -> None:
    scripted = ModelResponse(items=(CommandItem("x", approval=True),))
    schedule = ResponseSchedule(scenario(TurnScript(responses=(scripted,)), TurnScript()))
    assert schedule.next("t1")[:2] == (0, 0) and schedule.scenario.turn(0).response(0) is scripted
    turn, index, response = schedule.next("t1")  # the follow-up after the tool call
    assert (turn, index) == (0, 1) and response == FOLLOW_UP_RESPONSE
    turn, index, response = schedule.next("t2")
    assert (turn, index) == (1, 0) and response.items[0].text == "Hello from the fake model!"  # type: ignore[union-attr]
    assert schedule.next("t3")[:2] == (2, 0)  # beyond the script: plain turns


def test_turn_key_from_metadata_header_else_user_messages() -> None:
    assert turn_key({"x-codex-turn-metadata": '{"turn_id":"abc","thread_id":"t"}'}, None) == "abc"
    body = {"input": [{"role": "developer"}, {"role": "user"}, {"role": "user"}]}
    assert turn_key({"x-codex-turn-metadata": "not json"}, body) == "users:2"
    assert turn_key({}, {"input": "nope"}) is None


# --- HTTP -------------------------------------------------------------------------------------


async def http(
    port: int, method: str, path: str, body: bytes = b"", headers: list[tuple[str, str]] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """A minimal HTTP/1.1 client (h11) for one exchange on a fresh connection."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    conn = h11.Connection(h11.CLIENT)
    all_headers = [("host", f"127.0.0.1:{port}"), ("content-length", str(len(body))), *(headers or [])]
    async with stream:
        await stream.send_all(conn.send(h11.Request(method=method, target=path, headers=all_headers)))
        await stream.send_all(conn.send(h11.Data(data=body)) or b"")
        await stream.send_all(conn.send(h11.EndOfMessage()) or b"")
        status, response_headers, data = 0, {}, bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(65536))
            elif isinstance(event, h11.Response):
                status = event.status_code
                response_headers = {k.decode(): v.decode() for k, v in event.headers}
            elif isinstance(event, h11.Data):
                data += event.data
            elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                return status, response_headers, bytes(data)


def turn_header(turn_id: str) -> list[tuple[str, str]]:
    return [("content-type", "application/json"), ("x-codex-turn-metadata", json.dumps({"turn_id": turn_id}))]


async def test_serves_scripted_sse_and_records_requests() -> None:
    sc = scenario(TurnScript(responses=(ModelResponse(items=(MessageItem("Hi there", ("Hi", " there")),)),)))
    with trio.fail_after(10):
        async with serve_responses_api(sc, workdir="/run/workdir") as mock:
            assert mock.port > 0 and mock.base_url == f"http://127.0.0.1:{mock.port}/v1"
            body = orjson.dumps({"model": "m", "input": [{"role": "user", "content": []}]})
            status, headers, data = await http(mock.port, "POST", "/v1/responses", body, turn_header("t1"))
            assert status == 200 and headers["content-type"] == "text/event-stream"
            got = parse_sse(data)
            assert [e["type"] for e in got][-1] == "response.completed"
            assert "".join(e["delta"] for e in got if e["type"] == "response.output_text.delta") == "Hi there"
            # the follow-up of the same turn: past the script
            _, _, data2 = await http(mock.port, "POST", "/v1/responses", body, turn_header("t1"))
            assert any(e.get("delta") == "Done." for e in parse_sse(data2))
            recorded = mock.requests
            assert [(r.method, r.path, r.turn, r.response_index, r.status) for r in recorded] == [
                ("POST", "/v1/responses", 0, 0, 200),
                ("POST", "/v1/responses", 0, 1, 200),
            ]
            assert recorded[0].body == {"model": "m", "input": [{"role": "user", "content": []}]}
            assert recorded[0].header("X-Codex-Turn-Metadata") == '{"turn_id": "t1"}'
            assert mock.errors == []


async def test_other_paths_get_404_and_are_not_scheduled() -> None:
    with trio.fail_after(10):
        async with serve_responses_api(scenario(TurnScript()), workdir="/w") as mock:
            assert (await http(mock.port, "GET", "/v1/responses"))[0] == 404
            assert (await http(mock.port, "POST", "/v1/models", b"{}"))[0] == 404
            assert [(r.path, r.status, r.turn) for r in mock.requests] == [
                ("/v1/responses", 404, None),
                ("/v1/models", 404, None),
            ]
            assert mock.responses_requests() == []


async def test_http_error_status_and_zstd_request_body() -> None:
    sc = scenario(TurnScript(responses=(ModelResponse(end="http_error", http_status=500, error="overloaded"),)))
    body = zstandard.ZstdCompressor().compress(b'{"input": []}')
    with trio.fail_after(10):
        async with serve_responses_api(sc, workdir="/w") as mock:
            status, headers, data = await http(
                mock.port, "POST", "/v1/responses", body, [("content-encoding", "zstd"), *turn_header("a")]
            )
            assert status == 500 and headers["content-type"] == "application/json"
            assert json.loads(data)["error"]["message"] == "overloaded"
            assert mock.requests[0].body == {"input": []} and mock.requests[0].status == 500


async def test_client_closing_a_slow_stream_is_tolerated() -> None:
    slow = ModelResponse(items=(MessageItem("x" * 50, ("x",) * 50, delay_ms=20),))
    sc = scenario(TurnScript(responses=(slow,)), TurnScript())
    with trio.fail_after(10):
        async with serve_responses_api(sc, workdir="/w") as mock:
            stream = await trio.open_tcp_stream("127.0.0.1", mock.port)
            conn = h11.Connection(h11.CLIENT)
            headers = [("host", "x"), ("content-length", "2"), *turn_header("t1")]
            await stream.send_all(conn.send(h11.Request(method="POST", target="/v1/responses", headers=headers)))
            await stream.send_all(conn.send(h11.Data(data=b"{}")) + conn.send(h11.EndOfMessage()))
            first = await stream.receive_some(65536)
            assert b"200" in first.split(b"\r\n", 1)[0]
            await stream.aclose()  # like codex on turn/interrupt
            status, _, data = await http(mock.port, "POST", "/v1/responses", b"{}", turn_header("t2"))
            assert status == 200 and parse_sse(data)[-1]["type"] == "response.completed"
            assert [r.turn for r in mock.requests] == [0, 1]
            assert mock.errors == []


async def test_oversized_body_is_refused_with_a_recorded_error() -> None:
    big = b"x" * (MAX_REQUEST_BYTES + 1)
    with trio.fail_after(20):
        async with serve_responses_api(scenario(TurnScript()), workdir="/w") as mock:
            stream = await trio.open_tcp_stream("127.0.0.1", mock.port)
            conn = h11.Connection(h11.CLIENT)
            headers = [("host", "x"), ("content-length", str(len(big)))]
            async with stream:
                await stream.send_all(conn.send(h11.Request(method="POST", target="/v1/responses", headers=headers)))
                try:
                    await stream.send_all(big)
                except trio.BrokenResourceError:
                    pass  # the server hung up mid-body: what we want
                while await stream.receive_some(65536):
                    pass
            assert mock.requests == []
            assert any("over" in e for e in mock.errors)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::", "example.com", "10.0.0.1"])
async def test_refuses_non_loopback(host: str) -> None:
    with pytest.raises(NotLoopback, match="loopback"):
        async with serve_responses_api(scenario(), workdir="/w", host=host):
            pass  # pragma: no cover


async def test_ipv6_loopback_allowed() -> None:
    with trio.fail_after(10):
        try:
            async with serve_responses_api(scenario(TurnScript()), workdir="/w", host="::1") as mock:
                assert mock.port > 0
        except OSError as exc:  # a host without IPv6
            pytest.skip(f"no IPv6 loopback: {exc}")


@pytest.mark.parametrize("outcome", ["allow", "deny"])
async def test_the_reviewer_subagent_gets_its_verdict_outside_the_script(outcome: str) -> None:
    """The auto-review subagent's request (``x-openai-subagent: guardian``) is answered with the scenario's verdict,
    as the JSON its output schema asks for, and takes nothing of the scripted turns."""
    first = TurnScript(responses=(ModelResponse(items=(MessageItem("Hi", ("Hi",)),)),))
    sc = replace(scenario(first), config=replace(scenario(first).config, auto_review=outcome))
    body = orjson.dumps({"model": "m", "input": []})
    with trio.fail_after(10):
        async with serve_responses_api(sc, workdir="/w") as mock:
            guardian = [*turn_header("review-turn"), ("x-openai-subagent", "guardian")]
            _, _, data = await http(mock.port, "POST", "/v1/responses", body, guardian)
            text = "".join(e["delta"] for e in parse_sse(data) if e["type"] == "response.output_text.delta")
            assert orjson.loads(text)["outcome"] == outcome
            _, _, data = await http(mock.port, "POST", "/v1/responses", body, turn_header("t1"))
            assert any(e.get("delta") == "Hi" for e in parse_sse(data))  # the script's first response, still
            assert [(r.turn, r.response_index) for r in mock.requests] == [(None, None), (0, 0)]
