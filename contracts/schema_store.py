"""Where release folders live, and their schema pins: one directory per Codex release, ``codex-cli-<version>/``.

Two stores hold them:

- **Shipped releases** (:data:`SHIPPED_ROOT`, ``contracts/releases/`` of the package): read-only, never written.
- **User releases** (:func:`user_store`): where ``schema pin`` and ``validate-release`` write — ``--store DIR``,
  else ``$CODEX_HARNESS_STORE``, else ``${XDG_DATA_HOME:-~/.local/share}/codex-harness/schemas`` (the name it
  had when a folder held only the schema pin; folders written then are read as they are).

A lookup by version without an explicit ``root`` sees both; a shipped release wins over a user's folder of the
same version, and :func:`shadowed_note` says when such a user pin differs from it. The rest of a folder
(``release.json``, recorded answers, shapes) is read by :mod:`contracts.releases`, the one loader.

The schema pin of a folder is ``meta.json`` (the version and how the bundle was produced) and one
zstd-compressed JSON document per bundle (``stable.json.zst``, ``experimental.json.zst``) mapping
each file path that ``codex app-server generate-json-schema --out DIR`` wrote (``ClientRequest.json``,
``v2/ThreadStartResponse.json``...) to its parsed schema. The JSON text is the same schema as the
binary printed; only whitespace and key order are normalised.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import stat
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, TypeAlias

import orjson
import zstandard

from contracts import bounded_parse, safe_read
from contracts.exitcodes import InvalidInput
from contracts.safe_dir import SafeDir, WriteError

Bundle: TypeAlias = Mapping[str, Any]

SHIPPED_ROOT: Final = Path(__file__).resolve().parent / "releases"
STORE_ENV: Final = "CODEX_HARNESS_STORE"
RELEASE_PREFIX: Final = "codex-cli-"
META_FILE: Final = "meta.json"
BUNDLE_FILES: Final = {False: "stable.json.zst", True: "experimental.json.zst"}

# Far above a real bundle (about 6 MB uncompressed) and far below what would hurt a host.
MAX_BUNDLE_BYTES: Final = 256 * 1024 * 1024
MAX_SCHEMA_FILE_BYTES: Final = 64 * 1024 * 1024
MAX_SCHEMA_FILES: Final = 20_000
MAX_SCHEMA_DEPTH: Final = 16
MAX_META_BYTES: Final = 1024 * 1024
_ZSTD_LEVEL: Final = 19
_VERSION_RE: Final = re.compile(r"^\d+\.\d+\.\d+(?:[-+.][0-9A-Za-z.]+)?$")


class SchemaStoreError(InvalidInput):
    """A bundle or release that cannot be read or written, with the reason."""


class ReleaseNotPinned(SchemaStoreError):
    """No pinned schema for the requested release."""

    def __init__(self, version: str, pinned: list[str]) -> None:
        have = ", ".join(pinned) if pinned else "none"
        super().__init__(
            f"no pinned schema for codex-cli {version} (pinned releases: {have}); "
            f"pin it with `codex-harness schema pin --codex PATH` using a codex {version} binary "
            f"(into {user_store()}; {store_hint()})"
        )
        self.version = version
        self.pinned = pinned


def version_key(version: str) -> tuple[tuple[int, ...], str]:
    """Sort key: numeric release triple first, then any suffix."""
    match = re.match(r"(\d+)\.(\d+)\.(\d+)(.*)", version)
    if not match:
        return ((-1,), version)
    # A pre-release suffix ("-alpha") sorts before the plain release.
    suffix = match.group(4)
    return (tuple(int(part) for part in match.groups()[:3]), "~" if not suffix else suffix)


def is_version(text: str) -> bool:
    return bool(_VERSION_RE.match(text))


# --- where pins live ---------------------------------------------------------------------------------

_store_override: Path | None = None  # set by `--store DIR` for the command's duration (using_user_store)


def default_user_store() -> Path:
    """``$CODEX_HARNESS_STORE``, else ``${XDG_DATA_HOME:-~/.local/share}/codex-harness/schemas``.

    A relative ``XDG_DATA_HOME`` is ignored, as the XDG spec says.
    """
    explicit = os.environ.get(STORE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "share"
    return base / "codex-harness" / "schemas"


def user_store(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The user's pin store: ``explicit`` (``--store``), else the one in use, else :func:`default_user_store`."""
    if explicit is not None:
        return Path(explicit).expanduser()
    return _store_override if _store_override is not None else default_user_store()


@contextmanager
def using_user_store(store: str | os.PathLike[str] | None) -> Iterator[Path]:
    """Lookups inside the block see ``store`` as the user's pins (``--store DIR``); None: the default."""
    global _store_override
    previous = _store_override
    _store_override = None if store is None else Path(store).expanduser()
    _clear_caches()
    try:
        yield user_store()
    finally:
        _store_override = previous
        _clear_caches()


_change_hooks: list[Callable[[], None]] = []


def on_change(hook: Callable[[], None]) -> None:
    """``hook`` runs when a store changes (a pin written, another store in use): :mod:`contracts.releases`
    forgets what it read."""
    _change_hooks.append(hook)


def _clear_caches() -> None:
    _load_bundle_cached.cache_clear()
    _load_member_cached.cache_clear()
    for hook in _change_hooks:
        hook()


def is_shipped(root: Path) -> bool:
    """Whether ``root`` is (or lies inside) the package's read-only shipped pins."""
    try:
        return root.resolve().is_relative_to(SHIPPED_ROOT)
    except OSError:
        return False


def _releases_under(base: Path) -> list[str]:
    try:
        if not base.is_dir():
            return []
        entries = list(base.iterdir())
    except OSError:  # an unreadable user store hides its pins; the shipped ones still count
        return []
    return [
        entry.name[len(RELEASE_PREFIX) :]
        for entry in entries
        if entry.name.startswith(RELEASE_PREFIX) and (entry / META_FILE).is_file()
    ]


@functools.cache
def _shipped() -> frozenset[str]:
    """The shipped pins: part of the package, never written, so listed once (every lookup asks)."""
    return frozenset(_releases_under(SHIPPED_ROOT))


def release_root(version: str) -> Path:
    """Which store holds ``version`` for a lookup by version: the shipped pins win, else the user's store."""
    if version in _shipped():
        return SHIPPED_ROOT
    return user_store()


def release_dir(version: str, root: Path | None = None) -> Path:
    return (root or release_root(version)) / f"{RELEASE_PREFIX}{version}"


def pinned_releases(root: Path | None = None) -> list[str]:
    """Versions with a pinned schema under ``root``, oldest first; no ``root``: shipped and user pins together."""
    if root is not None:
        versions = set(_shipped() if root == SHIPPED_ROOT else _releases_under(root))
    else:
        versions = set(_shipped()) | set(_releases_under(user_store()))
    return sorted(versions, key=version_key)


def shipped_releases() -> list[str]:
    return pinned_releases(SHIPPED_ROOT)


def shadowed_note(version: str, store: Path | None = None) -> str | None:
    """A sentence when the user store holds a pin of a shipped ``version`` that differs from the shipped one.

    The shipped pin is the one used; the user's copy is reported, never silently preferred or ignored.
    """
    store = user_store(store)
    if version not in _shipped() or version not in _releases_under(store):
        return None
    try:
        mine = load_meta(version, store).get("bundles", {})
        shipped = load_meta(version, SHIPPED_ROOT).get("bundles", {})
    except SchemaStoreError as exc:
        return f"user pin of codex-cli {version} in {store} cannot be read ({exc}); the shipped pin is used"
    digests = {kind: (mine.get(kind, {}).get("sha256"), shipped.get(kind, {}).get("sha256")) for kind in shipped}
    if all(a == b for a, b in digests.values()):
        return None
    return (
        f"user pin of codex-cli {version} in {release_dir(version, store)} differs from the pin shipped with "
        f"the package; the shipped pin is used"
    )


def latest_release(root: Path | None = None) -> str:
    """The newest pinned release."""
    versions = pinned_releases(root)
    if not versions:
        where = root or f"{SHIPPED_ROOT} or {user_store()}"
        raise SchemaStoreError(f"no pinned schema under {where}")
    return versions[-1]


def load_meta(version: str, root: Path | None = None) -> dict[str, Any]:
    path = release_dir(version, root) / META_FILE
    if not path.is_file():
        default = root is None or root.resolve() == user_store().resolve()
        raise ReleaseNotPinned(version, pinned_releases(None if default else root))
    try:
        meta = safe_read.read_json(path, MAX_META_BYTES, follow=True)  # a pin of the user's or ours
    except (OSError, orjson.JSONDecodeError) as exc:
        raise SchemaStoreError(f"cannot read {path}: {exc}") from exc
    if not isinstance(meta, dict):
        raise SchemaStoreError(f"{path}: not a JSON object")
    return meta


def load_bundle(version: str, experimental: bool = False, root: Path | None = None) -> Bundle:
    """The bundle of a pinned release: relative file path → parsed schema. Cached per release.

    No ``root``: the shipped pin of ``version`` if there is one, else the user's (:func:`release_root`).
    """
    return _load_bundle_cached(version, experimental, (root or release_root(version)).resolve())


@functools.lru_cache(maxsize=16)
def _load_bundle_cached(version: str, experimental: bool, root: Path) -> Bundle:
    load_meta(version, root)  # a clear "not pinned" error before any file error
    return read_bundle_file(release_dir(version, root) / BUNDLE_FILES[experimental])


def read_bundle_file(path: Path) -> dict[str, Any]:
    """Decompress and parse one ``*.json.zst`` bundle, refusing more than MAX_BUNDLE_BYTES."""
    return _parse_bundle(_decompressed(path), path)


def _decompressed(path: Path) -> bytes:
    try:
        data = safe_read.read_bounded(path, MAX_BUNDLE_BYTES, follow=True)  # a pin of the user's or ours
    except OSError as exc:
        raise SchemaStoreError(f"cannot read {path}: {exc}") from exc
    try:
        declared = zstandard.frame_content_size(data)
        if declared < 0 or declared > MAX_BUNDLE_BYTES:
            raise SchemaStoreError(f"{path}: declared size {declared} is unknown or above {MAX_BUNDLE_BYTES} bytes")
        return zstandard.ZstdDecompressor().decompress(data, max_output_size=MAX_BUNDLE_BYTES)
    except zstandard.ZstdError as exc:
        raise SchemaStoreError(f"{path}: corrupt bundle: {exc}") from exc


def _parse_bundle(raw: bytes, path: Path) -> dict[str, Any]:
    try:
        bundle = bounded_parse.loads_json(raw)
    except orjson.JSONDecodeError as exc:
        raise SchemaStoreError(f"{path}: corrupt bundle: {exc}") from exc
    if not isinstance(bundle, dict) or not all(isinstance(v, dict) for v in bundle.values()):
        raise SchemaStoreError(f"{path}: not a mapping of file paths to schemas")
    return bundle


def load_bundle_member(version: str, experimental: bool, name: str, root: Path | None = None) -> Any:
    """One schema file of a pinned bundle (``ClientRequest.json``; None: the bundle has none). Cached per release.

    A bundle in the form :func:`encode_bundle` writes (compact, keys sorted) is only read up to the end of that
    file's value, a few ms instead of parsing every schema file: ``fake-codex`` needs the method list at its
    first request. Any other form is parsed whole.
    """
    return _load_member_cached(version, experimental, name, (root or release_root(version)).resolve())


@functools.lru_cache(maxsize=16)
def _load_member_cached(version: str, experimental: bool, name: str, root: Path) -> Any:
    load_meta(version, root)
    path = release_dir(version, root) / BUNDLE_FILES[experimental]
    raw = _decompressed(path)
    key = orjson.dumps(name) + b":"
    at = raw.find(key)
    if at > 0 and raw[at - 1 : at] in (b"{", b","):
        try:
            value, _end = json.JSONDecoder().raw_decode(raw[at + len(key) :].decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            value = None
        if isinstance(value, dict):
            return value
    return _parse_bundle(raw, path).get(name)


def read_bundle_dir(directory: Path) -> dict[str, Any]:
    """What ``generate-json-schema --out DIR`` wrote, as a bundle (paths with ``/``, sorted).

    Read with the bounded reader: a link or anything but a regular file among the schemas is an error naming
    it (never followed, never read), and the files are bounded each and in all."""
    try:
        fd = safe_read.open_dir(directory, follow=True)
    except OSError:
        raise SchemaStoreError(f"not a directory: {directory}") from None
    bundle: dict[str, Any] = {}
    try:
        _read_schema_tree(directory, fd, "", bundle, [0])
    finally:
        os.close(fd)
    if not bundle:
        raise SchemaStoreError(f"no *.json schema files in {directory}")
    return dict(sorted(bundle.items()))


def _read_schema_tree(directory: Path, fd: int, prefix: str, bundle: dict[str, Any], total: list[int]) -> None:
    if prefix.count("/") >= MAX_SCHEMA_DEPTH:
        raise SchemaStoreError(f"{directory / prefix}: nested deeper than {MAX_SCHEMA_DEPTH}")
    try:
        listed = safe_read.entries_of(fd, directory / prefix, limit=MAX_SCHEMA_FILES)
    except OSError as exc:
        raise SchemaStoreError(f"cannot read {directory / prefix}: {safe_read.describe(exc)}") from exc
    for name, mode in listed:
        rel = f"{prefix}{name}"
        path = directory / rel
        if not _utf8(name):  # os.listdir's surrogate escapes: no JSON key, no file name generate-json-schema writes
            shown = os.fsencode(directory / prefix) + b"/" + os.fsencode(name)
            raise SchemaStoreError(f"{shown!r}: a file name that is not UTF-8: not what generate-json-schema writes")
        if stat.S_ISDIR(mode):
            try:
                sub = safe_read.open_dir(name, dir_fd=fd)
            except OSError as exc:
                raise SchemaStoreError(f"cannot read {path}: {safe_read.describe(exc)}") from exc
            try:
                _read_schema_tree(directory, sub, f"{rel}/", bundle, total)
            finally:
                os.close(sub)
            continue
        if stat.S_ISLNK(mode):
            raise SchemaStoreError(f"{path} is a symbolic link (not followed): not what generate-json-schema writes")
        if not name.endswith(".json"):
            continue
        if len(bundle) >= MAX_SCHEMA_FILES:
            raise SchemaStoreError(f"{directory}: more than {MAX_SCHEMA_FILES} schema files")
        try:
            data = safe_read.read_bounded(name, MAX_SCHEMA_FILE_BYTES, dir_fd=fd, shown=path)
            total[0] += len(data)
            if total[0] > MAX_BUNDLE_BYTES:
                raise SchemaStoreError(f"{directory}: more than {MAX_BUNDLE_BYTES} bytes of schema files")
            bundle[rel] = bounded_parse.loads_json(data)
        except (OSError, orjson.JSONDecodeError) as exc:
            why = safe_read.describe(exc) if isinstance(exc, OSError) else str(exc)
            raise SchemaStoreError(f"cannot read schema {path}: {why}") from exc


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def encode_bundle(bundle: Bundle) -> bytes:
    """The canonical compressed form (sorted keys, so the same schema always gives the same bytes)."""
    raw = orjson.dumps(dict(bundle), option=orjson.OPT_SORT_KEYS)
    return zstandard.ZstdCompressor(level=_ZSTD_LEVEL, write_content_size=True).compress(raw)


def bundle_digest(bundle: Bundle) -> str:
    return hashlib.sha256(orjson.dumps(dict(bundle), option=orjson.OPT_SORT_KEYS)).hexdigest()


def write_release(
    version: str,
    stable: Bundle,
    experimental: Bundle,
    root: Path | None = None,
    produced_by: Mapping[str, Any] | None = None,
) -> Path:
    """Store both bundles of ``version`` under ``root`` (default: :func:`user_store`); returns the directory.

    The shipped pins are read-only: a ``root`` inside them is refused. Files are written to a temporary
    name and renamed, so a reader never sees half a bundle.
    """
    if not is_version(version):
        raise SchemaStoreError(f"not a release version: {version!r}")
    root = root if root is not None else user_store()
    if is_shipped(root):
        raise SchemaStoreError(
            f"{root} holds the pins shipped with the package and is never written; pins go to a store of yours "
            f"({store_hint()})"
        )
    target = release_dir(version, root)
    meta: dict[str, Any] = {
        "codex_version": version,
        "bundles": {},
        "produced_by": dict(produced_by or {}),
    }
    # Everything encoded before the folder is made: a bundle that cannot be written leaves no empty release behind.
    encoded: list[tuple[str, bytes]] = []
    try:
        for is_exp, bundle in ((False, stable), (True, experimental)):
            name = BUNDLE_FILES[is_exp]
            encoded.append((name, encode_bundle(bundle)))
            meta["bundles"]["experimental" if is_exp else "stable"] = {
                "file": name,
                "schema_files": len(bundle),
                "sha256": bundle_digest(bundle),
            }
        encoded.append((META_FILE, orjson.dumps(meta, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"))
    except (TypeError, ValueError) as exc:  # orjson.JSONEncodeError: a value or a name JSON cannot hold
        raise SchemaStoreError(f"cannot write the schema of {version}: {exc}") from exc
    try:
        with SafeDir.open(target) as out:  # each file written whole, never through a link
            for name, data in encoded:
                out.write(name, data)
    except WriteError as exc:
        raise SchemaStoreError(f"cannot write the schema of {version} to {target}: {exc}") from exc
    _clear_caches()
    return target


def open_bundle(spec: str | os.PathLike[str], experimental: bool = False) -> tuple[str, Bundle]:
    """A bundle named by a pinned version or a directory; returns a label and the bundle.

    A directory may be a release directory (``meta.json`` + ``*.json.zst``) or what
    ``generate-json-schema --out`` wrote.
    """
    text = os.fspath(spec)
    path = Path(text)
    if path.is_dir():
        if (path / META_FILE).is_file():
            return str(path), read_bundle_file(path / BUNDLE_FILES[experimental])
        return str(path), read_bundle_dir(path)
    if is_version(text):
        return text, load_bundle(text, experimental)
    if path.exists():
        raise SchemaStoreError(f"{text}: neither a pinned version nor a schema directory")
    if text[:1].isdigit():
        raise ReleaseNotPinned(text, pinned_releases())
    pinned = ", ".join(pinned_releases()) or "none"
    raise SchemaStoreError(f"{text}: no such directory and not a version (pinned releases: {pinned})")


def describe_stores() -> str:
    """Where lookups look, for messages: the shipped pins and the user's store."""
    return f"shipped: {SHIPPED_ROOT}; yours: {user_store()} ({store_hint()})"


def store_hint() -> str:
    """How a user chooses the store, for every message that sends them to it (one wording)."""
    return f"your store: --store DIR, else ${STORE_ENV}, else ${{XDG_DATA_HOME:-~/.local/share}}/codex-harness/schemas"
