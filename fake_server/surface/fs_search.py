"""fs/*, fuzzyFileSearch and command/exec, answered like 0.171.0 but confined and without side effects.

Reads see the session's work directory only (``Engine.cwd``; a path outside it reads as missing),
capped in size and count. Writes (writeFile, createDirectory, copy, remove) never touch the disk:
they go to an in-memory overlay that later reads in the same session see. ``command/exec`` never
runs anything: it answers with the scripted result (``[[methods]]``), by default an empty success.
"""

from __future__ import annotations

import base64
import os
import posixpath
from dataclasses import dataclass, field
from typing import Any

from fake_server.surface.call import Call
from fake_server.surface.errors import internal, invalid, invalid_params

MAX_READ_BYTES = 4 * 1024 * 1024
MAX_DIR_ENTRIES = 2000
MAX_SEARCH_FILES = 20_000
MAX_SEARCH_RESULTS = 50
NOT_FOUND = "No such file or directory (os error 2)"
NOT_A_DIRECTORY = "Not a directory (os error 20)"
DIRECTORY = object()  # an overlay entry that is a directory
DELETED = object()  # an overlay entry removed in this session


@dataclass(slots=True)
class Overlay:
    entries: dict[str, Any] = field(default_factory=dict)  # absolute path -> bytes | DIRECTORY | DELETED


def _overlay(call: Call) -> Overlay:
    state = call.state
    if state.fs is None:
        state.fs = Overlay()
    return state.fs


def _abs(value: Any) -> str:
    if not isinstance(value, str) or not value.startswith("/"):
        raise invalid("Invalid request: AbsolutePathBuf deserialized without a base path")
    return posixpath.normpath(value)


def _inside(call: Call, path: str) -> bool:
    """``path`` is the work directory or below it, symlinks resolved (a link cannot lead out)."""
    root = os.path.realpath(call.cwd)
    real = os.path.realpath(path)
    return real == root or real.startswith(root.rstrip("/") + "/")


def _kind(call: Call, path: str) -> str | None:
    """'file', 'dir' or None, overlay first, then the disk (inside the work directory only)."""
    entry = _overlay(call).entries.get(path)
    if entry is DELETED:
        return None
    if entry is DIRECTORY:
        return "dir"
    if isinstance(entry, bytes):
        return "file"
    if not _inside(call, path):
        return None
    if os.path.isdir(path):
        return "dir"
    if os.path.isfile(path):
        return "file"
    return None


def read_file(call: Call) -> dict[str, Any]:
    path = _abs(call.params.get("path"))
    kind = _kind(call, path)
    if kind is None:
        raise internal(NOT_FOUND)
    if kind == "dir":
        raise invalid(f"path `{path}` is not a file")
    entry = _overlay(call).entries.get(path)
    if isinstance(entry, bytes):
        data = entry
    else:
        with open(path, "rb") as handle:
            data = handle.read(MAX_READ_BYTES + 1)
    if len(data) > MAX_READ_BYTES:
        raise invalid(f"file `{path}` is larger than the fake's {MAX_READ_BYTES} byte cap")
    return {"dataBase64": base64.b64encode(data).decode("ascii")}


def get_metadata(call: Call) -> dict[str, Any]:
    path = _abs(call.params.get("path"))
    kind = _kind(call, path)
    if kind is None:
        raise internal(NOT_FOUND)
    modified = call.engine.now_ms
    if path not in _overlay(call).entries:
        modified = int(os.stat(path).st_mtime * 1000)
    return {
        "isDirectory": kind == "dir",
        "isFile": kind == "file",
        "isSymlink": False,
        "createdAtMs": 0,
        "modifiedAtMs": modified,
    }


def _listing(call: Call, path: str) -> dict[str, str]:
    names: dict[str, str] = {}
    if _inside(call, path) and os.path.isdir(path) and path not in _overlay(call).entries:
        with os.scandir(path) as scan:
            for entry in scan:
                if len(names) >= MAX_DIR_ENTRIES:
                    break
                names[entry.name] = "dir" if entry.is_dir(follow_symlinks=False) else "file"
    for other, entry in _overlay(call).entries.items():
        if posixpath.dirname(other) == path:
            name = posixpath.basename(other)
            if entry is DELETED:
                names.pop(name, None)
            else:
                names[name] = "dir" if entry is DIRECTORY else "file"
    return names


def read_directory(call: Call) -> dict[str, Any]:
    path = _abs(call.params.get("path"))
    kind = _kind(call, path)
    if kind is None:
        raise internal(NOT_FOUND)
    if kind != "dir":
        raise internal(NOT_A_DIRECTORY)
    names = _listing(call, path)
    entries = [
        {"fileName": name, "isDirectory": kind == "dir", "isFile": kind == "file"}
        for name, kind in sorted(names.items())
    ]
    return {"entries": entries}


def _parent_exists(call: Call, path: str) -> bool:
    return _kind(call, posixpath.dirname(path)) == "dir"


def write_file(call: Call) -> dict[str, Any]:
    path = _abs(call.params.get("path"))
    if not _parent_exists(call, path):
        raise internal(NOT_FOUND)
    try:
        data = base64.b64decode(str(call.params.get("dataBase64", "")), validate=True)
    except ValueError as exc:
        raise invalid(f"invalid base64: {exc}") from None
    if len(data) > MAX_READ_BYTES:
        raise invalid(f"data is larger than the fake's {MAX_READ_BYTES} byte cap")
    _overlay(call).entries[path] = data
    return {}


def create_directory(call: Call) -> dict[str, Any]:
    path = _abs(call.params.get("path"))
    if _kind(call, path) != "dir":
        if not _parent_exists(call, path) and call.params.get("recursive") is False:
            raise internal(NOT_FOUND)
        _overlay(call).entries[path] = DIRECTORY
    return {}


def copy(call: Call) -> dict[str, Any]:
    source = _abs(call.params.get("sourcePath"))
    destination = _abs(call.params.get("destinationPath"))
    kind = _kind(call, source)
    if kind is None or not _parent_exists(call, destination):
        raise internal(NOT_FOUND)
    if kind == "dir":
        _overlay(call).entries[destination] = DIRECTORY
    else:
        _overlay(call).entries[destination] = read_bytes(call, source)
    return {}


def read_bytes(call: Call, path: str) -> bytes:
    entry = _overlay(call).entries.get(path)
    if isinstance(entry, bytes):
        return entry
    with open(path, "rb") as handle:
        return handle.read(MAX_READ_BYTES)


def remove(call: Call) -> dict[str, Any]:
    path = _abs(call.params.get("path"))
    if _kind(call, path) is not None:
        _overlay(call).entries[path] = DELETED
    return {}  # 0.171.0 answers {} for a missing path too


def watch(call: Call) -> dict[str, Any]:
    path = _abs(call.params.get("path"))
    watch_id = str(call.params.get("watchId"))
    if watch_id in call.state.watches:
        raise invalid(f"watchId already exists: {watch_id}")
    call.state.watches[watch_id] = path
    return {"path": path}


def unwatch(call: Call) -> dict[str, Any]:
    call.state.watches.pop(str(call.params.get("watchId")), None)
    return {}


# --- fuzzy file search ----------------------------------------------------------------------


def _subsequence(query: str, text: str) -> list[int] | None:
    indices: list[int] = []
    position = 0
    lowered = text.lower()
    for ch in query.lower():
        found = lowered.find(ch, position)
        if found < 0:
            return None
        indices.append(found)
        position = found + 1
    return indices


def _walk(call: Call, root: str) -> list[str]:
    """Relative file paths under ``root`` (inside the work directory), bounded, hidden ones skipped."""
    found: list[str] = []
    if not _inside(call, root) or not os.path.isdir(root):
        return found
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith("."):
                continue
            found.append(posixpath.relpath(posixpath.join(directory, name), root))
            if len(found) >= MAX_SEARCH_FILES:
                return found
    return found


def fuzzy_file_search(call: Call) -> dict[str, Any]:
    query = str(call.params.get("query", ""))
    roots = [r for r in call.params.get("roots") or [] if isinstance(r, str)]
    files: list[dict[str, Any]] = []
    for root in roots:
        for rel in _walk(call, posixpath.normpath(root)):
            indices = _subsequence(query, rel) if query else None
            if indices is None:
                continue
            # Higher for tighter, earlier matches; 0.171.0's scores are of this order (65620 for a prefix).
            score = 65536 + 84 - (indices[-1] - indices[0]) - indices[0]
            files.append(
                {
                    "root": root,
                    "path": rel,
                    "match_type": "file",
                    "file_name": posixpath.basename(rel),
                    "score": score,
                    "indices": indices,
                }
            )
    files.sort(key=lambda f: (-f["score"], f["path"]))
    return {"files": files[:MAX_SEARCH_RESULTS]}


# --- command/exec (scripted, never run) -----------------------------------------------------


def command_exec(call: Call) -> dict[str, Any]:
    command = call.params.get("command")
    if not isinstance(command, list) or not command:
        raise invalid("command must not be empty")
    return {"exitCode": 0, "stdout": "", "stderr": ""}


def _no_process(call: Call) -> Any:
    raise invalid(f'no active command/exec for process id "{call.params.get("processId")}"')


def command_write(call: Call) -> Any:
    if call.params.get("deltaBase64") is None and not call.params.get("closeStdin"):
        raise invalid_params("command/exec/write requires deltaBase64 or closeStdin")
    return _no_process(call)


HANDLERS = {
    "fs/readFile": read_file,
    "fs/getMetadata": get_metadata,
    "fs/readDirectory": read_directory,
    "fs/writeFile": write_file,
    "fs/createDirectory": create_directory,
    "fs/copy": copy,
    "fs/remove": remove,
    "fs/watch": watch,
    "fs/unwatch": unwatch,
    "fuzzyFileSearch": fuzzy_file_search,
    "command/exec": command_exec,
    "command/exec/write": command_write,
    "command/exec/terminate": _no_process,
    "command/exec/resize": _no_process,
}
