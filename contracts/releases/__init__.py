"""Release folders: what the project holds true of each codex-cli release, as data, and their one loader.

A release is a folder ``codex-cli-<version>/`` in one of two places (:mod:`contracts.schema_store`): shipped
with the package (next to this file, read-only) or in the user's store (``--store DIR``, else
``$CODEX_HARNESS_STORE``, else ``${XDG_DATA_HOME:-~/.local/share}/codex-harness/schemas``). Both are read here,
the same way, so a release learned into the store is used exactly like a shipped one; a shipped release wins
over a store's folder of the same version. Every file is data a tool writes (JSON, no code):

- ``meta.json``, ``stable.json.zst``, ``experimental.json.zst``: the schema pin (``schema pin`` writes them).
  The client methods come from it (:attr:`Release.methods`), in the deserializer's order, so they are not
  stored twice.
- ``release.json``: what the schema does not say (:data:`DESCRIPTION_KEYS`): ``methods.beyond_schema``, the
  methods the deserializer lists that no schema file has, and where in its list; ``trace``, the rollout-trace
  bundle format it writes (:class:`contracts.trace_format.BundleFormat`); ``fake``, what its fake plays
  differently from the release-neutral engine: named ``switches`` and the fields it does not write
  (interpreted by :mod:`fake_server.profiles`); ``learned_from``, where each part came from.
- ``answers.json`` (the answers recorded from the binary) and ``shapes.json`` (the field sets of the frames
  the fake builds): :mod:`fake_server.surface.static` and :mod:`fake_server.shapes` read them.

No folder holds a per-scenario transcript to replay. A folder with only the schema pin, the layout of stores
written before release folders, is still a release: the schema checks, ``diff`` and ``validate-release`` use
it; only the fake cannot play it (:attr:`Release.playable`). ``default.json`` here names the default release,
the one place that does.

Files are read bounded, never through a link, never when not a regular file: a store is another program's
output. A folder that cannot be used raises :class:`ReleaseError` (a usage error, exit 3) naming the file.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from contracts import bounded_parse, safe_read, schema_store
from contracts.exitcodes import UsageError
from contracts.safe_dir import SafeDir, WriteError
from contracts.trace_format import EVENT_TYPES, NATIVE, SCHEMA_VERSION, BundleFormat

SHIPPED_ROOT: Final = schema_store.SHIPPED_ROOT
DESCRIPTION_FILE: Final = "release.json"
DEFAULT_FILE: Final = "default.json"
#: The ``format`` of ``release.json`` this loader reads.
FOLDER_FORMAT: Final = 1
DESCRIPTION_KEYS: Final = ("format", "release", "methods", "trace", "fake", "learned_from")
#: Far above a real data file (answers.json is about 90 KB) and far below what would hurt a host.
MAX_DATA_BYTES: Final = 16 * 1024 * 1024
MAX_NAMES: Final = 10_000
MAX_NAME_CHARS: Final = 256
MAX_NOTE_CHARS: Final = 4096
#: Nesting of a data file (the shipped ones reach 8): deeper would only exhaust the fillers' recursion.
MAX_DEPTH: Final = 64


class ReleaseError(UsageError):
    """A release folder that cannot be used (unreadable, or data that is not what the loader reads)."""


class ReleaseNotFound(ReleaseError):
    """No folder for the release in either place."""

    def __init__(self, version: str, known: list[str]) -> None:
        super().__init__(
            f"no release {version!r} (releases: {', '.join(known) or 'none'}; {schema_store.describe_stores()})"
        )
        self.version = version
        self.known = known


@dataclass(frozen=True, slots=True)
class MethodTable:
    """The client request methods a release's deserializer takes, as its pinned schema and release.json say."""

    #: every method, in the deserializer's order (its "unknown variant" list)
    client: tuple[str, ...]
    #: those only the experimental schema has (behind the ``experimentalApi`` capability)
    experimental: frozenset[str]
    #: those whose ``params`` may be left out
    paramless: frozenset[str]
    known: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "known", frozenset(self.client))


class Release:
    """One release folder, read on demand (each part once). ``description`` is ``release.json`` (None: a
    folder with only the schema pin)."""

    def __init__(self, version: str, root: Path, description: Mapping[str, Any] | None) -> None:
        self.version = version
        self.root = root
        self.folder = schema_store.release_dir(version, root)
        self.description = description
        self._data: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"Release({self.version!r}, {str(self.folder)!r})"

    @property
    def shipped(self) -> bool:
        return schema_store.is_shipped(self.root)

    @property
    def version_line(self) -> str:
        return f"codex-cli {self.version}"

    @property
    def fake(self) -> Mapping[str, Any] | None:
        """The ``fake`` part of release.json (what its fake plays differently), None: the fake cannot play it."""
        return None if self.description is None else self.description.get("fake")

    @property
    def playable(self) -> bool:
        return self.fake is not None

    @property
    def learned_from(self) -> Mapping[str, str]:
        return {} if self.description is None else self.description.get("learned_from", {})

    def bundle(self, experimental: bool = False) -> schema_store.Bundle:
        return schema_store.load_bundle(self.version, experimental, self.root)

    def _client_requests(self, experimental: bool) -> Any:
        return schema_store.load_bundle_member(self.version, experimental, "ClientRequest.json", self.root)

    @functools.cached_property
    def methods(self) -> MethodTable:
        """The client methods: the pinned schema's ``ClientRequest`` variants, in order, with release.json's
        ``methods.beyond_schema`` put where the deserializer lists them. Raises ReleaseError."""
        try:
            experimental = _variants(self._client_requests(True))
            stable = {name for name, _ in _variants(self._client_requests(False))}
        except schema_store.SchemaStoreError as exc:
            raise ReleaseError(f"release {self.version}: {exc}") from exc
        order = [name for name, _ in experimental]
        beyond = (self.description or {}).get("methods", {}).get("beyond_schema", {})
        extra = [m for m in beyond.get("names", ()) if m not in order]
        after = beyond.get("after")
        at = order.index(after) + 1 if after in order else len(order)
        order[at:at] = extra
        return MethodTable(
            client=tuple(order),
            experimental=frozenset(name for name, _ in experimental if name not in stable),
            paramless=frozenset(name for name, needs_params in experimental if not needs_params),
        )

    @functools.cached_property
    def notifications(self) -> frozenset[str]:
        """The server notification methods of its pin (``ServerNotification`` variants, experimental included):
        what the release can send. Raises ReleaseError."""
        try:
            schema = schema_store.load_bundle_member(self.version, True, "ServerNotification.json", self.root)
        except schema_store.SchemaStoreError as exc:
            raise ReleaseError(f"release {self.version}: {exc}") from exc
        variants = schema.get("oneOf") or schema.get("anyOf") if isinstance(schema, dict) else None
        if not isinstance(variants, list):
            raise ReleaseError(f"release {self.version}: the pin has no ServerNotification.json with its variants")
        return frozenset(name for name, _ in _variants({"oneOf": variants}))

    @property
    def trace(self) -> BundleFormat | None:
        """The trace bundle format it writes; None: release.json says nothing of it."""
        spec = None if self.description is None else self.description.get("trace")
        if spec is None:
            return None
        return BundleFormat(
            spec["schema"],
            self.version,
            payload_files=spec["payload_files"],
            closing_event=spec["closing_event"],
            not_written=frozenset(tuple(pair) for pair in spec.get("not_written", ())),
        )

    def data(self, name: str) -> Any:
        """A JSON data file of the folder (``answers.json``, ``shapes.json``), read once. Raises ReleaseError."""
        if name not in self._data:
            self._data[name] = read_json(self.folder / name, f"release {self.version}")
        return self._data[name]

    def has(self, name: str) -> bool:
        return _regular(self.folder / name)


# --- reading ---------------------------------------------------------------------------------------


def read_json(path: Path, what: str, limit: int = MAX_DATA_BYTES) -> Any:
    """The JSON document at ``path``: a regular file (not a link), at most ``limit`` bytes, nested at most
    :data:`MAX_DEPTH` levels (:mod:`contracts.safe_read`). Raises ReleaseError naming ``what`` and the file."""
    try:
        value = bounded_parse.loads_json(safe_read.read_bounded(path, limit), MAX_DEPTH + 1)
    except OSError as exc:
        raise ReleaseError(f"{what}: {safe_read.explain(path, exc)}") from None
    except bounded_parse.TooDeep:  # measured before parsing
        raise ReleaseError(f"{what}: {path} nests deeper than {MAX_DEPTH} levels") from None
    except orjson.JSONDecodeError as exc:
        raise ReleaseError(f"{what}: {path} is not JSON: {exc}") from None
    if _depth_over(value, MAX_DEPTH):
        raise ReleaseError(f"{what}: {path} nests deeper than {MAX_DEPTH} levels")
    return value


def _regular(path: Path) -> bool:
    return safe_read.is_regular(path)


def _depth_over(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return False


def _variants(request: Any) -> list[tuple[str, bool]]:
    """(method, params required) of each variant of ``ClientRequest.json``, in the schema's (declaration) order."""
    variants = request.get("oneOf") or request.get("anyOf") if isinstance(request, dict) else None
    if not isinstance(variants, list):
        raise schema_store.SchemaStoreError("the pin has no ClientRequest.json with its variants")
    out = []
    for variant in variants:
        try:
            name = variant["properties"]["method"]["enum"][0]
            required = variant.get("required") or ()
        except (KeyError, IndexError, TypeError):
            continue
        if isinstance(name, str):
            out.append((name, "params" in required))
    return out


def _fail(version: str, path: Path, where: str, expected: str) -> ReleaseError:
    return ReleaseError(f"release {version}: {path}: {where}: expected {expected}")


def _names(value: Any, version: str, path: Path, where: str) -> list[str]:
    if not isinstance(value, list) or len(value) > MAX_NAMES:
        raise _fail(version, path, where, f"a list of at most {MAX_NAMES} names")
    for name in value:
        if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME_CHARS:
            raise _fail(version, path, where, f"names of 1 to {MAX_NAME_CHARS} characters")
    return value


def _pairs(value: Any, version: str, path: Path, where: str) -> list[list[str]]:
    if not isinstance(value, list) or len(value) > MAX_NAMES:
        raise _fail(version, path, where, f"a list of at most {MAX_NAMES} [where, field] pairs")
    for pair in value:
        if not isinstance(pair, list) or len(pair) != 2:
            raise _fail(version, path, where, "[where, field] pairs")
        _names(pair, version, path, where)
    return value


def check_description(body: Any, version: str, path: Path) -> dict[str, Any]:
    """``release.json`` as the loader reads it, every value's type checked; raises ReleaseError naming the key."""
    if not isinstance(body, dict):
        raise _fail(version, path, "the document", "a JSON object")
    for key in body:
        if key not in DESCRIPTION_KEYS:
            raise _fail(version, path, key, f"a known key ({', '.join(DESCRIPTION_KEYS)})")
    if body.get("format") != FOLDER_FORMAT or isinstance(body.get("format"), bool):
        raise _fail(version, path, "format", f"{FOLDER_FORMAT} (the release folder format this version reads)")
    if body.get("release") != version:
        raise _fail(version, path, "release", f"{version!r}, the version its folder is named after")
    methods = body.get("methods", {})
    if not isinstance(methods, dict) or set(methods) - {"beyond_schema"}:
        raise _fail(version, path, "methods", "an object with at most beyond_schema")
    beyond = methods.get("beyond_schema", {})
    if not isinstance(beyond, dict) or set(beyond) - {"after", "names"}:
        raise _fail(version, path, "methods.beyond_schema", "an object with after and names")
    _names(beyond.get("names", []), version, path, "methods.beyond_schema.names")
    if "after" in beyond:
        _names([beyond["after"]], version, path, "methods.beyond_schema.after")
    trace = body.get("trace")
    if trace is not None:
        _check_trace(trace, version, path)
    fake = body.get("fake")
    if fake is not None:
        if not isinstance(fake, dict) or set(fake) - {"switches", "not_written"}:
            raise _fail(version, path, "fake", "an object with switches and not_written")
        switches = fake.get("switches", {})
        if not isinstance(switches, dict) or len(switches) > MAX_NAMES:
            raise _fail(version, path, "fake.switches", "an object of named switches")
        for name, value in switches.items():
            if not isinstance(value, bool | str) or (isinstance(value, str) and len(value) > MAX_NAME_CHARS):
                raise _fail(version, path, f"fake.switches.{name}", "true, false or a short string")
        _pairs(fake.get("not_written", []), version, path, "fake.not_written")
    notes = body.get("learned_from", {})
    if not isinstance(notes, dict) or not all(isinstance(v, str) and len(v) <= MAX_NOTE_CHARS for v in notes.values()):
        raise _fail(version, path, "learned_from", f"an object of texts of at most {MAX_NOTE_CHARS} characters")
    return body


def _check_trace(trace: Any, version: str, path: Path) -> None:
    if not isinstance(trace, dict) or set(trace) - {"schema", "payload_files", "closing_event", "not_written"}:
        raise _fail(version, path, "trace", "an object with schema, payload_files, closing_event, not_written")
    schema = trace.get("schema")
    if isinstance(schema, bool) or not isinstance(schema, int) or not 0 < schema < 2**32:
        raise _fail(version, path, "trace.schema", "the envelope schema number (a positive integer)")
    if not isinstance(trace.get("payload_files"), bool):
        raise _fail(version, path, "trace.payload_files", "true (a JSON file per payload) or false (zstd shards)")
    if trace.get("closing_event") not in EVENT_TYPES:
        raise _fail(version, path, "trace.closing_event", "a trace event type")
    for etype, _name in _pairs(trace.get("not_written", []), version, path, "trace.not_written"):
        if etype not in EVENT_TYPES:
            raise _fail(version, path, "trace.not_written", f"[event type, field] pairs (not {etype!r})")


# --- writing (a tool learning a release) -----------------------------------------------------------------


def write(
    version: str,
    description: Mapping[str, Any],
    data: Mapping[str, Any] | None = None,
    root: Path | None = None,
) -> Path:
    """Write the folder's ``release.json`` (checked as the loader reads it) and its data files (``data``: file
    name -> JSON value, e.g. ``answers.json``, ``shapes.json``) into ``root`` (default: the user's store) next
    to the schema pin ``schema pin`` wrote. Each file is written whole or not at all; the shipped folders are
    never written. Raises ReleaseError."""
    root = root if root is not None else schema_store.user_store()
    if schema_store.is_shipped(root):
        raise ReleaseError(f"{root} holds the releases shipped with the package and is never written")
    folder = schema_store.release_dir(version, root)
    check_description(dict(description), version, folder / DESCRIPTION_FILE)
    files = {DESCRIPTION_FILE: description, **(data or {})}
    for name in files:
        if "/" in name or not name.endswith(".json") or name == schema_store.META_FILE:
            raise ReleaseError(f"release {version}: {name!r} is not a data file name of a release folder")
    bodies = {}
    for name, value in files.items():
        try:
            body = orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n"
        except TypeError as exc:
            raise ReleaseError(f"release {version}: {name} is not JSON: {exc}") from None
        if len(body) > MAX_DATA_BYTES or _depth_over(value, MAX_DEPTH):
            raise ReleaseError(f"release {version}: {name} is larger or deeper than the loader reads")
        bodies[name] = body
    try:
        with SafeDir.open(folder) as out:  # each file written whole, never through a link
            for name, body in bodies.items():
                out.write(name, body)
    except WriteError as exc:
        raise ReleaseError(f"release {version}: {exc}") from exc
    clear_caches()
    return folder


# --- finding releases --------------------------------------------------------------------------------


def _load(version: str, root: Path) -> Release:
    path = schema_store.release_dir(version, root) / DESCRIPTION_FILE
    if not _regular(path):
        if os.path.lexists(path):
            raise ReleaseError(f"release {version}: {path} is not a regular file")
        return Release(version, root, None)  # a folder with only the schema pin (the older store layout)
    body = check_description(read_json(path, f"release {version}"), version, path)
    return Release(version, root, body)


@functools.lru_cache(maxsize=64)
def _cached(version: str, root: Path) -> Release:
    return _load(version, root)


def versions() -> list[str]:
    """Every release with a folder, shipped and the user's, oldest first."""
    return schema_store.pinned_releases()


def get(version: str) -> Release:
    """The release ``version``: the shipped folder if there is one, else the user's. Raises ReleaseError."""
    version = version.strip()
    if not schema_store.is_version(version) or version not in versions():
        raise ReleaseNotFound(version, versions())
    return _cached(version, schema_store.release_root(version).resolve())


def at(folder: Path) -> Release:
    """The release in ``folder`` (``.../codex-cli-<version>``), wherever it is. Raises ReleaseError."""
    name = folder.name
    version = name.removeprefix(schema_store.RELEASE_PREFIX)
    if name == version or not schema_store.is_version(version):
        raise ReleaseError(f"{folder}: not a release folder (codex-cli-<version>)")
    return _load(version, folder.parent)


def known() -> list[Release]:
    """Every release that can be read, oldest first (a folder that cannot be read is left out: :func:`get`
    says why when it is asked for by name)."""
    out = []
    for version in versions():
        try:
            out.append(get(version))
        except ReleaseError:
            continue
    return out


def playable() -> list[Release]:
    """The releases the fake can play (release.json has a ``fake`` part), oldest first."""
    return [release for release in known() if release.playable]


@functools.cache
def default_version() -> str:
    """The default release: the one ``default.json`` (shipped with the package) names."""
    body = read_json(SHIPPED_ROOT / DEFAULT_FILE, "the default release")
    version = body.get("default") if isinstance(body, dict) else None
    if not isinstance(version, str) or not schema_store.is_version(version):
        raise ReleaseError(f"{SHIPPED_ROOT / DEFAULT_FILE}: default: expected a release version")
    return version


def default() -> Release:
    return get(default_version())


def trace_formats() -> dict[int, BundleFormat]:
    """Every trace bundle format the reader takes, by envelope schema: what the releases declare (a shipped
    release's first, then the user's, newest first, for a schema no shipped release writes), and the
    vocabulary's own schema (:data:`contracts.trace_format.NATIVE`) when none declares it."""
    return dict(_trace_formats(schema_store.user_store().resolve()))


@functools.lru_cache(maxsize=8)
def _trace_formats(_store: Path) -> tuple[tuple[int, BundleFormat], ...]:
    formats: dict[int, BundleFormat] = {}
    releases = known()
    ordered = [r for r in releases if r.shipped] + [r for r in reversed(releases) if not r.shipped]
    for release in ordered:
        fmt = release.trace
        if fmt is not None:
            formats.setdefault(fmt.schema, fmt)
    formats.setdefault(SCHEMA_VERSION, NATIVE)
    return tuple(sorted(formats.items()))


def clear_caches() -> None:
    """Forget what was read (after a folder was written, or the store changed)."""
    _cached.cache_clear()
    _trace_formats.cache_clear()


schema_store.on_change(clear_caches)  # a pin written, or --store: what was read from a store may be stale
