"""What changed between two schema bundles, and whether it can break a client (pure).

Methods are compared per union (``ClientRequest``, ``ServerNotification``...). Types are compared by
definition name across the whole bundle; inside a type, every object, array, enum and ``oneOf``
variant gets a location (``Turn.status``, ``ThreadItem<AgentMessageThreadItem>.text``,
``UserInput[]``) and locations present in both bundles are compared field by field.

Breaking (exit 1 of ``schema diff``): a removed method, field, enum value or union variant, a changed
field type, and a field newly required in something the client sends (request params, the
``initialized`` notification, answers to server requests).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from contracts.protocol_index import UNION_FILES, Union, build_index

_REF_RE: Final = re.compile(r"#/definitions/(?:v2/)?([A-Za-z0-9_]+)$")
_UNION_NAMES: Final = frozenset(u.value for u in Union)


class ChangeKind(StrEnum):
    METHOD_ADDED = "method_added"
    METHOD_REMOVED = "method_removed"
    TYPE_ADDED = "type_added"
    TYPE_REMOVED = "type_removed"
    FIELD_ADDED = "field_added"
    FIELD_REMOVED = "field_removed"
    FIELD_TYPE_CHANGED = "field_type_changed"
    FIELD_NOW_REQUIRED = "field_now_required"
    FIELD_NOW_OPTIONAL = "field_now_optional"
    ENUM_VALUES_ADDED = "enum_values_added"
    ENUM_VALUES_REMOVED = "enum_values_removed"
    VARIANT_ADDED = "variant_added"
    VARIANT_REMOVED = "variant_removed"


@dataclass(frozen=True, slots=True, order=True)
class Change:
    """One difference. ``where``: ``"ClientRequest"`` for methods, a type location otherwise."""

    kind: ChangeKind
    where: str
    name: str  # the method, field, type, variant, or the enum values (comma-separated)
    old: str = ""
    new: str = ""
    breaking: bool = False


#: What a change means to a client, worst first: it can stop compiling or parsing (*breaking*); a client that
#: matches exhaustively on what the server sends meets a value or variant it has no arm for (*exhaustive-match
#: risk*); or nothing it does today changes (*additive*).
IMPACTS: Final = ("breaking", "exhaustive-match risk", "additive")
_WIDENING: Final = frozenset({ChangeKind.ENUM_VALUES_ADDED, ChangeKind.VARIANT_ADDED})


@dataclass(frozen=True, slots=True)
class SchemaDiff:
    old_label: str
    new_label: str
    changes: list[Change] = field(default_factory=list)
    #: the types the new release's server writes (notifications, its requests, answers to the client's requests)
    server_sent: frozenset[str] = frozenset()

    def impact(self, change: Change) -> str:
        """One of :data:`IMPACTS`. A server request the client has never seen must be answered: a risk too."""
        if change.breaking:
            return "breaking"
        if change.kind in _WIDENING and change.where.split("<", 1)[0].split(".", 1)[0] in self.server_sent:
            return "exhaustive-match risk"
        if change.kind == ChangeKind.METHOD_ADDED and change.where == Union.SERVER_REQUEST.value:
            return "exhaustive-match risk"
        return "additive"

    def by_impact(self) -> dict[str, list[Change]]:
        out: dict[str, list[Change]] = {name: [] for name in IMPACTS}
        for change in self.changes:
            out[self.impact(change)].append(change)
        return out

    @property
    def breaking(self) -> list[Change]:
        return [c for c in self.changes if c.breaking]

    @property
    def is_breaking(self) -> bool:
        return any(c.breaking for c in self.changes)

    def of_kind(self, *kinds: ChangeKind) -> list[Change]:
        return [c for c in self.changes if c.kind in kinds]


# --- flattening a bundle ---------------------------------------------------------------------------


def _normalise_refs(schema: Any) -> Any:
    # The same type is written "#/definitions/X" or "#/definitions/v2/X" depending on the file.
    if isinstance(schema, dict):
        out = {}
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str) and (m := _REF_RE.search(value)):
                out[key] = m.group(1)
            elif key not in ("description", "title", "$schema", "definitions"):
                out[key] = _normalise_refs(value)
        if "title" in schema and "properties" in schema:
            out["title"] = schema["title"]  # variant labels
        return out
    if isinstance(schema, list):
        return [_normalise_refs(v) for v in schema]
    return schema


def _file_order(path: str) -> tuple[int, str]:
    top = path.rsplit("/", 1)[-1]
    if top in UNION_FILES.values():
        return (0, path)
    return (1 if path.startswith("v2/") else 2, path)


def definitions(bundle: Mapping[str, Any]) -> dict[str, Any]:
    """Every named type of the bundle (definitions of all files, and each file's own root type)."""
    found: dict[str, Any] = {}
    for path in sorted(bundle, key=_file_order):
        schema = bundle[path]
        if not isinstance(schema, dict):
            continue
        defs = dict(schema.get("definitions", {}))
        nested = defs.pop("v2", None)
        if isinstance(nested, dict) and not ("type" in nested or "properties" in nested):
            defs.update(nested)
        for name, body in defs.items():
            if name not in _UNION_NAMES:  # compared method by method instead
                found.setdefault(name, _normalise_refs(body))
        name = path.rsplit("/", 1)[-1].removesuffix(".json")
        if name not in _UNION_NAMES and not name.startswith("codex_app_server_protocol"):
            found.setdefault(name, _normalise_refs(schema))
    return found


def client_sent_types(bundle: Mapping[str, Any]) -> set[str]:
    """Types a client writes: request params, client notifications, answers to server requests."""
    names: set[str] = set()
    for union in (Union.CLIENT_REQUEST, Union.CLIENT_NOTIFICATION):
        names.update(bundle.get(UNION_FILES[union], {}).get("definitions", {}))
    for entry in build_index(bundle).methods[Union.SERVER_REQUEST].values():
        if entry.response_file:
            names.add(entry.response_file.rsplit("/", 1)[-1].removesuffix(".json"))
            names.update(bundle[entry.response_file].get("definitions", {}))
    return names


def server_sent_types(bundle: Mapping[str, Any]) -> set[str]:
    """Types the server writes: its notifications and requests, and its answers to the client's requests."""
    names: set[str] = set()
    for union in (Union.SERVER_NOTIFICATION, Union.SERVER_REQUEST):
        names.update(bundle.get(UNION_FILES[union], {}).get("definitions", {}))
    for entry in build_index(bundle).methods[Union.CLIENT_REQUEST].values():
        if entry.response_file and isinstance(bundle.get(entry.response_file), dict):
            names.add(entry.response_file.rsplit("/", 1)[-1].removesuffix(".json"))
            names.update(bundle[entry.response_file].get("definitions", {}))
    names.discard("v2")
    nested = {}
    for union in (Union.SERVER_NOTIFICATION, Union.SERVER_REQUEST):
        defs = bundle.get(UNION_FILES[union], {}).get("definitions", {})
        if isinstance(defs.get("v2"), dict):
            nested.update(defs["v2"])
    return names | set(nested)


def _is_null(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "null" and len(schema) == 1


def summary(schema: Any) -> str:
    """A type in a few characters: ``string``, ``null|integer``, ``array<UserInput>``, ``Turn``."""
    if schema is True or schema == {}:
        return "any"
    if not isinstance(schema, dict):
        return "never" if schema is False else "?"
    if "$ref" in schema:
        return schema["$ref"]
    if "anyOf" in schema or "oneOf" in schema:
        parts = sorted({summary(v) for v in schema.get("anyOf", schema.get("oneOf", []))})
        return "|".join(parts)
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = sorted(kind)
    elif kind:
        kinds = [kind]
    elif "enum" in schema:
        kinds = ["enum"]
    elif "properties" in schema:
        kinds = ["object"]
    else:
        kinds = ["any"]
    if "array" in kinds and "items" in schema:
        kinds = [f"array<{summary(schema['items'])}>" if k == "array" else k for k in kinds]
    return "|".join(kinds)


def _variant_label(variant: Any, index: int) -> str:
    if not isinstance(variant, dict):
        return str(index)
    if "$ref" in variant:
        return variant["$ref"]
    if "title" in variant:
        return variant["title"]
    for prop, sub in variant.get("properties", {}).items():
        if isinstance(sub, dict) and len(sub.get("enum", ())) == 1:
            return f"{prop}={sub['enum'][0]}"
    return summary(variant) if "type" in variant else str(index)


@dataclass
class _Shape:
    fields: dict[str, str] | None = None  # name → type summary
    required: frozenset[str] = frozenset()
    enum: frozenset[str] | None = None
    variants: frozenset[str] | None = None


def _single_values(variants: list[Any]) -> list[Any] | None:
    values: list[Any] = []
    for v in variants:
        if not (isinstance(v, dict) and "enum" in v and "properties" not in v):
            return None
        values.extend(v["enum"])
    return values


def _walk(schema: Any, loc: str) -> Iterator[tuple[str, _Shape]]:
    if not isinstance(schema, dict):
        return
    for key in ("anyOf", "oneOf"):
        if key not in schema:
            continue
        variants = [v for v in schema[key] if not _is_null(v)]
        if len(variants) == 1:  # a nullable wrapper: the same place
            yield from _walk(variants[0], loc)
            continue
        if (values := _single_values(variants)) is not None:  # documented string enum
            yield loc, _Shape(enum=frozenset(map(str, values)))
            continue
        labels = [_variant_label(v, i) for i, v in enumerate(variants)]
        yield loc, _Shape(variants=frozenset(labels))
        for label, variant in zip(labels, variants, strict=True):
            yield from _walk(variant, f"{loc}<{label}>")
    for sub in schema.get("allOf", []):
        yield from _walk(sub, loc)
    if "enum" in schema and len(schema["enum"]) > 1:
        yield loc, _Shape(enum=frozenset(map(str, schema["enum"])))
    properties = schema.get("properties")
    if isinstance(properties, dict):
        yield (
            loc,
            _Shape(
                fields={name: summary(sub) for name, sub in properties.items()},
                required=frozenset(schema.get("required", ())),
            ),
        )
        for name, sub in properties.items():
            yield from _walk(sub, f"{loc}.{name}")
    items = schema.get("items")
    if isinstance(items, dict):
        yield from _walk(items, f"{loc}[]")


def shapes(schema: Any, name: str) -> dict[str, _Shape]:
    """Every location of one type with what it holds (merged when a location has several aspects)."""
    out: dict[str, _Shape] = {}
    for loc, shape in _walk(schema, name):
        have = out.setdefault(loc, _Shape())
        have.fields = shape.fields if shape.fields is not None else have.fields
        have.required = shape.required or have.required
        have.enum = shape.enum if shape.enum is not None else have.enum
        have.variants = shape.variants if shape.variants is not None else have.variants
    return out


# --- the diff --------------------------------------------------------------------------------------


def diff_bundles(
    old: Mapping[str, Any], new: Mapping[str, Any], old_label: str = "old", new_label: str = "new"
) -> SchemaDiff:
    changes: list[Change] = []
    old_index, new_index = build_index(old), build_index(new)
    for union in Union:
        before, after = set(old_index.methods[union]), set(new_index.methods[union])
        changes += [Change(ChangeKind.METHOD_REMOVED, union.value, m, breaking=True) for m in sorted(before - after)]
        changes += [Change(ChangeKind.METHOD_ADDED, union.value, m) for m in sorted(after - before)]

    old_defs, new_defs = definitions(old), definitions(new)
    changes += [Change(ChangeKind.TYPE_REMOVED, "types", n) for n in sorted(old_defs.keys() - new_defs.keys())]
    changes += [Change(ChangeKind.TYPE_ADDED, "types", n) for n in sorted(new_defs.keys() - old_defs.keys())]
    client_sent = client_sent_types(new)
    for name in sorted(old_defs.keys() & new_defs.keys()):
        if old_defs[name] == new_defs[name]:
            continue
        changes += _diff_type(name, old_defs[name], new_defs[name], name in client_sent)
    return SchemaDiff(old_label, new_label, changes, frozenset(server_sent_types(new)))


def _diff_type(name: str, old: Any, new: Any, client_sends: bool) -> list[Change]:
    out: list[Change] = []
    before, after = shapes(old, name), shapes(new, name)
    for loc in sorted(before.keys() & after.keys()):
        a, b = before[loc], after[loc]
        if a.fields is not None and b.fields is not None:
            for f in sorted(a.fields.keys() - b.fields.keys()):
                out.append(Change(ChangeKind.FIELD_REMOVED, loc, f, a.fields[f], breaking=True))
            for f in sorted(b.fields.keys() - a.fields.keys()):
                required = f in b.required
                out.append(
                    Change(
                        ChangeKind.FIELD_ADDED,
                        loc,
                        f,
                        new=b.fields[f] + (" (required)" if required else ""),
                        breaking=required and client_sends,
                    )
                )
            for f in sorted(a.fields.keys() & b.fields.keys()):
                if a.fields[f] != b.fields[f]:
                    out.append(Change(ChangeKind.FIELD_TYPE_CHANGED, loc, f, a.fields[f], b.fields[f], breaking=True))
            for f in sorted((b.required - a.required) & a.fields.keys()):
                out.append(Change(ChangeKind.FIELD_NOW_REQUIRED, loc, f, breaking=client_sends))
            for f in sorted((a.required - b.required) & b.fields.keys()):
                out.append(Change(ChangeKind.FIELD_NOW_OPTIONAL, loc, f))
        if a.enum is not None and b.enum is not None:
            if removed := sorted(a.enum - b.enum):
                out.append(Change(ChangeKind.ENUM_VALUES_REMOVED, loc, ", ".join(removed), breaking=True))
            if added := sorted(b.enum - a.enum):
                out.append(Change(ChangeKind.ENUM_VALUES_ADDED, loc, ", ".join(added)))
        if a.variants is not None and b.variants is not None:
            for v in sorted(a.variants - b.variants):
                out.append(Change(ChangeKind.VARIANT_REMOVED, loc, v, breaking=True))
            for v in sorted(b.variants - a.variants):
                out.append(Change(ChangeKind.VARIANT_ADDED, loc, v))
    return out
