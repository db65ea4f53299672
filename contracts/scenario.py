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

from contracts import budget_defaults, triggers
from contracts.expect import Expect
from contracts.faults import FAULT_DEFAULT_POINT as FAULT_DEFAULT_POINT  # re-exported
from contracts.faults import FAULT_KINDS, fake_only
from contracts.faults import FAULT_POINTS as FAULT_POINTS  # re-exported

# The probe bounds live with the placeholders (contracts.probe_refs.BOUNDS, the docs table); re-exported.
from contracts.probe_refs import MAX_PROBE_LINE_BYTES as MAX_PROBE_LINE_BYTES
from contracts.probe_refs import MAX_PROBE_WAIT_MS as MAX_PROBE_WAIT_MS
from contracts.probe_refs import MAX_PROBE_WAITS_MS as MAX_PROBE_WAITS_MS
from contracts.probe_refs import MAX_PROBES as MAX_PROBES

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
    #: the file's ``repeat``: ``text`` is its ``text`` that many times (a large message in a small file);
    #: kept so that writing the scenario back gives the small file again
    repeat: int = 1


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

#: Points, kinds, their parameters and bounds: one table, :mod:`contracts.faults` (re-exported here).
#: ``n`` counts occurrences of a point within the turn (1-based).


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


#: When a probe step runs: ``start`` before the handshake, ``thread`` after it (initialize, initialized,
#: thread/start; with ``handshake = false`` the same moment as ``start``), ``end`` after the last turn.
PROBE_POINTS: tuple[str, ...] = ("start", "thread", "end")
#: A probe param value that stands for the session's thread id (the handshake's, or the last a probe started).
THREAD_PLACEHOLDER = "${thread}"
#: The session's working directory on the target (contracts.probe_refs has ``${answer.<step>.<path>}``).
CWD_PLACEHOLDER = "${cwd}"


@dataclass(frozen=True, slots=True)
class ClientProbe:
    """One step the client takes outside its normal conversation, to see how the server answers.

    Exactly one of: ``send`` (a request: its method, with ``params``, None: no ``params`` key; the
    client waits for the answer, an error answer is what the probe is for), ``raw`` (one line written
    verbatim, a newline added; a line that parses as a request waits for the answer with its id),
    ``close_stdin`` (the server's stdin closed; the client waits for its exit). ``wait_ms``: time left
    to the server after the step (a line no one answers).
    """

    at: str = "thread"
    send: str | None = None
    params: dict[str, Any] | None = None
    raw: str | None = None
    close_stdin: bool = False
    wait_ms: int = 0
    #: a name later steps use in ``${answer.<id>.<path>}`` (they may use the step's index as well)
    id: str | None = None
    #: send the request and go on without waiting for its answer (two requests back to back); its answer
    #: cannot be named by ``${answer...}``
    no_wait: bool = False
    #: a server notification to wait for after the step (its first one after the step was taken), at
    #: most the plan's turn timeout: a ``turn/start`` probe waits for its ``turn/completed``
    until: str | None = None

    @property
    def kind(self) -> str:
        return "send" if self.send is not None else "raw" if self.raw is not None else "close_stdin"


@dataclass(frozen=True, slots=True)
class ClientFile:
    """A file put in the session's work directory before the server starts (``[[client.files]]``)."""

    path: str  # relative, inside the work directory (contracts.probe_refs.check_file_path)
    text: str


@dataclass(frozen=True, slots=True)
class ClientPlan:
    approval: str = "accept"  # default decision for every approval request
    approvals: tuple[str, ...] = ()  # per request in order of arrival; overrides `approval`
    actions: tuple[ClientAction, ...] = ()
    interrupt_budget_ms: int = budget_defaults.INTERRUPT_BUDGET_MS
    request_timeout_ms: int = budget_defaults.REQUEST_TIMEOUT_MS
    turn_timeout_ms: int = budget_defaults.TURN_TIMEOUT_MS
    teardown_ms: int = budget_defaults.TEARDOWN_MS
    experimental_api: bool = False
    opt_out: tuple[str, ...] = ()
    handshake: bool = True  # false: the client sends nothing of its own; the probes do it all
    #: false: the client starts none of the [[turns]]; they only script the model side of the turns the
    #: probe steps start (``turn/start`` probes, so input can be timed inside a turn)
    play_turns: bool = True
    probes: tuple[ClientProbe, ...] = ()
    files: tuple[ClientFile, ...] = ()
    approval_delay_ms: int = 0  # how long the user takes to answer each approval request
    #: how long the client waits for the server's first answer (``initialize``), counted from the server process's
    #: start: a process start (an interpreter's imports, the npm wrapper) is not a request being late
    startup_timeout_ms: int = budget_defaults.STARTUP_TIMEOUT_MS

    def probes_at(self, at: str) -> tuple[ClientProbe, ...]:
        return tuple(p for p in self.probes if p.at == at)

    def decision(self, index: int) -> str:
        """The decision for the ``index``-th (0-based) approval request of the session."""
        return triggers.decision(index, self.approvals, self.approval)

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
    #: the approvals reviewer model's verdict (``approvalsReviewer: "auto_review"``): ``allow`` or ``deny``
    auto_review: str = "allow"


def default_approval_policy(turns: tuple[TurnScript, ...] | list[TurnScript]) -> str:
    """The ``approval_policy`` of a scenario that names none: ``on-request`` when an item asks for approval."""
    asks = any(getattr(item, "approval", False) for t in turns for r in t.responses for item in r.items)
    return "on-request" if asks else "never"


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    turns: tuple[TurnScript, ...]
    client: ClientPlan = field(default_factory=ClientPlan)
    expect: Expect = field(default_factory=Expect)
    config: ServerConfig = field(default_factory=ServerConfig)
    targets: tuple[str, ...] = TARGETS
    #: the codex-cli release the fake plays (``release`` key; ``fake-codex --release`` and
    #: ``$FAKE_CODEX_RELEASE`` come first; None: the default release); the real target plays its own binary
    release: str | None = None
    source: str | None = None  # the file it came from
    methods: tuple[Any, ...] = ()  # [[methods]]: contracts.method_overrides.MethodOverride, fake-only

    @property
    def approval_turns(self) -> list[int]:
        """The turns whose model side scripts a tool call that asks an approval under the scenario's own settings
        (their truth rests on it: :mod:`contracts.played_path`)."""
        return [
            i
            for i, turn in enumerate(self.turns)
            if any(
                isinstance(item, CommandItem | FileChangeItem) and item.approval
                for response in turn.responses
                for item in response.items
            )
        ]

    @property
    def faults(self) -> tuple[Fault, ...]:
        return tuple(f for t in self.turns for f in t.faults)

    @property
    def fake_only(self) -> bool:
        """Faults only a fake can produce (the registry's flag): the real target skips the scenario."""
        return any(fake_only(f.kind) for f in self.faults) or bool(self.methods)

    def supports(self, target: str) -> tuple[bool, str]:
        """Whether the scenario runs on ``target``, and the reason when it does not."""
        if target not in self.targets:
            return False, f"scenario {self.name} declares targets {', '.join(self.targets)}"
        if target == "real" and self.methods:
            return False, "scripted answers ([[methods]]) can only be produced by the fake app-server"
        if target == "real" and self.fake_only:
            kinds = ", ".join(sorted({f.kind for f in self.faults if fake_only(f.kind)}))
            return False, f"fault {kinds} can only be produced by the fake app-server"
        return True, ""

    def turn(self, index: int) -> TurnScript:
        """Turn ``index`` (0-based); turns beyond the script are plain message turns."""
        return self.turns[index] if index < len(self.turns) else TurnScript()
