"""What a release is, derived from sessions recorded on it: pure functions, frames and bundles in, data out.

Each function reads what the real binary wrote and nothing else (no version is looked at):

- :func:`beyond_schema`: the methods its deserializer lists (the ``-32600 unknown variant`` answer) that its
  pinned schema does not have, and after which method it lists them;
- :func:`trace_format`: the rollout-trace bundle format of its bundles (envelope schema, payload files or
  shards, the event that ends a graceful recording, the required fields it never writes);
- :func:`field_sets` / :func:`not_written`: the fields its frames carry, per ``[where, field]`` as
  :mod:`fake_server.profiles` takes fields out (an item, a thread, a method's params or result), against the
  fake's: what the fake writes that the release never does;
- :func:`answers`: the answers to the requests beyond the turn core, with the run's paths as ``${cwd}``,
  ``${codex_home}``, ``${base_url}`` (:mod:`fake_server.surface.static`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import orjson

from contracts import bounded_parse, safe_read
from contracts.skeleton import UUID_RE
from contracts.trace_format import EVENT_LOG_NAME, EVENT_REQUIRED_FIELDS, MANIFEST_NAME, PAYLOADS_DIR_NAME

#: A trace file of a learning session is read up to this many bytes (a real one is well under 1 MB).
MAX_TRACE_BYTES: Final = 32 * 1024 * 1024
MAX_MANIFEST_BYTES: Final = 64 * 1024
_UNKNOWN_VARIANT: Final = re.compile(r"unknown variant `[^`]*`, expected one of (.*)", re.S)
_QUOTED: Final = re.compile(r"`([^`]+)`")
_BASE_URL: Final = re.compile(r"http://127\.0\.0\.1:\d+/v1")
#: The masked run paths of a transcript (:mod:`harness.transcript`) and the answers.json variables they become.
PATH_VARIABLES: Final = (("/RUN/workdir", "${cwd}"), ("/RUN/codex_home", "${codex_home}"))


# --- methods ---------------------------------------------------------------------------------------------


def deserializer_list(frames: Iterable[Any]) -> list[str] | None:
    """The method list of the first ``unknown variant`` error answer among ``frames`` (None: none)."""
    for frame in frames:
        error = frame.get("error") if isinstance(frame, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        if isinstance(message, str):
            found = _UNKNOWN_VARIANT.search(message)
            if found:
                return _QUOTED.findall(found.group(1))
    return None


def beyond_schema(listed: Sequence[str], pinned: Sequence[str]) -> dict[str, Any]:
    """``methods.beyond_schema`` of release.json: the listed methods the pin lacks, after the pinned method the
    deserializer lists right before the first of them."""
    known = set(pinned)
    names = [name for name in listed if name not in known]
    if not names:
        return {}
    first = listed.index(names[0])
    after = next((listed[i] for i in range(first - 1, -1, -1) if listed[i] in known), None)
    return {"after": after, "names": names} if after else {"names": names}


# --- trace bundles ---------------------------------------------------------------------------------------


def _events(bundle: Path) -> list[dict[str, Any]]:
    raw = safe_read.read_bounded(bundle / EVENT_LOG_NAME, MAX_TRACE_BYTES)
    out = []
    for line in raw.splitlines():
        try:
            envelope = bounded_parse.loads_json(line)
        except orjson.JSONDecodeError:
            continue  # a torn last line of a killed recording
        payload = envelope.get("payload") if isinstance(envelope, dict) else None
        if isinstance(payload, dict) and isinstance(payload.get("type"), str):
            out.append(payload)
    return out


def trace_format(bundles: Iterable[Path]) -> dict[str, Any] | None:
    """release.json's ``trace``, from the release's own bundles (None: no readable bundle).

    ``closing_event``: ``recording_completed`` when a bundle has it, else ``rollout_ended`` (the last event of
    a graceful recording without it). ``not_written``: a required field of an event type the bundles have
    that no event of that type carries."""
    schemas: set[int] = set()
    payload_files = False
    closing = False
    seen: dict[str, set[str]] = {}
    for bundle in bundles:
        try:
            manifest = bounded_parse.loads_json(safe_read.read_bounded(bundle / MANIFEST_NAME, MAX_MANIFEST_BYTES))
            events = _events(bundle)
        except (OSError, orjson.JSONDecodeError):
            continue
        schema = manifest.get("schema_version") if isinstance(manifest, dict) else None
        if isinstance(schema, int) and not isinstance(schema, bool) and schema > 0:
            schemas.add(schema)
        payloads = bundle / PAYLOADS_DIR_NAME
        if payloads.is_dir() and not payloads.is_symlink():
            payload_files |= any(p.suffix == ".json" for p in payloads.iterdir())
        for event in events:
            seen.setdefault(event["type"], set()).update(event)
            closing |= event["type"] == "recording_completed"
    if not schemas:
        return None
    missing = [
        [etype, name]
        for etype, fields in EVENT_REQUIRED_FIELDS.items()
        if etype in seen
        for name in fields
        if name not in seen[etype]
    ]
    return {
        "schema": max(schemas),
        "payload_files": payload_files,
        "closing_event": "recording_completed" if closing else "rollout_ended",
        "not_written": missing,
    }


# --- field sets ------------------------------------------------------------------------------------------


def _where(key: str) -> str:
    """Where a nested object's fields are named, as :func:`fake_server.profiles._where` takes them out."""
    return "item" if key in ("item", "items") else "thread" if key in ("thread", "threads", "data") else key


def _collect(value: Any, where: str, out: dict[str, set[str]]) -> None:
    stack = [(value, where)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, list):
            stack.extend((v, at) for v in item)
        elif isinstance(item, dict):
            # A map keyed by ids (``readStates`` by thread id) has entries, not fields: its values are one kind.
            fields = [k for k in item if not UUID_RE.fullmatch(k)]
            out.setdefault(at, set()).update(fields)
            stack.extend((v, f"{at}[]" if UUID_RE.fullmatch(k) else _where(k)) for k, v in item.items())


def field_sets(frames: Iterable[tuple[str | None, Any]]) -> dict[str, set[str]]:
    """The fields seen per ``where``: each (method, frame) pair gives its params' or result's top-level fields
    under the method (an answer's: its request's) and every nested object's under :func:`_where` of its key."""
    out: dict[str, set[str]] = {}
    for method, frame in frames:
        if not isinstance(frame, dict) or method is None:
            continue
        for part in ("params", "result"):
            body = frame.get(part)
            if isinstance(body, dict):
                out.setdefault(method, set()).update(k for k in body if not UUID_RE.fullmatch(k))
                for key, value in body.items():
                    _collect(value, f"{method}[]" if UUID_RE.fullmatch(key) else _where(key), out)
    return out


def server_frames(wire: Iterable[tuple[str, Any]]) -> list[tuple[str | None, Any]]:
    """(method, frame) of each server frame of a session's wire (``dir``, frame): a notification's or request's
    own method, an answer's request's."""
    asked: dict[Any, str] = {}
    out: list[tuple[str | None, Any]] = []
    for direction, frame in wire:
        if not isinstance(frame, dict):
            continue
        method = frame.get("method")
        if direction == "c2s":
            if isinstance(method, str) and "id" in frame:
                asked[_key(frame["id"])] = method
            continue
        if isinstance(method, str):
            out.append((method, frame))
        elif "id" in frame:
            out.append((asked.get(_key(frame["id"])), frame))
    return out


def _key(value: Any) -> str:
    return orjson.dumps(value).decode() if not isinstance(value, str) else f"s:{value}"


def not_written(fake: Mapping[str, set[str]], real: Mapping[str, set[str]]) -> list[list[str]]:
    """``[where, field]`` the fake writes and the release never does, where both wrote that object."""
    return sorted([where, name] for where in fake if where in real for name in fake[where] - real[where])


def only_real(fake: Mapping[str, set[str]], real: Mapping[str, set[str]]) -> list[list[str]]:
    """``[where, field]`` the release writes and the fake does not (where both wrote that object)."""
    return not_written(real, fake)


# --- answers ---------------------------------------------------------------------------------------------


def answer_key(method: str, params: Any) -> str:
    """The key of answers.json a request is answered from (config/read with its layers has its own)."""
    if method == "config/read" and isinstance(params, dict) and params.get("includeLayers"):
        return "config/read+layers"
    return method


def answer_method(key: str) -> str:
    """The method of an answers.json key (:func:`answer_key`'s inverse)."""
    return key.partition("+")[0]


def _variables(value: Any) -> Any:
    if isinstance(value, str):
        for path, name in PATH_VARIABLES:
            value = value.replace(path, name)
        return _BASE_URL.sub("${base_url}", value)
    if isinstance(value, list):
        return [_variables(v) for v in value]
    if isinstance(value, dict):
        return {k: _variables(v) for k, v in value.items()}
    return value


def answers(transcripts: Iterable[Sequence[Mapping[str, Any]]], keys: Iterable[str]) -> dict[str, Any]:
    """For each of ``keys``, the first result the release gave a request of that key in ``transcripts``
    (masked transcript lines, :mod:`harness.transcript`), its run paths as answers.json variables."""
    wanted = set(keys)
    found: dict[str, Any] = {}
    for lines in transcripts:
        asked: dict[str, str] = {}
        for line in lines:
            msg = line.get("msg")
            if not isinstance(msg, dict) or "id" not in msg:
                continue
            if line.get("dir") == "c2s" and isinstance(msg.get("method"), str):
                asked[_key(msg["id"])] = answer_key(msg["method"], msg.get("params"))
            elif line.get("dir") == "s2c" and "method" not in msg and isinstance(msg.get("result"), dict):
                key = asked.get(_key(msg["id"]))
                if key in wanted and key not in found:
                    found[key] = _variables(msg["result"])
    return found
