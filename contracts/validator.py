"""Validation of single wire frames against a pinned release's schema.

``Validator.for_release(version, experimental)`` builds, once per release and bundle, one schema per
method (the method's ``oneOf`` variant merged with the JSON-RPC envelope) and compiles each with
``jsonschema_rs`` the first time a frame needs it. A valid frame costs one dict lookup and one
``is_valid`` call; only an invalid one pays for error collection. ``explain`` re-validates with the
pure-Python ``jsonschema`` for a person to read (its best-match is clearer), off the hot path.

Frames are classified as the app-server does: ``method`` + ``id`` is a request, ``method`` alone a
notification, ``id`` + ``result`` a response, ``id`` + ``error`` an error answer. A response is
checked against the response type of the method it answers when the caller names that method.
"""

from __future__ import annotations

import functools
import re
import reprlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias

import jsonschema
import jsonschema_rs
import orjson

from contracts import schema_store
from contracts.protocol_index import MethodEntry, ProtocolIndex, Union, build_index

Direction: TypeAlias = Literal["c2s", "s2c"]
_DRAFT7: Final = "http://json-schema.org/draft-07/schema#"
_MISSING: Final = object()
_GOT_LIMIT: Final = 80
_DEF_REF_RE: Final = re.compile(r'"#/definitions/([^"/]+)"')

# Which union a frame belongs to, by direction and shape; and whose responses a direction carries.
_REQUEST_UNION: Final = {"c2s": Union.CLIENT_REQUEST, "s2c": Union.SERVER_REQUEST}
_NOTIFICATION_UNION: Final = {"c2s": Union.CLIENT_NOTIFICATION, "s2c": Union.SERVER_NOTIFICATION}
_ANSWERED_UNION: Final = {"c2s": Union.SERVER_REQUEST, "s2c": Union.CLIENT_REQUEST}


@dataclass(frozen=True, slots=True)
class Violation:
    """One way a frame breaks the schema.

    ``kind`` is the JSON Schema keyword that failed (``required``, ``type``, ``enum``, ``oneOf``...)
    or one of ``unknown_method``, ``not_a_message``, ``not_an_object``, ``not_json``; ``path`` is a
    JSON pointer into the frame (for ``required``, the pointer of the missing field).
    """

    kind: str
    path: str
    expected: str
    got: str
    message: str

    def __str__(self) -> str:
        return self.message


def _pointer(parts: Iterable[str | int]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _show(value: Any, limit: int | None = _GOT_LIMIT) -> str:
    try:
        text = orjson.dumps(value).decode()
    except (TypeError, ValueError):  # not JSON (a set, a non-str key, nesting past orjson's limit)
        text = reprlib.repr(value)  # depth- and length-bounded, unlike repr()
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def _violation(kind: str, path: str, expected: str, got: str, what: str) -> Violation:
    return Violation(kind, path, expected, got, f"{path or '/'}: {what}")


def _refs_in(schema: Any) -> set[str]:
    """The names of the definitions a schema refers to, by ``#/definitions/NAME``."""
    return set(_DEF_REF_RE.findall(orjson.dumps(schema).decode()))


def _strip(schema: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k not in ("$schema", "definitions")}


class Validator:
    """Validates frames of one release (stable or experimental bundle). Never raises on a bad frame.

    ``require_emitted_at``: a server notification must carry ``emittedAtMs`` when the release's own pin
    declares it (an integer at the top level of ``ServerNotification``, not listed as required): a release
    that declares it sends it on every notification. A pin without it (an older release) is held to its
    own schema only: no such rule.
    """

    def __init__(
        self,
        bundle: schema_store.Bundle,
        release: str = "?",
        experimental: bool = False,
        require_emitted_at: bool = True,
    ) -> None:
        self.release = release
        self.experimental = experimental
        self.require_emitted_at = require_emitted_at
        self.bundle = bundle
        self.index: ProtocolIndex = build_index(bundle)
        self._compiled: dict[tuple[str, str], Any] = {}
        # direction -> method -> compiled validator, for requests and notifications: such a frame costs two
        # dict lookups before jsonschema-rs runs
        self._requests: dict[str, dict[str, Any]] = {"c2s": {}, "s2c": {}}
        self._notifications: dict[str, dict[str, Any]] = {"c2s": {}, "s2c": {}}
        self._schemas: dict[tuple[str, str], dict[str, Any]] = {}
        self._explainers: dict[tuple[str, str], jsonschema.Draft7Validator] = {}
        self._ref_cache: dict[int, set[str]] = {}

    @classmethod
    def for_release(cls, version: str | None = None, experimental: bool = False) -> Validator:
        """The cached validator of a pinned release (None: the default release); raises
        ``schema_store.ReleaseNotPinned`` (clear message)."""
        if version is None:
            from contracts.releases import default_version

            version = default_version()
        # Keyed by the store too: a user pin (``--store``) and another store's pin of one version differ.
        return _validator_for(version, experimental, schema_store.release_root(version))

    # --- hot path -------------------------------------------------------------------------------

    def validate(self, frame: Any, direction: Direction, request_method: str | None = None) -> list[Violation]:
        """Violations of one frame (empty when valid). ``request_method``: for a response, what it answers."""
        validator = None
        if type(frame) is dict:
            try:
                validator = (self._requests if "id" in frame else self._notifications)[direction][frame["method"]]
            except (KeyError, TypeError):  # no method, an unhashable one, not seen yet, or a bad direction
                pass
        if validator is None:
            key = self._key(frame, direction, request_method)
            if isinstance(key, list):
                return key
            validator = self._compiled.get(key) or self._compile(key)
            if key[0] not in ("response", "error"):
                # a method frame of a known method: next time, skip the classification
                (self._requests if "id" in frame else self._notifications)[direction][key[1]] = validator
        try:
            if validator.is_valid(frame):
                return []
            return self._violations(validator, frame)
        except (ValueError, TypeError, OverflowError) as exc:  # not a JSON value (a set, a huge int...)
            return [_violation("not_json", "", "a JSON value", _show(frame), f"not a JSON value: {exc}")]

    def is_valid(self, frame: Any, direction: Direction, request_method: str | None = None) -> bool:
        return not self.validate(frame, direction, request_method)

    def _key(self, frame: Any, direction: str, request_method: str | None) -> tuple[str, str] | list[Violation]:
        if direction not in _REQUEST_UNION:
            raise ValueError(f"direction must be 'c2s' or 's2c', not {direction!r}")
        if type(frame) is not dict:
            return [_violation("not_an_object", "", "a JSON object", _show(frame), "frame is not a JSON object")]
        method = frame.get("method", _MISSING)
        if method is not _MISSING:
            if type(method) is not str:
                return [_violation("type", "/method", "string", _show(method), "method is not a string")]
            union = _REQUEST_UNION[direction] if "id" in frame else _NOTIFICATION_UNION[direction]
            if method not in self.index.methods[union]:
                return [self._unknown_method(union, method, "/method")]
            return (union.value, method)
        if "id" not in frame:
            return [_violation("not_a_message", "", "method or id", _show(frame), "neither method nor id")]
        if "result" in frame:
            if request_method is None:
                return ("response", "")
            union = _ANSWERED_UNION[direction]
            if request_method not in self.index.methods[union]:
                return [self._unknown_method(union, request_method, "/result")]
            return ("response", request_method)
        if "error" in frame:
            return ("error", "")
        return [
            _violation(
                "not_a_message",
                "",
                "result or error with an id",
                _show(frame),
                "id without method, result or error: neither request, response nor notification",
            )
        ]

    def _unknown_method(self, union: Union, method: str, path: str) -> Violation:
        bundle = "experimental" if self.experimental else "stable"
        hint = ""
        if not self.experimental:
            try:
                if method in Validator.for_release(self.release, True).index.methods[union]:
                    hint = " (it exists in the experimental API: the session must opt into experimentalApi)"
            except schema_store.SchemaStoreError:
                pass
        return _violation(
            "unknown_method",
            path,
            f"a {union.value} method of codex-cli {self.release} ({bundle})",
            _show(method),
            f"unknown {union.value} method {method!r}{hint}",
        )

    def compile_all(self) -> int:
        """Compile every method's schema now (for a steady first-frame latency); returns how many."""
        keys: list[tuple[str, str]] = [("error", ""), ("response", "")]
        for union, methods in self.index.methods.items():
            keys += [(union.value, m) for m in methods]
            if union in (Union.CLIENT_REQUEST, Union.SERVER_REQUEST):
                keys += [("response", m) for m in methods]
        for key in keys:
            if key not in self._compiled:
                self._compile(key)
        return len(keys)

    # --- schemas --------------------------------------------------------------------------------

    def schema_for(self, key: tuple[str, str]) -> dict[str, Any]:
        """The composed JSON Schema used for ``key`` (``(union, method)``, ``("response", method)``...)."""
        schema = self._schemas.get(key)
        if schema is None:
            schema = self._schemas[key] = self._prune(self._build(key))
        return schema

    def _compile(self, key: tuple[str, str]) -> Any:
        compiled = self._compiled[key] = jsonschema_rs.Draft7Validator(self.schema_for(key))
        return compiled

    def _refs(self, definition: Any) -> set[str]:
        # Keyed by identity, so only for a definition of the bundle: alive as long as this validator, its id is
        # never another object's. A schema built for one call is freed after it, and a later one may get its id.
        found = self._ref_cache.get(id(definition))
        if found is None:
            found = self._ref_cache[id(definition)] = _refs_in(definition)
        return found

    def _prune(self, schema: dict[str, Any]) -> dict[str, Any]:
        """Keep only the definitions the schema reaches: a union file carries hundreds it does not need."""
        definitions = schema.get("definitions", {})
        todo = _refs_in({k: v for k, v in schema.items() if k != "definitions"})  # built here: not cached by id
        kept: dict[str, Any] = {}
        while todo:
            name = todo.pop()
            if name in kept or name not in definitions:
                continue
            kept[name] = definitions[name]
            todo |= self._refs(definitions[name])
        return {**schema, "definitions": kept}

    def _explainer(self, key: tuple[str, str]) -> jsonschema.Draft7Validator:
        explainer = self._explainers.get(key)
        if explainer is None:
            explainer = self._explainers[key] = jsonschema.Draft7Validator(self.schema_for(key))
        return explainer

    def _envelope(self, filename: str) -> dict[str, Any]:
        schema = self.bundle.get(filename)
        if not isinstance(schema, dict):
            raise schema_store.SchemaStoreError(f"codex-cli {self.release}: bundle has no {filename}")
        return schema

    def _build(self, key: tuple[str, str]) -> dict[str, Any]:
        kind, method = key
        if kind == "error":
            return self._envelope("JSONRPCError.json")
        if kind == "response":
            envelope = self._envelope("JSONRPCResponse.json")
            entry = self._answered_entry(method) if method else None
            if entry is None or entry.response_file is None:
                return envelope
            response = self.bundle[entry.response_file]
            return {
                "$schema": _DRAFT7,
                "definitions": {**envelope.get("definitions", {}), **response.get("definitions", {})},
                "type": "object",
                "properties": {**envelope["properties"], "result": _strip(response)},
                "required": envelope["required"],
                "title": f"response to {method}",
            }
        union = Union(kind)
        entry = self.index.methods[union][method]
        is_request = union in (Union.CLIENT_REQUEST, Union.SERVER_REQUEST)
        envelope = self._envelope("JSONRPCRequest.json" if is_request else "JSONRPCNotification.json")
        union_schema = self.index.union_schemas[union]
        properties = {**envelope["properties"], **union_schema.get("properties", {}), **entry.variant["properties"]}
        required = set(envelope["required"]) | set(entry.variant.get("required", ()))
        if (
            union is Union.SERVER_NOTIFICATION
            and self.require_emitted_at
            and "emittedAtMs" in union_schema.get("properties", {})
        ):
            required.add("emittedAtMs")
        return {
            "$schema": _DRAFT7,
            "definitions": {**envelope.get("definitions", {}), **union_schema.get("definitions", {})},
            "type": "object",
            "properties": properties,
            "required": sorted(required),
            "title": entry.variant.get("title", method),
        }

    def _answered_entry(self, method: str) -> MethodEntry | None:
        for union in (Union.CLIENT_REQUEST, Union.SERVER_REQUEST):
            if (entry := self.index.methods[union].get(method)) is not None:
                return entry
        return None

    # --- errors ---------------------------------------------------------------------------------

    def _violations(self, validator: Any, frame: Any) -> list[Violation]:
        out: list[Violation] = []
        for error in validator.iter_errors(frame):
            out.extend(_convert(error))
        return out or [_violation("schema", "", "valid", _show(frame), "frame does not match the schema")]

    def explain(self, frame: Any, direction: Direction, request_method: str | None = None) -> str:
        """A readable account of what is wrong, for a person; ``"valid"`` when nothing is.

        Lists the violations, then the pure ``jsonschema`` best match with the schema location.
        """
        key = self._key(frame, direction, request_method)
        if isinstance(key, list):
            return "\n".join(v.message for v in key)
        violations = self.validate(frame, direction, request_method)
        if not violations:
            return "valid"
        title = self.schema_for(key).get("title", key[0])
        bundle = "experimental" if self.experimental else "stable"
        lines = [f"frame does not match {title} (codex-cli {self.release}, {bundle}):"]
        lines += [f"  {v.message}" for v in violations]
        try:
            errors = list(self._explainer(key).iter_errors(frame))
        except (TypeError, ValueError, RecursionError):
            errors = []
        if errors:
            best = jsonschema.exceptions.best_match(errors)
            where = _pointer(best.absolute_path) or "/"
            schema_where = "/".join(str(p) for p in best.absolute_schema_path)
            lines.append(f"  jsonschema best match: {where}: {best.message} [schema: {schema_where}]")
        return "\n".join(lines)


@functools.lru_cache(maxsize=16)
def _validator_for(version: str, experimental: bool, root: Path) -> Validator:
    bundle = schema_store.load_bundle(version, experimental, root)
    return Validator(bundle, version, experimental)


# --- jsonschema_rs errors → violations -----------------------------------------------------------


def _convert(error: Any) -> list[Violation]:
    kind = error.kind
    name = kind.name
    path = _pointer(error.instance_path)
    got = _show(error.instance)
    if isinstance(kind, jsonschema_rs.ValidationErrorKind.Required):
        field = _pointer([*error.instance_path, kind.property])
        return [_violation("required", field, "present", "absent", f"required field {kind.property!r} is missing")]
    if isinstance(kind, jsonschema_rs.ValidationErrorKind.Type):
        expected = " or ".join(kind.types)
        return [_violation("type", path, expected, got, f"expected {expected}, got {got}")]
    if isinstance(kind, jsonschema_rs.ValidationErrorKind.Enum):
        expected = "one of " + _show(list(kind.options), limit=None)
        return [_violation("enum", path, expected, got, f"{got} is not {expected}")]
    if isinstance(kind, jsonschema_rs.ValidationErrorKind.Constant):
        expected = _show(kind.expected_value)
        return [_violation("const", path, expected, got, f"expected {expected}, got {got}")]
    if isinstance(kind, jsonschema_rs.ValidationErrorKind.AdditionalProperties):
        unexpected = ", ".join(map(str, kind.unexpected))
        return [_violation(name, path, "no other fields", unexpected, f"unexpected field(s) {unexpected}")]
    if isinstance(kind, jsonschema_rs.ValidationErrorKind.OneOfNotValid | jsonschema_rs.ValidationErrorKind.AnyOf):
        return _best_branch(error, list(kind.context), name, path, got)
    return [_violation(name, path, name, got, error.message)]


def _is_tag_mismatch(branch_error: Any, depth: int) -> bool:
    # A one-value enum/const on a direct property is a union tag ("type": "agentMessage"): this
    # branch is for another variant, not a near miss.
    kind = branch_error.kind
    if len(branch_error.instance_path) != depth + 1:
        return False
    if isinstance(kind, jsonschema_rs.ValidationErrorKind.Enum):
        return len(kind.options) == 1
    return isinstance(kind, jsonschema_rs.ValidationErrorKind.Constant)


def _best_branch(error: Any, branches: list[list[Any]], name: str, path: str, got: str) -> list[Violation]:
    """The violations of the variant the frame most likely meant, like jsonschema's best_match."""
    depth = len(error.instance_path)
    candidates = [b for b in branches if b and not any(_is_tag_mismatch(e, depth) for e in b)]
    if not candidates:
        # Every variant refused the tag: report the tag field with all the values it may take.
        tags: dict[str, list[Any]] = {}
        for branch in branches:
            for e in branch:
                if _is_tag_mismatch(e, depth):
                    values = e.kind.options if hasattr(e.kind, "options") else [e.kind.expected_value]
                    tags.setdefault(_pointer(e.instance_path), []).extend(values)
        if len(tags) == 1:
            ((tag_path, values),) = tags.items()
            tag_got = _show(_resolve_last(error.instance, tag_path[len(path) :]))
            expected = "one of " + _show(sorted(set(map(str, values))), limit=None)
            return [_violation("enum", tag_path, expected, tag_got, f"{tag_got} is not {expected}")]
        return [_violation(name, path, f"one of the {name} variants", got, "matches none of the variants")]
    types = [b[0].kind for b in candidates if len(b) == 1 and b[0].instance_path == error.instance_path]
    if len(types) == len(candidates) and all(isinstance(k, jsonschema_rs.ValidationErrorKind.Type) for k in types):
        expected = " or ".join(dict.fromkeys(t for k in types for t in k.types))
        return [_violation("type", path, expected, got, f"expected {expected}, got {got}")]
    best = min(candidates, key=lambda b: (-max(len(e.instance_path) for e in b), len(b)))
    out: list[Violation] = []
    for e in best:
        out.extend(_convert(e))
    return out


def _resolve_last(instance: Any, pointer: str) -> Any:
    key = pointer.rsplit("/", 1)[-1].replace("~1", "/").replace("~0", "~")
    return instance.get(key) if isinstance(instance, dict) else None


class SessionValidator:
    """Validates the frames of one connection in order.

    Remembers the method of every pending request in each direction, so a response is checked
    against the response type of the request it answers, and switches to the experimental bundle
    once the client's ``initialize`` opts into ``experimentalApi``. At most ``max_pending`` requests
    per direction are remembered (oldest forgotten first; their answers get envelope checks only).
    """

    def __init__(self, version: str | None = None, experimental: bool = False, max_pending: int = 65536) -> None:
        self.validator = Validator.for_release(version, experimental)
        self.version = self.validator.release
        self.max_pending = max_pending
        self._pending: dict[str, dict[Any, str]] = {"c2s": {}, "s2c": {}}

    @property
    def experimental(self) -> bool:
        return self.validator.experimental

    def answered_method(self, frame: Any, direction: Direction) -> str | None:
        """Record a request, or return (and forget) the method a response answers."""
        if type(frame) is not dict or "id" not in frame:
            return None
        try:
            if "method" in frame:
                method = frame["method"]
                if type(method) is str:
                    table = self._pending[direction]
                    table[frame["id"]] = method
                    if len(table) > self.max_pending:
                        del table[next(iter(table))]
                    if method == "initialize" and direction == "c2s" and _opts_into_experimental(frame):
                        self.validator = Validator.for_release(self.version, True)
                return None
            if "result" in frame or "error" in frame:
                return self._pending["s2c" if direction == "c2s" else "c2s"].pop(frame["id"], None)
        except TypeError:  # an unhashable id: the envelope check reports it
            return None
        return None

    def validate(self, frame: Any, direction: Direction) -> list[Violation]:
        return self.validator.validate(frame, direction, self.answered_method(frame, direction))


def _opts_into_experimental(frame: dict[str, Any]) -> bool:
    params = frame.get("params")
    capabilities = params.get("capabilities") if isinstance(params, dict) else None
    return isinstance(capabilities, dict) and capabilities.get("experimentalApi") is True
