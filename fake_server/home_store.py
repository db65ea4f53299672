"""What fake-codex keeps in the ``CODEX_HOME`` it is given, so a new process finds the threads an earlier one left.

The real binary keeps a thread's rollout (its turns), its name and its archive state in ``CODEX_HOME``, and a new
``codex app-server`` lists, reads and resumes it from there (``tests/data/real/<version>/thread_store/``, recorded
by ``tests/thread_store_observe.py``). A thread is kept once it is *materialised*: a turn started, it was named,
forked or archived, or read with its turns; a thread that only started is forgotten with its process.

The fake keeps the same facts in its own folder, ``$CODEX_HOME/.fake-codex/``: one JSON file per thread
(``threads/<id>.json``) and the run's turn counter (``turns``: turn N of a scenario is the N-th ``turn/start`` of
the run, whichever process receives it). Only an explicit ``CODEX_HOME`` is used (never ``~/.codex``). Every
read is bounded and opens no link; a folder that is not ours (a link, a file, too many entries) turns the store
off for the process with one line on stderr, so the session still runs as a one-process one.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
from typing import Any

import orjson

from contracts import safe_read
from contracts.scenario import Usage
from fake_server.state import ThreadState
from fake_server.world import World

FOLDER = ".fake-codex"
#: One thread's file: its turns' views included (a built-in scenario streams a 16 MiB message). A larger one is
#: not read.
MAX_THREAD_BYTES = 96 * 1024 * 1024
MAX_THREADS = 10_000
_NAME = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.json$")
_KEPT = (
    "thread_id",
    "cwd",
    "created_ms",
    "path",
    "approval_policy",
    "sandbox",
    "reviewer",
    "model",
    "model_provider",
    "preview",
    "turns",
    "history",
)


class StoreError(OSError):
    """The store's folder cannot be used (``str()`` says why)."""


class HomeStore:
    """The threads of one ``CODEX_HOME``. Open with :meth:`open`; every method is cheap when nothing changed."""

    def __init__(self, fd: int, threads_fd: int, shown: str) -> None:
        self._fd = fd
        self._threads_fd = threads_fd
        self._shown = shown
        self._written: dict[str, bytes] = {}  # thread id -> what this process last wrote or read
        self._seen: dict[str, tuple[Any, ...]] = {}  # thread id -> its signature when last written
        self.problems: list[str] = []

    @classmethod
    def open(cls, codex_home: str) -> HomeStore:
        """The store under ``codex_home`` (created); :class:`StoreError` when it cannot be ours."""
        try:
            home_fd = safe_read.open_dir(codex_home)
            try:
                fd = _sub_dir(home_fd, FOLDER, codex_home)
            finally:
                os.close(home_fd)
            threads_fd = _sub_dir(fd, "threads", codex_home)
        except OSError as exc:
            raise StoreError(exc.errno or errno.EPERM, f"cannot keep threads in {codex_home}/{FOLDER}: {exc}") from None
        return cls(fd, threads_fd, f"{codex_home}/{FOLDER}")

    def close(self) -> None:
        for fd in (self._threads_fd, self._fd):
            try:
                os.close(fd)
            except OSError:
                pass

    # --- the turn counter -------------------------------------------------------------------------

    def next_turn(self) -> int:
        """The run's next turn index (0-based), counted across every process of this home."""
        fd = os.open("turns", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600, dir_fd=self._fd)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise StoreError(errno.EPERM, f"{self._shown}/turns is not a regular file")
            fcntl.flock(fd, fcntl.LOCK_EX)  # held for microseconds by another fake-codex at most
            text = os.read(fd, 32).decode("ascii", "replace").strip()
            index = int(text) if text.isdigit() else 0
            os.lseek(fd, 0, os.SEEK_SET)
            os.ftruncate(fd, 0)
            os.write(fd, str(index + 1).encode())
            return index
        finally:
            os.close(fd)

    # --- threads ------------------------------------------------------------------------------------

    def fill(self, world: World) -> None:
        """Bring into ``world`` the kept threads it does not hold (not loaded: a resume loads them)."""
        try:
            names = safe_read.entries_of(self._threads_fd, f"{self._shown}/threads", limit=MAX_THREADS)
        except OSError as exc:
            self._problem(f"cannot list {self._shown}/threads: {exc}")
            return
        for name, mode in names:
            thread_id = name.removesuffix(".json")
            if thread_id in world.threads or not _NAME.match(name) or not stat.S_ISREG(mode):
                continue
            try:
                data = safe_read.read_bounded(name, MAX_THREAD_BYTES, dir_fd=self._threads_fd)
                loaded = _thread_of(orjson.loads(data), thread_id)
            except (OSError, ValueError, TypeError, KeyError) as exc:
                self._problem(f"{self._shown}/threads/{name} is not a thread fake-codex kept: {exc}")
                continue
            thread, kept = loaded
            world.threads[thread_id] = thread
            extra = world.surface.extra(thread_id)
            extra.name, extra.archived, extra.forked_from = kept["name"], kept["archived"], kept["forked_from"]
            extra.loaded, extra.materialised, extra.from_store = False, True, True
            self._written[thread_id] = data

    def save(self, world: World) -> None:
        """Write every materialised thread of ``world`` that changed since (and forget deleted ones)."""
        for thread_id, thread in world.threads.items():
            extra = world.surface.threads.get(thread_id)
            if thread.ephemeral or not _materialised(thread, extra):
                continue
            if extra is not None and extra.deleted:
                if self._written.pop(thread_id, None) is not None:
                    _unlink(f"{thread_id}.json", self._threads_fd)
                continue
            signature = _signature(thread, extra)
            if self._seen.get(thread_id) == signature:
                continue  # nothing kept changed: no need to serialise its history again (it may be MiBs)
            data = orjson.dumps(_record(thread, extra))
            self._seen[thread_id] = signature
            if self._written.get(thread_id) == data:
                continue
            try:
                _write(self._threads_fd, f"{thread_id}.json", data)
            except OSError as exc:
                self._problem(f"cannot keep thread {thread_id} in {self._shown}: {exc}")
                continue
            self._written[thread_id] = data

    def _problem(self, text: str) -> None:
        if len(self.problems) < 20:
            self.problems.append(text)


def _materialised(thread: ThreadState, extra: Any) -> bool:
    return bool(thread.turns) or (extra is not None and (extra.materialised or extra.forked_from is not None))


def _signature(thread: ThreadState, extra: Any) -> tuple[Any, ...]:
    """What changes when anything kept changes (turns only grow; a turn's view is final once in the history)."""
    kept = (getattr(extra, k, None) for k in ("name", "archived", "forked_from", "materialised"))
    usage = len(thread.usage_frames)
    return (len(thread.turns), len(thread.history), usage, thread.preview, thread.model, thread.model_provider, *kept)


def _record(thread: ThreadState, extra: Any) -> dict[str, Any]:
    full = {k: getattr(thread, k) for k in _KEPT}
    full["history"] = list(thread.history)
    full["turns"] = list(thread.turns)
    full.update(
        name=getattr(extra, "name", None),
        archived=bool(getattr(extra, "archived", False)),
        forked_from=getattr(extra, "forked_from", None),
    )
    # The thread's token usage so far, as its rollout keeps it: a new process reports it on thread/resume and
    # counts on from it (observed, tests/data/real/<release>/surface/observed.json).
    total = thread.total
    full["usage"] = {
        "total": [total.input, total.cached, total.output, total.reasoning],
        "last": thread.usage_frames[-1]["params"] if thread.usage_frames else None,
    }
    return full


def _thread_of(data: Any, thread_id: str) -> tuple[ThreadState, dict[str, Any]]:
    if not isinstance(data, dict) or data.get("thread_id") != thread_id:
        raise ValueError("its id is not its name's")
    text = ("cwd", "sandbox", "model", "preview")
    if any(not isinstance(data.get(k), str) for k in text) or not isinstance(data.get("created_ms"), int):
        raise ValueError("a field is missing or of the wrong type")
    policy = data.get("approval_policy")
    granular = isinstance(policy, dict) and set(policy) == {"granular"} and isinstance(policy["granular"], dict)
    if not isinstance(policy, str) and not granular:
        raise ValueError("its approval policy is neither a name nor the granular form")
    if not isinstance(data.get("turns"), list) or not isinstance(data.get("history"), list):
        raise ValueError("its turns are not lists")
    if not all(isinstance(t, str) for t in data["turns"]) or not all(isinstance(t, dict) for t in data["history"]):
        raise ValueError("its turns are not what fake-codex writes")
    path, provider, reviewer = data.get("path"), data.get("model_provider"), data.get("reviewer")
    thread = ThreadState(
        thread_id=thread_id,
        cwd=data["cwd"],
        created_ms=data["created_ms"],
        ephemeral=False,
        path=path if isinstance(path, str) else None,
        approval_policy=policy,
        sandbox=data["sandbox"],
        model=data["model"],
        reviewer=reviewer if isinstance(reviewer, str) else "user",
        preview=data["preview"],
        turns=list(data["turns"]),
        history=list(data["history"]),
        model_provider=provider if isinstance(provider, str) else None,
    )
    usage = data.get("usage")
    if isinstance(usage, dict):
        total, last = usage.get("total"), usage.get("last")
        if isinstance(total, list) and len(total) == 4 and all(type(n) is int and n >= 0 for n in total):
            thread.total = Usage(*total)
        if isinstance(last, dict):
            thread.usage_frames = [{"method": "thread/tokenUsage/updated", "params": last}]
    name, forked = data.get("name"), data.get("forked_from")
    kept = {
        "name": name if isinstance(name, str) else None,
        "archived": data.get("archived") is True,
        "forked_from": forked if isinstance(forked, str) else None,
    }
    return thread, kept


def _sub_dir(parent_fd: int, name: str, shown: str) -> int:
    try:
        os.mkdir(name, 0o700, dir_fd=parent_fd)
    except FileExistsError:
        pass
    return safe_read.open_dir(name, dir_fd=parent_fd)


def _write(dir_fd: int, name: str, data: bytes) -> None:
    """Whole or not at all: a reader in another process never sees half a thread."""
    temp = f".{name}.{os.getpid()}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def _unlink(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass
