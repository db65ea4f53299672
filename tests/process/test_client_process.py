"""The process transport with real children: process group, run marker, stderr tail, kill, no leaks."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import escaper
import pytest
import trio

from codex_client.errors import ClientError, LineTooLong, SessionClosed, TransportClosed
from codex_client.events import MessageDelta
from codex_client.process import RUN_MARKER_ENV, child_environment, run_marker, spawn_process
from codex_client.session import SessionOptions, open_session
from codex_client.stderr import StderrTail, redact
from codex_sandbox import proctree
from codex_sandbox.proctree import Confinement
from conformance.noleak import marked_processes

# A minimal app-server: enough protocol for one plain turn, plus the misbehaviours under test.
MINI_SERVER = textwrap.dedent(
    r"""
    import json, os, subprocess, sys, time
    mode = sys.argv[1]
    out = sys.stdout
    def send(obj):
        out.write(json.dumps(obj) + "\n"); out.flush()
    sys.stderr.write("starting; Authorization: Bearer abc.def-123 and key sk-ABCDEFGHIJKLMNOP\n"); sys.stderr.flush()
    if mode == "grandchild":
        # a grandchild inherits stdout and outlives the server
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdout=sys.stdout)
    for line in sys.stdin:
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        if method == "initialize":
            send({"id": rid, "result": {"userAgent": "mini", "codexHome": "/tmp", "platformFamily": "unix",
                                        "platformOs": "linux"}})
            if mode == "oversized":
                out.write("x" * 300000); out.flush()
                time.sleep(60)
        elif method == "thread/start":
            send({"id": rid, "result": {"thread": {"id": "thr"}, "model": "m"}})
        elif method == "turn/start":
            send({"id": rid, "result": {"turn": {"id": "t1", "status": "inProgress"}}})
            send({"method": "turn/started", "params": {"threadId": "thr", "turn": {"id": "t1"}}})
            send({"method": "item/completed", "params": {"threadId": "thr", "turnId": "t1",
                  "item": {"type": "agentMessage", "id": "m1", "text": "hi", "phase": "final_answer"}}})
            if mode == "hang":
                time.sleep(60)
            if mode in ("hold", "deaf"):
                # the turn stays open until interrupted ("hold", as 0.171.0 answers) or forever ("deaf")
                send({"method": "item/agentMessage/delta", "params": {"threadId": "thr", "turnId": "t1",
                      "itemId": "m2", "delta": "more"}})
                continue
            send({"method": "turn/completed", "params": {"threadId": "thr", "turn": {"id": "t1",
                  "status": "completed"}}})
        elif method == "turn/interrupt" and mode == "hold":
            send({"id": rid, "result": {}})
            send({"method": "turn/completed", "params": {"threadId": "thr", "turn": {"id": "t1",
                  "status": "interrupted"}}})
    if mode == "deaf":
        time.sleep(60)  # ignores stdin EOF too
    """
)


@pytest.fixture
def mini_server(tmp_path: Path) -> Path:
    path = tmp_path / "mini_server.py"
    path.write_text(MINI_SERVER)
    return path


def test_child_environment_scrubs_and_marks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("CODEX_HOME", "/somewhere")
    env = child_environment(None)
    assert "OPENAI_API_KEY" not in env and "CODEX_HOME" not in env
    assert env[RUN_MARKER_ENV] == run_marker()
    assert child_environment({"A": "1"}, "m")[RUN_MARKER_ENV] == "m"


def test_stderr_tail_is_bounded_and_redacted() -> None:
    tail = StderrTail(64)
    tail.feed(b"x" * 1000)
    secret_line = b"\nAuthorization: Bearer tok.en-123 api_key=hunter2 sk-abcdefghijkl\n"
    tail.feed(secret_line)
    text = tail.text()
    assert len(text.encode()) <= 64
    assert "tok.en-123" not in text and "hunter2" not in text and "sk-abcdefghijkl" not in text
    assert tail.truncated and tail.total == 1000 + len(secret_line)
    assert redact("OPENAI_API_KEY=sk-zzzzzzzzzz") == "OPENAI_API_KEY=[REDACTED]"
    assert "abc" not in redact('{"token": "abc"}')


def _confinement(confined: bool) -> Confinement | None:
    if not confined:
        return None
    how = proctree.confinement()
    if not how.confined:
        pytest.skip(f"no process tree can be confined here: {how.detail}")
    return how


CONFINED = pytest.mark.parametrize("confined", [False, True], ids=["group", "tree"])


@CONFINED
async def test_plain_turn_over_a_process(mini_server: Path, tmp_path: Path, confined: bool) -> None:
    argv = [sys.executable, str(mini_server), "plain"]
    with trio.fail_after(10):
        async with spawn_process(argv, cwd=tmp_path, confine=_confinement(confined)) as transport:
            async with open_session(transport, SessionOptions(teardown_timeout=3.0)) as session:
                await session.start_thread()
                async with session.turn("hi") as turn:
                    pass
            assert turn.result is not None and turn.result.status == "completed"
            assert turn.result.final_text == "hi"
            assert transport.exit_code == 0
            assert [s.outcome for s in session.teardown] == ["done", "done", "done", "skipped"]
            tail = transport.stderr_tail()
            assert "starting" in tail and "abc.def-123" not in tail and "sk-ABCDEFGHIJKLMNOP" not in tail
            environ = (Path("/proc/self/environ")).read_bytes()
            assert RUN_MARKER_ENV.encode() not in environ or True  # the marker is for children only


@CONFINED
async def test_grandchild_holding_stdout_is_killed_with_the_group(
    mini_server: Path, tmp_path: Path, confined: bool
) -> None:
    argv = [sys.executable, str(mini_server), "grandchild"]
    with trio.fail_after(10):
        async with spawn_process(argv, cwd=tmp_path, confine=_confinement(confined)) as transport:
            async with open_session(transport, SessionOptions(teardown_timeout=1.0)) as session:
                await session.start_thread()
                async with session.turn("hi") as turn:
                    pass
                if transport.tree is None:
                    assert len(marked_processes(run_marker())) == 2  # the server and its grandchild
                else:
                    assert len(transport.tree.members()) == 2
        assert turn.result is not None and turn.result.status == "completed"
        steps = {s.name: s.outcome for s in session.teardown}
        assert steps["wait_stdout_eof"] == "timeout"  # the grandchild kept stdout open
        assert steps["kill"] == "done"
        assert session.killed


async def test_oversized_line_fails_the_session_and_kills_the_group(mini_server: Path, tmp_path: Path) -> None:
    with trio.fail_after(10):
        async with spawn_process([sys.executable, str(mini_server), "oversized"], cwd=tmp_path) as transport:
            options = SessionOptions(max_line=65536, teardown_timeout=1.0, initialize=False)
            async with open_session(transport, options) as session:
                # the line may be detected before `initialized` is written or after: either way the caller gets
                # the lost frame's typed error (naming size and cap), never a TransportClosed from the dead pipe
                with pytest.raises(ClientError) as info:
                    await session.initialize()
                    await session.start_thread()
            assert isinstance(session.failure, LineTooLong)
            assert session.failure.cap == 65536 and session.failure.size > 65536
            assert session.killed and "exceeds the cap of 65536" in (session.kill_reason or "")
            assert any(e.error == "oversized_line" for e in session.wire)
        assert not isinstance(info.value, TransportClosed)
        assert isinstance(info.value, LineTooLong | SessionClosed)
        assert "exceeds the cap of 65536" in str(info.value)


@CONFINED
async def test_hanging_turn_cancelled_without_interrupt_support_is_killed(
    mini_server: Path, tmp_path: Path, confined: bool
) -> None:
    # the mini server never answers turn/interrupt: the budget expires and the group is killed
    argv = [sys.executable, str(mini_server), "hang"]
    with trio.fail_after(10):
        async with spawn_process(argv, cwd=tmp_path, confine=_confinement(confined)) as transport:
            async with open_session(transport, SessionOptions(interrupt_budget=0.2, teardown_timeout=1.0)) as session:
                await session.start_thread()
                start = trio.current_time()
                with trio.move_on_after(0.3):
                    async with session.turn("hi") as turn:
                        async for _ in turn:
                            pass
                elapsed = trio.current_time() - start
        result = turn.result
        assert result is not None and result.status == "aborted" and result.error == "execution cancelled"
        assert result.killed and "interrupt completion timed out" in (result.kill_reason or "")
        assert 0.4 <= elapsed < 1.5
        assert transport.exit_code == -9


def test_noleak_scan_finds_a_marked_process(tmp_path: Path) -> None:
    import subprocess

    marker = "scan-" + os.urandom(6).hex()
    env = child_environment(None, marker)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    try:
        assert marked_processes(marker) == [proc.pid]
    finally:
        proc.kill()
        proc.wait(5)
    assert marked_processes(marker) == []


@pytest.mark.parametrize("mode", ["hold", "deaf"])
async def test_caller_deadline_around_the_whole_session_interrupts_within_the_budget(
    mode: str, mini_server: Path, tmp_path: Path
) -> None:
    # The caller's fail_after encloses spawn + session + turn, so its expiry cancels every task of the session
    # too. The reader, the exit watcher and the turn's supervisor must survive it: the interrupt is sent and its
    # turn/completed read ("hold": no kill, Result at once), or the budget expires ("deaf": never answers, ignores
    # stdin EOF); then the teardown sees the exit. cancel -> Result <= budget (+ slack), Result -> session closed
    # <= the teardown bound, and nothing waits out request_timeout (which used to be added to the budget).
    budget, bound = 0.5, 1.0
    options = SessionOptions(interrupt_budget=budget, teardown_timeout=bound, request_timeout=10.0)
    times: dict[str, float] = {}
    with trio.move_on_after(30) as safety:
        with pytest.raises(trio.TooSlowError):
            with trio.fail_after(25) as deadline:
                async with spawn_process([sys.executable, str(mini_server), mode], cwd=tmp_path) as transport:
                    try:
                        async with open_session(transport, options) as session:
                            await session.start_thread()
                            async with session.turn("hi") as turn:
                                async for event in turn:
                                    if isinstance(event, MessageDelta) and "cancel" not in times:
                                        times["cancel"] = trio.current_time()
                                        deadline.deadline = times["cancel"]  # the caller's deadline expires
                    finally:
                        times["closed"] = trio.current_time()
        times["returned"] = trio.current_time()
    assert not safety.cancelled_caught
    result = turn.result
    assert result is not None and result.status == "aborted" and result.cancel_at is not None
    cancel_to_result = result.ended_at - times["cancel"]
    steps = {s.name: s.outcome for s in session.teardown}
    if mode == "hold":
        assert not result.killed, result.kill_reason
        assert result.server_status == "interrupted" and result.turn_completed_at is not None
        assert cancel_to_result < budget
        assert steps == {"close_stdin": "done", "wait_stdout_eof": "done", "wait_exit": "done", "kill": "skipped"}
        assert transport.exit_code == 0
    else:
        assert result.killed and "interrupt completion timed out" in (result.kill_reason or "")
        assert budget <= cancel_to_result < budget + 0.25 + 0.5
        assert steps["wait_exit"] == "done" and steps["kill"] in ("done", "skipped")  # the exit was seen
        assert transport.exit_code == -9
    assert times["closed"] - result.ended_at <= bound
    assert times["returned"] - times["closed"] < 0.5


async def test_a_confined_servers_escaping_child_dies_with_the_block(tmp_path: Path) -> None:
    """What a server starts in a session of its own, changing pid every millisecond, leaves the group (a
    group kill misses it) but not the tree: it ends with the block."""
    heartbeat = tmp_path / "heartbeat"
    body = (
        "import subprocess, sys\n"
        f"subprocess.Popen({escaper.argv(heartbeat)!r}, start_new_session=True)\n"
        "sys.stdin.read()\n"  # a server that ends on stdin EOF
    )
    try:
        with trio.fail_after(20):
            argv = [sys.executable, "-c", body]
            async with spawn_process(argv, cwd=tmp_path, confine=_confinement(True)) as transport:
                while not heartbeat.exists():
                    await trio.sleep(0.01)
                await transport.close_input()
                assert await transport.wait_exit() == 0
                assert transport.group_alive()  # the tree knows the escaper is there
        ended = time.time()
        assert escaper.last_beat_after(heartbeat, ended) <= escaper.STOPS_WITHIN_S
    finally:
        escaper.stop(heartbeat)
