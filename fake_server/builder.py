"""Build scenarios in Python, equivalent to the TOML format (function style).

Every function checks what the TOML loader checks, and :func:`scenario` returns exactly the
:class:`~contracts.scenario.Scenario` that loading ``scenario_file.dumps`` of it gives back
(``source`` aside), so a built scenario can be saved and shared as a file::

    from fake_server.builder import *

    s = scenario(
        "approve_then_cancel",
        "A command needing approval; the client cancels while it is pending.",
        turn(response(command("echo hi", approval=True, call_id="call_echo"), usage=usage(100, 40, 20, 5))),
        client=client(actions=[action(1, "cancel", at="approval_pending")]),
        expect=expect(expect_turn("aborted", usage=buckets(60, 40, 0, 20), server_status="interrupted")),
    )
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from contracts import budget_defaults, scenario_file
from contracts.expect import RESULT_STATUSES, TRACE_EXPECTATIONS, Allowance, Expect, ExpectTurn
from contracts.faults import FaultProblem, check_fault
from contracts.scenario import (
    ACTION_TRIGGERS,
    ACTIONS,
    DECISIONS,
    DEFAULT_INPUT,
    DEFAULT_JUSTIFICATION,
    DEFAULT_STEER_TEXT,
    RESPONSE_ENDS,
    TARGETS,
    ClientAction,
    ClientPlan,
    CommandItem,
    Fault,
    FileChangeItem,
    MessageItem,
    ModelItem,
    ModelResponse,
    ReasoningItem,
    Scenario,
    ServerConfig,
    TurnScript,
    Usage,
    default_approval_policy,
)
from contracts.scenario_file import ScenarioError, split_text
from contracts.usage import UsageBuckets

SOURCE = "<builder>"

__all__ = [
    "action",
    "allow",
    "buckets",
    "client",
    "command",
    "config",
    "expect",
    "expect_turn",
    "fault",
    "file_change",
    "message",
    "reasoning",
    "response",
    "scenario",
    "turn",
    "usage",
]


def _err(key: str, expected: str, got: Any = None) -> ScenarioError:
    return ScenarioError(SOURCE, key, expected, got)


def _deltas(key: str, text: str, chunks: int, deltas: Iterable[str] | None) -> tuple[str, ...]:
    if deltas is not None:
        parts = tuple(deltas)
        if "".join(parts) != text:
            raise _err(f"{key}.deltas", "strings that join to `text`", parts)
        return parts
    if chunks < 1:
        raise _err(f"{key}.chunks", "an integer >= 1", chunks)
    return split_text(text, chunks)


def message(
    text: str, *, chunks: int = 1, deltas: Iterable[str] | None = None, delay_ms: int = 0, id: str | None = None
) -> MessageItem:
    return MessageItem(text, _deltas("message", text, chunks, deltas), delay_ms, id)


def reasoning(
    summary: str, *, chunks: int = 1, deltas: Iterable[str] | None = None, delay_ms: int = 0, id: str | None = None
) -> ReasoningItem:
    return ReasoningItem(summary, _deltas("reasoning", summary, chunks, deltas), delay_ms, id)


def command(
    command: str,
    *,
    call_id: str | None = None,
    approval: bool = False,
    justification: str = DEFAULT_JUSTIFICATION,
    output: str = "",
    exit_code: int = 0,
    duration_ms: int = 0,
) -> CommandItem:
    return CommandItem(command, call_id, approval, justification, output, exit_code, duration_ms)


def file_change(path: str, content: str = "", *, call_id: str | None = None, approval: bool = True) -> FileChangeItem:
    return FileChangeItem(path, content, call_id, approval)


def usage(input: int = 0, cached: int = 0, output: int = 0, reasoning: int = 0) -> Usage:
    if cached > input:
        raise _err("usage.cached", "cached <= input (input includes cached tokens)", cached)
    if reasoning > output:
        raise _err("usage.reasoning", "reasoning <= output (output includes reasoning tokens)", reasoning)
    return Usage(input, cached, output, reasoning)


def response(
    *items: ModelItem,
    usage: Usage | None = None,
    end: str = "completed",
    error: str = "model error",
    http_status: int = 500,
) -> ModelResponse:
    if end not in RESPONSE_ENDS:
        raise _err("response.end", f"one of {', '.join(RESPONSE_ENDS)}", end)
    return ModelResponse(tuple(items), usage, end, error, http_status)  # type: ignore[arg-type]


def fault(kind: str, at: str | None = None, n: int = 1, **params: Any) -> Fault:
    """One fault, checked against the fault registry (:mod:`contracts.faults`)."""
    try:
        kind, point, n, checked = check_fault(kind, at, n, params)
    except FaultProblem as exc:
        raise _err(f"fault.{exc.key}", exc.expected, exc.got) from None
    return Fault(kind, point, n, checked)


def turn(*responses: ModelResponse, input: str = DEFAULT_INPUT, faults: Iterable[Fault] = ()) -> TurnScript:
    return TurnScript(input, tuple(responses), tuple(faults))


def action(
    turn: int,
    do: str,
    *,
    at: str = "started",
    n: int = 1,
    delay_ms: int = 0,
    text: str = DEFAULT_STEER_TEXT,
) -> ClientAction:
    if do not in ACTIONS:
        raise _err("client.actions.do", f"one of {', '.join(ACTIONS)}", do)
    if at not in ACTION_TRIGGERS:
        raise _err("client.actions.at", f"one of {', '.join(ACTION_TRIGGERS)}", at)
    return ClientAction(turn, do, at, n, delay_ms, text)  # type: ignore[arg-type]


def client(
    *,
    approval: str = "accept",
    approvals: Iterable[str] = (),
    actions: Iterable[ClientAction] = (),
    interrupt_budget_ms: int = budget_defaults.INTERRUPT_BUDGET_MS,
    request_timeout_ms: int = budget_defaults.REQUEST_TIMEOUT_MS,
    turn_timeout_ms: int = budget_defaults.TURN_TIMEOUT_MS,
    teardown_ms: int = budget_defaults.TEARDOWN_MS,
    experimental_api: bool = False,
    opt_out: Iterable[str] = (),
) -> ClientPlan:
    for decision in (approval, *approvals):
        if decision not in DECISIONS:
            raise _err("client.approval", f"one of {', '.join(DECISIONS)}", decision)
    return ClientPlan(
        approval=approval,
        approvals=tuple(approvals),
        actions=tuple(actions),
        interrupt_budget_ms=interrupt_budget_ms,
        request_timeout_ms=request_timeout_ms,
        turn_timeout_ms=turn_timeout_ms,
        teardown_ms=teardown_ms,
        experimental_api=experimental_api,
        opt_out=tuple(opt_out),
    )


def buckets(
    input: int = 0, cache_read: int = 0, cache_write: int = 0, output: int = 0, reasoning: int = 0
) -> UsageBuckets:
    return UsageBuckets(input, cache_read, cache_write, output, reasoning)


def expect_turn(
    status: str, *, usage: UsageBuckets | None = None, server_status: str | None = None, also: tuple[str, ...] = ()
) -> ExpectTurn:
    """``also``: other statuses a correct client may report (docs/scenarios.md)."""
    for key, value in [("status", status), *(("also", a) for a in also)]:
        if value not in RESULT_STATUSES:
            raise _err(f"expect.turns.{key}", f"one of {', '.join(RESULT_STATUSES)}", value)
    kept = tuple(a for a in dict.fromkeys(also) if a != status)
    return ExpectTurn(status, usage, server_status, kept)  # type: ignore[arg-type]


def allow(contract: str, what: str, count: int | None = None, reason: str = "") -> Allowance:
    return Allowance(contract, what, count, reason)


def expect(
    *turns: ExpectTurn,
    server_trace: str = "closed",
    client_trace: str = "closed",
    server_exit: int | None = None,
    allow: Iterable[Allowance] = (),
    notes: dict[str, Any] | None = None,
) -> Expect:
    for key, value in (("server_trace", server_trace), ("client_trace", client_trace)):
        if value not in TRACE_EXPECTATIONS:
            raise _err(f"expect.{key}", f"one of {', '.join(TRACE_EXPECTATIONS)}", value)
    return Expect(tuple(turns), server_trace, client_trace, server_exit, tuple(allow), dict(notes or {}))  # type: ignore[arg-type]


def config(
    *,
    approval_policy: str | None = None,
    sandbox: str = "read-only",
    stream_max_retries: int = 0,
    model: str = "mock-model",
    auto_review: str = "allow",
) -> dict[str, Any]:
    """Server settings; ``approval_policy`` None means "on-request" when an item needs approval; ``auto_review``:
    the approvals reviewer's verdict when the client sets ``approvalsReviewer: "auto_review"``."""
    return {
        "approval_policy": approval_policy,
        "sandbox": sandbox,
        "stream_max_retries": stream_max_retries,
        "model": model,
        "auto_review": auto_review,
    }


def scenario(
    name: str,
    description: str,
    *turns: TurnScript,
    client: ClientPlan | None = None,
    expect: Expect | None = None,
    config: dict[str, Any] | None = None,
    targets: Iterable[str] = TARGETS,
) -> Scenario:
    """The scenario, checked by the same rules as a TOML file (it round-trips through one)."""
    if not turns:
        raise _err("turns", "at least one turn")
    settings = dict(config or {})
    policy = settings.get("approval_policy")
    if policy is None:
        policy = default_approval_policy(turns)
    built = Scenario(
        name=name,
        description=description,
        turns=tuple(turns),
        client=client or ClientPlan(),
        expect=expect or Expect(),
        config=ServerConfig(
            approval_policy=policy,
            sandbox=settings.get("sandbox", "read-only"),
            stream_max_retries=settings.get("stream_max_retries", 0),
            model=settings.get("model", "mock-model"),
            auto_review=settings.get("auto_review", "allow"),
        ),
        targets=tuple(targets),
    )
    # The loader is the one place the rules live: a built scenario must survive a save and reload.
    checked = scenario_file.loads(scenario_file.dumps(built), SOURCE, name)
    return _without_source(checked)


def _without_source(s: Scenario) -> Scenario:
    from dataclasses import replace

    return replace(s, source=None)
