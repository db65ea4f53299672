"""The JSON-RPC endpoint core: id allocation, pending tables, correlation of answers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.jsonrpc import (
    DuplicateRequest,
    DuplicateResponse,
    Endpoint,
    IncomingNotification,
    IncomingRequest,
    LateResponse,
    ProtocolViolation,
    ResponseMatched,
    RpcError,
    UnknownResponse,
)
from contracts.messages import INVALID_REQUEST, ErrorResponse, Notification, Request, Response


def test_ids_are_integers_from_zero_per_endpoint() -> None:
    server, other = Endpoint(), Endpoint()
    assert [server.request("item/commandExecution/requestApproval", {}).id for _ in range(3)] == [0, 1, 2]
    assert other.request("x").id == 0  # a new connection starts again at 0
    assert Endpoint(first_id=5).request("x").id == 5
    assert set(server.outgoing) == {0, 1, 2}


def test_request_frames() -> None:
    endpoint = Endpoint()
    assert endpoint.request("thread/loaded/list").frame == {"id": 0, "method": "thread/loaded/list"}
    assert endpoint.request("thread/start", {}).frame == {"id": 1, "method": "thread/start", "params": {}}
    note = endpoint.notify("turn/started", {"threadId": "t"}, emittedAtMs=5)
    assert note.frame == {"method": "turn/started", "params": {"threadId": "t"}, "emittedAtMs": 5}


def test_response_is_matched_once_then_duplicate() -> None:
    client = Endpoint()
    request = client.request("thread/start", {})
    answer = Response.make(request.id, {"thread": {}})
    event = client.receive(answer)
    assert event == ResponseMatched(request, answer) and event.ok
    assert client.outgoing == {}
    assert client.receive(answer) == DuplicateResponse(request, answer)


def test_error_answer_is_matched_and_becomes_a_typed_error() -> None:
    client = Endpoint()
    request = client.request("thread/loaded/list")
    answer = ErrorResponse.make(request.id, INVALID_REQUEST, "Invalid request: missing field `params`")
    event = client.receive(answer)
    assert isinstance(event, ResponseMatched) and not event.ok
    error = RpcError.from_response(answer, request.method)
    assert (error.code, error.message, error.method) == (INVALID_REQUEST, answer.message, "thread/loaded/list")
    assert "thread/loaded/list: JSON-RPC error -32600" in str(error)


def test_unknown_responses() -> None:
    client = Endpoint()
    client.request("x")
    assert client.receive(Response.make(99, {})) == UnknownResponse(Response.make(99, {}))
    null_id = ErrorResponse.make(None, -32700, "parse error")
    assert client.receive(null_id) == UnknownResponse(null_id)
    # An id of the other type is another id: "0" does not answer 0.
    assert isinstance(client.receive(Response.make("0", {})), UnknownResponse)
    assert 0 in client.outgoing


def test_late_response_after_abandon() -> None:
    server = Endpoint()
    approval = server.request("item/commandExecution/requestApproval", {"itemId": "call"})
    assert server.abandon(approval.id) is approval
    assert approval.id not in server.outgoing
    late = Response.make(approval.id, {"decision": "accept"})
    assert server.receive(late) == LateResponse(approval, late)
    assert server.receive(late) == DuplicateResponse(approval, late)
    with pytest.raises(ProtocolViolation):
        server.abandon(approval.id)


def test_incoming_requests_are_tracked_until_answered() -> None:
    server = Endpoint()
    request = Request.make("init-1", "initialize", {})
    assert server.receive(request) == IncomingRequest(request)
    assert server.receive(request) == DuplicateRequest(request)
    assert server.respond("init-1", {"userAgent": "x"}).frame == {"id": "init-1", "result": {"userAgent": "x"}}
    assert server.incoming == {}
    with pytest.raises(ProtocolViolation):
        server.respond("init-1", {})
    server.receive(Request.make(7, "no/such/method", {}))
    error = server.respond_error(7, -32600, "unknown variant")
    assert error.frame == {"error": {"code": -32600, "message": "unknown variant"}, "id": 7}
    with pytest.raises(ProtocolViolation):
        server.respond_error(7, -32600, "again")


def test_notifications_pass_through() -> None:
    note = Notification.make("initialized")
    assert Endpoint().receive(note) == IncomingNotification(note)


def test_answered_memory_is_bounded() -> None:
    client = Endpoint(memory=2)
    requests = [client.request("x") for _ in range(3)]
    for r in requests:
        client.receive(Response.make(r.id, {}))
    # The oldest answered id is forgotten: a repeat answer is unknown, the recent ones duplicates.
    assert isinstance(client.receive(Response.make(0, {})), UnknownResponse)
    assert isinstance(client.receive(Response.make(2, {})), DuplicateResponse)
    with pytest.raises(ValueError):
        Endpoint(memory=0)


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["send", "answer", "abandon"]), st.integers(0, 20)), max_size=60))
def test_every_answer_is_classified_consistently(ops: list[tuple[str, int]]) -> None:
    """Each id is matched at most once; answers to never-sent ids are unknown; no exception."""
    endpoint = Endpoint()
    sent: list[int] = []
    matched: set[int] = set()
    for op, n in ops:
        if op == "send":
            sent.append(endpoint.request("m").id)
        elif op == "abandon" and sent:
            rid = sent[n % len(sent)]
            if rid in endpoint.outgoing:
                endpoint.abandon(rid)
        elif op == "answer":
            event = endpoint.receive(Response.make(n, {}))
            if n not in sent:
                assert isinstance(event, UnknownResponse)
            elif isinstance(event, ResponseMatched | LateResponse):
                assert n not in matched
                matched.add(n)
            else:
                assert isinstance(event, DuplicateResponse) and n in matched
    assert set(endpoint.outgoing).isdisjoint(matched)
