"""The flood the ingest benchmarks feed: its bytes, a server that blasts them, and bare reading loops.

A flood is one turn whose agent message streams N deltas with no delay. ``fake-codex`` produces it
with the ``flood`` scenario, but a Python fake writes slower than a client can read, so a reader
measured against it measures the fake. The *blast server* here replays the same session (the
frames captured from ``fake-codex``, or frames in the default release's shape when the fake is not
installed) with the whole turn pre-serialised and written in one go, so the reader is the bottleneck.

The bare loops are the baseline every client figure is divided by: handshake by hand, then read
big chunks, split on ``\\n`` in bulk and ``orjson.loads`` each line until ``turn/completed``.

Run as a script, this module is the blast server: ``python bench/_flood.py serve SCRIPT.json``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import trio

THREAD_ID = "01a22b4c-2acf-7632-8d5c-cb457ab3c722"
TURN_ID = "01a22b4c-2ade-7350-a7a9-be381ff46ebb"
READ_SIZE = 256 * 1024
DELTA_TEXT = "Hello fr"  # 8 characters a delta, as the real binary streamed them
FLOOD_METHOD = "item/agentMessage/delta"


def _note(method: str, params: dict[str, Any], ms: int = 1796022741815) -> bytes:
    return orjson.dumps({"method": method, "params": params, "emittedAtMs": ms}) + b"\n"


def _thread(release: str) -> dict[str, Any]:
    return {
        "id": THREAD_ID,
        "environments": [{"environmentId": "local", "cwd": "/RUN/workdir", "runtimeWorkspaceRoots": ["/RUN/workdir"]}],
        "extra": None,
        "sessionId": THREAD_ID,
        "forkedFromId": None,
        "attachedToThreadId": None,
        "parentThreadId": None,
        "preview": "",
        "ephemeral": False,
        "section": None,
        "sectionEnteredAt": None,
        "projectId": None,
        "historyMode": "paginated",
        "modelProvider": "mock_provider",
        "model": "mock-model",
        "reasoningEffort": None,
        "createdAt": 1796022741,
        "updatedAt": 1796022741,
        "recencyAt": 1796022741,
        "status": {"type": "idle"},
        "path": None,
        "cwd": "/RUN/workdir",
        "cliVersion": release,
        "originator": "bench",
        "source": "vscode",
        "canAcceptDirectInput": True,
        "threadSource": None,
        "agentNickname": None,
        "agentRole": None,
        "gitInfo": None,
        "name": None,
        "daybreakEnabled": None,
        "turns": [],
    }


def _turn(status: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    done = status != "inProgress"
    return {
        "id": TURN_ID,
        "rootTurnId": TURN_ID,
        "items": items,
        "itemsView": "summary" if done else "notLoaded",
        "status": status,
        "error": None,
        "startedAt": 1796022741,
        "completedAt": 1796022741 if done else None,
        "durationMs": 113 if done else None,
    }


def _agent_message(text: str, completed: bool) -> dict[str, Any]:
    return {
        "type": "agentMessage",
        "moderation": None,
        "id": "msg-1",
        "text": text,
        "phase": None,
        "memoryCitation": None,
        "delivery": None,
        "questions": None,
        "startedAtMs": 1796022741815,
        "completedAtMs": 1796022741816 if completed else None,
    }


def synthetic_script(n: int) -> dict[str, Any]:
    """A session in the default release's shape (as recorded from it) whose one turn streams ``n`` deltas.

    ``replies[method]`` = the result answering that request and the raw lines that follow it.
    """
    from contracts.releases import default_version

    release = default_version()
    ids = {"threadId": THREAD_ID, "turnId": TURN_ID}
    text = DELTA_TEXT * n
    usage = {"totalTokens": 120, "inputTokens": 100, "cachedInputTokens": 40, "cacheWriteInputTokens": 0}
    usage |= {"outputTokens": 20, "reasoningOutputTokens": 0}
    delta = _note(FLOOD_METHOD, {**ids, "itemId": "msg-1", "delta": DELTA_TEXT})
    turn_lines = [
        _note("thread/status/changed", {"threadId": THREAD_ID, "status": {"type": "active", "activeFlags": []}}),
        _note("turn/started", {"threadId": THREAD_ID, "turn": _turn("inProgress", [])}),
        _note("item/started", {"item": _agent_message("", False), **ids, "startedAtMs": 1796022741815}),
        delta * n,
        _note(
            "item/completed",
            {"item": _agent_message(text, True), **ids, "contentTokenCount": None, "completedAtMs": 1796022741816},
        ),
        _note(
            "thread/tokenUsage/updated",
            {**ids, "tokenUsage": {"total": usage, "last": usage, "modelContextWindow": 258400}},
        ),
        _note("thread/status/changed", {"threadId": THREAD_ID, "status": {"type": "idle"}}),
        _note("turn/completed", {"threadId": THREAD_ID, "turn": _turn("completed", [_agent_message(text, True)])}),
    ]
    thread_start = {
        "thread": _thread(release),
        "model": "mock-model",
        "modelProvider": "mock_provider",
        "serviceTier": None,
        "disabledPluginIds": [],
        "cwd": "/RUN/workdir",
        "runtimeWorkspaceRoots": ["/RUN/workdir"],
        "instructionSources": [],
        "approvalPolicy": "never",
        "approvalsReviewer": "user",
        "sandbox": {"type": "readOnly", "networkAccess": False},
        "activePermissionProfile": None,
        "reasoningEffort": None,
        "multiAgentMode": "explicitRequestOnly",
    }
    init = {
        "userAgent": f"bench/{release} (linux; x86_64) (bench; 0.0.1)",
        "codexHome": "/RUN/codex_home",
        "platformFamily": "unix",
        "platformOs": "linux",
    }
    return {
        "source": "synthetic",
        "deltas": n,
        "replies": {
            "initialize": {"result": init, "after": []},
            "thread/start": {"result": thread_start, "after": [_note("thread/started", {"thread": _thread(release)})]},
            "turn/start": {"result": {"turn": _turn("inProgress", [])}, "after": turn_lines},
        },
    }


def synthetic_interrupt_script(deltas_before: int = 3) -> dict[str, Any]:
    """A session whose turns stream a few deltas and then wait for ``turn/interrupt``.

    The interrupt is answered as the real server does: ``{}``, thread idle, ``turn/completed{interrupted}``.
    """
    script = synthetic_script(deltas_before)
    # status active, turn/started, item/started, the deltas; no item/completed, no turn/completed
    head = script["replies"]["turn/start"]["after"][:4]
    script["replies"]["turn/start"]["after"] = head
    script["replies"]["turn/interrupt"] = {
        "result": {},
        "after": [
            _note("thread/status/changed", {"threadId": THREAD_ID, "status": {"type": "idle"}}),
            _note("turn/completed", {"threadId": THREAD_ID, "turn": _turn("interrupted", [])}),
        ],
    }
    return script


def write_script(script: dict[str, Any], path: Path) -> None:
    """Raw lines are stored as text (they are UTF-8 JSON) so the script is one JSON document."""
    out = {
        **script,
        "replies": {
            m: {"result": r["result"], "after": [b.decode() for b in r["after"]]} for m, r in script["replies"].items()
        },
    }
    path.write_bytes(orjson.dumps(out))


def turn_bytes(script: dict[str, Any]) -> bytes:
    """The bytes of the flooded turn as the client reads them (the turn/start answer excluded)."""
    return b"".join(script["replies"]["turn/start"]["after"])


# --- the blast server -------------------------------------------------------------------------


def serve(script_path: str) -> int:
    """Answer requests from the script; after turn/start write the whole turn with one write call.

    Anything else that asks (turn/interrupt, unknown methods) gets ``{}``. Exits at stdin EOF.
    Every turn after the first gets its own turn id, as the real server gives them (a client may
    rightly ignore events of a turn id it has already seen complete); the first is sent verbatim.
    """
    data = orjson.loads(Path(script_path).read_bytes())
    replies = {m: (r["result"], "".join(r["after"]).encode()) for m, r in data["replies"].items()}
    out = sys.stdout.buffer
    turns = 0
    for line in sys.stdin.buffer:
        try:
            frame = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(frame, dict) or "id" not in frame or "method" not in frame:
            continue
        if frame["method"] == "turn/start":
            turns += 1
        result, after = replies.get(frame["method"], ({}, b""))
        reply = orjson.dumps({"id": frame["id"], "result": result}) + b"\n" + after
        if turns > 1:
            reply = reply.replace(_TURN_ID_BYTES, _nth_turn_id(turns))
        out.write(reply)
        out.flush()
    return 0


_TURN_ID_BYTES = TURN_ID.encode()


def _nth_turn_id(n: int) -> bytes:
    return f"{TURN_ID[:-8]}{n:08x}".encode()


def blast_argv(script_path: Path) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "serve", str(script_path)]


# --- bare reading loops -----------------------------------------------------------------------


Consumer = Callable[[bytes], list[dict[str, Any]]]


def bare_consumer() -> Consumer:
    """The baseline: bulk split on ``\\n``, ``orjson.loads`` each line."""
    rest = b""
    loads = orjson.loads

    def feed(chunk: bytes) -> list[dict[str, Any]]:
        nonlocal rest
        lines = (rest + chunk).split(b"\n") if rest else chunk.split(b"\n")
        rest = lines.pop()
        return [loads(line) for line in lines if line]

    return feed


@dataclass(slots=True)
class FloodRun:
    notifications: int  # frames of the turn read after the turn/start answer, turn/completed included
    seconds: float  # turn/start sent -> turn/completed parsed
    nbytes: int
    cpu: float = 0.0  # this process's CPU seconds over the same span (the reader's work, not the server's)

    @property
    def rate(self) -> float:
        return self.notifications / self.seconds if self.seconds > 0 else float("inf")

    @property
    def cpu_rate(self) -> float:
        return self.notifications / self.cpu if self.cpu > 0 else float("inf")


class RawSession:
    """A child process driven by hand: handshake, one turn, read through a chosen consumer."""

    def __init__(self, proc: trio.Process, consume: Consumer) -> None:
        self.proc = proc
        self.consume = consume
        self.pending: list[dict[str, Any]] = []
        self.nbytes = 0
        self.next_id = 0

    async def send(self, frame: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        await self.proc.stdin.send_all(orjson.dumps(frame) + b"\n")

    async def request(self, method: str, params: dict[str, Any]) -> int:
        rid = self.next_id
        self.next_id += 1
        await self.send({"id": rid, "method": method, "params": params})
        return rid

    async def read(self) -> list[dict[str, Any]]:
        assert self.proc.stdout is not None
        chunk = await self.proc.stdout.receive_some(READ_SIZE)
        if not chunk:
            raise EOFError("server closed stdout")
        self.nbytes += len(chunk)
        return self.consume(chunk)

    async def answer(self, rid: int) -> dict[str, Any]:
        while True:
            for i, frame in enumerate(self.pending):
                if frame.get("id") == rid and "method" not in frame:
                    del self.pending[i]
                    return frame
            self.pending.extend(await self.read())

    async def handshake(self) -> str:
        """initialize, initialized, thread/start; returns the thread id."""
        rid = await self.request("initialize", {"clientInfo": {"name": "bench", "title": "bench", "version": "0"}})
        await self.answer(rid)
        await self.send({"method": "initialized"})
        rid = await self.request("thread/start", {"cwd": os.getcwd()})
        reply = await self.answer(rid)
        return reply["result"]["thread"]["id"]

    async def flood_turn(self, thread_id: str, on_frame: Callable[[dict[str, Any]], object] | None = None) -> FloodRun:
        """Start a turn and read until turn/completed; only the turn's frames are counted."""
        self.pending.clear()
        start_bytes = self.nbytes
        c0 = time.process_time()
        t0 = time.perf_counter()
        rid = await self.request("turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": "flood"}]})
        count = 0
        while True:
            frames = self.pending or await self.read()
            self.pending = []
            for frame in frames:
                if frame.get("id") == rid:
                    continue
                count += 1
                if on_frame is not None:
                    on_frame(frame)
                if frame.get("method") == "turn/completed":
                    seconds = time.perf_counter() - t0
                    return FloodRun(count, seconds, self.nbytes - start_bytes, time.process_time() - c0)


async def run_raw(
    argv: list[str],
    consume: Consumer,
    timeout: float,
    on_frame: Callable[[dict[str, Any]], object] | None = None,
    env: dict[str, str] | None = None,
) -> FloodRun:
    """One flooded turn against a fresh process; the process group is killed on any way out."""
    proc = await trio.lowlevel.open_process(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )
    try:
        with trio.fail_after(timeout):
            session = RawSession(proc, consume)
            thread_id = await session.handshake()
            run = await session.flood_turn(thread_id, on_frame)
            assert proc.stdin is not None
            await proc.stdin.aclose()
            with trio.move_on_after(2):
                await proc.wait()
            return run
    finally:
        kill_group(proc)


def kill_group(proc: trio.Process) -> None:
    if proc.returncode is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


async def capture_script(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run a flood session against ``argv`` and keep what it answered, for the blast server to replay."""
    replies: dict[str, dict[str, Any]] = {}
    proc = await trio.lowlevel.open_process(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )
    raw: list[bytes] = []
    base = bare_consumer()

    def keep(chunk: bytes) -> list[dict[str, Any]]:
        frames = base(chunk)
        raw.extend(orjson.dumps(f) + b"\n" for f in frames)
        return frames

    try:
        with trio.fail_after(timeout):
            session = RawSession(proc, keep)
            rid = await session.request("initialize", {"clientInfo": {"name": "bench", "title": "b", "version": "0"}})
            replies["initialize"] = {"result": (await session.answer(rid))["result"], "after": []}
            await session.send({"method": "initialized"})
            rid = await session.request("thread/start", {"cwd": os.getcwd()})
            reply = await session.answer(rid)
            thread_id = reply["result"]["thread"]["id"]
            between = [orjson.dumps(f) + b"\n" for f in session.pending]
            replies["thread/start"] = {"result": reply["result"], "after": between}
            turn_lines: list[bytes] = []
            turn_result: dict[str, Any] = {}

            def on_frame(frame: dict[str, Any]) -> None:
                turn_lines.append(orjson.dumps(frame) + b"\n")

            session.pending.clear()
            rid_turn = session.next_id
            original = session.consume

            def keep_turn_answer(chunk: bytes) -> list[dict[str, Any]]:
                frames = original(chunk)
                for f in frames:
                    if f.get("id") == rid_turn and "result" in f:
                        turn_result.update(f["result"])
                return frames

            session.consume = keep_turn_answer
            await session.flood_turn(thread_id, on_frame)
            replies["turn/start"] = {"result": turn_result, "after": turn_lines}
            assert proc.stdin is not None
            await proc.stdin.aclose()
            with trio.move_on_after(2):
                await proc.wait()
    finally:
        kill_group(proc)
    deltas = sum(1 for line in replies["turn/start"]["after"] if FLOOD_METHOD.encode() in line[:40])
    # Named by program and scenario, not by the machine's paths (this line lands in docs/performance.md).
    source = " ".join(Path(a).name if a.startswith("/") else a for a in argv)
    return {"source": source, "deltas": deltas, "replies": replies}


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        sys.exit(serve(sys.argv[2]))
    print("usage: _flood.py serve SCRIPT.json", file=sys.stderr)
    sys.exit(3)
