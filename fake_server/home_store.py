"""What fake-codex keeps in the ``CODEX_HOME`` it is given, so a new process finds the threads an earlier one left.

The real binary keeps a thread's rollout (its turns), its name and its archive state in ``CODEX_HOME``, and a new
``codex app-server`` lists, reads and resumes it from there (``tests/data/real/<version>/thread_store/``, recorded
by ``tests/thread_store_observe.py``). A thread is kept once it is *materialised*: a turn started, it was named,
forked or archived, or read with its turns; a thread that only started is forgotten with its process.

The fake keeps the same facts in its own folder, ``$CODEX_HOME/.fake-codex/``: one file per thread
(``threads/<id>.json``) and the run's turn counter (``turns``: turn N of a scenario is the N-th ``turn/start`` of
the run, whichever process receives it). Only an explicit ``CODEX_HOME`` is used (never ``~/.codex``). Every
read is bounded and opens no link; a folder that is not ours (a link, a file, too many entries) turns the store
off for the process with one line on stderr, so the session still runs as a one-process one.

The store indexes; it does not load. A thread file is two JSON lines: its *head* (every kept fact but the turns'
full views, at most :data:`MAX_HEAD_BYTES`) and its *history* (the turns' views: MiBs for a long thread). A new
file is indexed from its head alone; the history is read only when something looks past the thread's first turn
(``thread/read`` with its turns, a resume, a fork, ``thread/turns/list``…: :class:`StoredHistory`), and the
histories held at once are at most :data:`MAX_LOADED_BYTES` (the least recently read is let go; it is read
again when asked). The heads indexed are at most :data:`MAX_INDEX_BYTES` in all. A file that is not a thread
this store wrote (not two lines, not JSON, nested too deep, of the wrong shape) is skipped and named once, and
remembered: it is not read again until it changes.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import orjson

from contracts import bounded_parse, safe_read
from contracts.exitcodes import InvalidInput
from contracts.scenario import Usage
from fake_server import turn_counter
from fake_server.state import ThreadState
from fake_server.world import World

FOLDER = ".fake-codex"
#: One thread's file: its turns' views included (a built-in scenario streams a 16 MiB message). A larger one is
#: not read.
MAX_THREAD_BYTES = 96 * 1024 * 1024
MAX_THREADS = 10_000
#: One thread's head: its facts and turn ids (a preview is the first user message, clipped by nobody).
MAX_HEAD_BYTES = 1024 * 1024
#: The heads indexed in all (10,000 threads of 12 KiB each).
MAX_INDEX_BYTES = 128 * 1024 * 1024
#: The histories held in memory at once, counted in file bytes (the largest a thread may have; one more is read
#: when asked, then the least recently read let go).
MAX_LOADED_BYTES = MAX_THREAD_BYTES
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
)


class StoreError(InvalidInput, OSError):
    """The store's folder cannot be used (``str()`` says why)."""


class HomeStore:
    """The threads of one ``CODEX_HOME``. Open with :meth:`open`; every method is cheap when nothing changed."""

    def __init__(self, fd: int, threads_fd: int, shown: str) -> None:
        self._fd = fd
        self._threads_fd = threads_fd
        self._shown = shown
        self._written: dict[str, bytes] = {}  # thread id -> what this process last wrote (b"" when only read)
        self._seen: dict[str, tuple[Any, ...]] = {}  # thread id -> its signature when last written or indexed
        self._bad: dict[str, tuple[int, int, int]] = {}  # file name -> (inode, size, mtime) when found bad
        self._indexed_bytes = 0
        self._loaded: OrderedDict[str, tuple[StoredHistory, int]] = OrderedDict()  # least recently read first
        self._loaded_bytes = 0
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
            return turn_counter.take_next(fd, f"{self._shown}/turns", StoreError)
        finally:
            os.close(fd)

    # --- threads ------------------------------------------------------------------------------------

    def fill(self, world: World) -> None:
        """Index into ``world`` the kept threads it does not hold, from their heads (not loaded: a resume loads
        them; their histories are read when asked). A bad file is named once and not read again unchanged."""
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
                key = _key(os.stat(name, dir_fd=self._threads_fd, follow_symlinks=False))
            except OSError:
                continue  # gone since the listing
            if self._bad.get(name) == key:
                continue  # found bad, and unchanged since
            if self._indexed_bytes >= MAX_INDEX_BYTES:
                self._problem(
                    f"{self._shown}/threads: more than {MAX_INDEX_BYTES} bytes of thread heads; the rest left out"
                )
                return
            try:
                head = self._head(name, thread_id)
            except (OSError, ValueError, TypeError, KeyError) as exc:
                self._bad[name] = key
                self._problem(f"{self._shown}/threads/{name} is not a thread fake-codex kept: {exc}")
                continue
            thread, kept, size = head
            self._indexed_bytes += size
            world.threads[thread_id] = thread
            extra = world.surface.extra(thread_id)
            extra.name, extra.archived, extra.forked_from = kept["name"], kept["archived"], kept["forked_from"]
            extra.loaded, extra.materialised, extra.from_store = False, True, True
            self._written[thread_id] = b""
            self._seen[thread_id] = _signature(thread, extra)

    def _head(self, name: str, thread_id: str) -> tuple[ThreadState, dict[str, Any], int]:
        """The thread a file's first line describes, its history left in the file."""
        prefix = safe_read.read_prefix(name, MAX_HEAD_BYTES + 1, dir_fd=self._threads_fd)
        end = prefix.find(b"\n")
        if end < 0:
            raise ValueError(f"no head line within {MAX_HEAD_BYTES} bytes")
        thread, kept = _thread_of(bounded_parse.loads_json(prefix[:end]), thread_id)
        thread.history = StoredHistory(self, name, kept["history_len"], kept["first_turn"])  # type: ignore[assignment]
        return thread, kept, end

    def read_history(self, history: StoredHistory) -> list[dict[str, Any]]:
        """The turns' views of a kept thread, read now (bounded; held until :data:`MAX_LOADED_BYTES` of others
        push it out). A file that went bad since it was indexed gives no turns, and is named."""
        name = history.name
        try:
            data = safe_read.read_bounded(name, MAX_THREAD_BYTES, dir_fd=self._threads_fd)
            end = data.find(b"\n")
            if end < 0:
                raise ValueError("no head line")
            turns = _history_of(bounded_parse.loads_json(memoryview(data)[end + 1 :]))
        except (OSError, ValueError, TypeError) as exc:
            self._problem(f"{self._shown}/threads/{name} is not a thread fake-codex kept: {exc}")
            return []
        self._hold(history, len(data))
        return turns

    def _hold(self, history: StoredHistory, size: int) -> None:
        self._loaded.pop(history.name, None)
        self._loaded[history.name] = (history, size)
        self._loaded_bytes += size
        while self._loaded_bytes > MAX_LOADED_BYTES and len(self._loaded) > 1:
            _name, (oldest, oldest_size) = self._loaded.popitem(last=False)
            self._loaded_bytes -= oldest_size
            oldest.let_go()

    def forget(self, history: StoredHistory) -> None:
        """``history`` changed in this process: it is no longer the file's to reread (nor to let go)."""
        held = self._loaded.pop(history.name, None)
        if held is not None:
            self._loaded_bytes -= held[1]

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
            data = _record(thread, extra)
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


def _record(thread: ThreadState, extra: Any) -> bytes:
    """The file of a thread: its head line, then its history line."""
    history = list(thread.history)
    head = {k: getattr(thread, k) for k in _KEPT}
    head["turns"] = list(thread.turns)
    head.update(
        name=getattr(extra, "name", None),
        archived=bool(getattr(extra, "archived", False)),
        forked_from=getattr(extra, "forked_from", None),
        history_len=len(history),
        first_turn=history[0]["id"] if history else None,
    )
    # The thread's token usage so far, as its rollout keeps it: a new process reports it on thread/resume and
    # counts on from it (observed, tests/data/real/<release>/surface/observed.json).
    total = thread.total
    head["usage"] = {
        "total": [total.input, total.cached, total.output, total.reasoning],
        "last": thread.usage_frames[-1]["params"] if thread.usage_frames else None,
    }
    return orjson.dumps(head) + b"\n" + orjson.dumps(history) + b"\n"


def _history_of(data: Any) -> list[dict[str, Any]]:
    """The turns' views as fake-codex writes them (each an object with a string id, its items objects)."""
    if not isinstance(data, list):
        raise ValueError("its history is not a list")
    for turn in data:
        if not isinstance(turn, dict) or not isinstance(turn.get("id"), str):
            raise ValueError("a turn of its history is not an object with an id")
        items = turn.get("items", [])
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise ValueError(f"the items of turn {turn['id'][:40]!r} are not a list of objects")
    return data


def _thread_of(data: Any, thread_id: str) -> tuple[ThreadState, dict[str, Any]]:
    """A thread's head line as its state (an empty history: the caller puts the stored one in)."""
    if not isinstance(data, dict) or data.get("thread_id") != thread_id:
        raise ValueError("its id is not its name's")
    text = ("cwd", "sandbox", "model", "preview")
    if any(not isinstance(data.get(k), str) for k in text) or not isinstance(data.get("created_ms"), int):
        raise ValueError("a field is missing or of the wrong type")
    policy = data.get("approval_policy")
    granular = isinstance(policy, dict) and set(policy) == {"granular"} and isinstance(policy["granular"], dict)
    if not isinstance(policy, str) and not granular:
        raise ValueError("its approval policy is neither a name nor the granular form")
    if not isinstance(data.get("turns"), list) or not all(isinstance(t, str) for t in data["turns"]):
        raise ValueError("its turns are not what fake-codex writes")
    count, first = data.get("history_len"), data.get("first_turn")
    if type(count) is not int or count < 0 or (first is None) != (count == 0):
        raise ValueError("its history is not described")
    if first is not None and not isinstance(first, str):
        raise ValueError("its first turn has no id")
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
        history=[],
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
        "history_len": count,
        "first_turn": first,
    }
    return thread, kept


class StoredHistory:
    """A kept thread's turns, still in its file: its length and first turn id are known from the head; anything
    else (iterating, an index past 0, appending) reads the file then (:meth:`HomeStore.read_history`).

    Stands where :attr:`ThreadState.history <fake_server.state.ThreadState.history>` holds a list, and reads as
    one; a thread the process changes (a new turn appended) keeps its turns in memory from then on."""

    __slots__ = ("_count", "_owned", "_store", "_turns", "first_id", "name")

    def __init__(self, store: HomeStore, name: str, count: int, first_id: str | None) -> None:
        self._store, self.name, self._count, self.first_id = store, name, count, first_id
        self._turns: list[dict[str, Any]] | None = None
        self._owned = False

    def _list(self) -> list[dict[str, Any]]:
        if self._turns is None:
            self._turns = self._store.read_history(self)
        return self._turns

    def let_go(self) -> None:
        if not self._owned:
            self._turns = None

    def __len__(self) -> int:
        return self._count if self._turns is None else len(self._turns)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(list(self._list()))  # a copy: letting go mid-iteration must not cut it short

    def __getitem__(self, index: Any) -> Any:
        return self._list()[index]

    def __eq__(self, other: object) -> bool:
        return list(self) == (list(other) if isinstance(other, (list, StoredHistory)) else other)

    __hash__ = None  # type: ignore[assignment]

    def append(self, turn: dict[str, Any]) -> None:
        turns = self._list()
        self._owned = True
        self._store.forget(self)
        turns.append(turn)

    def __repr__(self) -> str:
        return f"StoredHistory({self.name!r}, {len(self)} turns)"


def _key(st: os.stat_result) -> tuple[int, int, int]:
    """What changes when a file is replaced or written (a bad file is read again only then)."""
    return (st.st_ino, st.st_size, st.st_mtime_ns)


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
