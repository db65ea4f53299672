"""What every process tree offers, whatever confines it, and the registry the signal path ends them through."""

from __future__ import annotations

import contextlib
import itertools
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import trio

from contracts.exitcodes import InternalError

Kind = Literal["pid-namespace", "cgroup-v2", "cgroup-v1", "none"]
#: Bound of a tree's start (the launcher, the init's interpreter) and of its end (the kill, the reap).
START_TIMEOUT_S = 10.0
END_TIMEOUT_S = 2.0
#: After an interrupt, how long the running scenarios are given to notice their processes were killed.
STOP_S = 10.0
POLL_S = 0.01


class ConfinementFailed(InternalError, RuntimeError):
    """The confinement chosen for this machine could not start a tree (the launcher died, a cgroup vanished)."""


@dataclass(frozen=True, slots=True)
class Confinement:
    """How trees are confined on this machine: ``kind``, and ``detail`` saying how (or why not)."""

    kind: Kind
    detail: str
    #: pid-namespace: the argv prefix that starts the init in a new PID namespace (bwrap or unshare)
    launcher: tuple[str, ...] = ()
    #: cgroup-v2 / cgroup-v1: the cgroup (ours) under which each tree gets a child
    cgroup_parent: Path | None = None

    @property
    def confined(self) -> bool:
        return self.kind != "none"


@dataclass(frozen=True, slots=True)
class Member:
    """A live process of a tree: ``pid`` as the harness sees it, ``inner`` as the tree's processes see it."""

    pid: int
    inner: int
    described: str


class ProcessTree(ABC):
    """Every process one start of a command makes, and whatever those make, however they try to get away.

    ``process`` is what the harness started (a launcher or the main process itself); ``stdin`` /
    ``stdout`` / ``stderr`` are the main process's. ``wait()`` is the main process's exit; the tree
    outlives it until ``aclose()``, so what the main process left behind can be judged (``empty()``),
    named (``members()``) and ended (``kill()``). ``kill()`` is synchronous and idempotent: the signal
    path calls it from a handler.
    """

    confinement: Confinement
    process: trio.Process
    returncode: int | None = None
    #: the main process's pid as the harness sees it (None: it could not be found, it was already gone)
    main_pid: int | None = None
    #: our ends of the main process's stdio (a pipe asked for with subprocess.PIPE), else None. Only the
    #: main process and what it starts hold the other ends: EOF means they are all done with them.
    stdin: trio.abc.SendStream | None = None
    stdout: trio.abc.ReceiveStream | None = None
    stderr: trio.abc.ReceiveStream | None = None

    @abstractmethod
    async def start(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | Path | None,
        stdio: dict[str, Any],
    ) -> None: ...

    @abstractmethod
    async def wait(self) -> int:
        """The main process's exit code (negative: the signal that ended it). Any number of tasks may wait."""

    async def pump(self) -> None:
        """What the tree needs running in the background while it is open (:func:`open_tree` runs it)."""
        return None  # the process-based trees need nothing: trio waits for their main process

    @abstractmethod
    def members(self) -> list[Member]:
        """The tree's live processes besides its own machinery, named (a scan: a fast forker may be missed)."""

    @abstractmethod
    def empty(self) -> bool:
        """True when nothing of the tree is alive any more (the kernel's answer where the confinement has one)."""

    @abstractmethod
    def kill(self) -> None:
        """SIGKILL everything in the tree, now; never raises, never waits long."""

    @abstractmethod
    async def aclose(self) -> None:
        """Kill, reap and release (bounded by :data:`END_TIMEOUT_S` per step)."""


# --- the registry: what the signal path ends before the run unwinds ---------------------------------------

_live: dict[int, Callable[[], None]] = {}
_tokens = itertools.count(1)
#: How many times :func:`end_all` ran: a tree registered before a kill and started after it (its start was
#: under way in another thread) is killed as it starts (:func:`ended_since`).
_ends = [0]


def ends() -> int:
    """The count of :func:`end_all` calls so far, to compare with :func:`ended_since` later."""
    return _ends[0]


def ended_since(count: int) -> bool:
    """Whether :func:`end_all` ran since :func:`ends` returned ``count``."""
    return _ends[0] != count


def register(kill: Callable[[], None]) -> int:
    """Keep ``kill`` until :func:`unregister`; :func:`end_all` calls it. Returns the token to unregister with."""
    token = next(_tokens)
    _live[token] = kill
    return token


def unregister(token: int) -> None:
    _live.pop(token, None)


def end_all() -> int:
    """SIGKILL every registered tree and process group (SIGTERM / SIGINT); how many there were."""
    _ends[0] += 1  # before the kills: a start that reads the count after this is ended by its own check
    kills = list(_live.values())
    for kill in kills:
        with contextlib.suppress(Exception):
            kill()
    return len(kills)


async def wait_bounded(process: trio.Process, timeout: float = END_TIMEOUT_S) -> bool:
    """Reap ``process`` within ``timeout``; False when it did not exit."""
    with trio.move_on_after(timeout):
        await process.wait()
        return True
    return False


def unwrapped(group: BaseExceptionGroup) -> BaseException:
    """The block's own exception out of the group of :func:`open_tree`'s nursery (the pump never raises)."""
    if len(group.exceptions) == 1:
        inner = group.exceptions[0]
        return unwrapped(inner) if isinstance(inner, BaseExceptionGroup) else inner
    return group
