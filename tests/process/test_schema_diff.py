"""``schema diff`` on a mutated copy of the pinned 0.171.0 bundle, and the CLI's exit codes."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from support import paths

from contracts import schema_store
from contracts.exitcodes import FAILED, OK, USAGE
from contracts.schema_diff import Change, ChangeKind, diff_bundles
from harness.cli import main
from harness.commands.schema import format_diff

K = ChangeKind


def pinned() -> dict[str, Any]:
    return copy.deepcopy(dict(schema_store.load_bundle("0.171.0")))


def edit_type(bundle: dict[str, Any], name: str, edit: Callable[[dict[str, Any]], None]) -> int:
    """Apply ``edit`` to every copy of type ``name`` (each schema file carries its own copies)."""
    copies = 0
    for path, schema in bundle.items():
        holders = [schema.get("definitions", {}), schema.get("definitions", {}).get("v2", {})]
        for defs in holders:
            if isinstance(defs.get(name), dict):
                edit(defs[name])
                copies += 1
        if path.rsplit("/", 1)[-1] == f"{name}.json":
            edit(schema)
            copies += 1
    assert copies, name
    return copies


def remove_method(bundle: dict[str, Any], union_file: str, method: str) -> None:
    schema = bundle[union_file]
    before = len(schema["oneOf"])
    schema["oneOf"] = [v for v in schema["oneOf"] if v["properties"]["method"]["enum"] != [method]]
    assert len(schema["oneOf"]) == before - 1


def mutated() -> dict[str, Any]:
    bundle = pinned()
    remove_method(bundle, "ClientRequest.json", "thread/goal/clear")
    edit_type(bundle, "TurnStartParams", lambda s: s["properties"].update(priority={"type": ["integer", "null"]}))
    edit_type(bundle, "ThreadStartParams", lambda s: s.setdefault("required", []).append("cwd"))
    edit_type(bundle, "Turn", lambda s: s["required"].append("durationMs"))

    def rename_interrupted(s: dict[str, Any]) -> None:
        s["enum"] = ["cancelled" if v == "interrupted" else v for v in s["enum"]]

    edit_type(bundle, "TurnStatus", rename_interrupted)
    return bundle


EXPECTED = {
    Change(K.METHOD_REMOVED, "ClientRequest", "thread/goal/clear", breaking=True),
    Change(K.FIELD_ADDED, "TurnStartParams", "priority", new="integer|null"),
    Change(K.FIELD_NOW_REQUIRED, "ThreadStartParams", "cwd", breaking=True),  # the client sends it
    Change(K.FIELD_NOW_REQUIRED, "Turn", "durationMs"),  # the server sends it: more certainty for the client
    Change(K.ENUM_VALUES_REMOVED, "TurnStatus", "interrupted", breaking=True),
    Change(K.ENUM_VALUES_ADDED, "TurnStatus", "cancelled"),
}


def test_identical_bundles_have_no_changes() -> None:
    result = diff_bundles(pinned(), pinned())
    assert result.changes == [] and not result.is_breaking


def test_mutated_bundle_gives_the_expected_report() -> None:
    result = diff_bundles(pinned(), mutated(), "0.171.0", "mutated")
    assert set(result.changes) == EXPECTED
    assert len(result.changes) == len(EXPECTED)
    assert result.is_breaking and {c.name for c in result.breaking} == {"thread/goal/clear", "cwd", "interrupted"}
    text = format_diff(result)
    assert (
        text.splitlines()[0]
        == "schema diff 0.171.0 -> mutated (stable bundle): BREAKING (3 changes can break a client)"
    )
    for line in (
        "  - ClientRequest (BREAKING): thread/goal/clear",
        "  + TurnStartParams.priority: integer|null",
        "  ! ThreadStartParams.cwd is now required  BREAKING (clients that send it)",
        "  ! Turn.durationMs is now required",
        "  - TurnStatus: interrupted  BREAKING (clients that read it)",
        "  + TurnStatus: cancelled",
    ):
        assert line in text.splitlines(), (line, text)
    assert len(text.splitlines()) < 25


def test_added_method_removed_field_type_change_and_variants() -> None:
    old = pinned()
    new = pinned()
    remove_method(old, "ServerNotification.json", "turn/diff/updated")  # so the new one "adds" it
    edit_type(new, "TurnInterruptParams", lambda s: s["properties"].pop("turnId"))
    edit_type(new, "TokenUsageBreakdown", lambda s: s["properties"]["inputTokens"].update(type="string"))

    def drop_idle(s: dict[str, Any]) -> None:
        s["oneOf"] = [v for v in s["oneOf"] if v.get("title") != "IdleThreadStatus"]

    edit_type(new, "ThreadStatus", drop_idle)
    result = diff_bundles(old, new)
    assert set(result.changes) == {
        Change(K.METHOD_ADDED, "ServerNotification", "turn/diff/updated"),
        Change(K.FIELD_REMOVED, "TurnInterruptParams", "turnId", old="string", breaking=True),
        Change(K.FIELD_TYPE_CHANGED, "TokenUsageBreakdown", "inputTokens", "integer", "string", breaking=True),
        Change(K.VARIANT_REMOVED, "ThreadStatus", "IdleThreadStatus", breaking=True),
    }


def test_additions_only_are_not_breaking() -> None:
    new = pinned()
    edit_type(new, "TurnStartParams", lambda s: s["properties"].update(priority={"type": "integer"}))
    result = diff_bundles(pinned(), new)
    assert result.changes == [Change(K.FIELD_ADDED, "TurnStartParams", "priority", new="integer")]
    assert not result.is_breaking


# --- the command ---------------------------------------------------------------------------------


def test_cli_diff_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stable = mutated()
    release = schema_store.write_release("0.171.1", stable, stable, tmp_path)
    assert main(["schema", "diff", "0.171.0", str(release)]) == FAILED
    out = capsys.readouterr().out
    assert "BREAKING" in out and "thread/goal/clear" in out

    compatible = pinned()
    edit_type(compatible, "TurnStartParams", lambda s: s["properties"].update(priority={"type": "integer"}))
    raw_dir = tmp_path / "generated"
    for rel, schema in compatible.items():
        (raw_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (raw_dir / rel).write_bytes(orjson.dumps(schema))
    assert main(["schema", "diff", "0.171.0", str(raw_dir)]) == OK
    assert "compatible" in capsys.readouterr().out
    assert main(["schema", "diff", "0.171.0", "0.171.0", "--experimental"]) == OK
    assert main(["schema", "diff", "0.171.0", str(release), "--json"]) == FAILED
    assert '"kind": "method_removed"' in capsys.readouterr().out


def test_cli_diff_unreadable_sides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "diff", "0.171.0", "9.9.9"]) == USAGE
    assert "no pinned schema for codex-cli 9.9.9" in capsys.readouterr().err
    assert main(["schema", "diff", "0.171.0", str(tmp_path / "missing")]) == USAGE
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["schema", "diff", str(empty), "0.171.0"]) == USAGE
    assert "no *.json schema files" in capsys.readouterr().err
    corrupt = tmp_path / "codex-cli-1.0.0"
    corrupt.mkdir()
    (corrupt / "meta.json").write_text("{}")
    (corrupt / "stable.json.zst").write_bytes(b"not zstd")
    assert main(["schema", "diff", str(corrupt), "0.171.0"]) == USAGE
    assert "corrupt bundle" in capsys.readouterr().err


def test_cli_usage_errors_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["schema", "diff", "0.171.0"])
    assert exc.value.code == USAGE
    with pytest.raises(SystemExit) as exc:
        main(["schema"])
    assert exc.value.code == USAGE


# --- any two shapes, judged by who is hurt -------------------------------------------------------

_DATA = paths.DATA / "schema_diff"
_SIDE_FILES = {"server": ("ServerNotification.json",), "client": ("ClientRequest.json",)}
_SIDE_FILES["both"] = _SIDE_FILES["server"] + _SIDE_FILES["client"]


def tiny_bundle(defs: dict[str, Any], sent_by: str) -> dict[str, Any]:
    """A bundle holding only ``defs``, sent by the server (a client reads them), the client, or both."""
    return {name: {"oneOf": [], "definitions": copy.deepcopy(defs)} for name in _SIDE_FILES[sent_by]}


def judged(old: dict[str, Any], new: dict[str, Any], sent_by: str) -> set[tuple[str, str, str, str]]:
    result = diff_bundles(tiny_bundle(old, sent_by), tiny_bundle(new, sent_by))
    rows = {(c.kind.value, c.where, c.name, c.hurts) for c in result.changes if not c.kind.startswith("type_")}
    assert all(c.breaking == bool(c.hurts) for c in result.changes)
    return rows


def obj(required: tuple[str, ...] = (), **fields: Any) -> dict[str, Any]:
    return {"type": "object", "properties": fields, "required": list(required)}


S, INT, N = {"type": "string"}, {"type": "integer"}, {"type": ["string", "null"]}
E = {"type": "string", "enum": ["a", "b"]}
PAIR = {"oneOf": [obj(("a",), a=S), obj(("b",), b=INT)]}

# (case, sent by, old field/type T, new, expected rows); every type is named "T"
SHAPES: list[tuple[str, str, dict[str, Any], dict[str, Any], set[tuple[str, str, str, str]]]] = [
    ("object -> union, server-sent", "server", obj(("a",), a=S), PAIR, {("shape_changed", "T", "", "reader")}),
    (
        "object -> union, client-sent: old JSON still valid",
        "client",
        obj(("a",), a=S),
        PAIR,
        {("shape_changed", "T", "", "")},
    ),
    ("union -> object, client-sent", "client", PAIR, obj(("a",), a=S), {("shape_changed", "T", "", "writer")}),
    ("union -> object, server-sent", "server", PAIR, obj(("a",), a=S), {("shape_changed", "T", "", "")}),
    (
        "object -> string field",
        "both",
        obj(x={"$ref": "#/definitions/O"}),
        obj(x=S),
        {("field_type_changed", "T", "x", "reader+writer")},
    ),
    ("union -> scalar", "both", obj(x=PAIR), obj(x=INT), {("field_type_changed", "T", "x", "reader+writer")}),
    (
        "enum -> string, server-sent: a match risk, not a break",
        "server",
        obj(m=E),
        obj(m=S),
        {("field_type_changed", "T", "m", "")},
    ),
    ("string -> enum, client-sent", "client", obj(m=S), obj(m=E), {("field_type_changed", "T", "m", "writer")}),
    ("string -> enum, server-sent", "server", obj(m=S), obj(m=E), {("field_type_changed", "T", "m", "")}),
    ("nullable -> not null, client-sent", "client", obj(n=N), obj(n=S), {("field_type_changed", "T", "n", "writer")}),
    ("nullable -> not null, server-sent", "server", obj(n=N), obj(n=S), {("field_type_changed", "T", "n", "")}),
    ("not null -> nullable, server-sent", "server", obj(n=S), obj(n=N), {("field_type_changed", "T", "n", "reader")}),
    ("not null -> nullable, client-sent", "client", obj(n=S), obj(n=N), {("field_type_changed", "T", "n", "")}),
    (
        "array<string> -> array<integer>",
        "both",
        obj(l={"type": "array", "items": S}),
        obj(l={"type": "array", "items": INT}),
        {("field_type_changed", "T", "l", "reader+writer")},
    ),
    (
        "array<enum> -> array<string>, client-sent",
        "client",
        obj(l={"type": "array", "items": E}),
        obj(l={"type": "array", "items": S}),
        {("field_type_changed", "T", "l", "")},
    ),
    (
        "array<string> -> array<enum>, client-sent",
        "client",
        obj(l={"type": "array", "items": S}),
        obj(l={"type": "array", "items": E}),
        {("field_type_changed", "T", "l", "writer")},
    ),
    (
        "renamed item type, same JSON",
        "both",
        obj(l={"type": "array", "items": {"$ref": "#/definitions/P"}}),
        obj(l={"type": "array", "items": {"$ref": "#/definitions/Q"}}),
        set(),
    ),
    (
        "required -> optional, server-sent",
        "server",
        obj(("a",), a=S),
        obj(a=S),
        {("field_now_optional", "T", "a", "reader")},
    ),
    ("optional -> required, server-sent", "server", obj(a=S), obj(("a",), a=S), {("field_now_required", "T", "a", "")}),
]
_NAMED = {"O": obj(("k",), k=S), "P": S, "Q": {"type": "string", "description": "renamed"}}


@pytest.mark.parametrize(("sent_by", "old", "new", "expected"), [c[1:] for c in SHAPES], ids=[c[0] for c in SHAPES])
def test_any_two_shapes_are_compared_and_judged_by_who_is_hurt(
    sent_by: str, old: dict[str, Any], new: dict[str, Any], expected: set[tuple[str, str, str, str]]
) -> None:
    assert judged({"T": old, **_NAMED}, {"T": new, **_NAMED}, sent_by) == expected


REAL_CASES = orjson.loads((_DATA / "real_cases.json").read_bytes())


@pytest.mark.parametrize("case", sorted(REAL_CASES))
def test_real_release_changes_are_classified(case: str) -> None:
    """Definitions extracted from the releases' own schemas (``generate-json-schema``)."""
    spec = REAL_CASES[case]
    assert judged(spec["old"], spec["new"], spec["sent_by"]) == {tuple(row) for row in spec["expected"]}


def test_pinned_169_to_171_names_the_union_change() -> None:
    result = diff_bundles(schema_store.load_bundle("0.169.0"), schema_store.load_bundle("0.171.0"))
    assert {(c.kind, c.where, c.name) for c in result.breaking} == {
        (K.SHAPE_CHANGED, "AgentMessageDisplay", ""),
        (K.FIELD_REMOVED, "Project", "position"),
    }
    assert "  ~ AgentMessageDisplay: object -> union  BREAKING (clients that read it)" in format_diff(result)
