"""A small bounded JSON-lines driver for the real ``codex app-server`` (independent of client).

Real-binary tests use it to talk to the server over stdio with plain JSON objects: send a request,
wait for a message matching a predicate (always under a deadline), answer server requests. The
process runs in its own process group; :func:`run_server` kills that group on the way out.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from harness.targets.real import RealTarget

MAX_LINE = 16 * 1024 * 1024
AMBIENT = frozenset({"account/rateLimits/updated", "warning", "configWarning", "remoteControl/status/changed"})
#: Messages whose count or position depends on timing, not on the protocol: left out of projections.
TIMING_DEPENDENT = AMBIENT | {"thread/started", "item/commandExecution/outputDelta"}

Message = dict[str, Any]


class DriverError(Exception):
    pass


@dataclass
class Entry:
    t: float
    dir: str  # "c2s" | "s2c"
    msg: Message


@dataclass
class Driver:
    process: trio.Process
    started: float
    log: list[Entry] = field(default_factory=list)
    _buffer: bytearray = field(default_factory=bytearray)
    _cursor: int = 0  # index into the s2c messages already consumed by `until`
    _inbox: list[Message] = field(default_factory=list)
    _next_id: int = 0
    _methods: dict[Any, str] = field(default_factory=dict)

    def now(self) -> float:
        return time.monotonic() - self.started

    async def send(self, msg: Message) -> None:
        assert self.process.stdin is not None
        self.log.append(Entry(self.now(), "c2s", msg))
        if "method" in msg and "id" in msg:
            self._methods[msg["id"]] = msg["method"]
        await self.process.stdin.send_all(json.dumps(msg).encode() + b"\n")

    async def request(self, method: str, params: dict[str, Any] | None = None) -> int:
        rid = self._next_id
        self._next_id += 1
        msg: Message = {"id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        await self.send(msg)
        return rid

    async def call(self, method: str, params: dict[str, Any] | None = None, timeout: float = 30.0) -> Message:
        rid = await self.request(method, params)
        reply = await self.until(lambda m: m.get("id") == rid and "method" not in m, timeout)
        if "error" in reply:
            raise DriverError(f"{method} failed: {reply['error']}")
        return reply["result"]

    async def _read_one(self) -> Message | None:
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            if len(self._buffer) > MAX_LINE:
                raise DriverError("line too long")
            data = await self.process.stdout.receive_some(65536)
            if not data:
                return None
            self._buffer += data
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        msg = json.loads(line)
        self.log.append(Entry(self.now(), "s2c", msg))
        return msg

    async def until(self, predicate: Callable[[Message], bool], timeout: float = 30.0) -> Message:
        """The first not-yet-consumed server message matching ``predicate`` (earlier ones stay queued)."""
        with trio.fail_after(timeout):
            for i, msg in enumerate(self._inbox):
                if predicate(msg):
                    del self._inbox[i]
                    return msg
            while True:
                msg = await self._read_one()
                if msg is None:
                    raise DriverError("server closed stdout")
                if predicate(msg):
                    return msg
                self._inbox.append(msg)

    async def until_method(self, method: str, timeout: float = 30.0, **match: Any) -> Message:
        def pred(m: Message) -> bool:
            if m.get("method") != method:
                return False
            params = m.get("params") or {}
            return all(_lookup(params, k) == v for k, v in match.items())

        return await self.until(pred, timeout)

    async def drain(self, timeout: float) -> None:
        """Read everything the server sends for ``timeout`` seconds or until EOF."""
        with trio.move_on_after(timeout):
            while await self._read_one() is not None:
                pass

    async def handshake(self, cwd: Path, **thread_params: Any) -> str:
        await self.call("initialize", {"clientInfo": {"name": "test_driver", "version": "0"}})
        await self.send({"method": "initialized"})
        result = await self.call("thread/start", {"cwd": str(cwd), **thread_params})
        return result["thread"]["id"]

    async def start_turn(self, thread_id: str, text: str = "Say hello") -> str:
        result = await self.call("turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": text}]})
        return result["turn"]["id"]

    async def answer(self, request: Message, result: Message | None = None, error: Message | None = None) -> None:
        if error is not None:
            await self.send({"id": request["id"], "error": error})
        else:
            await self.send({"id": request["id"], "result": result})

    def method_of(self, rid: Any) -> str | None:
        return self._methods.get(rid)

    def server_messages(self) -> list[Message]:
        return [e.msg for e in self.log if e.dir == "s2c"]

    def first_time(self, predicate: Callable[[Message], bool], direction: str = "s2c") -> float:
        return next(e.t for e in self.log if e.dir == direction and predicate(e.msg))


def _lookup(params: Message, dotted: str) -> Any:
    value: Any = params
    for part in dotted.split("__"):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def kill_group(process: trio.Process) -> None:
    """SIGKILL the process group we started (start_new_session: its id is the child's pid)."""
    if process.returncode is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@asynccontextmanager
async def run_server(target: RealTarget, stderr_path: Path, *, exit_timeout: float = 10.0) -> AsyncIterator[Driver]:
    """Start the real app-server of ``target``; on exit close stdin, wait (bounded), then kill the group."""
    with stderr_path.open("wb") as stderr:
        process = await trio.lowlevel.open_process(
            list(target.argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=dict(target.env),
            cwd=target.cwd,
            start_new_session=True,
        )
        driver = Driver(process=process, started=time.monotonic())
        try:
            yield driver
            await close_and_wait(driver, exit_timeout)
        finally:
            kill_group(process)
            with trio.move_on_after(5) as scope:
                scope.shield = True
                await process.wait()
            _reap_group(process.pid)


async def close_and_wait(driver: Driver, timeout: float) -> int:
    """Close the server's stdin and wait (bounded) for it to exit; its status."""
    assert driver.process.stdin is not None
    try:
        await driver.process.stdin.aclose()
    except trio.BrokenResourceError:
        pass
    with trio.fail_after(timeout):
        # keep stdout drained so the server never blocks on a full pipe while shutting down
        async with trio.open_nursery() as nursery:
            nursery.start_soon(driver.drain, timeout)
            code = await driver.process.wait()
            nursery.cancel_scope.cancel()
    return code


def signal_server(driver: Driver, target: RealTarget, sig: int) -> int:
    """Send ``sig`` to the server itself, inside the confinement (the launcher does not forward signals):
    the first process of the group that runs ``target.server_argv``. Its host pid."""
    wanted = [os.fsencode(a) for a in target.server_argv]
    for pid in sorted(group_members(driver.process.pid)):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
        except OSError:
            continue
        # the npm launcher: ``node PATH app-server …`` (the confining launcher's argv only ends with it)
        if argv == wanted or (len(argv) == len(wanted) + 1 and argv[1:] == wanted):
            os.kill(pid, sig)
            return pid
    raise DriverError(f"no process of the group runs {' '.join(target.server_argv)}")


def _reap_group(pgid: int) -> None:
    # A grandchild (e.g. a command's shell) may outlive the server in our group: kill it too.
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def group_members(pgid: int) -> list[int]:
    """Live processes whose process group is ``pgid`` (Linux /proc)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry))
    return members


def project(log: Iterable[tuple[str, dict[str, Any]]]) -> list[str]:
    """The server side from the first turn/start answer on: kinds, methods, item types and statuses,
    turn statuses, thread statuses and flags, willRetry. Ids, texts and timestamps are left out, and
    runs of one identical entry (deltas) count once."""
    methods: dict[Any, str] = {}
    out: list[str] = []
    started = False
    for direction, msg in log:
        if direction == "c2s":
            if "method" in msg and "id" in msg:
                methods[msg["id"]] = msg["method"]
            continue
        entry = _entry(msg, methods)
        if entry is None:
            continue
        started = started or entry.startswith("<- turn/start")
        if started and (not out or out[-1] != entry):
            out.append(entry)
    return _item_before_status(out)


def _item_before_status(out: list[str]) -> list[str]:
    """0.171.0 writes a declined or failed item's ``item/completed`` and the thread's status change from two
    tasks in the same millisecond, in either order (seen under load; contracts.fidelity forgives the same
    race): the pair is put in one order, item first, as the reference transcripts have it."""
    for i in range(len(out) - 1):
        status, item = out[i], out[i + 1]
        if status.startswith("thread/status/changed") and item.startswith("item/completed") and (
            item.endswith(" declined") or item.endswith(" failed")
        ):
            out[i], out[i + 1] = item, status
    return out


def _entry(msg: dict[str, Any], methods: dict[Any, str]) -> str | None:
    if "method" in msg and "id" in msg:
        return f"request {msg['method']}"
    if "method" not in msg:
        return f"<- {methods.get(msg.get('id'))}" + (" error" if "error" in msg else "")
    method = msg["method"]
    if method in TIMING_DEPENDENT:
        return None
    params = msg.get("params") or {}
    parts = [method]
    if "item" in params:
        parts.append(params["item"].get("type", "?"))
        if params["item"].get("status") is not None:
            parts.append(params["item"]["status"])
    if method == "turn/completed":
        parts += [params["turn"]["status"], f"items={len(params['turn']['items'])}"]
    if method == "thread/status/changed":
        parts.append(params["status"]["type"])
        if params["status"]["type"] == "active":
            parts.append(f"{params['status'].get('activeFlags')}")
    if method == "error":
        parts.append(f"willRetry={params['willRetry']}")
    return " ".join(parts)


def test_reference_projection_is_stable() -> None:
    """The projection itself: ids, texts, timestamps and delta counts do not matter; statuses do."""
    log = [
        ("c2s", {"id": 5, "method": "turn/start", "params": {}}),
        ("s2c", {"method": "warning", "params": {}}),
        ("s2c", {"id": 5, "result": {"turn": {"id": "t"}}}),
        ("s2c", {"method": "item/agentMessage/delta", "params": {"delta": "a"}}),
        ("s2c", {"method": "item/agentMessage/delta", "params": {"delta": "b"}}),
        ("s2c", {"method": "thread/status/changed", "params": {"status": {"type": "active", "activeFlags": []}}}),
        ("s2c", {"method": "turn/completed", "params": {"turn": {"status": "failed", "items": []}}}),
    ]
    assert project(log) == [
        "<- turn/start",
        "item/agentMessage/delta",
        "thread/status/changed active []",
        "turn/completed failed items=0",
    ]


def reduce_with_codex(codex_bin: Path, bundle: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """The binary's own reducer (``codex debug trace-reduce``), bounded."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_"))}
    env["CODEX_HOME"] = str(out.parent / "reduce-home")
    Path(env["CODEX_HOME"]).mkdir(exist_ok=True)
    return subprocess.run(
        [os.fspath(codex_bin), "debug", "trace-reduce", os.fspath(bundle), "-o", os.fspath(out)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def test_the_declined_item_and_status_race_reads_in_one_order() -> None:
    raced = [
        "serverRequest/resolved",
        "thread/status/changed active []",
        "item/completed commandExecution declined",
        "thread/tokenUsage/updated",
    ]
    assert _item_before_status(list(raced)) == [raced[0], raced[2], raced[1], raced[3]]
    # Only around a declined or failed item: an accepted one keeps the order it came in.
    accepted = ["thread/status/changed active []", "item/completed commandExecution completed"]
    assert _item_before_status(list(accepted)) == accepted
