"""A tree nothing confines: its process group, the run marker and the harness's descendants (best effort).

Where neither a PID namespace nor a cgroup can be made. The main process leads its own session and group;
the harness is a child subreaper while such a tree is open, so a descendant that ``setsid``s and loses its
parent is re-parented to the harness and still found by walking ``/proc`` parent links; the run marker
(``CODEX_HARNESS_RUN_MARKER``) finds what kept its environment. A process that scrubs its environment,
double-forks and changes pid faster than ``/proc`` can be read escapes all three: the confinement's detail
says "not confined" and why.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import trio

from codex_sandbox.proctree import procfs
from codex_sandbox.proctree.base import Confinement, Member, ProcessTree, wait_bounded

_subreapers = 0  # open trees that need the harness to be a subreaper


class GroupTree(ProcessTree):
    def __init__(self, confinement: Confinement, marker: str | None) -> None:
        self.confinement = confinement
        self.marker = marker
        self.theirs: set[int] = set()
        self._subreaper = False

    async def start(
        self, argv: Sequence[str], *, env: Mapping[str, str], cwd: str | Path | None, stdio: dict[str, Any]
    ) -> None:
        global _subreapers
        # Ours to kill is only what this tree starts: processes the caller already had stay out of every sweep.
        self.theirs = procfs.descendants(os.getpid())
        if _subreapers == 0:
            self._subreaper = procfs.set_child_subreaper(True)
        else:
            self._subreaper = True
        if self._subreaper:
            _subreapers += 1
        try:
            self.process = await trio.lowlevel.open_process(
                list(argv), env=dict(env), cwd=cwd, start_new_session=True, **stdio
            )
        except BaseException:
            self._release()
            raise
        self.stdin, self.stdout, self.stderr = self.process.stdin, self.process.stdout, self.process.stderr
        self.main_pid = self.process.pid

    def _release(self) -> None:
        global _subreapers
        if self._subreaper:
            self._subreaper = False
            _subreapers -= 1
            if _subreapers == 0:
                procfs.set_child_subreaper(False)

    async def wait(self) -> int:
        self.returncode = await self.process.wait()
        return self.returncode

    def _pids(self) -> set[int]:
        found = procfs.descendants(os.getpid())
        if self.marker:
            found |= procfs.marked(self.marker)
        return found - self.theirs - {os.getpid()}

    def members(self) -> list[Member]:
        return [Member(p, p, procfs.describe(p)) for p in sorted(self._pids())]

    def empty(self) -> bool:
        return not self._pids()

    def kill(self) -> None:
        process = getattr(self, "process", None)
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)  # unreaped, its pid (= the group) is still ours
        with contextlib.suppress(OSError):
            for pid in self._pids():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)

    async def aclose(self) -> None:
        try:
            self.kill()
            process = getattr(self, "process", None)
            if process is not None:
                await wait_bounded(process)
            with trio.move_on_after(2.0):
                while left := self._pids():
                    procfs.reap(left)
                    self.kill()
                    await trio.sleep(0.01)
            procfs.reap(procfs.orphan_zombies(self.theirs | ({process.pid} if process is not None else set())))
        finally:
            self._release()
