"""The process-tree tracker: every process one start of a command makes cannot escape the harness.

One API, the strongest confinement the machine allows (:func:`confinement`):

1. ``pid-namespace``: the tree runs in a PID namespace of its own under a tiny init the harness ends
   (bwrap, else util-linux unshare; as root directly, otherwise through a user namespace);
2. ``cgroup-v2`` / ``cgroup-v1``: a cgroup of its own (``cgroup.kill``; the v1 freezer);
3. ``none``: its process group, the run marker and the harness's descendants, and the detail says
   "not confined" and why.

Use::

    async with open_tree(argv, env=env, cwd=cwd, stdout=subprocess.PIPE) as tree:
        code = await tree.wait()          # the main process ended; the tree lives on
        if not tree.empty():              # something it started is still running
            left = tree.members()         # named (pid as we see it, as the tree sees it, command line)
    # leaving the block kills whatever is left, reaps it and releases the namespace or cgroup

Every open tree is registered: :func:`end_all` (the CLI's SIGTERM path) kills them all at once, from a
signal handler. Something that starts processes another way (:func:`codex_client.process.spawn_process`)
registers its own kill with :func:`register`.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

import trio

from codex_sandbox.proctree.base import (
    STOP_S,
    Confinement,
    ConfinementFailed,
    Member,
    ProcessTree,
    end_all,
    ended_since,
    ends,
    register,
    unregister,
    unwrapped,
)
from codex_sandbox.proctree.detect import CONFINE_ENV, confinement

__all__ = [
    "CONFINE_ENV",
    "STOP_S",
    "Confinement",
    "ConfinementFailed",
    "Member",
    "ProcessTree",
    "confinement",
    "end_all",
    "open_tree",
    "register",
    "unregister",
]


def new_tree(how: Confinement, marker: str | None = None) -> ProcessTree:
    if how.kind == "pid-namespace":
        from codex_sandbox.proctree.pidns import PidNamespaceTree

        return PidNamespaceTree(how)
    if how.kind in ("cgroup-v2", "cgroup-v1"):
        from codex_sandbox.proctree.cgroup import CgroupTree

        return CgroupTree(how)
    from codex_sandbox.proctree.group import GroupTree

    return GroupTree(how, marker)


@contextlib.asynccontextmanager
async def open_tree(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | Path | None = None,
    stdin: int | None = subprocess.DEVNULL,
    stdout: int | None = None,
    stderr: int | None = None,
    marker: str | None = None,
    how: Confinement | None = None,
) -> AsyncIterator[ProcessTree]:
    """Start ``argv`` as the main process of a new tree; on exit, end the tree (bounded, even when cancelled).

    ``marker``: the run marker the unconfined fallback also sweeps by. ``how``: a confinement other than
    this machine's (tests). An ``OSError`` is the command's (it cannot be executed); a
    :class:`ConfinementFailed` the machinery's.
    """
    tree = new_tree(how or confinement(), marker)
    count = ends()  # before the registration: a kill between the two finds nothing started, and is seen below
    token = register(tree.kill)
    try:
        await tree.start(argv, env=env, cwd=cwd, stdio={"stdin": stdin, "stdout": stdout, "stderr": stderr})
        if ended_since(count):  # the signal path's kill came while this tree was starting: it found nothing yet
            tree.kill()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(tree.pump)
            try:
                yield tree
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        raise unwrapped(group) from None  # the block's exception, as raised: a caller's except still sees it
    finally:
        try:
            with trio.CancelScope(shield=True):
                await tree.aclose()
        finally:
            unregister(token)
