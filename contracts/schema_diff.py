"""What changed between two schema bundles, and whether it can break a client (pure).

Methods are compared per union (``ClientRequest``, ``ServerNotification``...). Types are compared by
definition name across the whole bundle; inside a type, every object, array, enum and ``oneOf``
variant gets a location (``Turn.status``, ``ThreadItem<AgentMessageThreadItem>.text``,
``UserInput[]``) and locations present in both bundles are compared field by field.

Every change is classified by who it hurts: a client that *reads* the type (the server sends it:
notifications, server requests, answers to the client's requests) or one that *writes* it (request params,
the ``initialized`` notification, answers to server requests). It is breaking (exit 1 of ``schema diff``)
when it hurts a side that really handles the type:

* a removed method, field, enum value or union variant: both sides;
* a location whose shape changed (object <-> union <-> enum <-> scalar, an array's item type): both;
* a field newly required or no longer nullable: the writer (what it sent before is now refused);
* a field newly optional or newly nullable: the reader (what it relied on may now be missing);
* a free string that became an enum: the writer; an enum that became a free string widens it for the
  reader, an exhaustive-match risk like an added enum value, not a break.

Types are compared by the JSON they allow, not by their names: a field whose type was renamed
(``AbsolutePathBuf`` -> ``LegacyAppPathString``, both plain strings) is no change at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

import orjson

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
    SHAPE_CHANGED = "shape_changed"


@dataclass(frozen=True, slots=True, order=True)
class Change:
    """One difference. ``where``: ``"ClientRequest"`` for methods, a type location otherwise."""

    kind: ChangeKind
    where: str
    name: str  # the method, field, type, variant, or the enum values (comma-separated)
    old: str = ""
    new: str = ""
    breaking: bool = False
    #: who it breaks: "reader" (a client that reads what the server sends), "writer", "reader+writer" or ""
    hurts: str = field(default="", compare=False)


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
        parts = sorted({summary(v) for v in (schema["anyOf"] if "anyOf" in schema else schema["oneOf"])})
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
    raw: dict[str, Any] = field(default_factory=dict)  # name → its schema, to compare by wire shape
    required: frozenset[str] = frozenset()
    enum: frozenset[str] | None = None
    variants: frozenset[str] | None = None
    node: Any = None  # the schema at this location, to judge a change of shape by the JSON it allows


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
            yield loc, _Shape(enum=frozenset(map(str, values)), node=schema)
            continue
        labels = [_variant_label(v, i) for i, v in enumerate(variants)]
        yield loc, _Shape(variants=frozenset(labels), node=schema)
        for label, variant in zip(labels, variants, strict=True):
            yield from _walk(variant, f"{loc}<{label}>")
    for sub in schema.get("allOf", []):
        yield from _walk(sub, loc)
    if "enum" in schema and len(schema["enum"]) > 1:
        yield loc, _Shape(enum=frozenset(map(str, schema["enum"])), node=schema)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        yield (
            loc,
            _Shape(
                fields={name: summary(sub) for name, sub in properties.items()},
                raw=dict(properties),
                node=schema,
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
        have.raw = shape.raw or have.raw
        have.node = have.node if have.node is not None else shape.node
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
        changes += [
            Change(ChangeKind.METHOD_REMOVED, union.value, m, breaking=True, hurts=_BOTH)
            for m in sorted(before - after)
        ]
        changes += [Change(ChangeKind.METHOD_ADDED, union.value, m) for m in sorted(after - before)]

    old_defs, new_defs = definitions(old), definitions(new)
    changes += [Change(ChangeKind.TYPE_REMOVED, "types", n) for n in sorted(old_defs.keys() - new_defs.keys())]
    changes += [Change(ChangeKind.TYPE_ADDED, "types", n) for n in sorted(new_defs.keys() - old_defs.keys())]
    client_sent, server_sent = client_sent_types(new), server_sent_types(new)
    for name in sorted(old_defs.keys() & new_defs.keys()):
        if old_defs[name] == new_defs[name]:
            continue
        sides = _Sides(name in server_sent, name in client_sent)
        changes += _diff_type(name, old_defs[name], new_defs[name], sides, old_defs, new_defs)
    return SchemaDiff(old_label, new_label, changes, frozenset(server_sent))


# --- who a change hurts ----------------------------------------------------------------------------

_BOTH: Final = "reader+writer"
_ANNOTATIONS: Final = frozenset({"description", "title", "default", "examples", "format", "minimum", "maximum"})
_MAX_DEPTH: Final = 24


@dataclass(frozen=True, slots=True)
class _Sides:
    """Whether the server sends the type (a client reads it) and whether a client sends it (writes it)."""

    read: bool
    written: bool

    def verdict(self, reader: bool, writer: bool) -> tuple[bool, str]:
        """Breaking, and who is hurt among the clients that really handle the type."""
        if self.read or self.written:  # a type no method reaches is judged as both read and written
            reader, writer = reader and self.read, writer and self.written
        return reader or writer, "+".join(name for name, hit in (("reader", reader), ("writer", writer)) if hit)


def _wire(schema: Any, defs: Mapping[str, Any], seen: tuple[str, ...] = ()) -> Any:
    """The JSON a schema allows, names resolved and annotations dropped: renames compare equal."""
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        name = schema["$ref"]
        if name in seen or len(seen) >= _MAX_DEPTH or name not in defs:
            return {"$ref": name}  # a recursive type: its own diff covers it
        return _wire(defs[name], defs, (*seen, name))
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _ANNOTATIONS:
            continue
        if key in ("anyOf", "oneOf"):
            variants: list[Any] = []
            for v in value:
                w = _wire(v, defs, seen)
                variants += w["anyOf"] if isinstance(w, dict) and set(w) == {"anyOf"} else [w]
            out["anyOf"] = _sorted_unique(variants)
        elif key == "properties" and isinstance(value, dict):
            out[key] = {k: _wire(v, defs, seen) for k, v in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = _wire(value, defs, seen)
        elif key in ("required", "enum") and isinstance(value, list):
            out[key] = sorted(map(str, value))
        else:
            out[key] = value
    kinds = out.get("type")
    if isinstance(kinds, list):  # {"type": ["string", "null"]} is the union of a string and null
        rest = {k: v for k, v in out.items() if k != "type"}
        out = {"anyOf": _sorted_unique([{**rest, "type": k} if k != "null" else {"type": "null"} for k in kinds])}
    if "anyOf" in out and len(out) > 1:  # an object with a union in it: keep the union the outer shape
        rest = {k: v for k, v in out.items() if k != "anyOf"}
        out = {"anyOf": _sorted_unique([_merge(rest, v) for v in out["anyOf"]])}
    if "anyOf" in out and len(out["anyOf"]) == 1:
        return out["anyOf"][0]
    return out


def _merge(a: dict[str, Any], b: Any) -> Any:
    # An object's own fields plus one variant's: the JSON that variant of the object allows.
    if not isinstance(b, dict):
        return b
    out = {**a, **b}
    if "properties" in a and "properties" in b:
        out["properties"] = {**a["properties"], **b["properties"]}
    if "required" in a and "required" in b:
        out["required"] = sorted({*a["required"], *b["required"]})
    return out


def _sorted_unique(variants: list[Any]) -> list[Any]:
    keyed = {orjson.dumps(v, option=orjson.OPT_SORT_KEYS): v for v in variants}
    return [keyed[k] for k in sorted(keyed)]


def _split_null(schema: Any) -> tuple[bool, list[Any]]:
    variants = schema["anyOf"] if isinstance(schema, dict) and set(schema) == {"anyOf"} else [schema]
    rest = [v for v in variants if v != {"type": "null"}]
    return len(rest) < len(variants), rest


def _kind(schema: Any) -> str:
    if not isinstance(schema, dict) or schema == {}:
        return "any"
    if "$ref" in schema:
        return "ref:" + schema["$ref"]
    if "enum" in schema:
        return "enum"
    if "properties" in schema or schema.get("type") == "object":
        return "object"
    return str(schema.get("type", "any"))


def _hurt(old: Any, new: Any, depth: int = 0) -> tuple[bool, bool]:
    """(reader hurt, writer hurt) by replacing wire shape ``old`` with ``new``."""
    if old == new or depth > _MAX_DEPTH:
        return False, False
    old_null, old_rest = _split_null(old)
    new_null, new_rest = _split_null(new)
    reader, writer = new_null and not old_null, old_null and not new_null
    if old_rest == new_rest:
        return reader, writer
    if len(old_rest) != 1 or len(new_rest) != 1:  # unions: any variant lost or gained
        lost = any(v not in new_rest for v in old_rest)
        gained = any(v not in old_rest for v in new_rest)
        return reader or gained, writer or lost
    a, b = old_rest[0], new_rest[0]
    ka, kb = _kind(a), _kind(b)
    if {ka, kb} == {"enum", "string"}:  # a string's values narrowed (writer) or widened (a match risk)
        return reader, writer or kb == "enum"
    if ka != kb:
        return True, True
    if ka == "enum":
        removed = bool(set(a["enum"]) - set(b["enum"]))
        return reader or removed, writer or removed
    if ka == "array":
        r, w = _hurt(a.get("items", {}), b.get("items", {}), depth + 1)
        return reader or r, writer or w
    if ka == "object":
        pa, pb = a.get("properties", {}), b.get("properties", {})
        ra, rb = set(a.get("required", ())), set(b.get("required", ()))
        reader |= bool(pa.keys() - pb.keys()) or bool(ra - rb)
        writer |= bool(pa.keys() - pb.keys()) or bool(rb - ra)
        for key in pa.keys() & pb.keys():
            r, w = _hurt(pa[key], pb[key], depth + 1)
            reader, writer = reader or r, writer or w
        return reader, writer
    return True, True  # another scalar, or constraints this differ cannot read: assume the worst


def _described(short: str, schema: Any) -> str:
    # "string" says nothing when the change is a string that became an enum: name the enum.
    return short.replace("string", "enum", 1) if isinstance(schema, dict) and '"enum":' in _json_text(schema) else short


def _json_text(schema: Any) -> str:
    return orjson.dumps(schema).decode() if schema is not None else ""


def _shape_kind(shape: _Shape) -> str:
    if shape.variants is not None:
        return "union"
    if shape.fields is not None:
        return "object"
    return "enum" if shape.enum is not None else "other"


def _diff_type(
    name: str,
    old: Any,
    new: Any,
    sides: _Sides,
    old_defs: Mapping[str, Any] | None = None,
    new_defs: Mapping[str, Any] | None = None,
) -> list[Change]:
    old_defs, new_defs = old_defs or {}, new_defs or {}
    out: list[Change] = []

    def add(kind: ChangeKind, loc: str, what: str, reader: bool, writer: bool, old: str = "", new: str = "") -> None:
        breaking, hurts = sides.verdict(reader, writer)
        out.append(Change(kind, loc, what, old, new, breaking=breaking, hurts=hurts))

    before, after = shapes(old, name), shapes(new, name)
    for loc in sorted(before.keys() & after.keys()):
        a, b = before[loc], after[loc]
        if _shape_kind(a) != _shape_kind(b):
            old_shape, new_shape = _wire(a.node, old_defs), _wire(b.node, new_defs)
            if old_shape != new_shape:
                r, w = _hurt(old_shape, new_shape)
                add(ChangeKind.SHAPE_CHANGED, loc, "", r, w, _shape_kind(a), _shape_kind(b))
            continue
        if a.fields is not None and b.fields is not None:
            for f in sorted(a.fields.keys() - b.fields.keys()):
                add(ChangeKind.FIELD_REMOVED, loc, f, True, True, old=a.fields[f])
            for f in sorted(b.fields.keys() - a.fields.keys()):
                required = f in b.required
                add(ChangeKind.FIELD_ADDED, loc, f, False, required, new=b.fields[f] + (" (required)" * required))
            for f in sorted(a.fields.keys() & b.fields.keys()):
                # Inline shapes present on both sides are compared at their own locations; a field is judged
                # here when its summary changed or it has an inline shape on one side only (enum -> string).
                nested = [f"{loc}.{f}" + "[]" * depth for depth in range(4)]
                one_sided = any((n in before) != (n in after) for n in nested)
                if a.fields[f] == b.fields[f] and not one_sided:
                    continue
                wa, wb = _wire(a.raw.get(f), old_defs), _wire(b.raw.get(f), new_defs)
                if wa == wb:
                    continue  # a renamed type, the same JSON
                r, w = _hurt(wa, wb)
                old_s, new_s = _described(a.fields[f], a.raw.get(f)), _described(b.fields[f], b.raw.get(f))
                add(ChangeKind.FIELD_TYPE_CHANGED, loc, f, r, w, old_s, new_s)
            for f in sorted((b.required - a.required) & a.fields.keys()):
                add(ChangeKind.FIELD_NOW_REQUIRED, loc, f, False, True)
            for f in sorted((a.required - b.required) & b.fields.keys()):
                add(ChangeKind.FIELD_NOW_OPTIONAL, loc, f, True, False)
        if a.enum is not None and b.enum is not None:
            if removed := sorted(a.enum - b.enum):
                add(ChangeKind.ENUM_VALUES_REMOVED, loc, ", ".join(removed), True, True)
            if added := sorted(b.enum - a.enum):
                add(ChangeKind.ENUM_VALUES_ADDED, loc, ", ".join(added), False, False)
        if a.variants is not None and b.variants is not None:
            for v in sorted(a.variants - b.variants):
                add(ChangeKind.VARIANT_REMOVED, loc, v, True, True)
            for v in sorted(b.variants - a.variants):
                add(ChangeKind.VARIANT_ADDED, loc, v, False, False)
    return out
