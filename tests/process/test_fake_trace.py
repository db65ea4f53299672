"""Server trace bundles of the fake: real format, closed on graceful shutdown, unclosed after a crash or
kill, and the pre-fix bug on demand; each built-in scenario's declared server_trace verdict holds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import trio
import trio.testing
from support.plan import play

from contracts.faults import transport_problem
from contracts.messages import Response
from contracts.trace.closure import check_bundle
from contracts.wire import LineDecoder
from fake_server.catalogue import builtin_names, load_builtin
from fake_server.inprocess import serve_in_process
from fake_server.runtime import VIRTUAL_EPOCH_MS
from fake_server.server_trace import ServerTrace

INIT = b'{"id":0,"method":"initialize","params":{"clientInfo":{"name":"t","version":"1"}}}\n'


def _verdicts(root: Path) -> list[str]:
    return [check_bundle(p).verdict for p in sorted(root.glob("trace-*"))]


@pytest.mark.parametrize(
    "name", [n for n in builtin_names() if transport_problem({f.kind for f in load_builtin(n).faults}, "stdio") is None]
)
def test_declared_server_trace_verdict_holds(name: str, tmp_path: Path) -> None:
    scenario = load_builtin(name)
    run = play(scenario)
    trace = ServerTrace(tmp_path)
    for event in run.server.traces:
        trace.on_event(event)
    trace.finish(graceful=not run.server.crashed)
    assert trace.broken is None
    verdicts = _verdicts(tmp_path) or ["none"]
    if scenario.expect.server_trace == "none" and verdicts == ["unclosed"]:
        # [expect] "none": the check does not judge a bundle written anyway (a turn that never ends, its server
        # ended however the client ends it): contracts.checks.trace_closure skips it, never passes it
        return
    assert verdicts == [scenario.expect.server_trace]


async def test_in_process_trace_closed_on_eof_with_virtual_times(
    mock_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    mock_clock.autojump_threshold = 0
    async with serve_in_process(load_builtin("command_approval"), trace_root=tmp_path) as server:
        decoder = LineDecoder()
        await server.send(INIT + b'{"id":1,"method":"thread/start","params":{}}\n')
        thread_id = None
        while thread_id is None:
            for item in decoder.feed(await server.receive()):
                if isinstance(item, Response) and item.id == 1:
                    thread_id = item.result["thread"]["id"]
        await server.send(
            orjson.dumps({"id": 2, "method": "turn/start", "params": {"threadId": thread_id, "input": []}}) + b"\n"
        )
        done = False
        while not done:
            for item in decoder.feed(await server.receive()):
                if getattr(item, "method", None) == "item/commandExecution/requestApproval":
                    await server.send(orjson.dumps({"id": item.id, "result": {"decision": "accept"}}) + b"\n")
                done = done or getattr(item, "method", None) == "turn/completed"
        await server.close_input()
        assert await server.wait_exit() == 0
    assert _verdicts(tmp_path) == ["closed"]
    manifest = orjson.loads(next(tmp_path.glob("trace-*/manifest.json")).read_bytes())
    assert manifest["started_at_unix_ms"] == VIRTUAL_EPOCH_MS
    assert manifest["root_thread_id"] == thread_id


async def test_in_process_trace_unclosed_after_kill(mock_clock: trio.testing.MockClock, tmp_path: Path) -> None:
    mock_clock.autojump_threshold = 0
    async with serve_in_process(load_builtin("long_stream"), trace_root=tmp_path) as server:
        decoder = LineDecoder()
        await server.send(INIT + b'{"id":1,"method":"thread/start","params":{}}\n')
        thread_id = None
        while thread_id is None:
            for item in decoder.feed(await server.receive()):
                if isinstance(item, Response) and item.id == 1:
                    thread_id = item.result["thread"]["id"]
        await server.send(
            orjson.dumps({"id": 2, "method": "turn/start", "params": {"threadId": thread_id, "input": []}}) + b"\n"
        )
        await trio.sleep(1)
        server.kill()
        assert await server.wait_exit() == -9
    assert _verdicts(tmp_path) == ["unclosed"]


def _run_process(scenario: str, root: Path, stdin: bytes, timeout: float = 30) -> int:
    env = {**os.environ, "CODEX_ROLLOUT_TRACE_ROOT": str(root)}
    proc = subprocess.run(
        [sys.executable, "-m", "fake_server.cli", "app-server", "--scenario", scenario],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    return proc.returncode


def _session() -> bytes:
    return INIT + b'{"id":1,"method":"thread/start","params":{}}\n'


def test_process_trace_closed_on_stdin_eof(tmp_path: Path) -> None:
    assert _run_process("plain", tmp_path, _session()) == 0
    assert _verdicts(tmp_path) == ["closed"]


def test_process_trace_closed_on_sigterm(tmp_path: Path) -> None:
    env = {**os.environ, "CODEX_ROLLOUT_TRACE_ROOT": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fake_server.cli", "app-server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(_session())
        proc.stdin.flush()
        lines = 0
        while lines < 5:  # initialize answer, 2 ambient, thread/start answer, thread/started
            assert proc.stdout.readline()
            lines += 1
        proc.terminate()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=30)
    assert _verdicts(tmp_path) == ["closed"]


def test_process_trace_unclosed_after_crash(tmp_path: Path) -> None:
    env = {**os.environ, "CODEX_ROLLOUT_TRACE_ROOT": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fake_server.cli", "app-server", "--scenario", "crash_mid_turn"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(_session())
        proc.stdin.flush()
        thread_id = None
        while thread_id is None:
            line = proc.stdout.readline()
            assert line
            frame = orjson.loads(line)
            if frame.get("id") == 1:
                thread_id = frame["result"]["thread"]["id"]
        turn = {"id": 2, "method": "turn/start", "params": {"threadId": thread_id, "input": []}}
        proc.stdin.write(orjson.dumps(turn) + b"\n")
        proc.stdin.flush()
        assert proc.wait(timeout=30) == 3
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=30)
    assert _verdicts(tmp_path) == ["unclosed"]


#: Tool, turn and inference events of the real 0.171.0 bundles for these scenarios (recorded against the
#: mock Responses API): (type, status, runtime kind).
REAL_TRACE_EVENTS = {
    "command_approval": [
        ("codex_turn_started", None, None),
        ("inference_started", None, None),
        ("inference_completed", None, None),
        ("tool_call_started", None, None),
        ("tool_call_runtime_started", None, "exec_command"),
        ("tool_call_runtime_ended", "completed", None),
        ("tool_call_ended", "completed", None),
        ("inference_started", None, None),
        ("inference_completed", None, None),
        ("codex_turn_ended", "completed", None),
    ],
    "running_command_interrupt": [
        ("codex_turn_started", None, None),
        ("inference_started", None, None),
        ("inference_completed", None, None),
        ("tool_call_started", None, None),
        ("tool_call_runtime_started", None, "exec_command"),
        ("tool_call_ended", "aborted", None),
        ("codex_turn_ended", "cancelled", None),
        ("tool_call_runtime_ended", "failed", None),
    ],
    "approval_cancel": [
        ("codex_turn_started", None, None),
        ("inference_started", None, None),
        ("inference_completed", None, None),
        ("tool_call_started", None, None),
        ("tool_call_ended", "aborted", None),
        ("codex_turn_ended", "cancelled", None),
    ],
    "file_change_cancel": [
        ("codex_turn_started", None, None),
        ("inference_started", None, None),
        ("inference_completed", None, None),
        ("tool_call_started", None, None),
        ("tool_call_runtime_started", None, "apply_patch"),
        ("tool_call_ended", "aborted", None),
        ("codex_turn_ended", "cancelled", None),
    ],
    "file_change_approval": [
        ("codex_turn_started", None, None),
        ("inference_started", None, None),
        ("inference_completed", None, None),
        ("tool_call_started", None, None),
        ("tool_call_runtime_started", None, "apply_patch"),
        ("tool_call_runtime_ended", "completed", None),
        ("tool_call_ended", "completed", None),
        ("inference_started", None, None),
        ("inference_completed", None, None),
        ("codex_turn_ended", "completed", None),
    ],
}


@pytest.mark.parametrize("name", sorted(REAL_TRACE_EVENTS))
def test_trace_events_follow_the_real_binary(name: str, tmp_path: Path) -> None:
    run = play(load_builtin(name))
    trace = ServerTrace(tmp_path)
    for event in run.server.traces:
        trace.on_event(event)
    trace.finish(graceful=not run.server.crashed)
    got = []
    for line in next(tmp_path.glob("trace-*/trace.jsonl")).read_bytes().splitlines():
        payload = orjson.loads(line)["payload"]
        kind = payload["type"]
        if kind.startswith(("tool", "codex_turn", "inference")):
            runtime = (payload.get("kind") or {}).get("type") if kind == "tool_call_runtime_started" else None
            got.append((kind, payload.get("status"), runtime))
    assert got == REAL_TRACE_EVENTS[name]
