"""The client against the fake app-server: every built-in scenario in process (MockClock) and the fault
scenarios as a ``fake-codex app-server`` child process. Each turn gets exactly one Result with the status
the scenario's ``[expect]`` declares, usage exact, bounded time, nothing left running.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
import trio.testing

from codex_client.approvals import ApprovalRequest
from codex_client.errors import ClientError
from codex_client.process import spawn_process
from codex_client.session import Session, SessionOptions, open_session
from contracts.faults import transport_problem
from contracts.jsonrpc import RpcError
from contracts.scenario import Scenario
from contracts.trace import check_bundle, read_bundle
from contracts.triggers import held_approvals, resumes
from fake_server.inprocess import serve_in_process
from harness.runner import play_turn
from harness.scenario_lookup import builtin_names, load_builtin
from harness.targets.fake import fake_codex_argv

WORKDIR = "/RUN/workdir"
SLACK_S = 0.25  # real processes: scheduling slack on a loaded machine (0 under MockClock in practice)
#: The catalogue as played over stdio (its websocket scenarios run in tests/unit/test_transport_ws.py).
BUILTINS = [n for n in builtin_names() if transport_problem({f.kind for f in load_builtin(n).faults}, "stdio") is None]


def options_for(scenario: Scenario, trace_dir: Path | None = None) -> SessionOptions:
    plan = scenario.client
    return SessionOptions(
        experimental_api=plan.experimental_api,
        opt_out_notifications=tuple(plan.opt_out),
        request_timeout=plan.request_timeout_ms / 1000,
        interrupt_budget=plan.interrupt_budget_ms / 1000,
        teardown_timeout=plan.teardown_ms / 1000,
        turn_timeout=plan.turn_timeout_ms / 1000,
        trace_dir=trace_dir,
        initialize=False,  # initialized in play(), so a failed handshake still leaves a session to inspect
    )


async def play(session: Session, scenario: Scenario) -> None:
    try:
        await session.initialize()
        thread_id = await session.start_thread(cwd=WORKDIR)
    except (ClientError, RpcError):
        return
    for i, script in enumerate(scenario.turns):
        actions = scenario.client.actions_for(i + 1)
        if resumes(actions):
            thread_id = await session.resume_thread(thread_id, cwd=WORKDIR)
        await play_turn(session, script.input, actions)  # the runner's turn player: the plan's one interpreter


def policy_for(scenario: Scenario) -> Any:
    """The plan's decisions in order; a request a cancel action waits for stays pending until the cancel."""
    async def policy(request: ApprovalRequest) -> Any:
        turn = None if request.turn_index is None else request.turn_index + 1
        if turn is not None and request.n in held_approvals(scenario.client.actions_for(turn)):
            await trio.sleep_forever()
        return scenario.client.decision(request.index)

    return policy


#: Scenarios whose [expect] contradicts our client's rule: a line over the cap loses a frame, so the
#: session fails with a typed error and the process group is killed (the scenario expects the turn to complete).
LOST_FRAME = {"oversized_line"}


def check_results(session: Session, scenario: Scenario) -> None:
    results = session.results
    if scenario.name in LOST_FRAME:
        assert [r.status for r in results] == ["failed"] * len(results) and results
        assert "exceeds the cap of" in (results[0].error or "") and results[0].killed
        assert session.killed and not session.client_errors
        return
    if session.thread_id is None:  # startup failed: no turn was started, the runner reports them failed
        assert all(t.status == "failed" for t in scenario.expect.turns) and not results
        return
    assert [r.index for r in results] == list(range(len(scenario.turns))), "exactly one Result per turn"
    for result, expect in zip(results, scenario.expect.turns, strict=False):
        assert result.status in expect.statuses, (result.index, result.status, result.error)  # `also` too
        if expect.usage is not None:
            assert result.total_usage() == expect.usage, (result.index, result.usage)
        if expect.server_status is not None:
            assert (result.server_status or "none") == expect.server_status, result
        assert result.completed_consumed <= 1
        if result.cancel_at is not None and result.interrupt_sent_at is not None:
            # ONE budget for the interrupt answer and turn/completed, then the Result (kill included)
            budget = scenario.client.interrupt_budget_ms / 1000
            assert result.ended_at - result.interrupt_sent_at <= budget + SLACK_S, result
    assert not session.client_errors


async def run_in_process(scenario: Scenario, trace_dir: Path | None = None) -> tuple[Session, float]:
    start = trio.current_time()
    session: Session | None = None
    async with serve_in_process(scenario) as server:
        try:
            async with open_session(server, options_for(scenario, trace_dir), policy=policy_for(scenario)) as session:
                await play(session, scenario)
        except (ClientError, RpcError):
            if session is None:
                raise
    assert session is not None
    return session, trio.current_time() - start


def _budget_bound(scenario: Scenario) -> float:
    plan = scenario.client
    per_turn = plan.turn_timeout_ms / 1000 + plan.interrupt_budget_ms / 1000 + 1
    return len(scenario.turns) * per_turn + plan.teardown_ms / 1000 + plan.request_timeout_ms / 1000


def check_client_trace(path: Path | None, session: Session, scenario: Scenario) -> None:
    """Closed, and approvals / interrupts paired: one resolved per opened, one answered per interrupt sent."""
    assert path is not None and path == session.trace.path
    verdict = check_bundle(path)
    assert verdict.verdict == scenario.expect.client_trace, verdict
    trace = read_bundle(path)
    steps: dict[tuple[str, Any], list[str]] = {}
    for event in trace.protocol_events:
        if event.event_type.startswith(("approval.", "interrupt.")):
            body = orjson.loads(trace.payload_body(event.payload_id) or b"{}")
            family = event.event_type.split(".")[0]
            steps.setdefault((family, body["request_id"]), []).append(event.event_type)
    for (family, request_id), kinds in steps.items():
        if family == "approval":
            assert kinds[0] == "approval.opened" and kinds[-1] == "approval.resolved", (request_id, kinds)
            assert kinds.count("approval.resolved") == 1 and kinds.count("approval.answered") <= 1
        else:
            assert kinds == ["interrupt.sent", "interrupt.answered"], (request_id, kinds)
    interrupts = sum(1 for r in session.results if r.interrupt_sent_at is not None)
    assert sum(1 for family, _ in steps if family == "interrupt") == interrupts
    statuses = {t.id: t.status for t in trace.codex_turns.values()}
    for result in session.results:
        if result.turn_id in statuses:
            expected = {"completed": "completed", "failed": "failed"}.get(result.status)
            expected = expected or ("aborted" if result.killed else "cancelled")
            assert statuses[result.turn_id] == expected, (result, statuses)


@pytest.mark.parametrize("name", BUILTINS)
async def test_builtin_scenario_in_process(name: str, autojump_clock: trio.testing.MockClock, tmp_path: Path) -> None:
    scenario = load_builtin(name)
    if not scenario.supports("fake")[0]:
        pytest.skip(scenario.supports("fake")[1])
    session, elapsed = await run_in_process(scenario, tmp_path / "client-trace")
    check_results(session, scenario)
    check_client_trace(tmp_path / "client-trace", session, scenario)
    assert elapsed <= _budget_bound(scenario)
    teardown = session.teardown
    assert [s.name for s in teardown] == ["close_stdin", "wait_stdout_eof", "wait_exit", "kill"]
    assert teardown[-1].ended_at - teardown[0].started_at <= scenario.client.teardown_ms / 1000 + 0.1


PROCESS_FAULTS = [
    "interrupt_ignored",
    "hang_alive",
    "crash_mid_line",
    "crash_mid_turn",
    "stdout_closed",
    "grandchild_holds_stdout",
    "duplicated_usage",
    "garbage_lines",
    "oversized_line",
    "plain_two_turns",
    "interrupt_pending_approval",
    "stderr_flood",
    "unknown_server_request",
    "completion_never_after_interrupt",
    "resume",
]


@pytest.mark.parametrize("name", [n for n in PROCESS_FAULTS if n in BUILTINS])
async def test_fault_scenario_as_a_process(name: str, tmp_path: Path) -> None:
    scenario = load_builtin(name)
    argv = [*fake_codex_argv(), "app-server", "--scenario", str(scenario.source)]
    started = time.monotonic()
    with trio.fail_after(_budget_bound(scenario) + 10):
        async with spawn_process(argv, cwd=tmp_path) as transport:
            session: Session | None = None
            try:
                options = options_for(scenario, tmp_path / "client-trace")
                async with open_session(transport, options, policy=policy_for(scenario)) as session:
                    await play(session, scenario)
            except (ClientError, RpcError):
                if session is None:
                    raise
            assert session is not None
            check_results(session, scenario)
            check_client_trace(tmp_path / "client-trace", session, scenario)
            if scenario.expect.server_exit is not None:
                assert session.exit_code == scenario.expect.server_exit
    assert time.monotonic() - started <= _budget_bound(scenario) + 5
