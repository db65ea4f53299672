"""The real ``codex app-server`` through the mock Responses API (marker ``real_codex``).

Each test prepares a run with :func:`harness.targets.real.real_target`, talks JSON lines over stdio
with the small driver of :mod:`test_real_driver` (not the client under test), and compares what the
server said, structurally, with the sequences recorded from codex-cli 0.171.0 in the reference
transcripts (``tests/data/real/0.171.0/transcripts/``; copied below as literal projections so the suite is
self-contained). Every run is bounded: deadlines on every wait, the process group killed on the way
out, the temporary directories removed.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest
import trio
from test_real_driver import Driver, close_and_wait, project, reduce_with_codex, run_server, signal_server

from contracts.scenario import (
    CommandItem,
    FileChangeItem,
    MessageItem,
    ModelResponse,
    ReasoningItem,
    Scenario,
    ServerConfig,
    TurnScript,
    Usage,
)
from contracts.trace.closure import check_bundle
from harness.targets.real import RealTarget, real_target

pytestmark = pytest.mark.real_codex

RUN_TIMEOUT = 90.0
ECHO = CommandItem(
    "echo approved-output > approved.txt; cat approved.txt",
    call_id="call_echo",
    approval=True,
    justification="Test driver wants to run this command",
)
AFTER_TOOL = ModelResponse(
    items=(MessageItem("The command ran.", ("The ", "command ", "ran", ".")),), usage=Usage(150, 100, 10)
)
TOOL_USAGE = Usage(120, 0, 15)


def driver_log(driver: Driver) -> list[tuple[str, dict[str, Any]]]:
    return [(e.dir, e.msg) for e in driver.log]


# --- projections of the reference transcripts (codex-cli 0.171.0) ------------------------------

TURN_OPEN = [
    "<- turn/start",
    "thread/status/changed active []",
    "turn/started",
    "item/started userMessage",
    "item/completed userMessage",
]
PLAIN_TURN = [
    *TURN_OPEN,
    "item/started agentMessage",
    "item/agentMessage/delta",
    "item/completed agentMessage",
    "thread/tokenUsage/updated",
    "thread/status/changed idle",
    "turn/completed completed items=1",
]
APPROVAL_PENDING = [
    *TURN_OPEN,
    "thread/status/changed active ['waitingOnApproval']",
    "item/started commandExecution inProgress",
    "request item/commandExecution/requestApproval",
    "serverRequest/resolved",
]
FOLLOW_UP = [
    "thread/tokenUsage/updated",
    "item/started agentMessage",
    "item/agentMessage/delta",
    "item/completed agentMessage",
    "thread/tokenUsage/updated",
    "thread/status/changed idle",
    "turn/completed completed items=1",
]
REFERENCE = {
    "plain": PLAIN_TURN + PLAIN_TURN,
    "stream_interrupt": [
        *TURN_OPEN,
        "item/started agentMessage",
        "item/agentMessage/delta",
        "<- turn/interrupt",
        "thread/status/changed idle",
        "turn/completed interrupted items=0",
    ],
    "approval_accept": [
        *APPROVAL_PENDING,
        "thread/status/changed active []",
        "item/completed commandExecution completed",
        *FOLLOW_UP,
    ],
    "approval_decline": [
        *APPROVAL_PENDING,
        "item/completed commandExecution declined",
        "thread/status/changed active []",
        *FOLLOW_UP,
    ],
    "approval_rpc_error": [
        *APPROVAL_PENDING,
        "item/completed commandExecution failed",
        "thread/status/changed active []",
        *FOLLOW_UP,
    ],
    "approval_cancel": [
        *APPROVAL_PENDING,
        "item/completed commandExecution declined",
        "thread/status/changed active []",
        "thread/tokenUsage/updated",
        "thread/status/changed idle",
        "turn/completed interrupted items=0",
    ],
    "approval_interrupt": [
        *APPROVAL_PENDING[:-1],
        "thread/tokenUsage/updated",
        "<- turn/interrupt",
        "thread/status/changed idle",
        "turn/completed interrupted items=0",
        "serverRequest/resolved",
    ],
    "model_error": [
        *TURN_OPEN,
        "thread/status/changed systemError",
        "error willRetry=False",
        "turn/completed failed items=0",
    ]
    * 2,
}


# --- helpers -------------------------------------------------------------------------------------


def scenario(name: str, *turns: TurnScript, **config: Any) -> Scenario:
    return Scenario(name=name, description=name, turns=turns, config=ServerConfig(**config))


def one_response(*items: Any, usage: Usage | None = TOOL_USAGE, then: ModelResponse | None = None) -> TurnScript:
    responses = (ModelResponse(items=items, usage=usage),) + ((then,) if then else ())
    return TurnScript(responses=responses)


async def turn_completed(driver: Driver, turn_id: str, timeout: float = 30.0) -> dict[str, Any]:
    msg = await driver.until_method("turn/completed", timeout, turn__id=turn_id)
    return msg["params"]["turn"]


async def server_request(driver: Driver, timeout: float = 30.0) -> dict[str, Any]:
    return await driver.until(lambda m: "method" in m and "id" in m, timeout)


def stderr_path(tmp_path: Path) -> Path:
    return tmp_path / "server-stderr.log"


def tool_outputs(target: RealTarget, request_index: int) -> list[str]:
    body = target.requests[request_index].body
    return [i["output"] for i in body["input"] if i.get("type") == "function_call_output"]


# --- tests ---------------------------------------------------------------------------------------


async def test_plain_two_turns(codex_bin: Path, tmp_path: Path) -> None:
    sc = scenario(
        "plain",
        TurnScript(),
        TurnScript(
            responses=(ModelResponse(items=(MessageItem("Second.", ("Sec", "ond.")),), usage=Usage(150, 100, 10)),)
        ),
    )
    with trio.fail_after(RUN_TIMEOUT):
        async with (
            real_target(sc, codex_bin, base_dir=tmp_path) as target,
            run_server(target, stderr_path(tmp_path)) as d,
        ):
            thread = await d.handshake(target.workdir)
            first = await turn_completed(d, await d.start_turn(thread))
            second = await turn_completed(d, await d.start_turn(thread))
    assert first["status"] == second["status"] == "completed"
    assert [i["text"] for i in first["items"]] == ["Hello from the fake model!"]
    assert [i["text"] for i in second["items"]] == ["Second."]
    assert project(driver_log(d)) == REFERENCE["plain"]
    usage = [m["params"]["tokenUsage"] for m in d.server_messages() if m.get("method") == "thread/tokenUsage/updated"]
    assert [u["last"]["inputTokens"] for u in usage] == [100, 150]
    assert usage[1]["total"]["inputTokens"] == 250 and usage[1]["total"]["cachedInputTokens"] == 140
    assert [(r.turn, r.response_index, r.status) for r in target.requests] == [(0, 0, 200), (1, 0, 200)]
    assert target.requests[0].body["stream"] is True and target.requests[0].header("accept") == "text/event-stream"


async def test_streaming_interrupt(codex_bin: Path, tmp_path: Path) -> None:
    long_stream = MessageItem("x" * 300, ("x",) * 300, delay_ms=100)  # 30 s if never interrupted
    sc = scenario("stream_interrupt", one_response(long_stream))
    with trio.fail_after(RUN_TIMEOUT):
        async with (
            real_target(sc, codex_bin, base_dir=tmp_path) as target,
            run_server(target, stderr_path(tmp_path)) as d,
        ):
            thread = await d.handshake(target.workdir)
            turn = await d.start_turn(thread)
            await d.until_method("item/agentMessage/delta")
            sent = d.now()
            await d.request("turn/interrupt", {"threadId": thread, "turnId": turn})
            completed = await turn_completed(d, turn, timeout=5)
            latency = d.now() - sent
            await d.drain(0.3)
    assert completed["status"] == "interrupted" and completed["items"] == []
    assert latency < 2.0
    projected = project(driver_log(d))
    assert projected == REFERENCE["stream_interrupt"]
    assert len(target.requests) == 1
    assert target.mock.errors == []


@pytest.mark.parametrize(
    ("reference", "answer", "requests", "tool_output"),
    [
        ("approval_accept", {"result": {"decision": "accept"}}, 2, "approved-output"),
        ("approval_decline", {"result": {"decision": "decline"}}, 2, 'Rejected(\\"rejected by user\\")'),
        (
            "approval_rpc_error",
            {"error": {"code": -32000, "message": "no"}},
            2,
            'Rejected(\\"approval request failed\\")',
        ),
        ("approval_cancel", {"result": {"decision": "cancel"}}, 1, None),
    ],
)
async def test_command_approval_answers(
    codex_bin: Path, tmp_path: Path, reference: str, answer: dict[str, Any], requests: int, tool_output: str | None
) -> None:
    sc = scenario(reference, one_response(ECHO, then=AFTER_TOOL), approval_policy="on-request")
    with trio.fail_after(RUN_TIMEOUT):
        async with (
            real_target(sc, codex_bin, base_dir=tmp_path) as target,
            run_server(target, stderr_path(tmp_path)) as d,
        ):
            thread = await d.handshake(target.workdir)
            turn = await d.start_turn(thread)
            request = await server_request(d)
            await d.send({"id": request["id"], **answer})
            completed = await turn_completed(d, turn)
            await d.drain(0.3)
            wrote_file = (target.workdir / "approved.txt").exists()
    params = request["params"]
    assert request["method"] == "item/commandExecution/requestApproval" and request["id"] == 0
    assert params["itemId"] == "call_echo" and params["reason"] == ECHO.justification
    assert params["cwd"] == str(target.workdir) and ECHO.command in params["command"]
    assert completed["status"] == ("interrupted" if reference == "approval_cancel" else "completed")
    assert project(driver_log(d)) == REFERENCE[reference]
    assert len(target.requests) == requests
    if tool_output is not None:
        assert tool_output in tool_outputs(target, 1)[-1]
    assert wrote_file == (reference == "approval_accept")


async def test_interrupt_while_approval_pending(codex_bin: Path, tmp_path: Path) -> None:
    sc = scenario("approval_interrupt", one_response(ECHO, then=AFTER_TOOL), approval_policy="on-request")
    with trio.fail_after(RUN_TIMEOUT):
        async with (
            real_target(sc, codex_bin, base_dir=tmp_path) as target,
            run_server(target, stderr_path(tmp_path)) as d,
        ):
            thread = await d.handshake(target.workdir)
            turn = await d.start_turn(thread)
            request = await server_request(d)
            sent = d.now()
            interrupt_id = await d.request("turn/interrupt", {"threadId": thread, "turnId": turn})
            completed = await turn_completed(d, turn, timeout=5)
            latency = d.now() - sent
            await d.until_method("serverRequest/resolved", 5, requestId=request["id"])
            await d.answer(request, {"decision": "accept"})  # late: cleared, must get no reply
            await d.drain(0.5)
            wrote_file = (target.workdir / "approved.txt").exists()
    assert completed["status"] == "interrupted" and latency < 2.0
    got = project(driver_log(d))
    # serverRequest/resolved comes from its own task: unordered relative to turn/completed.
    assert [e for e in got if e != "serverRequest/resolved"] == [
        e for e in REFERENCE["approval_interrupt"] if e != "serverRequest/resolved"
    ]
    assert got.count("serverRequest/resolved") == 1
    answers = [m for m in d.server_messages() if m.get("id") == interrupt_id and "method" not in m]
    assert answers == [{"id": interrupt_id, "result": {}}]
    assert len(target.requests) == 1 and not wrote_file


async def test_file_change_approval(codex_bin: Path, tmp_path: Path) -> None:
    patch = FileChangeItem("hello.txt", "hello from apply_patch")
    sc = scenario("file_change", one_response(patch, then=AFTER_TOOL), approval_policy="on-request")
    with trio.fail_after(RUN_TIMEOUT):
        async with (
            real_target(sc, codex_bin, base_dir=tmp_path) as target,
            run_server(target, stderr_path(tmp_path)) as d,
        ):
            thread = await d.handshake(target.workdir)
            turn = await d.start_turn(thread)
            request = await server_request(d)
            await d.answer(request, {"decision": "accept"})
            completed = await turn_completed(d, turn)
            await d.drain(0.3)
            content = (target.workdir / "hello.txt").read_text()
    assert request["method"] == "item/fileChange/requestApproval"
    assert completed["status"] == "completed"
    assert content == "hello from apply_patch\n"
    got = [e for e in project(driver_log(d)) if e != "turn/diff/updated"]
    # fileChange: item/started comes before the waitingOnApproval status (the command is the other way round)
    assert got == [
        *TURN_OPEN,
        "item/started fileChange inProgress",
        "thread/status/changed active ['waitingOnApproval']",
        "request item/fileChange/requestApproval",
        "serverRequest/resolved",
        "thread/status/changed active []",
        "item/completed fileChange completed",
        *FOLLOW_UP,
    ]
    assert "Success. Updated the following files" in tool_outputs(target, 1)[-1]


async def test_parallel_command_approvals(codex_bin: Path, tmp_path: Path) -> None:
    second = CommandItem("echo second", call_id="call_two", approval=True)
    sc = scenario("parallel", one_response(ECHO, second, then=AFTER_TOOL), approval_policy="on-request")
    with trio.fail_after(RUN_TIMEOUT):
        async with (
            real_target(sc, codex_bin, base_dir=tmp_path) as target,
            run_server(target, stderr_path(tmp_path)) as d,
        ):
            thread = await d.handshake(target.workdir)
            turn = await d.start_turn(thread)
            requests = [await server_request(d), await server_request(d)]
            for request in requests:
                await d.answer(request, {"decision": "accept"})
            completed = await turn_completed(d, turn)
    assert sorted(r["id"] for r in requests) == [0, 1]
    assert sorted(r["params"]["itemId"] for r in requests) == ["call_echo", "call_two"]
    assert completed["status"] == "completed"
    commands = [
        m["params"]["item"]
        for m in d.server_messages()
        if m.get("method") == "item/completed" and m["params"]["item"]["type"] == "commandExecution"
    ]
    assert sorted((c["id"], c["status"]) for c in commands) == [("call_echo", "completed"), ("call_two", "completed")]
    assert sorted(o.split("Output:\n")[-1] for o in tool_outputs(target, 1)) == ["approved-output\n", "second\n"]


async def test_reasoning_summary(codex_bin: Path, tmp_path: Path) -> None:
    reasoning = ReasoningItem("**Thinking** about the answer.", ("**Thinking**", " about the answer."))
    message = MessageItem("Answer.", ("Ans", "wer."))
    sc = scenario("reasoning", one_response(reasoning, message, usage=Usage(100, 0, 30, 12)))
    with trio.fail_after(RUN_TIMEOUT):
        async with (
            real_target(sc, codex_bin, base_dir=tmp_path) as target,
            run_server(target, stderr_path(tmp_path)) as d,
        ):
            thread = await d.handshake(target.workdir)
            completed = await turn_completed(d, await d.start_turn(thread))
    assert project(driver_log(d)) == [
        *TURN_OPEN,
        "item/started reasoning",
        "item/reasoning/summaryPartAdded",
        "item/reasoning/summaryTextDelta",
        "item/completed reasoning",
        "item/started agentMessage",
        "item/agentMessage/delta",
        "item/completed agentMessage",
        "thread/tokenUsage/updated",
        "thread/status/changed idle",
        "turn/completed completed items=1",
    ]
    done = next(
        m
        for m in d.server_messages()
        if m.get("method") == "item/completed" and m["params"]["item"]["type"] == "reasoning"
    )
    assert done["params"]["item"]["summary"] == ["**Thinking** about the answer."]
    usage = next(m for m in d.server_messages() if m.get("method") == "thread/tokenUsage/updated")
    assert usage["params"]["tokenUsage"]["last"]["reasoningOutputTokens"] == 12
    assert [i["type"] for i in completed["items"]] == ["agentMessage"]


async def test_model_errors_then_recovery(codex_bin: Path, tmp_path: Path) -> None:
    sc = scenario(
        "model_error",
        TurnScript(responses=(ModelResponse(end="http_error", http_status=500, error="ignored by codex"),)),
        TurnScript(responses=(ModelResponse(end="failed", error="the model broke"),)),
        TurnScript(),
    )
    with trio.fail_after(RUN_TIMEOUT):
        async with (
            real_target(sc, codex_bin, base_dir=tmp_path) as target,
            run_server(target, stderr_path(tmp_path)) as d,
        ):
            thread = await d.handshake(target.workdir)
            turns = [await turn_completed(d, await d.start_turn(thread)) for _ in range(3)]
    assert [t["status"] for t in turns] == ["failed", "failed", "completed"]
    assert turns[0]["error"]["codexErrorInfo"] == "internalServerError"
    assert turns[1]["error"] == {
        "message": "stream disconnected before completion: the model broke",
        "codexErrorInfo": "other",
        "additionalDetails": None,
        "misalignment": None,
    }
    assert project(driver_log(d)) == REFERENCE["model_error"] + PLAIN_TURN
    assert [r.status for r in target.requests] == [500, 200, 200]


async def test_stream_cut_is_retried_once(codex_bin: Path, tmp_path: Path) -> None:
    cut = ModelResponse(items=(MessageItem("partial text", ("partial", " text")),), end="disconnect")
    retry = ModelResponse(items=(MessageItem("Full answer.", ("Full", " answer.")),), usage=Usage(100, 0, 5))
    sc = scenario("stream_retry", TurnScript(responses=(cut, retry)), stream_max_retries=1)
    with trio.fail_after(RUN_TIMEOUT):
        async with (
            real_target(sc, codex_bin, base_dir=tmp_path) as target,
            run_server(target, stderr_path(tmp_path)) as d,
        ):
            thread = await d.handshake(target.workdir)
            completed = await turn_completed(d, await d.start_turn(thread))
    errors = [m["params"] for m in d.server_messages() if m.get("method") == "error"]
    assert [e["willRetry"] for e in errors] == [True]
    assert errors[0]["error"]["message"] == "Reconnecting... 1/1"
    assert errors[0]["error"]["codexErrorInfo"] == {"responseStreamDisconnected": {"httpStatusCode": None}}
    assert (
        errors[0]["error"]["additionalDetails"]
        == "stream disconnected before completion: stream closed before response.completed"
    )
    assert completed["status"] == "completed" and [i["text"] for i in completed["items"]] == ["Full answer."]
    assert project(driver_log(d)) == [
        *TURN_OPEN,
        "item/started agentMessage",
        "item/agentMessage/delta",
        "error willRetry=True",
        "item/started agentMessage",  # the partial message never completes; the retry opens a new one
        "item/agentMessage/delta",
        "item/completed agentMessage",
        "thread/tokenUsage/updated",
        "thread/status/changed idle",
        "turn/completed completed items=1",
    ]
    assert [(r.turn, r.response_index) for r in target.requests] == [(0, 0), (0, 1)]


def processes_with(token: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if token.encode() in cmdline:
                found.append(int(entry))
    return found


async def wait_gone(token: str, timeout: float) -> list[int]:
    with trio.move_on_after(timeout):
        while processes_with(token):
            await trio.sleep(0.05)
    return processes_with(token)


async def test_running_command_interrupt(codex_bin: Path, tmp_path: Path) -> None:
    token = f"codex-harness-{os.getpid()}-{tmp_path.name}"
    sleeper = CommandItem(f"sleep 30; echo {token}", duration_ms=30000)
    sc = scenario("running_command", one_response(sleeper))
    with trio.fail_after(RUN_TIMEOUT):
        async with real_target(sc, codex_bin, base_dir=tmp_path) as target:
            async with run_server(target, stderr_path(tmp_path)) as d:
                thread = await d.handshake(target.workdir)
                turn = await d.start_turn(thread)
                await d.until_method("item/started", item__type="commandExecution")
                with trio.move_on_after(5):  # the shell appears shortly after item/started
                    while not processes_with(token):
                        await trio.sleep(0.05)
                running = processes_with(token)
                sent = d.now()
                await d.request("turn/interrupt", {"threadId": thread, "turnId": turn})
                completed = await turn_completed(d, turn, timeout=5)
                latency = d.now() - sent
                await d.drain(0.3)
                # 0.171.0 leaves the interrupted command running (in its own session) until shutdown.
                status = await close_and_wait(d, 10)
            left = await wait_gone(token, 5)
    assert running, "the command never started"
    assert completed["status"] == "interrupted" and latency < 2.0
    assert status == 0
    assert left == [], "the interrupted command outlived the server"
    assert project(driver_log(d)) == [
        *TURN_OPEN,
        "item/started commandExecution inProgress",
        "thread/tokenUsage/updated",
        "<- turn/interrupt",
        "thread/status/changed idle",
        "turn/completed interrupted items=0",
    ]
    assert len(target.requests) == 1


async def test_trace_bundle_closed_after_stdin_eof(codex_bin: Path, tmp_path: Path) -> None:
    trace_root = tmp_path / "traces"
    sc = scenario("plain_trace", TurnScript())
    with trio.fail_after(RUN_TIMEOUT):
        async with real_target(sc, codex_bin, base_dir=tmp_path, trace_root=trace_root) as target:
            async with run_server(target, stderr_path(tmp_path)) as d:
                thread = await d.handshake(target.workdir)
                await turn_completed(d, await d.start_turn(thread))
                bundles_while_running = sorted(trace_root.glob("trace-*"))
                status = await close_and_wait(d, 10)
    assert status == 0
    bundles = sorted(trace_root.glob(f"trace-*-{thread}"))
    assert len(bundles) == 1 and bundles_while_running == bundles
    bundle = bundles[0]
    assert (bundle / "manifest.json").is_file() and (bundle / "trace.jsonl").is_file()
    assert sorted(p.name for p in (bundle / "payloads").iterdir())[0] == "000001.zst"
    verdict = check_bundle(bundle)
    assert verdict.verdict == "closed", verdict.to_json()
    reduced = reduce_with_codex(codex_bin, bundle, tmp_path / "state.json")
    assert reduced.returncode == 0, reduced.stderr


# --- trace bundles kept as test data (tests/data/real/0.171.0/trace-bundles/) ---------------------

RECORD_ENV = "CODEX_HARNESS_RECORD_BUNDLES"


async def record_interrupt_running_command(codex_bin: Path, tmp_path: Path, trace_root: Path) -> None:
    sc = scenario("interrupt_running", one_response(CommandItem("sleep 30", duration_ms=30000)))
    async with real_target(sc, codex_bin, base_dir=tmp_path, trace_root=trace_root) as target:
        async with run_server(target, stderr_path(tmp_path)) as d:
            thread = await d.handshake(target.workdir)
            turn = await d.start_turn(thread)
            await d.until_method("item/started", item__type="commandExecution")
            await d.request("turn/interrupt", {"threadId": thread, "turnId": turn})
            assert (await turn_completed(d, turn, 5))["status"] == "interrupted"
            assert await close_and_wait(d, 10) == 0


async def record_sigterm_pending_approval(codex_bin: Path, tmp_path: Path, trace_root: Path) -> None:
    sc = scenario("sigterm_pending", one_response(ECHO, then=AFTER_TOOL), approval_policy="on-request")
    async with real_target(sc, codex_bin, base_dir=tmp_path, trace_root=trace_root) as target:
        async with run_server(target, stderr_path(tmp_path)) as d:
            thread = await d.handshake(target.workdir)
            await d.start_turn(thread)
            await server_request(d)
            signal_server(d, target, signal.SIGTERM)  # the npm launcher forwards it to the native server
            with trio.fail_after(10):
                await d.drain(10)
                status = await d.process.wait()
    assert status == 0  # observed: the server closes its bundle and exits 0 within ~40 ms


async def record_plain_turn(codex_bin: Path, tmp_path: Path, trace_root: Path) -> None:
    async with real_target(
        scenario("plain", TurnScript()), codex_bin, base_dir=tmp_path, trace_root=trace_root
    ) as target:
        async with run_server(target, stderr_path(tmp_path)) as d:
            thread = await d.handshake(target.workdir)
            assert (await turn_completed(d, await d.start_turn(thread)))["status"] == "completed"
            assert await close_and_wait(d, 10) == 0


RECORDINGS = {
    "real-as-interrupt-running-command": record_interrupt_running_command,
    "real-as-sigterm-pending-approval": record_sigterm_pending_approval,
    "real-as-plain-turn": record_plain_turn,
}


@pytest.mark.parametrize("name", sorted(RECORDINGS))
async def test_recorded_bundles_are_closed(codex_bin: Path, tmp_path: Path, name: str) -> None:
    """Graceful shutdowns (stdin EOF, SIGTERM) close the bundle; our checker and codex's reducer agree.

    With CODEX_HARNESS_RECORD_BUNDLES=DIR the bundle is also copied to DIR/<name> (how the bundles
    under tests/data/real/0.171.0/trace-bundles/ were made).
    """
    trace_root = tmp_path / "traces"
    with trio.fail_after(RUN_TIMEOUT):
        await RECORDINGS[name](codex_bin, tmp_path, trace_root)
    bundles = list(trace_root.glob("trace-*"))
    assert len(bundles) == 1
    verdict = check_bundle(bundles[0])
    assert verdict.verdict == "closed", verdict.to_json()
    reduced = reduce_with_codex(codex_bin, bundles[0], tmp_path / "state.json")
    assert reduced.returncode == 0, reduced.stderr
    if out := os.environ.get(RECORD_ENV):
        target_dir = Path(out) / name
        shutil.rmtree(target_dir, ignore_errors=True)
        shutil.copytree(bundles[0], target_dir, ignore=shutil.ignore_patterns("state.json"))
