"""fs/*, fuzzyFileSearch and command/exec, answered like the real binary but confined and without side effects.

Reads see the session's work directory only (``Engine.cwd``; a path outside it reads as missing),
capped in size and count. Writes (writeFile, createDirectory, copy, remove) never touch the disk:
they go to an in-memory overlay that later reads in the same session see. ``command/exec`` never
runs anything: it answers with the scripted result (``[[methods]]``), by default an empty success.

Everything a client can make the fake hold or do is capped. The overlay holds at most
:data:`MAX_OVERLAY_ENTRIES` paths and :data:`MAX_OVERLAY_BYTES` of file data: past that a write is
answered as the real server answers it on a full disk (observed with its work directory on a small tmpfs:
``-32603 No space left on device (os error 28)``). ``fuzzyFileSearch`` takes its roots once each, as
the real server does (``/a`` and ``/a/`` are one root, ``/a/b/..`` another), looks at most
:data:`MAX_SEARCH_FILES` entries over all of them and refuses more than :data:`MAX_SEARCH_ROOTS` distinct
roots with a clear error (the real server answered 2,000 without one; a real client sends a handful).
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
MAX_SEARCH_FILES = 20_000  # entries (files and folders) looked at by one search, over all its roots
MAX_SEARCH_ROOTS = 1_000  # distinct roots of one search
MAX_SEARCH_RESULTS = 50
MAX_OVERLAY_ENTRIES = 10_000  # paths written, made or copied in one session
MAX_OVERLAY_BYTES = 64 * 1024 * 1024  # file data written or copied in one session
MAX_WATCHES = 1_000
NOT_FOUND = "No such file or directory (os error 2)"
NOT_A_DIRECTORY = "Not a directory (os error 20)"
NO_SPACE = "No space left on device (os error 28)"  # the real server on a full disk, for writeFile
DIRECTORY = object()  # an overlay entry that is a directory
DELETED = object()  # an overlay entry removed in this session


@dataclass(slots=True)
class Overlay:
    entries: dict[str, Any] = field(default_factory=dict)  # absolute path -> bytes | DIRECTORY | DELETED
    data_bytes: int = 0  # the bytes entries hold, together

    def put(self, path: str, entry: Any) -> None:
        """Set ``path`` to ``entry`` within the caps; a write past them is a full disk (:data:`NO_SPACE`)."""
        old = self.entries.get(path)
        size = len(entry) if isinstance(entry, bytes) else 0
        freed = len(old) if isinstance(old, bytes) else 0
        if old is None and entry is not DELETED and len(self.entries) >= MAX_OVERLAY_ENTRIES:
            raise internal(NO_SPACE)
        if self.data_bytes - freed + size > MAX_OVERLAY_BYTES:
            raise internal(NO_SPACE)
        self.entries[path] = entry
        self.data_bytes += size - freed


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
    modified = call.world.now_ms
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
    _overlay(call).put(path, data)
    return {}


def create_directory(call: Call) -> dict[str, Any]:
    path = _abs(call.params.get("path"))
    if _kind(call, path) != "dir":
        if not _parent_exists(call, path) and call.params.get("recursive") is False:
            raise internal(NOT_FOUND)
        _overlay(call).put(path, DIRECTORY)
    return {}


def copy(call: Call) -> dict[str, Any]:
    source = _abs(call.params.get("sourcePath"))
    destination = _abs(call.params.get("destinationPath"))
    kind = _kind(call, source)
    if kind is None or not _parent_exists(call, destination):
        raise internal(NOT_FOUND)
    if kind == "dir":
        _overlay(call).put(destination, DIRECTORY)
    else:
        _overlay(call).put(destination, read_bytes(call, source))
    return {}


def read_bytes(call: Call, path: str) -> bytes:
    entry = _overlay(call).entries.get(path)
    if isinstance(entry, bytes):
        return entry
    with open(path, "rb") as handle:
        data = handle.read(MAX_READ_BYTES + 1)
    if len(data) > MAX_READ_BYTES:  # never a silently cut copy
        raise invalid(f"file `{path}` is larger than the fake's {MAX_READ_BYTES} byte cap")
    return data


def remove(call: Call) -> dict[str, Any]:
    path = _abs(call.params.get("path"))
    if _kind(call, path) is not None:
        _overlay(call).put(path, DELETED)  # no new entry past what is written or on the disk: never refused
    return {}  # the real server answers {} for a missing path too


def watch(call: Call) -> dict[str, Any]:
    path = _abs(call.params.get("path"))
    watch_id = str(call.params.get("watchId"))
    if watch_id in call.state.watches:
        raise invalid(f"watchId already exists: {watch_id}")
    if len(call.state.watches) >= MAX_WATCHES:
        raise invalid(f"the fake keeps at most {MAX_WATCHES} watches; unwatch one first")
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


def _walk(call: Call, root: str, budget: list[int]) -> list[str]:
    """Relative file paths under ``root`` (inside the work directory), hidden ones skipped; every entry
    looked at (file or folder) is taken from ``budget[0]``, shared by the search's roots."""
    found: list[str] = []
    if budget[0] <= 0 or not _inside(call, root) or not os.path.isdir(root):
        return found
    for directory, subdirs, files in os.walk(root):
        budget[0] -= len(subdirs) + len(files)
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith("."):
                continue
            found.append(posixpath.relpath(posixpath.join(directory, name), root))
        if budget[0] <= 0:
            break
    return found


def _root_key(root: str) -> str:
    """When two roots are one (the real server compares them as paths: ``/a``, ``/a/`` and ``/a//.`` are one root,
    ``/a/b/..`` is another, nothing is resolved)."""
    parts = [p for p in root.split("/") if p not in ("", ".")]
    return ("/" if root.startswith("/") else "") + "/".join(parts)


def _distinct_roots(value: Any) -> list[str]:
    roots: dict[str, str] = {}  # key -> the first spelling, which the answer names
    for root in value if isinstance(value, list) else []:
        if isinstance(root, str):
            roots.setdefault(_root_key(root), root)
            if len(roots) > MAX_SEARCH_ROOTS:
                raise invalid(f"fuzzyFileSearch: at most {MAX_SEARCH_ROOTS} distinct roots (the fake's cap)")
    return list(roots.values())


def fuzzy_file_search(call: Call) -> dict[str, Any]:
    query = str(call.params.get("query", ""))
    roots = _distinct_roots(call.params.get("roots"))
    files: list[dict[str, Any]] = []
    budget = [MAX_SEARCH_FILES]
    for root in roots:
        for rel in _walk(call, posixpath.normpath(root), budget):
            indices = _subsequence(query, rel) if query else None
            if indices is None:
                continue
            # Higher for tighter, earlier matches; the real server's scores are of this order (65620 for a prefix).
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
