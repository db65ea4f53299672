"""The validator against the real codex-cli 0.171.0 transcripts, and mutated copies of their frames."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_reference_set import reference, reference_set, replayable_set

from contracts.schema_store import ReleaseNotPinned
from contracts.validator import SessionValidator, Validator, Violation
from contracts.wire import LineDecoder, WireError


def transcript_files(sessions: list[Any] | None = None) -> list[Path]:
    """The reference set's transcripts (tests/data/real/0.171.0/), or those of ``sessions``; a missing one fails."""
    files = [r.path for r in (reference_set() if sessions is None else sessions)]
    for path in files:
        if not path.is_file():
            pytest.fail(f"reference transcript missing: {path} (part of the repository; `make reference`)")
    return files


def entries(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def frame_of(entry: dict[str, Any]) -> dict[str, Any] | WireError:
    """The frame as the reader sees it; ``_raw`` lines go through the codec like any wire line."""
    msg = entry["msg"]
    if "_raw" not in msg:
        return msg
    decoder = LineDecoder()
    items = decoder.feed(msg["_raw"].encode() + b"\n") + decoder.feed_eof()
    assert len(items) == 1, msg
    item = items[0]
    return item if isinstance(item, WireError) else item.frame


def verdicts(path: Path) -> list[tuple[str, str, Any, list[Violation] | WireError]]:
    """(direction, raw line or frame, frame, rejection) for every rejected wire line of one transcript."""
    session = SessionValidator()
    rejected = []
    for entry in entries(path):
        if entry["dir"] == "note":
            continue
        frame = frame_of(entry)
        if isinstance(frame, WireError):
            rejected.append((entry["dir"], entry["msg"]["_raw"], None, frame))
            continue
        violations = session.validate(frame, entry["dir"])
        if violations:
            rejected.append((entry["dir"], orjson.dumps(frame).decode(), frame, violations))
    return rejected


# The deliberately invalid client lines of the corpus, and what each rejection must name.
EXPECTED_REJECTIONS: dict[tuple[str, str], tuple[str, str, str]] = {
    ("framing.jsonl", "this is not json"): ("invalid_json", "", ""),
    ("framing.jsonl", '{"id": 78}'): ("not_a_message", "", "id without method"),
    ("framing.jsonl", '{"id":77,"method":"thread/loaded/list"}'): ("required", "/params", "'params'"),
    ("misc_requests.jsonl", '{"id":4,"method":"no/such/method","params":{}}'): (
        "unknown_method",
        "/method",
        "no/such/method",
    ),
    ("misc_requests.jsonl", '{"id":6,"method":"turn/start","params":{"input":[]}}'): (
        "required",
        "/params/threadId",
        "'threadId'",
    ),
}


def test_every_server_frame_validates_and_exactly_the_invalid_client_frames_are_rejected() -> None:
    """Over the sessions replayed verbatim; the method probes send wrong params on purpose (next test)."""
    seen: dict[tuple[str, str], tuple[str, str, str]] = {}
    frames = 0
    for path in transcript_files(replayable_set()):
        frames += sum(1 for e in entries(path) if e["dir"] != "note")
        for direction, text, _frame, rejection in verdicts(path):
            assert direction == "c2s", f"{path.name}: server frame rejected: {text[:200]} -> {rejection}"
            if isinstance(rejection, WireError):
                seen[(path.name, text)] = (rejection.kind.value, "", rejection.detail)
            else:
                (violation,) = rejection
                seen[(path.name, text)] = (violation.kind, violation.path, violation.message)
    assert frames > 300
    assert set(seen) == set(EXPECTED_REJECTIONS)
    for key, (kind, path, named) in EXPECTED_REJECTIONS.items():
        got_kind, got_path, message = seen[key]
        assert (got_kind, got_path) == (kind, path), key
        assert named in message, (key, message)


def test_every_server_frame_of_every_session_validates() -> None:
    """The method-surface and pending-input probes included: whatever the client sent, the real server's
    every answer and notification is valid against the pinned schema."""
    frames = 0
    for path in transcript_files():
        for direction, text, _frame, rejection in verdicts(path):
            assert direction == "c2s", f"{path.name}: server frame rejected: {text[:200]} -> {rejection}"
        frames += sum(1 for e in entries(path) if e["dir"] == "s2c")
    assert frames > 700  # 804 server frames in the 0.171.0 set when written


def test_the_id_only_frame_is_rejected_by_the_validator_too() -> None:
    (violation,) = Validator.for_release().validate({"id": 78}, "c2s")
    assert violation.kind == "not_a_message" and "neither request, response nor notification" in violation.message


def test_experimental_session_switches_bundle() -> None:
    path = reference("experimental_optout").path
    session = SessionValidator()
    for entry in entries(path):
        if entry["dir"] != "note":
            assert session.validate(frame_of(entry), entry["dir"]) == []
    assert session.experimental


def test_responses_are_checked_against_the_method_they_answer() -> None:
    validator = Validator.for_release()
    assert validator.validate({"id": 1, "result": {}}, "s2c") == []  # envelope only
    violations = validator.validate({"id": 1, "result": {}}, "s2c", "thread/start")
    assert {v.path for v in violations} >= {"/result/thread", "/result/model"}
    assert all(v.kind == "required" for v in violations)
    # A client's answer to a server request.
    assert (
        validator.validate({"id": 0, "result": {"decision": "accept"}}, "c2s", "item/commandExecution/requestApproval")
        == []
    )
    (bad,) = validator.validate({"id": 0, "result": {}}, "c2s", "item/commandExecution/requestApproval")
    assert (bad.kind, bad.path) == ("required", "/result/decision")
    (unknown,) = validator.validate({"id": 0, "result": {}}, "c2s", "thread/start")  # not a server request
    assert unknown.kind == "unknown_method" and "thread/start" in unknown.message


def test_error_answers_are_checked_against_the_envelope() -> None:
    validator = Validator.for_release()
    assert validator.validate({"error": {"code": -32600, "message": "Not initialized"}, "id": 0}, "s2c") == []
    (violation,) = validator.validate({"error": {"code": "x", "message": "m"}, "id": 0}, "s2c")
    assert (violation.kind, violation.path) == ("type", "/error/code")


def test_experimental_method_in_a_stable_session_says_so() -> None:
    (violation,) = Validator.for_release().validate({"id": 1, "method": "thread/settings/update", "params": {}}, "c2s")
    assert violation.kind == "unknown_method" and "experimentalApi" in violation.message


def test_release_without_a_pin_gets_a_clear_message() -> None:
    with pytest.raises(ReleaseNotPinned, match=r"no pinned schema for codex-cli 9\.9\.9.*0\.171\.0.*schema pin"):
        Validator.for_release("9.9.9")


def test_validators_are_cached_per_release_and_bundle() -> None:
    assert Validator.for_release() is Validator.for_release("0.171.0", False)
    assert Validator.for_release(experimental=True) is not Validator.for_release()


# --- mutations of real frames --------------------------------------------------------------------


def real_frame(filename: str, direction: str, want: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    for entry in entries(reference(Path(filename).stem).path):
        if entry["dir"] == direction and "_raw" not in entry["msg"] and want(entry["msg"]):
            return copy.deepcopy(entry["msg"])
    pytest.fail(f"no such frame in {filename}")


def method_is(method: str) -> Callable[[dict[str, Any]], bool]:
    return lambda m: m.get("method") == method


def item_type_is(item_type: str) -> Callable[[dict[str, Any]], bool]:
    return lambda m: m.get("method") == "item/started" and m["params"]["item"]["type"] == item_type


DELETE = object()


def mutate(frame: dict[str, Any], pointer: str, value: Any) -> None:
    *parents, last = [int(p) if p.isdigit() else p for p in pointer.strip("/").split("/")]
    target: Any = frame
    for part in parents:
        target = target[part]
    if value is DELETE:
        del target[last]
    else:
        target[last] = value


def waiting_on_approval(m: dict[str, Any]) -> bool:
    return m.get("method") == "thread/status/changed" and m["params"]["status"].get("activeFlags") == [
        "waitingOnApproval"
    ]


PLAIN, APPROVAL = "plain.jsonl", "approval_accept.jsonl"
MUTATIONS = [
    # a required field removed
    (PLAIN, "s2c", method_is("turn/completed"), "/params/threadId", DELETE, "required"),
    (PLAIN, "s2c", item_type_is("agentMessage"), "/params/item/id", DELETE, "required"),
    (PLAIN, "s2c", method_is("turn/started"), "/emittedAtMs", DELETE, "required"),
    (PLAIN, "c2s", method_is("turn/start"), "/params/input", DELETE, "required"),
    (PLAIN, "c2s", method_is("initialize"), "/params/clientInfo", DELETE, "required"),
    # a wrong type
    (PLAIN, "s2c", method_is("turn/completed"), "/params/turn/durationMs", "113", "type"),
    (PLAIN, "s2c", method_is("thread/tokenUsage/updated"), "/params/tokenUsage/total/inputTokens", "1", "type"),
    (PLAIN, "s2c", method_is("turn/started"), "/emittedAtMs", "now", "type"),
    (PLAIN, "c2s", method_is("initialize"), "/params/clientInfo/name", 5, "type"),
    (PLAIN, "s2c", method_is("thread/status/changed"), "/params/status", None, "type"),
    # an unknown enum value
    (PLAIN, "s2c", method_is("turn/completed"), "/params/turn/status", "done", "enum"),
    (PLAIN, "s2c", item_type_is("agentMessage"), "/params/item/type", "bogusItem", "enum"),
    (PLAIN, "s2c", method_is("thread/status/changed"), "/params/status/type", "sleeping", "enum"),
    (APPROVAL, "s2c", waiting_on_approval, "/params/status/activeFlags/0", "napping", "enum"),
]


@pytest.mark.parametrize(("filename", "direction", "pick", "path", "value", "kind"), MUTATIONS)
def test_mutated_frames_are_rejected_naming_the_field(
    filename: str, direction: str, pick: Callable[[dict[str, Any]], bool], path: str, value: Any, kind: str
) -> None:
    validator = Validator.for_release()
    frame = real_frame(filename, direction, pick)
    assert validator.validate(frame, direction) == []
    mutate(frame, path, value)
    violations = validator.validate(frame, direction)
    assert [(v.kind, v.path) for v in violations] == [(kind, path)]
    (violation,) = violations
    assert path in violation.message and violation.expected and violation.got
    field = next(p for p in reversed(path.split("/")) if not p.isdigit())
    explanation = validator.explain(frame, direction)
    assert field in explanation and "jsonschema best match" in explanation


def test_explain_valid_and_unknown() -> None:
    validator = Validator.for_release()
    assert validator.explain({"method": "initialized"}, "c2s") == "valid"
    assert "no/such" in validator.explain({"id": 1, "method": "no/such", "params": {}}, "c2s")


# --- never raises --------------------------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
_frameish = st.fixed_dictionaries(
    {},
    optional={
        "id": _json,
        "method": st.sampled_from(["turn/start", "item/started", "initialized", "x"]) | _json,
        "params": _json,
        "result": _json,
        "error": _json,
        "emittedAtMs": _json,
    },
)


@settings(max_examples=300, deadline=None)
@given(
    frame=_frameish | _json | st.just({1, 2}),
    direction=st.sampled_from(["c2s", "s2c"]),
    method=st.none() | st.sampled_from(["thread/start", "nope"]),
)
def test_validate_never_raises(frame: Any, direction: str, method: str | None) -> None:
    violations = Validator.for_release().validate(frame, direction, method)  # type: ignore[arg-type]
    assert all(isinstance(v, Violation) and v.message for v in violations)


def test_frames_no_codec_would_produce_are_violations_not_exceptions() -> None:
    validator = Validator.for_release()
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(50_000):
        node["a"] = {}
        node = node["a"]
    for frame, direction, method in [
        ({"id": 1, "result": deep}, "s2c", "thread/start"),
        ({"method": "turn/started", "params": deep, "emittedAtMs": 1}, "s2c", None),
        ({"method": "initialized", 1: 2}, "c2s", None),
        ({"id": 1, "result": {1, 2}}, "s2c", "thread/start"),
    ]:
        (violation,) = validator.validate(frame, direction, method)  # type: ignore[arg-type]
        assert violation.kind == "not_json" and len(violation.got) <= 80
        assert validator.explain(frame, direction, method)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="direction"):
        validator.validate({}, "up")  # type: ignore[arg-type]


def test_compile_all_covers_every_method() -> None:
    validator = Validator(Validator.for_release().bundle, "0.171.0")
    assert validator.compile_all() == 2 + 110 + 1 + 10 + 87 + 110 + 10
    assert validator.validate({"method": "initialized"}, "c2s") == []
