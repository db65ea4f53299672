"""The newline-delimited JSON codec: framing, typed errors, bounds, and split invariance."""

from __future__ import annotations

import itertools

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.messages import ErrorResponse, Notification, Request, Response, classify
from contracts.wire import LineDecoder, WireError, WireErrorKind, encode, encode_frame, parse_line


def decode_all(chunks: list[bytes], max_line: int = 1024) -> list[object]:
    decoder = LineDecoder(max_line=max_line)
    out: list[object] = []
    for chunk in chunks:
        out += decoder.feed(chunk)
    out += decoder.feed_eof()
    return out


def kinds(items: list[object]) -> list[object]:
    return [item.kind if isinstance(item, WireError) else type(item).__name__ for item in items]


# --- messages ------------------------------------------------------------------------------------


def test_each_message_shape_is_classified() -> None:
    stream = (
        b'{"id":0,"method":"initialize","params":{}}\n'
        b'{"method":"initialized"}\n'
        b'{"id":0,"result":{"ok":true}}\n'
        b'{"error":{"code":-32600,"message":"Not initialized"},"id":1}\n'
        b'{"error":{"code":-32700,"message":"parse"},"id":null}\n'
    )
    items = decode_all([stream])
    assert kinds(items) == ["Request", "Notification", "Response", "ErrorResponse", "ErrorResponse"]
    request, notification, response, error, null_error = items
    assert isinstance(request, Request) and request.id == 0 and request.method == "initialize"
    assert isinstance(notification, Notification) and notification.params is None
    assert isinstance(response, Response) and response.result == {"ok": True}
    assert isinstance(error, ErrorResponse) and (error.code, error.message) == (-32600, "Not initialized")
    assert isinstance(null_error, ErrorResponse) and null_error.id is None


def test_jsonrpc_field_is_accepted_and_never_written() -> None:
    (item,) = decode_all([b'{"jsonrpc":"2.0","id":"init-1","method":"initialize","params":{}}\n'])
    assert isinstance(item, Request) and item.id == "init-1"
    assert b"jsonrpc" not in encode(Request.make(1, "thread/start", {}))
    assert b"jsonrpc" not in encode(Response.make(1, {}))


def test_frames_keep_absent_and_null_apart() -> None:
    assert Request.make(1, "thread/loaded/list").frame == {"id": 1, "method": "thread/loaded/list"}
    assert Request.make(1, "x", None).frame == {"id": 1, "method": "x", "params": None}
    assert ErrorResponse.make(1, -32600, "bad").frame == {"error": {"code": -32600, "message": "bad"}, "id": 1}


def test_encode_round_trips_and_escapes_newlines() -> None:
    message = Notification.make("item/agentMessage/delta", {"delta": "a\nb\u2028c"}, emittedAtMs=1)
    line = encode(message)
    assert line.count(b"\n") == 1 and line.endswith(b"\n")
    (back,) = decode_all([line])
    assert back == Notification("item/agentMessage/delta", {"delta": "a\nb\u2028c"}, message.frame)
    assert encode_frame({"id": 78}) == b'{"id":78}\n'


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        (b"this is not json", WireErrorKind.INVALID_JSON),
        (b'{"id": 1, "method": "x"', WireErrorKind.INVALID_JSON),
        (b"\xff\xfe{}", WireErrorKind.INVALID_UTF8),
        (b"[1, 2]", WireErrorKind.NOT_AN_OBJECT),
        (b'"text"', WireErrorKind.NOT_AN_OBJECT),
        (b'{"id": 78}', WireErrorKind.NOT_A_MESSAGE),
        (b"{}", WireErrorKind.NOT_A_MESSAGE),
        (b'{"method": 5}', WireErrorKind.NOT_A_MESSAGE),
        (b'{"id": true, "method": "x"}', WireErrorKind.NOT_A_MESSAGE),
        (b'{"id": 1.5, "result": {}}', WireErrorKind.NOT_A_MESSAGE),
        (b'{"id": 1, "error": {"code": "x", "message": "m"}}', WireErrorKind.NOT_A_MESSAGE),
        (b'{"id": 1, "error": {"code": true, "message": "m"}}', WireErrorKind.NOT_A_MESSAGE),
        (b'{"id": [1], "error": {"code": 1, "message": "m"}}', WireErrorKind.NOT_A_MESSAGE),
    ],
)
def test_bad_lines_are_typed_errors_and_the_reader_carries_on(line: bytes, kind: WireErrorKind) -> None:
    items = decode_all([line + b"\n" + b'{"method":"initialized"}\n'])
    assert kinds(items) == [kind, "Notification"]
    error = items[0]
    assert isinstance(error, WireError) and error.size == len(line) and error.sample == line[:120]
    assert error.describe().startswith(kind.value)


def test_blank_lines_are_skipped() -> None:
    assert decode_all([b'\n  \n\r\n{"method":"initialized"}\n\n']) == [
        Notification("initialized", None, {"method": "initialized"})
    ]
    assert parse_line(b"   ") is None


def test_classify_reports_reasons() -> None:
    assert classify({"id": 78}) == "id without method, result or error"
    assert classify({}) == "neither method nor id"


# --- bounds --------------------------------------------------------------------------------------


def test_oversized_line_is_reported_with_size_and_cap_and_not_buffered() -> None:
    cap = 64
    decoder = LineDecoder(max_line=cap)
    big = b'{"method":"x","params":"' + b"a" * 500 + b'"}'
    out: list[object] = []
    for i in range(0, len(big), 7):
        out += decoder.feed(big[i : i + 7])
        assert decoder.buffered <= cap  # the excess is counted, never kept
    out += decoder.feed(b'\n{"method":"initialized"}\n')
    assert kinds(out) == [WireErrorKind.OVERSIZED_LINE, "Notification"]
    error = out[0]
    assert isinstance(error, WireError)
    assert error.size == len(big)
    assert f"{len(big)} bytes" in error.detail and f"cap of {cap}" in error.detail
    assert error.sample == big[:120][: len(error.sample)] and error.sample


def test_oversized_line_in_one_chunk_and_line_at_the_cap() -> None:
    cap = 10
    exact = b'{"id":"1"}'  # ten bytes: allowed
    assert len(exact) == cap
    items = decode_all([exact + b"\n", b'{"method":"xxxxxx"}\n'], max_line=cap)
    assert kinds(items) == [WireErrorKind.NOT_A_MESSAGE, WireErrorKind.OVERSIZED_LINE]


def test_oversized_partial_then_newline_in_a_later_chunk() -> None:
    decoder = LineDecoder(max_line=16)
    assert decoder.feed(b'{"method":"a') == []  # 12 bytes held
    (error,) = decoder.feed(b'bcdefgh"}\n')
    assert isinstance(error, WireError) and error.kind is WireErrorKind.OVERSIZED_LINE and error.size == 21
    assert error.sample == b'{"method":"abcdefgh"}'
    assert decoder.buffered == 0


def test_max_line_must_be_positive() -> None:
    with pytest.raises(ValueError):
        LineDecoder(max_line=0)


# --- end of stream -------------------------------------------------------------------------------


def test_final_line_without_newline_is_reported_not_used() -> None:
    decoder = LineDecoder()
    assert decoder.feed(b'{"method":"initialized"}\n{"id":1,"result":{}}') == [
        Notification("initialized", None, {"method": "initialized"})
    ]
    (error,) = decoder.feed_eof()
    assert isinstance(error, WireError) and error.kind is WireErrorKind.TRUNCATED_AT_EOF
    assert error.size == len(b'{"id":1,"result":{}}') and error.sample == b'{"id":1,"result":{}}'
    assert decoder.feed_eof() == []


def test_eof_after_whitespace_or_during_an_oversized_line() -> None:
    decoder = LineDecoder(max_line=8)
    decoder.feed(b"   ")
    assert decoder.feed_eof() == []
    decoder.feed(b"x" * 20)
    (error,) = decoder.feed_eof()
    assert isinstance(error, WireError) and error.kind is WireErrorKind.OVERSIZED_LINE and error.size == 20


# --- properties ----------------------------------------------------------------------------------

_json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8)
_params = st.dictionaries(st.text(max_size=6), _json_scalars, max_size=4)
_frames = st.one_of(
    st.builds(lambda i, m, p: {"id": i, "method": m, "params": p}, st.integers(0, 1000), st.text(max_size=12), _params),
    st.builds(lambda m, p: {"method": m, "params": p}, st.text(max_size=12), _params),
    st.builds(lambda i, r: {"id": i, "result": r}, st.integers(0, 1000) | st.text(max_size=4), _params),
    st.builds(lambda i, c: {"error": {"code": c, "message": "m"}, "id": i}, st.integers(0, 9), st.integers(-33000, 0)),
)
_garbage = st.sampled_from([b"not json", b"[1]", b'{"id":78}', b"\xff", b"{", b'"x"', b"", b"  "])
_lines = st.lists(_frames.map(lambda f: orjson.dumps(f)) | _garbage | st.binary(max_size=40), max_size=12)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


@settings(max_examples=300, deadline=None)
@given(lines=_lines, cuts=st.lists(st.integers(0, 10_000), max_size=20), cap=st.sampled_from([8, 32, 1024]))
def test_any_split_of_the_stream_yields_the_same_items(lines: list[bytes], cuts: list[int], cap: int) -> None:
    data = b"\n".join(lines) + b"\n"
    whole = decode_all([data], max_line=cap)
    assert decode_all(_split(data, cuts), max_line=cap) == whole
    assert decode_all([bytes([b]) for b in data], max_line=cap) == whole


@settings(max_examples=500, deadline=None)
@given(data=st.binary(max_size=300), cuts=st.lists(st.integers(0, 400), max_size=8), cap=st.integers(1, 64))
def test_any_bytes_yield_messages_or_wire_errors_never_an_exception(data: bytes, cuts: list[int], cap: int) -> None:
    decoder = LineDecoder(max_line=cap)
    items: list[object] = []
    for chunk in _split(data, cuts):
        items += decoder.feed(chunk)
        assert decoder.buffered <= cap
    items += decoder.feed_eof()
    assert all(isinstance(i, Request | Notification | Response | ErrorResponse | WireError) for i in items)
    assert decoder.buffered == 0


@settings(max_examples=200, deadline=None)
@given(frames=st.lists(_frames, max_size=10))
def test_encoded_frames_decode_to_the_same_frames(frames: list[dict]) -> None:
    data = b"".join(encode_frame(f) for f in frames)
    items = decode_all([data], max_line=1 << 20)
    assert [i.frame for i in items if not isinstance(i, WireError)] == frames
