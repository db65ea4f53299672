"""What a ``--listen ws://`` server does with a thread when the connection that started it goes away, observed the
same way on any binary: the real ``codex`` (offline, confined, through :func:`harness.targets.real.real_target`)
or ``fake-codex``, playing ``tests/data/real/scenarios/ws_lifetime.toml``.

One server: connection 1 starts a thread and a turn whose message streams for about two seconds, and closes
(a close frame) after the first delta. Connection 2, once that turn would have ended, lists the loaded threads,
reads the thread with its turns (the first turn's status and message), resumes it and starts a turn (which
answer it gets: the scenario's second turn, or its first again). Then the server gets SIGTERM: its exit code,
and whether its rollout trace bundles are closed. ``tests/data/real/<version>/transports/ws_lifetime.json`` is the
real binary's; ``tests/process/test_fake_surface_ws.py`` compares the fake with it on every run (and the live binary
under ``real_codex``).

Record again: ``.venv/bin/python tests/ws_lifetime_observe.py --codex .tools/node_modules/.bin/codex --out
tests/data/real/0.171.0/transports/ws_lifetime.json`` (0.163.0: ``.tools/codex-0.163.0/node_modules/.bin/codex``,
into its own folder).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import trio

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))

from codex_client.sockets import LISTENING  # noqa: E402
from contracts.fidelity import AMBIENT_METHODS  # noqa: E402
from contracts.websocket import WsStream, client_handshake  # noqa: E402
from harness.learn.observe_io import write_observed  # noqa: E402

SCENARIO = HERE / "data" / "real" / "scenarios" / "ws_lifetime.toml"
STEP_S = 30.0
#: How long connection 2 waits after connection 1 closed: the first turn streams for about two seconds.
TURN_S = 4.0


@dataclass
class Server:
    process: Any
    trace_root: Path
    workdir: Path
    server_argv: tuple[str, ...] | None  # the real binary's own argv inside the confinement (None: the fake)


Start = Callable[[], AbstractAsyncContextManager[Server]]


def fake_start(tmp: Path, release: str | None = None) -> Start:
    from codex_client.process import spawn_process
    from harness.codex_bin import scrubbed_env
    from harness.targets.fake import fake_codex_argv

    @asynccontextmanager
    async def start() -> AsyncIterator[Server]:
        folder = Path(tempfile.mkdtemp(dir=tmp))
        for sub in ("codex_home", "home", "tmp", "workdir", "trace"):
            (folder / sub).mkdir()
        env = scrubbed_env(
            os.environ, codex_home=folder / "codex_home", tmpdir=folder / "tmp", trace_root=folder / "trace"
        )
        env["HOME"] = str(folder / "home")
        argv = [*fake_codex_argv(), "app-server", "--scenario", str(SCENARIO), "--listen", "ws://127.0.0.1:0"]
        argv += ["--release", release] if release else []
        async with spawn_process(argv, cwd=folder / "workdir", env=env) as process:
            yield Server(process, folder / "trace", folder / "workdir", None)

    return start


def real_start(codex: Path, tmp: Path) -> Start:
    from codex_client.process import spawn_process
    from fake_server.catalogue import resolve
    from harness.targets.real import real_target

    @asynccontextmanager
    async def start() -> AsyncIterator[Server]:
        trace = Path(tempfile.mkdtemp(dir=tmp))
        async with real_target(
            resolve(str(SCENARIO)), codex, base_dir=tmp, listen="ws://127.0.0.1:0", trace_root=trace
        ) as target:
            async with spawn_process(target.argv, cwd=target.cwd, env=target.env) as process:
                yield Server(process, trace, target.workdir, target.server_argv)

    return start


def _descendants(root: int) -> list[int]:
    """Live processes under ``root`` (Linux /proc): the confinement may start the server in a session of its own."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parents[int(entry)] = int(fields[1])
    out = []
    for pid in parents:
        up = pid
        while up in parents and up != root and up > 1:
            up = parents[up]
        if up == root and pid != root:
            out.append(pid)
    return out


def terminate(server: Server) -> None:
    """SIGTERM to the server itself (inside a confinement, the launcher forwards no signal)."""
    if server.server_argv is None:
        server.process.child.send_signal(signal.SIGTERM)
        return
    wanted = [os.fsencode(a) for a in server.server_argv[1:]]
    found = []
    for member in _descendants(server.process.pid):
        try:
            argv = Path(f"/proc/{member}/cmdline").read_bytes().split(b"\0")[:-1]
        except OSError:
            continue
        if argv[-len(wanted) :] == wanted and not argv[0].endswith((b"bwrap", b"unshare")):
            found.append(member)  # the npm launcher (node), then the native binary it started
    if found:
        os.kill(max(found), signal.SIGTERM)  # the native server itself
        return
    raise RuntimeError("no process under the launcher runs the server")


class Ws:
    """One websocket client: requests answered in order, notifications kept."""

    def __init__(self, ws: WsStream) -> None:
        self.ws = ws
        self.next_id = 0
        self.seen: list[dict[str, Any]] = []

    async def recv(self) -> dict[str, Any]:
        while not self.seen:
            batch = await self.ws.receive()
            if not batch:
                raise EOFError("the server closed the connection")
            for message in batch:
                if isinstance(message, bytes):
                    self.seen.append(orjson.loads(message))
        return self.seen.pop(0)

    async def call(self, method: str, params: dict[str, Any] | None, until: str | None = None) -> dict[str, Any]:
        self.next_id += 1
        rid = self.next_id
        frame: dict[str, Any] = {"id": rid, "method": method}
        if params is not None:
            frame["params"] = params
        await self.ws.send([orjson.dumps(frame)])
        answer: dict[str, Any] | None = None
        self.notes: list[dict[str, Any]] = []
        with trio.fail_after(STEP_S):
            while True:
                message = await self.recv()
                if os.environ.get("WS_DEBUG"):
                    sys.stderr.write(f"{rid} {method} <- {str(message)[:200]}\n")
                if "method" in message and "id" in message:
                    await self.ws.send([orjson.dumps({"id": message["id"], "error": {"code": -32601, "message": "x"}})])
                elif "method" in message:
                    if message["method"] not in AMBIENT_METHODS:
                        self.notes.append(message)
                elif message.get("id") == rid:
                    answer = message
                methods = [n["method"] for n in self.notes]
                if answer is not None and (until is None or until in methods or "error" in answer):
                    return answer


async def connect(port: int) -> Ws:
    ws = Ws(await client_handshake(await trio.open_tcp_stream("127.0.0.1", port)))
    await ws.call("initialize", {"clientInfo": {"name": "observe", "version": "0"}})
    await ws.ws.send([orjson.dumps({"method": "initialized"})])
    return ws


def _text(turn: dict[str, Any]) -> str:
    return "".join(str(i.get("text")) for i in turn.get("items") or [] if i.get("type") == "agentMessage")


def bundles(root: Path) -> list[str]:
    from contracts.trace.reader import bundles_under, read_bundle

    out = []
    for path in bundles_under(root):
        try:
            out.append(read_bundle(path).recording_status)
        except Exception as exc:  # what a reader refuses is an observation too
            out.append(f"unreadable: {type(exc).__name__}")
    return sorted(out)


async def port_of(server: Server) -> int:
    with trio.fail_after(STEP_S):
        while True:
            found = LISTENING.search(server.process.stderr_tail())
            if found:
                return int(found.group(2))
            await trio.sleep(0.05)


async def first_connection(port: int, server: Server) -> str:
    """A thread and a turn, the connection closed (a close frame) after the turn's first delta: the thread's id."""
    first = await connect(port)
    started = await first.call("thread/start", {"cwd": str(server.workdir)})
    thread_id: str = started["result"]["thread"]["id"]
    await first.call(
        "turn/start",
        {"threadId": thread_id, "input": [{"type": "text", "text": "Say hello"}]},
        until="item/agentMessage/delta",
    )
    await first.ws.aclose()
    return thread_id


async def stop(server: Server, out: dict[str, Any], prefix: str) -> None:
    terminate(server)
    with trio.fail_after(STEP_S):
        code = await server.process.wait_exit()
    out[f"{prefix}exit code"] = code
    out[f"{prefix}trace bundles"] = bundles(server.trace_root)


async def observe(start: Start) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with start() as server:
        await first_connection(await port_of(server), server)
        await trio.sleep(0.3)  # the turn streams on (or not) with no connection
        await stop(server, out, "SIGTERM mid-turn, no connection: ")
    async with start() as server:
        port = await port_of(server)
        thread_id = await first_connection(port, server)
        await trio.sleep(TURN_S)
        second = await connect(port)
        loaded = await second.call("thread/loaded/list", {})
        out["loaded after the close"] = [t == thread_id for t in loaded["result"]["data"]]
        read = await second.call("thread/read", {"threadId": thread_id, "includeTurns": True})
        turns = (read.get("result") or {}).get("thread", {}).get("turns") or []
        out["first turn, read by connection 2"] = [{"status": t.get("status"), "text": _text(t)} for t in turns]
        if "error" in read:
            out["first turn, read by connection 2"] = {"error": read["error"].get("message")}
        resumed = await second.call("thread/resume", {"threadId": thread_id})
        out["resumed"] = "result" in resumed
        answer = await second.call(
            "turn/start",
            {"threadId": thread_id, "input": [{"type": "text", "text": "Again"}]},
            until="turn/completed",
        )
        completed = next(n for n in second.notes if n["method"] == "turn/completed") if "result" in answer else None
        done = [n for n in second.notes if n["method"] == "item/completed"]
        texts = [n["params"]["item"].get("text") for n in done if n["params"]["item"].get("type") == "agentMessage"]
        out["next turn, connection 2"] = {
            "status": completed["params"]["turn"]["status"] if completed else None,
            "text": texts,
        }
        await stop(server, out, "SIGTERM, connection 2 open: ")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--codex", help="the real binary (default: observe fake-codex)")
    parser.add_argument("--release", help="the release fake-codex plays (default: its own)")
    parser.add_argument("--out", help="write the observation here (default: stdout)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="observe-") as tmp:
        start = real_start(Path(args.codex), Path(tmp)) if args.codex else fake_start(Path(tmp), args.release)
        result = trio.run(observe, start)
    write_observed(result, args.out)


if __name__ == "__main__":
    main()
