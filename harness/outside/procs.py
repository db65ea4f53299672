"""Finding and ending every process an outside client started, however it tried to get away.

Two nets: the run marker (``CODEX_HARNESS_RUN_MARKER=<marker>`` in ``/proc/<pid>/environ``; the shim sets it
for every server, and children inherit it unless they scrub their environment), and descent: the harness
makes itself a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``) while a client runs, so a descendant
that ``setsid``s and loses its parent is re-parented to us instead of init and is still found by walking
``/proc/*/stat`` parent links from our pid. Linux only; elsewhere both nets find nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
_PROC = Path("/proc")
MARKER_ENV = "CODEX_HARNESS_RUN_MARKER"


def set_child_subreaper(on: bool) -> bool:
    """Become (or stop being) a child subreaper; False where prctl is not available."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, ppid) of ``pid``, None when it is gone."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[0], int(fields[1])


def _pids() -> Iterator[int]:
    try:
        entries = list(_PROC.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.name.isdigit():
            yield int(entry.name)


def alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def marked(marker: str) -> set[int]:
    """Live processes of this user whose environment carries ``marker``."""
    needle = f"{MARKER_ENV}={marker}".encode() + b"\0"
    uid = os.getuid()
    found = set()
    for pid in _pids():
        try:
            if (_PROC / str(pid)).stat().st_uid != uid:
                continue
            environ = (_PROC / str(pid) / "environ").read_bytes()
        except OSError:
            continue
        if (environ + b"\0").find(needle) >= 0 and alive(pid):
            found.add(pid)
    return found


def descendants(root: int) -> set[int]:
    """Live descendants of ``root`` (with a subreaper, orphans of the tree stay in it)."""
    children: dict[int, list[int]] = {}
    for pid in _pids():
        stat = _stat(pid)
        if stat is not None:
            children.setdefault(stat[1], []).append(pid)
    out: set[int] = set()
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        out.add(pid)
        todo.extend(children.get(pid, ()))
    return {p for p in out if alive(p)}


def describe(pid: int) -> str:
    try:
        cmd = (_PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        cmd = "?"
    return f"{pid} ({cmd[:160]})"


def survivors(marker: str, exclude: set[int] = frozenset()) -> set[int]:  # type: ignore[assignment]
    """Everything still alive that the run started: marked processes and our descendants."""
    return (marked(marker) | descendants(os.getpid())) - exclude - {os.getpid()}


def kill_all(pids: set[int], *, group: int | None = None, grace_s: float = 2.0) -> list[str]:
    """SIGKILL the client's group and ``pids``, wait (bounded) until they are gone, reap our orphans.

    Returns who was killed, described. Reaping: orphans re-parented to us become our zombies; trio does
    not know them, so they are collected here by pid (only those, never a child someone else waits for).
    """
    described = [describe(p) for p in sorted(pids) if alive(p)]
    if group is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + grace_s
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.01)  # SIGKILLed processes die asynchronously; bounded by grace_s
    reap(pids)
    return described


def reap(pids: set[int]) -> None:
    """Collect the zombies among ``pids`` that are our children."""
    me = os.getpid()
    for pid in pids:
        stat = _stat(pid)
        if stat is not None and stat[1] == me and stat[0] == "Z":
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)


def orphan_zombies(known: set[int]) -> set[int]:
    """Our zombie children that we did not start ourselves (re-parented orphans)."""
    me = os.getpid()
    out = set()
    for pid in _pids():
        stat = _stat(pid)
        if stat is not None and stat[1] == me and stat[0] == "Z" and pid not in known:
            out.add(pid)
    return out
