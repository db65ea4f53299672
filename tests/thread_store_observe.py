"""What a server keeps in ``CODEX_HOME`` between processes, and what it answers from its own setup, observed the
same way on any binary: the real ``codex`` (offline, confined, through :func:`harness.targets.real.real_target`)
or ``fake-codex``.

:func:`observe` plays fixed cases, each a sequence of server processes sharing one ``CODEX_HOME`` (a client that
starts one server per task): threads with and without turns, named, archived, then a new process that lists,
reads, resumes and continues them; and what ``config/read``, ``modelProvider/list`` and a new thread's
``model`` are with the harness's mock-provider ``config.toml``, with an empty home and with ``-c`` overrides.
Every answer is reduced to what a client relies on (ids as labels ``T0``, ``T1``…, paths relative to the home,
errors by message). ``tests/data/real/<version>/thread_store/observed.json`` is the real binary's;
``tests/process/test_thread_store.py`` compares the fake with it on every run.

Record again: ``.venv/bin/python tests/thread_store_observe.py --codex .tools/node_modules/.bin/codex
--out tests/data/real/0.171.0/thread_store/observed.json``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import trio

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))

from contracts.fidelity import AMBIENT_METHODS  # noqa: E402
from harness.learn.observe_io import LineConn, write_observed  # noqa: E402

STEP_S = 30.0
#: Settings that keep the real binary offline (harness.targets.real.HERMETIC_CONFIG) given as ``-c`` overrides,
#: for the cases whose home has no config.toml.
HERMETIC_ARGS = (
    "-c",
    "check_for_update_on_startup=false",
    "-c",
    "analytics.enabled=false",
    "-c",
    "features.plugins=false",
)
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class Conn(LineConn):
    """One server process on stdio: requests answered in order, notifications collected by name."""

    async def call(
        self, method: str, params: dict[str, Any], until: str | None = None
    ) -> tuple[dict[str, Any], list[str]]:
        """The answer, and the notifications before it (and until ``until`` arrived, when given)."""
        rid = await self.request(method, params)
        answer: dict[str, Any] | None = None
        notes: list[str] = []
        with trio.fail_after(STEP_S):
            while True:
                message = await self.recv()
                if "method" in message and "id" in message:  # a server request: not expected here
                    await self.send({"id": message["id"], "error": {"code": -32601, "message": "unexpected"}})
                elif "method" in message:
                    if message["method"] not in AMBIENT_METHODS:
                        notes.append(message["method"])
                elif message.get("id") == rid:
                    answer = message
                if answer is not None and (until is None or until in notes or "error" in answer):
                    return answer, notes


Server = Callable[[tuple[str, ...]], AbstractAsyncContextManager[Conn]]
Home = Callable[[bool], AbstractAsyncContextManager[tuple[Server, Path]]]


# --- starting a binary --------------------------------------------------------------------------------


@asynccontextmanager
async def _session(argv: Any, env: Any, cwd: Path) -> AsyncIterator[Conn]:
    from codex_client.process import spawn_process

    async with spawn_process(argv, cwd=cwd, env=env) as process:
        conn = Conn(process)
        await conn.call(
            "initialize", {"clientInfo": {"name": "observe", "version": "0"}, "capabilities": {"experimentalApi": True}}
        )
        await conn.send({"method": "initialized"})
        yield conn
        await process.close_input()
        with trio.move_on_after(10):
            await process.wait_exit()


def fake_home(tmp: Path) -> Home:
    from harness.codex_bin import scrubbed_env
    from harness.targets.fake import fake_codex_argv

    @asynccontextmanager
    async def home(configured: bool) -> AsyncIterator[tuple[Server, Path]]:
        folder = Path(tempfile.mkdtemp(dir=tmp))
        for sub in ("codex_home", "home", "tmp", "workdir"):
            (folder / sub).mkdir()
        if configured:
            import tomli_w

            from fake_server.catalogue import resolve
            from harness.targets.real import config_toml, effective_config

            config = config_toml(effective_config(resolve("plain_two_turns")), "http://127.0.0.1:1/v1")
            (folder / "codex_home" / "config.toml").write_text(tomli_w.dumps(config))
        env = scrubbed_env(os.environ, codex_home=folder / "codex_home", tmpdir=folder / "tmp", trace_root=None)
        env["HOME"] = str(folder / "home")

        def server(extra: tuple[str, ...]) -> AbstractAsyncContextManager[Conn]:
            argv = [*fake_codex_argv(), "app-server", "--scenario", "plain_two_turns", *extra]
            return _session(argv, env, folder / "workdir")

        yield server, folder / "workdir"

    return home


def real_home(codex: Path, tmp: Path) -> Home:
    from fake_server.catalogue import resolve
    from harness.targets.real import real_target

    @asynccontextmanager
    async def home(configured: bool) -> AsyncIterator[tuple[Server, Path]]:
        async with real_target(resolve("plain_two_turns"), codex, base_dir=tmp) as target:
            if not configured:
                target.config_path.unlink()

            def server(extra: tuple[str, ...]) -> AbstractAsyncContextManager[Conn]:
                return _session(target.argv_with(extra), target.env, target.cwd)

            yield server, target.workdir

    return home


# --- reducing answers ---------------------------------------------------------------------------------


class Labels:
    """Thread and turn ids as ``T0``, ``T1``… in order of first sight (the same run to run)."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def __call__(self, value: str) -> str:
        return self.names.setdefault(value, f"T{len(self.names)}")

    def text(self, text: str) -> str:
        return _UUID.sub(lambda m: self(m.group(0)), text)


def _where(path: Any) -> Any:
    """A rollout path as the folder it is in, relative to the home (``sessions`` / ``archived_sessions``)."""
    if not isinstance(path, str):
        return path
    for folder in ("archived_sessions", "sessions"):
        if f"/{folder}/" in path:
            return folder
    return "elsewhere"


def thread_view(thread: dict[str, Any], labels: Labels) -> dict[str, Any]:
    turns = thread.get("turns") or []
    return {
        "id": labels(thread["id"]),
        "status": (thread.get("status") or {}).get("type"),
        "name": thread.get("name"),
        "preview": thread.get("preview"),
        "model": thread.get("model"),
        "modelProvider": thread.get("modelProvider"),
        "environments": None if thread.get("environments") is None else len(thread["environments"]),
        "path": _where(thread.get("path")),
        "turns": [turn_view(t, labels) for t in turns],
    }


def turn_view(turn: dict[str, Any], labels: Labels) -> dict[str, Any]:
    return {
        "id": labels(turn["id"]),
        "status": turn.get("status"),
        "itemsView": turn.get("itemsView"),
        "items": [i.get("type") for i in turn.get("items") or []],
    }


def reduce(method: str, answer: dict[str, Any], labels: Labels) -> dict[str, Any]:
    if "error" in answer:
        error = answer["error"]
        return {"error": {"code": error.get("code"), "message": labels.text(str(error.get("message")))}}
    result = answer.get("result") or {}
    out: dict[str, Any] = {}
    if isinstance(result.get("thread"), dict):
        out["thread"] = thread_view(result["thread"], labels)
    if method in ("thread/start", "thread/resume"):
        out["model"] = result.get("model")
        out["modelProvider"] = result.get("modelProvider")
    if method == "thread/list":
        out["data"] = [thread_view(t, labels) for t in result.get("data") or []]
        out["readStates"] = sorted(labels(k) for k in result.get("readStates") or {})
    elif method == "thread/loaded/list":
        out["data"] = [labels(t) for t in result.get("data") or []]
    elif method == "thread/turns/list":
        out["data"] = [turn_view(t, labels) for t in result.get("data") or []]
    elif method == "thread/read":
        state = result.get("readState")
        out["readState"] = None if state is None else sorted(state)
    elif method == "config/read":
        config = result.get("config") or {}
        out["config"] = {k: config.get(k) for k in ("model", "model_provider", "approval_policy", "sandbox_mode")}
        providers = config.get("model_providers")
        out["config"]["model_providers"] = sorted(providers) if isinstance(providers, dict) else providers
        out["config"]["features.plugins"] = (config.get("features") or {}).get("plugins")
        out["config"]["check_for_update_on_startup"] = config.get("check_for_update_on_startup")
        layers = result.get("layers")
        if layers is not None:
            out["layers"] = [(layer.get("name") or {}).get("type") for layer in layers]
    elif method == "modelProvider/list":
        out["data"] = [{"id": p.get("id"), "baseUrl": p.get("baseUrl") is not None} for p in result.get("data") or []]
        out["defaultProviderId"] = result.get("defaultProviderId")
    elif method in ("thread/name/set", "thread/archive", "thread/unarchive"):
        out["result"] = sorted(result)
    return out


# --- the cases ----------------------------------------------------------------------------------------

TEXT = [{"type": "text", "text": "Say hello"}]


class Play:
    """One case: its processes' answers in order, ids labelled across them."""

    def __init__(self) -> None:
        self.labels = Labels()
        self.steps: list[dict[str, Any]] = []
        self.ids: dict[str, str] = {}  # the case's own names for threads (a, b…) -> ids

    async def call(self, conn: Conn, method: str, params: dict[str, Any], until: str | None = None) -> dict[str, Any]:
        sent = {k: self.labels(v) if k == "threadId" else v for k, v in params.items() if k != "cwd"}
        answer, notes = await conn.call(method, params, until)
        self.steps.append({"method": method, "params": sent, **reduce(method, answer, self.labels), "notes": notes})
        return answer

    async def start(self, conn: Conn, name: str, cwd: Path) -> str:
        answer = await self.call(conn, "thread/start", {"cwd": str(cwd)})
        self.ids[name] = answer["result"]["thread"]["id"]
        return self.ids[name]

    async def turn(self, conn: Conn, name: str) -> None:
        await self.call(conn, "turn/start", {"threadId": self.ids[name], "input": TEXT}, until="turn/completed")

    def process(self, n: int) -> None:
        self.steps.append({"process": n})


async def case_threads(home: Home) -> list[dict[str, Any]]:
    """A: a turn, then named. B: nothing. C: named, no turn. D: a turn, then archived. Then a second process."""
    play = Play()
    async with home(True) as (server, workdir):
        async with server(()) as conn:
            play.process(1)
            a = await play.start(conn, "a", workdir)
            await play.turn(conn, "a")
            await play.call(conn, "thread/name/set", {"threadId": a, "name": "first"})
            b = await play.start(conn, "b", workdir)
            c = await play.start(conn, "c", workdir)
            await play.call(conn, "thread/name/set", {"threadId": c, "name": "unstarted"})
            d = await play.start(conn, "d", workdir)
            await play.turn(conn, "d")
            await play.call(conn, "thread/archive", {"threadId": d})
            await play.call(conn, "thread/list", {})
            await play.call(conn, "thread/read", {"threadId": c, "includeTurns": True})
            await play.call(conn, "thread/turns/list", {"threadId": c})
            await play.call(conn, "thread/read", {"threadId": b, "includeTurns": True})
        async with server(()) as conn:
            play.process(2)
            await play.call(conn, "thread/loaded/list", {})
            await play.call(conn, "thread/list", {})
            await play.call(conn, "thread/list", {"archived": True})
            await play.call(conn, "thread/read", {"threadId": a, "includeTurns": True})
            await play.call(conn, "thread/read", {"threadId": b})
            await play.call(conn, "thread/read", {"threadId": c, "includeTurns": True})
            await play.call(conn, "thread/turns/list", {"threadId": c})
            await play.call(conn, "thread/turns/list", {"threadId": a})
            await play.call(conn, "thread/resume", {"threadId": b})
            await play.call(conn, "thread/resume", {"threadId": d})
            await play.call(conn, "thread/resume", {"threadId": c})
            await play.call(conn, "thread/resume", {"threadId": a})
            await play.call(conn, "thread/loaded/list", {})
            await play.turn(conn, "a")
            await play.call(conn, "thread/unarchive", {"threadId": d})
        async with server(()) as conn:
            play.process(3)
            await play.call(conn, "thread/list", {})
            await play.call(conn, "thread/read", {"threadId": a, "includeTurns": True})
            await play.call(conn, "thread/resume", {"threadId": a})
    return play.steps


async def case_unstarted(home: Home) -> list[dict[str, Any]]:
    """Threads with no turn: what materialises one (a name, a read with turns) and what a new process finds."""
    play = Play()
    async with home(True) as (server, workdir):
        async with server(()) as conn:
            play.process(1)
            a = await play.start(conn, "a", workdir)
            await play.call(conn, "thread/read", {"threadId": a})
            await play.call(conn, "thread/turns/list", {"threadId": a})
            b = await play.start(conn, "b", workdir)
            await play.call(conn, "thread/read", {"threadId": b, "includeTurns": True})
            c = await play.start(conn, "c", workdir)
            await play.call(conn, "thread/name/set", {"threadId": c, "name": "named"})
            await play.call(conn, "thread/read", {"threadId": c})
            await play.call(conn, "thread/list", {})
        async with server(()) as conn:
            play.process(2)
            await play.call(conn, "thread/list", {})
            for thread in (a, b, c):
                await play.call(conn, "thread/read", {"threadId": thread})
            await play.call(conn, "thread/turns/list", {"threadId": b})
            await play.call(conn, "thread/resume", {"threadId": a})
            await play.call(conn, "thread/resume", {"threadId": c})
            await play.call(conn, "thread/read", {"threadId": c, "includeTurns": True})
    return play.steps


async def case_setup(home: Home, configured: bool, extra: tuple[str, ...]) -> list[dict[str, Any]]:
    """What a server answers from the home's config.toml and its ``-c`` overrides."""
    play = Play()
    async with home(configured) as (server, workdir):
        async with server(extra) as conn:
            play.process(1)
            await play.call(conn, "config/read", {})
            await play.call(conn, "config/read", {"includeLayers": True})
            await play.call(conn, "modelProvider/list", {})
            await play.start(conn, "a", workdir)
    return play.steps


SETUPS: dict[str, tuple[bool, tuple[str, ...]]] = {
    "mock provider config.toml": (True, ()),
    "empty home": (False, HERMETIC_ARGS),
    "empty home, -c model and provider": (
        False,
        (
            *HERMETIC_ARGS,
            "-c",
            'model="other-model"',
            "-c",
            'model_provider="p2"',
            "-c",
            'model_providers.p2={name="P2", base_url="http://127.0.0.1:9/v1", wire_api="responses"}',
        ),
    ),
    "mock provider config.toml, -c model": (True, ("-c", 'model="override-model"')),
}


async def observe(home: Home) -> dict[str, Any]:
    out: dict[str, Any] = {"threads": await case_threads(home), "unstarted": await case_unstarted(home)}
    for name, (configured, extra) in SETUPS.items():
        out[f"setup: {name}"] = await case_setup(home, configured, extra)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--codex", help="the real binary (default: observe fake-codex)")
    parser.add_argument("--out", help="write the observations here (default: stdout)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = real_home(Path(args.codex), Path(tmp)) if args.codex else fake_home(Path(tmp))
        observed = trio.run(observe, home)
    write_observed(observed, args.out, sort_keys=True)


if __name__ == "__main__":
    main()
