"""The rest of the surface a client meets beside the turn core, observed the same way on any binary: the real
``codex`` (offline, confined, through :func:`harness.targets.real.real_target`) or ``fake-codex``.

Cases (each a sequence of server processes sharing one ``CODEX_HOME``, :mod:`thread_store_observe`'s way):

- ``config: …``: what ``config/read`` (with and without its layers) answers from an empty ``CODEX_HOME`` with
  no ``-c`` at all, and from a home whose ``config.toml`` or ``-c`` sets keys the harness's own file does not
  (or sets them otherwise): the values, which keys have an origin (and in which layer), the layers;
- ``archive``: ``thread/archive`` of threads with and without a turn, ``thread/list`` with ``archived: true``,
  ``thread/unarchive`` (its thread's ``model``), in one process and across two;
- ``archive: a model written``: threads with no turn whose rollout gets the model all the same;
- ``resume``: the notifications ``thread/resume`` sends, the ones just after its answer included (the restored
  token usage, ``restored``: its total), and the total the next turn reports, in the thread's process and a new one.

A session whose home has no ``config.toml`` would reach for the network at start-up (the plugin sync, analytics,
the update check: ``harness.targets.real.HERMETIC_CONFIG``); with ``--isolate`` (the default when ``unshare``
can) the whole observation runs in a network namespace of its own, where only loopback exists.

``tests/data/real/<version>/surface/observed.json`` is the real binary's;
``tests/process/test_fake_surface_observed.py`` compares the fake with it on every run, and (``real_codex``) the live
binary with the fake.

Record again: ``.venv/bin/python tests/surface_observe.py --codex .tools/node_modules/.bin/codex
--out tests/data/real/0.171.0/surface/observed.json`` (another release: its binary and its folder).
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import trio

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import thread_store_observe as tso  # noqa: E402

from contracts.fidelity import AMBIENT_METHODS  # noqa: E402

#: How long the notifications that trail an answer are waited for (the real sends them within milliseconds).
TRAIL_S = 1.0
#: Keys of config/read compared (the rest of the answer is the release's recorded shape, compared elsewhere).
CONFIG_KEYS = (
    "model",
    "model_provider",
    "approval_policy",
    "approvals_reviewer",
    "sandbox_mode",
    "analytics",
    "check_for_update_on_startup",
    "features",
    "hide_agent_reasoning",
    "show_raw_agent_reasoning",
    "model_reasoning_effort",
    "history",
)
#: A home's config.toml that sets what the harness's own does not, and sets the hermetic keys otherwise.
OTHER_CONFIG = """\
model = "file-model"
approval_policy = "on-request"
approvals_reviewer = "user"
hide_agent_reasoning = true
model_reasoning_effort = "high"
check_for_update_on_startup = true

[analytics]
enabled = true

[features]
plugins = true

[history]
persistence = "none"
"""
OVERRIDES = (
    "-c",
    "check_for_update_on_startup=false",
    "-c",
    "analytics.enabled=false",
    "-c",
    'model="flag-model"',
    "-c",
    "show_raw_agent_reasoning=true",
)


async def trail(conn: tso.Conn, seconds: float = TRAIL_S) -> list[dict[str, Any]]:
    """The notifications that come within ``seconds`` of the last one (none: ``seconds`` after the call)."""
    notes: list[dict[str, Any]] = []
    while True:
        with trio.move_on_after(seconds) as scope:
            message = await conn.recv()
        if scope.cancelled_caught:
            return notes
        if "method" in message and "id" not in message and message["method"] not in AMBIENT_METHODS:
            notes.append(message)


def total_tokens(messages: list[dict[str, Any]]) -> int | None:
    """The thread's total tokens the last ``thread/tokenUsage/updated`` of ``messages`` reports (None: none)."""
    found = None
    for message in messages:
        if message.get("method") == "thread/tokenUsage/updated":
            found = ((message.get("params") or {}).get("tokenUsage") or {}).get("total", {}).get("totalTokens")
    return found


def config_view(result: dict[str, Any]) -> dict[str, Any]:
    config = result.get("config") or {}
    out: dict[str, Any] = {"config": {k: config.get(k, "<absent>") for k in CONFIG_KEYS}}
    providers = config.get("model_providers")
    out["config"]["model_providers"] = sorted(providers) if isinstance(providers, dict) else providers
    origins = result.get("origins") or {}
    out["origins"] = {k: (v.get("name") or {}).get("type") for k, v in sorted(origins.items())}
    if "layers" in result:
        out["layers"] = [[(lay.get("name") or {}).get("type"), lay.get("config")] for lay in result["layers"]]
    return out


class Play(tso.Play):
    async def call(
        self, conn: tso.Conn, method: str, params: dict[str, Any], until: str | None = None
    ) -> dict[str, Any]:
        if method != "config/read":
            answer = await super().call(conn, method, params, until)
            if method == "thread/resume":
                after = await trail(conn)
                self.steps[-1]["after"] = [m["method"] for m in after]
                self.steps[-1]["restored"] = total_tokens(after)
            return answer
        answer, _notes = await conn.call(method, params)
        result = answer.get("result") or {}
        view: dict[str, Any] = {"error": answer["error"]} if "error" in answer else config_view(result)
        self.steps.append({"method": method, "params": params, **view})
        return answer

    async def turn(self, conn: tso.Conn, name: str) -> None:
        """A turn, its notifications' names, and the thread's total tokens its last usage reports."""
        conn.next_id += 1
        rid = conn.next_id
        params = {"threadId": self.ids[name], "input": tso.TEXT}
        await conn.send({"id": rid, "method": "turn/start", "params": params})
        seen: list[dict[str, Any]] = []
        answered = False
        with trio.fail_after(tso.STEP_S):
            while not (answered and any(m.get("method") == "turn/completed" for m in seen)):
                message = await conn.recv()
                if "method" in message and "id" in message:  # a server request: not expected here
                    await conn.send({"id": message["id"], "error": {"code": -32601, "message": "unexpected"}})
                elif "method" in message:
                    if message["method"] not in AMBIENT_METHODS:
                        seen.append(message)
                elif message.get("id") == rid:
                    answered = True
        sent = {"threadId": self.labels(self.ids[name]), "input": tso.TEXT}
        notes = [m["method"] for m in seen]
        self.steps.append({"method": "turn/start", "params": sent, "notes": notes, "total": total_tokens(seen)})


@asynccontextmanager
async def with_config(home: tso.Home, text: str | None) -> AsyncIterator[tuple[tso.Server, Path]]:
    """A home with this config.toml (None: none at all)."""
    async with home(False) as (server, workdir):
        if text is not None:
            (workdir.parent / "codex_home" / "config.toml").write_text(text)
        yield server, workdir


async def case_config(home: tso.Home, text: str | None, extra: tuple[str, ...]) -> list[dict[str, Any]]:
    play = Play()
    async with with_config(home, text) as (server, _workdir):
        async with server(extra) as conn:
            play.process(1)
            await play.call(conn, "config/read", {})
            await play.call(conn, "config/read", {"includeLayers": True})
    return play.steps


async def case_archive(home: tso.Home) -> list[dict[str, Any]]:
    """A: a turn. B: named, no turn. C: nothing. Archived, listed, unarchived; then a second process."""
    play = Play()
    async with home(True) as (server, workdir):
        async with server(()) as conn:
            play.process(1)
            a = await play.start(conn, "a", workdir)
            await play.turn(conn, "a")
            b = await play.start(conn, "b", workdir)
            await play.call(conn, "thread/name/set", {"threadId": b, "name": "named"})
            c = await play.start(conn, "c", workdir)
            await play.call(conn, "thread/archive", {"threadId": a})
            await play.call(conn, "thread/archive", {"threadId": b})
            await play.call(conn, "thread/archive", {"threadId": c})
            await play.call(conn, "thread/list", {"archived": True})
            await play.call(conn, "thread/list", {})
            await play.call(conn, "thread/unarchive", {"threadId": a})
            await play.call(conn, "thread/unarchive", {"threadId": b})
            await play.call(conn, "thread/list", {"archived": True})
            await play.call(conn, "thread/list", {})
            await play.call(conn, "thread/archive", {"threadId": a})
            await play.call(conn, "thread/archive", {"threadId": b})
        async with server(()) as conn:
            play.process(2)
            await play.call(conn, "thread/list", {"archived": True})
            await play.call(conn, "thread/unarchive", {"threadId": b})
            await play.call(conn, "thread/unarchive", {"threadId": a})
            await play.call(conn, "thread/list", {})
            await play.call(conn, "thread/resume", {"threadId": a})
            await play.call(conn, "thread/resume", {"threadId": b})
    return play.steps


async def case_model_written(home: tso.Home) -> list[dict[str, Any]]:
    """Threads with no turn whose rollout gets a turn context: items injected (D), a thread/revert (E)."""
    play = Play()
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "injected"}]}
    async with home(True) as (server, workdir):
        async with server(()) as conn:
            play.process(1)
            d = await play.start(conn, "d", workdir)
            await play.call(conn, "thread/inject_items", {"threadId": d, "items": [item]})
            await play.call(conn, "thread/archive", {"threadId": d})
            e = await play.start(conn, "e", workdir)
            await play.call(conn, "thread/name/set", {"threadId": e, "name": "named"})
            await play.call(conn, "thread/revert", {"threadId": e, "beforeTurnId": "t1"})
            await play.call(conn, "thread/archive", {"threadId": e})
            await play.call(conn, "thread/list", {"archived": True})
            await play.call(conn, "thread/unarchive", {"threadId": d})
            await play.call(conn, "thread/unarchive", {"threadId": e})
    return play.steps


async def case_resume(home: tso.Home) -> list[dict[str, Any]]:
    """A thread with two turns resumed in its own process, then by a new one (with and without its turns); one
    with no turn."""
    play = Play()
    async with home(True) as (server, workdir):
        async with server(()) as conn:
            play.process(1)
            a = await play.start(conn, "a", workdir)
            await play.turn(conn, "a")
            await play.turn(conn, "a")
            await play.call(conn, "thread/resume", {"threadId": a})
            await play.call(conn, "thread/resume", {"threadId": a, "excludeTurns": True})
            b = await play.start(conn, "b", workdir)
            await play.call(conn, "thread/name/set", {"threadId": b, "name": "named"})
        async with server(()) as conn:
            play.process(2)
            await play.call(conn, "thread/resume", {"threadId": a, "excludeTurns": True})
            await play.call(conn, "thread/resume", {"threadId": a})
            await play.call(conn, "thread/resume", {"threadId": b})
            await play.turn(conn, "a")
            await play.call(conn, "thread/resume", {"threadId": a})
    return play.steps


CONFIGS: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "empty home": (None, ()),
    "empty home, -c": (None, OVERRIDES),
    "config.toml of its own": (OTHER_CONFIG, ()),
    "config.toml of its own, -c": (OTHER_CONFIG, OVERRIDES),
}


async def observe(home: tso.Home, *, together: bool = False) -> dict[str, Any]:
    """Every case (``together``: all at once, each in its own home; for the fake, whose processes mostly wait)."""
    cases: dict[str, Callable[[], Awaitable[list[dict[str, Any]]]]] = {
        **{f"config: {name}": functools.partial(case_config, home, *setup) for name, setup in CONFIGS.items()},
        "archive": functools.partial(case_archive, home),
        "archive: a model written": functools.partial(case_model_written, home),
        "resume": functools.partial(case_resume, home),
    }
    out: dict[str, Any] = {}

    async def one(name: str) -> None:
        out[name] = await cases[name]()

    if not together:
        for name in cases:
            await one(name)
        return out
    async with trio.open_nursery() as nursery:
        for name in cases:
            nursery.start_soon(one, name)
    return {name: out[name] for name in cases}


def fake_home(tmp: Path, release: str | None = None) -> tso.Home:
    """fake-codex's homes (:func:`thread_store_observe.fake_home`), playing ``release`` (None: its default)."""
    base = tso.fake_home(tmp)
    if release is None:
        return base

    @asynccontextmanager
    async def home(configured: bool) -> AsyncIterator[tuple[tso.Server, Path]]:
        async with base(configured) as (server, workdir):
            yield (lambda extra: server(("--release", release, *extra))), workdir

    return home


# --- the release's answers from an empty home --------------------------------------------------------


def write_answers(path: Path, found: dict[str, Any]) -> None:
    """``found`` into a release folder's answers.json, its other answers kept in their order."""
    import json

    answers = json.loads(path.read_text(encoding="utf-8"))
    answers.update(found)
    # the shipped folders' layout (one space a level), so a new recording is a small diff
    path.write_text(json.dumps(answers, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


# --- running it in a network namespace -----------------------------------------------------------------


def loopback_up() -> None:
    """Bring ``lo`` up in the new namespace (it starts down): the mock Responses API listens there."""
    import fcntl
    import socket
    import struct

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        flags = struct.unpack("16sH", fcntl.ioctl(sock, siocgifflags, struct.pack("16sH", b"lo", 0)))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sH", b"lo", flags | iff_up))


def run(home_of: Callable[[Path], tso.Home], *, together: bool = False) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        return dict(trio.run(functools.partial(observe, together=together), home_of(Path(tmp))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--codex", help="the real binary (default: observe fake-codex)")
    parser.add_argument("--release", help="the release fake-codex plays (default: its own)")
    parser.add_argument("--out", help="write the observations here (default: stdout)")
    parser.add_argument(
        "--answers-into",
        help="instead: record config/read from an empty home into this release folder's answers.json",
    )
    parser.add_argument(
        "--no-isolate", action="store_true", help="do not run in a network namespace of its own (unshare --net)"
    )
    args = parser.parse_args()
    from harness.learn import empty_home
    from harness.learn.empty_home import can_isolate, isolated

    if args.answers_into:  # the binary's own session isolates itself (as release learn records it)
        with tempfile.TemporaryDirectory() as tmp:
            found = empty_home.record(Path(args.codex), Path(tmp))
        if found is None:
            sys.exit("no network namespace can be made here (unshare --net): nothing recorded")
        write_answers(Path(args.answers_into) / "answers.json", found)
        return
    if not args.no_isolate and os.environ.get("SURFACE_OBSERVE_ISOLATED") != "1" and can_isolate():
        env = {**os.environ, "SURFACE_OBSERVE_ISOLATED": "1"}
        sys.exit(
            subprocess.run(
                isolated([sys.executable, os.path.abspath(__file__), *sys.argv[1:]]), env=env, check=False
            ).returncode
        )
    if os.environ.get("SURFACE_OBSERVE_ISOLATED") == "1":
        loopback_up()
    if args.codex:
        data = run(lambda tmp: tso.real_home(Path(args.codex), tmp))
    else:
        data = run(lambda tmp: fake_home(tmp, args.release))
    text = orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_bytes(text)
    else:
        sys.stdout.write(text.decode())


if __name__ == "__main__":
    main()
