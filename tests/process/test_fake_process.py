"""``fake-codex`` as a real child process, driven with JSON lines: the approval transcripts, the
version, stdin EOF, SIGTERM, and the process faults (exit codes, half a line, stderr, grandchild)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import orjson
import pytest
import trio
from test_reference_set import REPO, reference, replayable_set

from contracts.fidelity import diff_server_sides, render, shape
from contracts.wire import LineDecoder, WireError, WireErrorKind

FAKE = [sys.executable, "-m", "fake_server.cli"]
STEP_TIMEOUT = 30.0  # bound of every wait on the child (real time; generous for loaded CI hosts)


class Child:
    """A fake-codex child in its own process group; killed (group) on exit, never leaked."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.decoder = LineDecoder()
        self.items: list[Any] = []
        self.stderr = bytearray()
        self.eof = False

    async def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(data)

    async def send_frame(self, frame: dict[str, Any]) -> None:
        await self.send(orjson.dumps(frame) + b"\n")

    async def close_stdin(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.aclose()

    async def read_more(self) -> bool:
        assert self.process.stdout is not None
        data = await self.process.stdout.receive_some(1 << 20)
        if not data:
            self.items += self.decoder.feed_eof()
            self.eof = True
            return False
        self.items += self.decoder.feed(data)
        return True

    async def until(self, predicate: Callable[[list[Any]], bool], timeout: float = STEP_TIMEOUT) -> bool:
        with trio.move_on_after(timeout):
            while not predicate(self.items):
                if self.eof or not await self.read_more():
                    return predicate(self.items)
            return True
        return False

    async def drain_stderr(self) -> None:
        assert self.process.stderr is not None
        while data := await self.process.stderr.receive_some(1 << 16):
            self.stderr += data

    @property
    def frames(self) -> list[Any]:
        return [None if isinstance(i, WireError) else i.frame for i in self.items]

    def kill_group(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


async def spawn(nursery: trio.Nursery, *args: str, env: dict[str, str] | None = None) -> Child:
    process = await trio.lowlevel.open_process(
        [*FAKE, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )
    child = Child(process)
    nursery.start_soon(child.drain_stderr)
    return child


async def finish(child: Child, nursery: trio.Nursery) -> None:
    child.kill_group()
    with trio.fail_after(STEP_TIMEOUT):
        await child.process.wait()
    nursery.cancel_scope.cancel()


def _structural_count(frames: list[Any]) -> int:
    return sum(1 for f in frames if shape(f) is not None)


async def test_version() -> None:
    result = await trio.run_process([*FAKE, "--version"], capture_stdout=True)
    assert result.stdout.decode().strip() == "codex-cli 0.171.0"


async def test_bad_scenario_is_a_clear_error() -> None:
    with trio.fail_after(STEP_TIMEOUT):
        result = await trio.run_process(
            [*FAKE, "app-server", "--scenario", "no_such"], capture_stderr=True, check=False, stdin=b""
        )
    assert result.returncode == 2
    assert b"no_such" in result.stderr and b"built-in scenario" in result.stderr


@pytest.mark.parametrize("name", [r.name for r in replayable_set()])
async def test_process_replays_the_real_transcripts(name: str) -> None:
    """``fake-codex app-server --scenario X`` driven with the client lines of a reference transcript (the
    scenario it was recorded with) answers like the real binary did."""
    transcript = reference(name).transcript()
    scenario_file = reference(name).scenario_spec
    if scenario_file.endswith(".toml"):
        scenario_file = str(REPO / scenario_file)
    recorded: list[Any] = []
    idmap: dict[str, str] = {}
    closed = False
    async with trio.open_nursery() as nursery:
        child = await spawn(nursery, "app-server", "--scenario", scenario_file)
        for entry in transcript:
            if entry["dir"] == "s2c":
                recorded.append(entry["msg"])
                continue
            if entry["dir"] == "note":
                if "stdin closed" in str(entry["msg"]):
                    await child.close_stdin()
                    closed = True
                continue
            need = _structural_count(recorded)
            assert await child.until(lambda _, need=need: _structural_count(child.frames) >= need), name
            for real, mine in zip(recorded, child.frames, strict=False):
                for key in ("thread", "turn"):
                    for side in ("result", "params"):
                        a = (real.get(side) or {}).get(key) if isinstance(real, dict) else None
                        b = (mine.get(side) or {}).get(key) if isinstance(mine, dict) else None
                        if isinstance(a, dict) and isinstance(b, dict) and "id" in a and "id" in b:
                            idmap.setdefault(a["id"], b["id"])
            msg = entry["msg"]
            text = msg["_raw"] if "_raw" in msg else orjson.dumps(msg).decode()
            for real_id, mine_id in idmap.items():
                text = text.replace(real_id, mine_id)
            await child.send(text.encode() + b"\n")
        need = _structural_count(recorded)
        await child.until(lambda _: _structural_count(child.frames) >= need)
        if not closed:
            await child.close_stdin()
        with trio.fail_after(STEP_TIMEOUT):
            assert await child.process.wait() == 0
        await child.until(lambda _: False, timeout=STEP_TIMEOUT)  # read to EOF
        differences = diff_server_sides(recorded, child.frames)
        assert differences == [], render(differences)
        if name == "approval_interrupt":
            assert b"could not find callback for Integer(0)" in child.stderr
        await finish(child, nursery)


def _method_seen(name: str) -> Callable[[list[Any]], bool]:
    return lambda items: any(getattr(i, "method", None) == name for i in items)


async def _start_turn(child: Child) -> None:
    await child.send_frame({"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}})
    await child.send_frame({"id": 1, "method": "thread/start", "params": {}})
    assert await child.until(lambda items: any(getattr(i, "id", None) == 1 for i in items))
    thread_id = next(i for i in child.items if getattr(i, "id", None) == 1).result["thread"]["id"]
    await child.send_frame(
        {"id": 2, "method": "turn/start", "params": {"threadId": thread_id, "input": [{"type": "text", "text": "x"}]}}
    )


async def test_stdin_eof_exits_zero_promptly() -> None:
    async with trio.open_nursery() as nursery:
        child = await spawn(nursery, "app-server")
        await child.send_frame(
            {"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}}
        )
        assert await child.until(lambda items: bool(items))
        await child.close_stdin()
        with trio.fail_after(2):
            assert await child.process.wait() == 0
        await finish(child, nursery)


async def test_env_selects_the_scenario_and_crash_exit_code() -> None:
    async with trio.open_nursery() as nursery:
        child = await spawn(nursery, "app-server", env={"FAKE_CODEX_SCENARIO": "crash_mid_turn"})
        await _start_turn(child)
        await child.until(lambda _: False)  # to EOF
        with trio.fail_after(STEP_TIMEOUT):
            assert await child.process.wait() == 3
        deltas = [i for i in child.items if getattr(i, "method", None) == "item/agentMessage/delta"]
        assert len(deltas) == 2
        await finish(child, nursery)


async def test_crash_mid_line_leaves_half_a_frame() -> None:
    async with trio.open_nursery() as nursery:
        child = await spawn(nursery, "app-server", "--scenario", "crash_mid_line")
        await _start_turn(child)
        await child.until(lambda _: False)
        with trio.fail_after(STEP_TIMEOUT):
            assert await child.process.wait() == 2
        errors = [i for i in child.items if isinstance(i, WireError)]
        assert [e.kind for e in errors] == [WireErrorKind.TRUNCATED_AT_EOF]
        await finish(child, nursery)


async def test_hang_alive_survives_stdin_eof_until_killed() -> None:
    async with trio.open_nursery() as nursery:
        child = await spawn(nursery, "app-server", "--scenario", "hang_alive")
        await _start_turn(child)
        assert await child.until(_method_seen("item/agentMessage/delta"))
        await child.close_stdin()
        with trio.move_on_after(1.0):
            await child.process.wait()
        assert child.process.returncode is None
        child.kill_group()
        with trio.fail_after(STEP_TIMEOUT):
            assert await child.process.wait() == -signal.SIGKILL
        await finish(child, nursery)


async def test_stdout_closed_while_alive() -> None:
    async with trio.open_nursery() as nursery:
        child = await spawn(nursery, "app-server", "--scenario", "stdout_closed")
        await _start_turn(child)
        await child.until(lambda _: False)  # stdout reaches EOF
        assert child.eof and child.process.returncode is None
        await child.close_stdin()
        with trio.fail_after(STEP_TIMEOUT):
            assert await child.process.wait() == 0
        await finish(child, nursery)


async def test_stderr_flood_reaches_stderr() -> None:
    async with trio.open_nursery() as nursery:
        child = await spawn(nursery, "app-server", "--scenario", "stderr_flood")
        await _start_turn(child)
        assert await child.until(_method_seen("turn/completed"))
        await child.close_stdin()
        with trio.fail_after(STEP_TIMEOUT):
            assert await child.process.wait() == 0
        with trio.fail_after(STEP_TIMEOUT):
            while len(child.stderr) < 1024 * 1024:
                await trio.sleep(0.01)
        await finish(child, nursery)


async def test_grandchild_holds_stdout_after_exit() -> None:
    async with trio.open_nursery() as nursery:
        child = await spawn(nursery, "app-server", "--scenario", "grandchild_holds_stdout")
        await _start_turn(child)
        assert await child.until(_method_seen("turn/completed"))
        await child.close_stdin()
        with trio.fail_after(STEP_TIMEOUT):
            assert await child.process.wait() == 0
        # The server is gone, yet its stdout stays open: a grandchild holds it.
        assert not await child.until(lambda _: False, timeout=0.5) and not child.eof
        child.kill_group()  # the grandchild is in the server's process group
        assert await child.until(lambda _: child.eof, timeout=STEP_TIMEOUT) or child.eof
        await finish(child, nursery)


async def test_sigterm_is_graceful() -> None:
    async with trio.open_nursery() as nursery:
        child = await spawn(nursery, "app-server")
        await child.send_frame(
            {"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}}
        )
        assert await child.until(lambda items: bool(items))
        child.process.send_signal(signal.SIGTERM)
        with trio.fail_after(STEP_TIMEOUT):
            assert await child.process.wait() == 0
        await finish(child, nursery)


def _agent_message_started(item: Any) -> bool:
    params = getattr(item, "params", None) or {}
    return getattr(item, "method", None) == "item/started" and (params.get("item") or {}).get("type") == "agentMessage"


async def test_sigterm_ends_a_server_blocked_writing_a_long_line() -> None:
    """The real binary (0.171.0, its stdout reader stalled in a 16 MiB agent-message delta) exits 0 within
    1–2.5 s of SIGTERM, leaving nothing in its process group; the fake did not exit while blocked writing."""
    async with trio.open_nursery() as nursery:
        child = await spawn(nursery, "app-server", "--scenario", "large_message_16mib")
        await _start_turn(child)
        # The line before the 16 MiB delta; reading stops here, so the fake blocks on the full pipe.
        assert await child.until(lambda items: any(_agent_message_started(i) for i in items))
        child.process.send_signal(signal.SIGTERM)
        with trio.fail_after(10):
            assert await child.process.wait() == 0
        await finish(child, nursery)
