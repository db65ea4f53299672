"""The runner plays a scenario's [client] part against the in-process fake and builds a judged record."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import trio
import trio.testing

from codex_client.approvals import ApprovalRequest
from contracts.expect import Expect, ExpectTurn
from contracts.record import SessionRecord, WireEntry
from contracts.scenario import (
    ClientAction,
    ClientPlan,
    CommandItem,
    Fault,
    MessageItem,
    ModelResponse,
    Scenario,
    ServerConfig,
    TurnScript,
    Usage,
)
from contracts.usage import UsageBuckets
from harness import runner

PLAIN_USAGE = UsageBuckets(input=60, cache_read=40, output=20)


def by(run: runner.ScenarioRun, contract: str) -> dict[str, str]:
    return {c.name: c.status for c in run.checks if c.contract == contract}


def long_stream(actions: tuple[ClientAction, ...] = (), **plan: object) -> Scenario:
    deltas = tuple(f"w{i} " for i in range(300))
    message = MessageItem("".join(deltas), deltas, delay_ms=100)
    turn = TurnScript(responses=(ModelResponse((message,), Usage(100, 40, 20)),))
    return Scenario(
        "long_stream_test",
        "300 deltas 100 ms apart",
        (turn,),
        client=ClientPlan(actions=actions, **plan),  # type: ignore[arg-type]
        expect=Expect(turns=(ExpectTurn("aborted" if actions else "completed"),)),
    )


def approval_scenario(decisions: tuple[str, ...]) -> Scenario:
    command = CommandItem("/bin/echo hi", approval=True, output="hi\n")
    turn = TurnScript(responses=(ModelResponse((command,), Usage(100, 40, 20)),))
    return Scenario(
        "approval_test",
        "one command approval",
        (turn,),
        client=ClientPlan(approvals=decisions),
        config=ServerConfig(approval_policy="on-request"),
    )


def test_plain_two_turns_record_and_contracts() -> None:
    scenario = Scenario(
        "plain_test",
        "two plain turns",
        (TurnScript(), TurnScript()),
        expect=Expect(turns=(ExpectTurn("completed", PLAIN_USAGE, "completed"),) * 2),
    )
    run = runner.run_one(scenario, "fake")
    assert run.record is not None and run.record.virtual_time
    assert [r.status for r in run.record.results] == ["completed", "completed"]
    methods = [e.frame.get("method") for e in run.record.wire if e.dir == "c2s" and e.frame]
    assert methods.count("turn/start") == 2 and methods[0] == "initialize"
    for contract in ("terminal_status", "usage", "schema", "protocol"):
        assert set(by(run, contract).values()) == {"pass"}, (contract, run.checks)
    assert run.record.budgets.interrupt_s == 2.0


def test_cancel_after_the_third_delta_aborts_within_budget_on_virtual_time() -> None:
    run = runner.run_one(long_stream((ClientAction(1, "cancel", at="delta", n=3),)), "fake")
    assert run.record is not None
    (result,) = run.record.results
    assert result.status == "aborted" and result.cancel_at is not None
    interrupts = [
        e for e in run.record.wire if e.dir == "c2s" and e.frame and e.frame.get("method") == "turn/interrupt"
    ]
    assert len(interrupts) == 1
    deltas_before = [
        e
        for e in run.record.wire
        if e.t <= interrupts[0].t and e.frame and e.frame.get("method") == "item/agentMessage/delta"
    ]
    assert len(deltas_before) == 3
    latency = next(c for c in run.checks if c.contract == "latency" and c.name == "turn 1 cancel→Result")
    assert latency.status == "pass" and "virtual time" in latency.detail
    assert run.wall_s < 10  # 30 s of scripted stream cost no wall time


def test_delayed_cancel_action() -> None:
    run = runner.run_one(long_stream((ClientAction(1, "cancel", at="delay", delay_ms=1500),)), "fake")
    assert run.record is not None
    c2s = [e for e in run.record.wire if e.dir == "c2s" and e.frame]
    (interrupt,) = [e for e in c2s if e.frame.get("method") == "turn/interrupt"]
    start = next(e for e in c2s if e.frame.get("method") == "turn/start")
    assert interrupt.t - start.t == pytest.approx(1.5, abs=0.01)
    assert [r.status for r in run.record.results] == ["aborted"]


def test_steer_action_sends_turn_steer_after_its_trigger() -> None:
    scenario = long_stream((ClientAction(1, "steer", at="delta", n=2, text="and more"),))
    run = runner.run_one(scenario, "fake")
    assert run.record is not None
    c2s = [e.frame for e in run.record.wire if e.dir == "c2s" and e.frame]
    (steer,) = [f for f in c2s if f.get("method") == "turn/steer"]
    assert steer["params"]["input"][0]["text"] == "and more"
    assert by(run, "protocol") and "fail" not in by(run, "schema").values()


@pytest.mark.parametrize("decision", ["accept", "decline", "cancel"])
def test_approval_decisions_follow_the_plan_in_order(decision: str) -> None:
    run = runner.run_one(approval_scenario((decision,)), "fake")
    assert run.record is not None
    answers = [e.frame for e in run.record.wire if e.dir == "c2s" and e.frame and "result" in e.frame]
    assert answers and answers[0]["result"]["decision"] == decision
    assert by(run, "protocol")["server requests answered"] == "pass"


def test_unsupported_target_skips_every_contract_with_the_reason() -> None:
    scenario = Scenario("crashy", "crash", (TurnScript(faults=(Fault("crash", "delta"),)),))
    run = runner.run_one(scenario, "real")
    assert run.skipped and "only be produced by the fake" in run.skipped
    assert {c.status for c in run.checks} == {"skip"}
    assert len(run.checks) == len(runner.CONTRACT_NAMES)


def test_real_target_without_a_binary_is_not_available(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CODEX_BIN", raising=False)
    run = runner.run_one(Scenario("p", "plain", (TurnScript(),)), "real")
    assert run.skipped and "not available" in run.skipped


def test_saved_record_is_the_judged_one(tmp_path: Path) -> None:
    run = runner.run_one(Scenario("p", "plain", (TurnScript(),)), "fake", save_dir=tmp_path / "p")
    loaded = SessionRecord.load(tmp_path / "p")
    assert (tmp_path / "p" / "wire.jsonl").stat().st_size > 0
    assert len(loaded.wire) == len(run.record.wire)  # type: ignore[union-attr]


def test_crash_at_initialize_gives_failed_results_not_an_exception() -> None:
    scenario = Scenario(
        "crash_init",
        "crash on initialize",
        (TurnScript(faults=(Fault("crash", "initialize", params={"exit_code": 7}),)),),
        expect=Expect(turns=(ExpectTurn("failed"),), server_exit=7),
    )
    run = runner.run_one(scenario, "fake")
    assert run.record is not None
    assert [r.status for r in run.record.results] == ["failed"]
    assert by(run, "terminal_status")["turn 1 status"] == "pass"


def test_client_without_interrupt_budget_turns_latency_red(monkeypatch: pytest.MonkeyPatch) -> None:
    real_options = runner.session_options

    def no_budget(plan: ClientPlan, trace_dir: Path | None) -> object:
        return dataclasses.replace(real_options(plan, trace_dir), interrupt_budget=math.inf)

    monkeypatch.setattr(runner, "session_options", no_budget)
    scenario = long_stream((ClientAction(1, "cancel", at="delta", n=2),), turn_timeout_ms=60000)
    scenario = Scenario(
        scenario.name,
        scenario.description,
        (TurnScript(responses=scenario.turns[0].responses, faults=(Fault("interrupt_ignored", "interrupt"),)),),
        client=scenario.client,
        expect=scenario.expect,
    )
    run = runner.run_one(scenario, "fake")
    assert by(run, "latency")["turn 1 cancel→Result"] == "fail"


def test_cancel_at_approval_pending_holds_the_approval_unanswered() -> None:
    scenario = approval_scenario(("accept",))
    scenario = dataclasses.replace(
        scenario,
        client=ClientPlan(actions=(ClientAction(1, "cancel", at="approval_pending", n=1),)),
        expect=Expect(turns=(ExpectTurn("aborted", server_status="interrupted"),)),
    )
    run = runner.run_one(scenario, "fake")
    assert run.record is not None
    answers = [e.frame for e in run.record.wire if e.dir == "c2s" and e.frame and "result" in e.frame]
    assert answers == []  # cancelled while pending: never accepted
    methods = [e.frame.get("method") for e in run.record.wire if e.dir == "c2s" and e.frame]
    assert "turn/interrupt" in methods
    assert by(run, "terminal_status")["turn 1 status"] == "pass"
    assert by(run, "protocol")["server requests answered"] == "pass"  # resolved by the server


def test_fake_process_target_records_real_time_exit_and_server_trace() -> None:
    scenario = Scenario(
        "plain_proc",
        "one plain turn",
        (TurnScript(),),
        expect=Expect(turns=(ExpectTurn("completed", PLAIN_USAGE, "completed"),), server_exit=0),
    )
    run = runner.run_one(scenario, "fake-process")
    assert run.record is not None and not run.record.virtual_time
    assert run.record.server_exit == 0
    assert run.record.server_trace is not None
    assert by(run, "trace_closure")["server trace"] == "pass"
    assert set(by(run, "terminal_status").values()) == {"pass"}


def test_a_run_past_its_limit_ends_with_a_record_and_a_red_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "VIRTUAL_RUN_LIMIT_S", 10.0)
    scenario = Scenario(
        "hangs",
        "server alive but silent, client with long deadlines",
        (TurnScript(faults=(Fault("hang", "start"),)),),
        client=ClientPlan(turn_timeout_ms=10_000_000),
        expect=Expect(turns=(ExpectTurn("timeout"),)),
    )
    run = runner.run_one(scenario, "fake")
    assert run.record is not None and run.record.wire
    assert any("did not finish" in e for e in run.record.client_errors)
    assert by(run, "terminal_status")["client errors"] == "fail"


def test_an_exception_escaping_the_client_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken_play(*args: object, **kwargs: object) -> None:
        raise KeyError("turn")

    monkeypatch.setattr(runner, "_play_session", broken_play)
    run = runner.run_one(Scenario("p", "plain", (TurnScript(),)), "fake")
    assert run.record is not None
    assert any("KeyError" in e for e in run.record.client_errors)
    assert by(run, "terminal_status")["client errors"] == "fail"


async def test_approvals_one_response_asks_together_are_answered_once_all_are_pending(
    mock_clock: trio.testing.MockClock,
) -> None:
    """On a loaded machine the real binary asks the second approval late; answering the first before it
    would make the server flip the thread's status in between (not what "ask at once" means)."""
    mock_clock.autojump_threshold = 0
    both = ModelResponse((CommandItem("echo one", approval=True), CommandItem("echo two", approval=True)))
    policy = runner.approval_policy(ClientPlan(approvals=("accept", "decline")), (TurnScript(responses=(both,)),))
    policy.start_turn(1)
    answers: dict[int, tuple[str, float]] = {}

    async def ask(index: int) -> None:
        request = ApprovalRequest(index, "item/commandExecution/requestApproval", "command", {}, index)
        answers[index] = (await policy(request), trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask, 0)
        await trio.sleep(1.0)
        assert answers == {}  # the first waits for its sibling
        nursery.start_soon(ask, 1)
    assert answers == {0: ("accept", 1.0), 1: ("decline", 1.0)}

    alone = runner.approval_policy(ClientPlan(), (TurnScript(responses=(both,)),))
    alone.start_turn(1)
    start = trio.current_time()
    request = ApprovalRequest(0, "item/commandExecution/requestApproval", "command", {}, 0)
    assert await alone(request) == "accept"  # a sibling that never comes: answered at the bound
    assert trio.current_time() - start == runner.SIBLING_APPROVAL_WAIT_S


async def test_a_real_time_session_waits_briefly_for_open_requests_to_resolve(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    asked = WireEntry(0.0, "s2c", {"id": 0, "method": "item/commandExecution/requestApproval", "params": {}})
    resolved = WireEntry(0.1, "s2c", {"method": "serverRequest/resolved", "params": {"threadId": "t", "requestId": 0}})
    session = SimpleNamespace(wire=[asked])
    server = SimpleNamespace(exit_code=None)
    assert runner._unresolved_requests(session) == {0}

    async def resolve_later() -> None:
        await trio.sleep(0.1)
        session.wire.append(resolved)

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(resolve_later)
        await runner._settle_resolved(session, server)
    assert trio.current_time() - start == pytest.approx(0.1, abs=0.02)  # returns once resolved

    session.wire = [asked]
    start = trio.current_time()
    await runner._settle_resolved(session, server)
    assert trio.current_time() - start == pytest.approx(runner.RESOLVED_SETTLE_S)  # bounded
    server.exit_code = 0
    start = trio.current_time()
    await runner._settle_resolved(session, server)
    assert trio.current_time() == start  # an exited server resolves nothing more
