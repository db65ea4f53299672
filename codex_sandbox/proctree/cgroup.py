"""A tree in a cgroup of its own: v2 (``cgroup.kill``, else ``cgroup.freeze``) or the v1 freezer.

Where no PID namespace can be made. The main process joins the cgroup before it execs the command (a
``/bin/sh`` that writes its own pid into ``cgroup.procs``), so everything it starts is born in it; the
kernel lists the cgroup's processes (``cgroup.procs``: exact, whoever forks how fast) and ends them at
once (``cgroup.kill``) or freezes them first, so none can fork while the others are killed. Weaker than
a namespace: a root process can move itself to another cgroup, and a harness killed by SIGKILL leaves
the cgroup's processes alive (nothing watches for its death here).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import trio

from codex_sandbox.confine_init import unescape  # the one mountinfo unescaper (that file imports only the stdlib)
from codex_sandbox.proctree import procfs
from codex_sandbox.proctree.base import (
    END_TIMEOUT_S,
    POLL_S,
    Confinement,
    ConfinementFailed,
    Member,
    ProcessTree,
    wait_bounded,
)

PREFIX = "codex-harness-"
_JOIN = 'echo $$ > "$0" && exec "$@"'
_counter = itertools.count(1)
FREEZE_WAIT_S = 0.5


def mounts(mountinfo: str) -> list[tuple[str, str, str, str]]:
    """(fstype, root, mount point, super options) of every line of a ``/proc/self/mountinfo`` text."""
    out = []
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if sep and len(fields) >= 5 and len(tail) >= 3:
            out.append((tail[0], unescape(fields[3]), unescape(fields[4]), tail[2]))
    return out


def own_cgroup(mountinfo: str, cgroups: str, version: int) -> Path | None:
    """The directory of this process's own cgroup: v2 (``cgroup2``) or the v1 ``freezer`` hierarchy."""
    if version == 2:
        mount = next(((r, m) for t, r, m, _ in mounts(mountinfo) if t == "cgroup2"), None)
        path = next((line.split(":", 2)[2] for line in cgroups.splitlines() if line.startswith("0::")), None)
    else:
        mount = next(
            ((r, m) for t, r, m, opts in mounts(mountinfo) if t == "cgroup" and "freezer" in opts.split(",")), None
        )
        path = next(
            (
                line.split(":", 2)[2]
                for line in cgroups.splitlines()
                if line.count(":") >= 2 and "freezer" in line.split(":", 2)[1].split(",")
            ),
            None,
        )
    if mount is None or path is None:
        return None
    root, point = mount
    if root != "/" and not (path == root or path.startswith(root.rstrip("/") + "/")):
        return None  # our cgroup is outside what this mount shows (a container's view)
    relative = path[len(root.rstrip("/")) :].lstrip("/") if root != "/" else path.lstrip("/")
    return Path(point) / relative


def probe(parent: Path, version: int) -> str | None:
    """Make a child cgroup and start an empty program in it: None when that works, else why not."""
    child = parent / f"{PREFIX}probe-{os.getpid()}-{next(_counter)}"
    try:
        child.mkdir()
    except OSError as exc:
        return f"cannot create a cgroup under {parent}: {exc.strerror or exc}"
    try:
        sh = shutil.which("sh") or "/bin/sh"
        done = subprocess.run(
            [sh, "-c", _JOIN, str(child / "cgroup.procs"), sys.executable, "-I", "-S", "-c", ""],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=END_TIMEOUT_S * 5,
        )
        if done.returncode != 0:
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            return f"cannot join a cgroup under {parent}: {said[-1][:200] if said else done.returncode}"
        if version == 1 and not (child / "freezer.state").exists():
            return f"{parent} has no freezer"
        return None
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot start a process in a cgroup under {parent}: {exc}"
    finally:
        _remove(child)


def _remove(directory: Path) -> bool:
    deadline = time.monotonic() + END_TIMEOUT_S
    while True:
        try:
            directory.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_S)  # the last member's exit is still being accounted; bounded


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
        return True
    except OSError:
        return False


class CgroupTree(ProcessTree):
    def __init__(self, confinement: Confinement) -> None:
        assert confinement.cgroup_parent is not None
        self.confinement = confinement
        self.version = 2 if confinement.kind == "cgroup-v2" else 1
        self.dir = confinement.cgroup_parent / f"{PREFIX}{os.getpid()}-{next(_counter)}"

    async def start(
        self, argv: Sequence[str], *, env: Mapping[str, str], cwd: str | Path | None, stdio: dict[str, Any]
    ) -> None:
        try:
            self.dir.mkdir()
        except OSError as exc:
            raise ConfinementFailed(f"cannot create the cgroup {self.dir}: {exc.strerror or exc}") from None
        sh = shutil.which("sh") or "/bin/sh"
        self.process = await trio.lowlevel.open_process(
            [sh, "-c", _JOIN, str(self.dir / "cgroup.procs"), *argv],
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
            **stdio,
        )
        self.stdin, self.stdout, self.stderr = self.process.stdin, self.process.stdout, self.process.stderr
        self.main_pid = self.process.pid

    async def wait(self) -> int:
        self.returncode = await self.process.wait()
        return self.returncode

    def _pids(self) -> set[int]:
        try:
            text = (self.dir / "cgroup.procs").read_text()
        except OSError:
            return set()
        return {int(line) for line in text.split() if line.isdigit()}

    def members(self) -> list[Member]:
        return [Member(p, p, procfs.describe(p)) for p in sorted(self._pids()) if procfs.alive(p)]

    def empty(self) -> bool:
        return not any(procfs.alive(p) for p in self._pids())

    def kill(self) -> None:
        if self.version == 2 and _write(self.dir / "cgroup.kill", "1"):
            return
        # No cgroup.kill (before Linux 5.14) or the v1 freezer: freeze, so nothing forks, kill each, thaw.
        freeze, frozen, thawed = (
            ("cgroup.freeze", "1", "0") if self.version == 2 else ("freezer.state", "FROZEN", "THAWED")
        )
        _write(self.dir / freeze, frozen)
        if self.version == 1:
            deadline = time.monotonic() + FREEZE_WAIT_S
            while time.monotonic() < deadline:
                with contextlib.suppress(OSError):
                    if (self.dir / "freezer.state").read_text().strip() == "FROZEN":
                        break
                time.sleep(POLL_S)  # FREEZING -> FROZEN takes a scheduler pass; bounded
        for pid in self._pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        _write(self.dir / freeze, thawed)

    async def aclose(self) -> None:
        self.kill()
        process = getattr(self, "process", None)
        if process is not None:
            await wait_bounded(process)
        with trio.move_on_after(END_TIMEOUT_S):
            while not self.empty():
                self.kill()  # a process moved in between the kill and now
                await trio.sleep(POLL_S)
        with contextlib.suppress(OSError):
            _remove(self.dir)
