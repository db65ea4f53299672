"""Scenarios: what the model does, which faults strike where, what the client does, and the truth.

A scenario has three parts, in a TOML file (see ``docs/scenarios.md``) or built in Python
(:mod:`fake_server.builder`):

- ``[[turns]]``: per turn, the model's responses (one per Responses API request: streamed
  messages, reasoning, commands and file changes needing approval, usage, how the response ends)
  and the **faults** injected at points of the timeline;
- ``[client]``: what the client under test does (approval decisions, cancel / steer / resume
  actions, deadlines and the interrupt budget);
- ``[expect]``: the ground truth as literal values (:class:`contracts.expect.Expect`).

Model-level steps run on every target (the real binary gets them through the mock Responses
API); faults only a fake can produce make a scenario fake-only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from contracts.expect import Expect

TARGETS: tuple[str, ...] = ("fake", "fake-process", "real")
DEFAULT_INPUT = "Say hello"
DEFAULT_JUSTIFICATION = "The model wants to run this command"
DEFAULT_STEER_TEXT = "Also mention the weather."

# --- model side -------------------------------------------------------------------------------

ItemType = Literal["message", "reasoning", "command", "file_change"]
ResponseEnd = Literal["completed", "http_error", "failed", "disconnect"]
RESPONSE_ENDS: tuple[str, ...] = ("completed", "http_error", "failed", "disconnect")


@dataclass(frozen=True, slots=True)
class Usage:
    """Usage of one model response, as the Responses API reports it (input includes cached)."""

    input: int = 0
    cached: int = 0
    output: int = 0  # includes reasoning
    reasoning: int = 0

    @property
    def total(self) -> int:
        return self.input + self.output


@dataclass(frozen=True, slots=True)
class MessageItem:
    text: str
    deltas: tuple[str, ...]  # how the text streams; joined they equal `text`
    delay_ms: int = 0  # before each delta
    id: str | None = None  # Responses item id (msg-N when None)
    type: Literal["message"] = "message"


@dataclass(frozen=True, slots=True)
class ReasoningItem:
    summary: str
    deltas: tuple[str, ...]
    delay_ms: int = 0
    id: str | None = None  # rs_N when None
    type: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True, slots=True)
class CommandItem:
    command: str
    call_id: str | None = None  # call_N when None
    approval: bool = False  # escalated: needs a command approval
    justification: str = DEFAULT_JUSTIFICATION
    output: str = ""
    exit_code: int = 0
    duration_ms: int = 0  # how long the command runs once allowed
    type: Literal["command"] = "command"


@dataclass(frozen=True, slots=True)
class FileChangeItem:
    path: str
    content: str
    call_id: str | None = None
    approval: bool = True
    type: Literal["file_change"] = "file_change"


ModelItem = MessageItem | ReasoningItem | CommandItem | FileChangeItem


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """One model response: its output items in order, its usage, and how it ends.

    ``end``: ``completed`` (normal), ``http_error`` (the request fails with ``http_status``),
    ``failed`` (``response.failed`` with ``error``), ``disconnect`` (the stream is cut before
    ``response.completed``; retried when ``[config] stream_max_retries`` allows, else the turn fails).
    """

    items: tuple[ModelItem, ...] = ()
    usage: Usage | None = None
    end: ResponseEnd = "completed"
    error: str = "model error"
    http_status: int = 500


# --- faults -----------------------------------------------------------------------------------

#: Points of the timeline a fault can attach to. ``n`` counts occurrences within the turn (1-based).
FAULT_POINTS: tuple[str, ...] = (
    "initialize",  # when the initialize request arrives
    "start",  # right after turn/started
    "delta",  # after the n-th message delta of the turn
    "item_started",  # after the n-th item/started of the turn
    "approval_pending",  # once the n-th approval request of the turn is sent
    "usage",  # at the n-th usage notification of the turn
    "interrupt",  # when turn/interrupt arrives
    "end",  # where the turn would end (before thread/status idle + turn/completed)
    "after_end",  # after turn/completed
)

#: Fault kinds with their parameters (name -> default). ``None`` default: required.
FAULT_KINDS: dict[str, dict[str, Any]] = {
    "delayed_completion": {"delay_ms": None},
    "completion_after_interrupt": {"delay_ms": 0, "never": False},
    "interrupt_ignored": {},
    "interrupt_answer_missing": {},
    "duplicate_usage": {"count": 1},
    "replay_usage": {"count": 1},
    "drop_turn_completed": {},
    "crash": {"exit_code": 1, "mid_line": False},
    "hang": {},
    "stdout_closed": {},
    "grandchild_holds_stdout": {"hold_ms": 30000},
    "garbage_lines": {"count": 3, "text": "this is not JSON"},
    "oversized_line": {"size": 40 * 1024 * 1024},
    "invalid_utf8": {"count": 1},
    "stderr_flood": {"bytes": 1024 * 1024},
    "unknown_notification": {"method": "x/unknownNotification", "count": 1},
    "unknown_server_request": {"method": "x/unknownRequest"},
    "resolved_order": {"order": "after"},  # before | after | never, relative to turn/completed
    "late_events": {"count": 2},
    "duplicate_response_id": {},
    "overload": {"count": 1},
    "trace_unclosed_tool": {},
}

#: Default point per fault kind when the file gives none.
FAULT_DEFAULT_POINT: dict[str, str] = {
    "delayed_completion": "end",
    "completion_after_interrupt": "interrupt",
    "interrupt_ignored": "interrupt",
    "interrupt_answer_missing": "interrupt",
    "duplicate_usage": "usage",
    "replay_usage": "usage",
    "drop_turn_completed": "end",
    "crash": "delta",
    "hang": "start",
    "stdout_closed": "start",
    "grandchild_holds_stdout": "start",
    "garbage_lines": "start",
    "oversized_line": "start",
    "invalid_utf8": "start",
    "stderr_flood": "start",
    "unknown_notification": "start",
    "unknown_server_request": "start",
    "resolved_order": "interrupt",
    "late_events": "after_end",
    "duplicate_response_id": "start",
    "overload": "start",
    "trace_unclosed_tool": "interrupt",
}


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str
    at: str
    n: int = 1
    params: dict[str, Any] = field(default_factory=dict)

    def param(self, name: str) -> Any:
        if name in self.params:
            return self.params[name]
        return FAULT_KINDS[self.kind][name]


#: What a turn without scripted responses (and every turn beyond the script) gets.
DEFAULT_RESPONSE = ModelResponse(
    items=(MessageItem("Hello from the fake model!", ("Hello from ", "the fake model!")),),
    usage=Usage(input=100, cached=40, output=20, reasoning=0),
)
#: What follows a tool call when the script has no further response for the turn.
FOLLOW_UP_RESPONSE = ModelResponse(
    items=(MessageItem("Done.", ("Done.",)),),
    usage=Usage(input=150, cached=100, output=10, reasoning=0),
)


@dataclass(frozen=True, slots=True)
class TurnScript:
    input: str = DEFAULT_INPUT
    responses: tuple[ModelResponse, ...] = ()  # empty: (DEFAULT_RESPONSE,)
    faults: tuple[Fault, ...] = ()

    def response(self, index: int) -> ModelResponse:
        """The ``index``-th (0-based) model response of the turn.

        Unscripted turns play DEFAULT_RESPONSE; a request past the script (a follow-up after a
        tool call) plays FOLLOW_UP_RESPONSE.
        """
        scripted = self.responses or (DEFAULT_RESPONSE,)
        return scripted[index] if index < len(scripted) else FOLLOW_UP_RESPONSE


# --- client side ------------------------------------------------------------------------------

DECISIONS: tuple[str, ...] = ("accept", "acceptForSession", "decline", "cancel", "error")
ACTIONS: tuple[str, ...] = ("cancel", "steer", "resume")
ACTION_TRIGGERS: tuple[str, ...] = ("started", "delta", "item_started", "approval_pending", "delay")


@dataclass(frozen=True, slots=True)
class ClientAction:
    """Something the client does during turn ``turn`` (1-based).

    ``cancel``: cancel the caller's scope; ``steer``: send turn/steer with ``text``; ``resume``:
    thread/resume the thread before starting the turn. ``at``: when (``started`` = turn/started
    seen, ``delta`` = the n-th message delta, ``item_started`` = the n-th item/started,
    ``approval_pending`` = the n-th approval request, ``delay`` = ``delay_ms`` after turn/start);
    ``delay_ms`` more after the trigger.
    """

    turn: int
    do: Literal["cancel", "steer", "resume"]
    at: str = "started"
    n: int = 1
    delay_ms: int = 0
    text: str = DEFAULT_STEER_TEXT


@dataclass(frozen=True, slots=True)
class ClientPlan:
    approval: str = "accept"  # default decision for every approval request
    approvals: tuple[str, ...] = ()  # per request in order of arrival; overrides `approval`
    actions: tuple[ClientAction, ...] = ()
    interrupt_budget_ms: int = 2000
    request_timeout_ms: int = 30000
    turn_timeout_ms: int = 60000
    teardown_ms: int = 3000
    experimental_api: bool = False
    opt_out: tuple[str, ...] = ()

    def decision(self, index: int) -> str:
        """The decision for the ``index``-th (0-based) approval request of the session."""
        return self.approvals[index] if index < len(self.approvals) else self.approval

    def actions_for(self, turn: int) -> tuple[ClientAction, ...]:
        return tuple(a for a in self.actions if a.turn == turn)


# --- config and the whole -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Server-side settings the scenario needs (the real target writes them into config.toml)."""

    approval_policy: str = "never"  # "on-request" when any item needs approval
    sandbox: str = "read-only"
    stream_max_retries: int = 0
    model: str = "mock-model"


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    turns: tuple[TurnScript, ...]
    client: ClientPlan = field(default_factory=ClientPlan)
    expect: Expect = field(default_factory=Expect)
    config: ServerConfig = field(default_factory=ServerConfig)
    targets: tuple[str, ...] = TARGETS
    source: str | None = None  # the file it came from

    @property
    def faults(self) -> tuple[Fault, ...]:
        return tuple(f for t in self.turns for f in t.faults)

    @property
    def fake_only(self) -> bool:
        """Faults only a fake can produce: the real target skips the scenario."""
        return bool(self.faults)

    def supports(self, target: str) -> tuple[bool, str]:
        """Whether the scenario runs on ``target``, and the reason when it does not."""
        if target not in self.targets:
            return False, f"scenario {self.name} declares targets {', '.join(self.targets)}"
        if target == "real" and self.fake_only:
            kinds = ", ".join(sorted({f.kind for f in self.faults}))
            return False, f"fault {kinds} can only be produced by the fake app-server"
        return True, ""

    def turn(self, index: int) -> TurnScript:
        """Turn ``index`` (0-based); turns beyond the script are plain message turns."""
        return self.turns[index] if index < len(self.turns) else TurnScript()
