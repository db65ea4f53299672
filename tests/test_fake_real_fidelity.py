"""Against the real binary (``--codex PATH``): every built-in scenario the real target can play gives a
server side structurally equal to the fake's (``codex-harness diff`` for the whole catalogue)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.fidelity import render
from fake_server.catalogue import builtin_names, load_builtin

REAL_SCENARIOS = [n for n in builtin_names() if load_builtin(n).supports("real")[0]]


@pytest.mark.real_codex
@pytest.mark.parametrize("name", REAL_SCENARIOS)
def test_fake_matches_real_binary(name: str, codex_bin: Path, tmp_path: Path) -> None:
    from harness.commands.diff import fidelity_diff

    result = fidelity_diff(load_builtin(name), codex_bin, work_root=tmp_path)
    assert result.error is None and result.skipped is None, result.error or result.skipped
    assert result.differences == [], render(result.differences)


def _busy_scenario():
    from fake_server.builder import message, response, scenario, turn, usage

    words = [f"w{i} " for i in range(20)]
    return scenario(
        "busy",
        "a second input while the turn streams",
        turn(
            response(message("".join(words), deltas=words, delay_ms=100), usage=usage(100, 40, 20)),
            response(message("Folded answer.", chunks=3), usage=usage(150, 100, 10)),
        ),
    )


def _second(mode: str, thread_id: str, turn_id: str) -> dict:
    text = [{"type": "text", "text": "more"}]
    if mode == "turn/start":
        return {"id": 3, "method": "turn/start", "params": {"threadId": thread_id, "input": text}}
    return {
        "id": 3,
        "method": "turn/steer",
        "params": {"threadId": thread_id, "input": text, "expectedTurnId": turn_id},
    }


def _fake_busy(mode: str) -> list:
    from fake_server.virtual import VirtualServer

    v = VirtualServer(_busy_scenario())
    v.send({"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}})
    v.send({"id": 1, "method": "thread/start", "params": {}})
    thread_id = next(f for f in v.frames if f.get("id") == 1)["result"]["thread"]["id"]
    v.send(
        {"id": 2, "method": "turn/start", "params": {"threadId": thread_id, "input": [{"type": "text", "text": "x"}]}}
    )
    turn_id = next(f for f in v.frames if f.get("id") == 2)["result"]["turn"]["id"]
    v.run_until_state(lambda: sum(1 for g in v.frames if g.get("method") == "item/agentMessage/delta") >= 3)
    v.send(_second(mode, thread_id, turn_id))
    v.run_until(lambda f: f.get("method") == "turn/completed")
    return v.frames


@pytest.mark.real_codex
@pytest.mark.parametrize("mode", ["turn/start", "turn/steer"])
async def test_input_while_busy_matches_real_binary(mode: str, codex_bin: Path) -> None:
    import subprocess

    import orjson
    import trio

    from contracts.fidelity import diff_server_sides
    from harness.targets.real import real_target
    from harness.wire import LineDecoder

    frames: list = []
    async with real_target(_busy_scenario(), codex_bin) as target:
        process = await trio.lowlevel.open_process(
            list(target.argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=target.env,
            cwd=target.cwd,
        )
        try:
            decoder = LineDecoder()
            assert process.stdin is not None and process.stdout is not None

            async def until(predicate) -> dict:
                with trio.fail_after(30):
                    while True:
                        for frame in frames:
                            if predicate(frame):
                                return frame
                        data = await process.stdout.receive_some(1 << 16)
                        assert data, "codex closed stdout"
                        frames.extend(m.frame for m in decoder.feed(data) if hasattr(m, "frame"))

            async def send(frame: dict) -> None:
                await process.stdin.send_all(orjson.dumps(frame) + b"\n")

            await send({"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}})
            await until(lambda f: f.get("id") == 0)
            await send({"id": 1, "method": "thread/start", "params": {}})
            thread_id = (await until(lambda f: f.get("id") == 1))["result"]["thread"]["id"]
            start = {
                "id": 2,
                "method": "turn/start",
                "params": {"threadId": thread_id, "input": [{"type": "text", "text": "x"}]},
            }
            await send(start)
            turn_id = (await until(lambda f: f.get("id") == 2))["result"]["turn"]["id"]
            await until(lambda _: sum(1 for g in frames if g.get("method") == "item/agentMessage/delta") >= 3)
            await send(_second(mode, thread_id, turn_id))
            await until(lambda f: f.get("method") == "turn/completed")
            await process.stdin.aclose()
            with trio.fail_after(30):
                await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    differences = diff_server_sides(_fake_busy(mode), frames, collapse_deltas=True)
    assert differences == [], render(differences)
