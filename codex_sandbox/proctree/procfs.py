"""Reading ``/proc``: who is alive, whose child, in which PID namespace, carrying which run marker (Linux).

A scan is a series of reads, not one instant: a process that forks a new pid and exits every millisecond
is seldom caught by it. The trees (:mod:`codex_sandbox.proctree`) therefore decide *whether* anything is left by
the kernel where they can (``kill(-1, 0)`` inside a PID namespace, ``cgroup.procs``) and use these scans to
*name* what they find.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterator
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
PROC = Path("/proc")
MARKER_ENV = "CODEX_HARNESS_RUN_MARKER"


def set_child_subreaper(on: bool) -> bool:
    """Become (or stop being) a child subreaper; False where prctl is not available."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, session id) of ``pid``, None when it is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()
    try:
        return fields[0], int(fields[1]), int(fields[3])
    except (IndexError, ValueError):
        return None


def pids() -> Iterator[int]:
    try:
        entries = list(PROC.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.name.isdigit():
            yield int(entry.name)


def alive(pid: int) -> bool:
    state = stat(pid)
    return state is not None and state[0] not in ("Z", "X")


def marked(marker: str) -> set[int]:
    """Live processes of this user whose environment carries ``marker``."""
    needle = f"{MARKER_ENV}={marker}".encode() + b"\0"
    uid = os.getuid()
    found = set()
    for pid in pids():
        try:
            if (PROC / str(pid)).stat().st_uid != uid:
                continue
            environ = (PROC / str(pid) / "environ").read_bytes()
        except OSError:
            continue
        if (environ + b"\0").find(needle) >= 0 and alive(pid):
            found.add(pid)
    return found


def descendants(root: int) -> set[int]:
    """Live descendants of ``root`` (with a subreaper, or inside a PID namespace, orphans stay in the tree)."""
    children: dict[int, list[int]] = {}
    for pid in pids():
        state = stat(pid)
        if state is not None:
            children.setdefault(state[1], []).append(pid)
    out: set[int] = set()
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        out.add(pid)
        todo.extend(children.get(pid, ()))
    return {p for p in out if alive(p)}


def inner_pid(pid: int) -> int:
    """``pid`` as its own PID namespace numbers it (the last ``NSpid`` field); ``pid`` itself if unknown."""
    try:
        for line in (PROC / str(pid) / "status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    except (OSError, ValueError, IndexError):
        pass
    return pid


def pid_namespace(pid: int | str = "self") -> str | None:
    """The ``pid:[inode]`` of ``pid``'s PID namespace, None when it cannot be read."""
    try:
        return os.readlink(PROC / str(pid) / "ns" / "pid")
    except OSError:
        return None


def describe(pid: int) -> str:
    try:
        cmd = (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        cmd = "?"
    return f"{pid} ({cmd[:160]})"


def reap(candidates: set[int]) -> None:
    """Collect the zombies among ``candidates`` that are our children (never a child someone else waits for)."""
    me = os.getpid()
    for pid in candidates:
        state = stat(pid)
        if state is not None and state[1] == me and state[0] == "Z":
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)


def orphan_zombies(known: set[int]) -> set[int]:
    """Our zombie children that we did not start ourselves (re-parented orphans)."""
    me = os.getpid()
    out = set()
    for pid in pids():
        state = stat(pid)
        if state is not None and state[1] == me and state[0] == "Z" and pid not in known:
            out.add(pid)
    return out
