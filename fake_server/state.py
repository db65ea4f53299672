"""The connection's state: threads, turns, pending server requests, the waits a turn program yields, and what the
methods beyond the turn core remember (names, archives, forks, goals, sections, watches)."""

from __future__ import annotations

from collections import deque
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from contracts.messages import ErrorResponse, JsonId, Response
from contracts.scenario import CommandItem, FileChangeItem, TurnScript, Usage
from fake_server.profiles import Profile, default

# --- what a turn program yields ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sleep:
    """Resume after ``ms`` of scripted time (the deployment's clock, virtual under MockClock)."""

    ms: int


@dataclass(frozen=True, slots=True)
class NextAnswer:
    """Resume with the next :class:`Answer` to one of this turn's approval requests."""


@dataclass(frozen=True, slots=True)
class Park:
    """Never resume on its own (the turn waits for an interrupt, a steer, or nothing at all)."""


Wait: TypeAlias = Sleep | NextAnswer | Park
Program: TypeAlias = Generator[Wait, Any, None]
#: A part of a program that tells its caller whether to go on (``more = yield from part(...)``).
ProgramPart: TypeAlias = Generator[Wait, Any, bool]


@dataclass(slots=True)
class Answer:
    request_id: JsonId
    response: Response | ErrorResponse


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """A tool that was running in the background has ended (resumes a program waiting in NextAnswer)."""

    call_id: str


@dataclass(slots=True)
class Tool:
    """A tool item of the running model response (command or file change)."""

    item: CommandItem | FileChangeItem
    item_id: str
    started_ms: int
    request_id: JsonId | None = None  # its approval request, while pending
    answered: bool = False  # its approval request got an answer (or was abandoned)
    done: bool = False  # its item ended
    decision: str | None = None
    #: what the release does with it under the thread's settings (fake_server.policy): ask | review | run | reject
    outcome: str = "run"


@dataclass(slots=True)
class TurnRun:
    """One turn from turn/start to turn/completed."""

    thread_id: str
    turn_id: str
    index: int  # 0-based over the session: which scenario turn it plays
    script: TurnScript
    started_ms: int
    max_retries: int = 0  # [config] stream_max_retries: reconnects a cut stream gets
    experimental: bool = False  # the client asked for experimentalApi (thread/readState/changed)
    profile: Profile = field(default_factory=default)  # the release played (fake_server.profiles)
    program: Program | None = None
    timer: int | None = None  # token of the pending wake, if any
    answers: deque[Answer] = field(default_factory=deque)
    waiting_answer: bool = False
    response_index: int = 0
    retries: int = 0
    tools: list[Tool] = field(default_factory=list)
    deferred_usage: Usage | None = None
    agent_messages: list[dict[str, Any]] = field(default_factory=list)
    history_items: list[dict[str, Any]] = field(default_factory=list)  # completed user/agent messages, in order
    pending_interrupts: list[JsonId] = field(default_factory=list)
    landing: bool = False  # interrupt_delayed: an interrupt is on its way; later ones wait with it
    counts: dict[str, int] = field(default_factory=dict)  # fault points reached
    diff: str = ""
    ended: bool = False
    drop_completed: bool = False
    trace_bug: bool = False  # trace_unclosed_tool: a pending tool's end is never traced
    last_message_id: str | None = None
    model_items: list[dict[str, Any]] = field(default_factory=list)  # Responses items of the current response

    tool_timers: list[int] = field(default_factory=list)
    auto_review: str = "allow"  # [config] auto_review: the approvals reviewer's verdict
    # turn/start on the busy thread and turn/steer: input waiting for the next model request, in order
    pending_input: list[str] = field(default_factory=list)
    flush_timer: int | None = None

    @property
    def shapes(self) -> Any:
        """The field sets of the frames the release played writes (:class:`fake_server.shapes.Shapes`)."""
        return self.profile.shapes

    def pending_requests(self) -> list[JsonId]:
        return [t.request_id for t in self.tools if t.request_id is not None and not t.answered and not t.done]


@dataclass(slots=True)
class ThreadState:
    thread_id: str
    cwd: str
    created_ms: int
    ephemeral: bool
    path: str | None
    approval_policy: Any  # a policy name, or {"granular": {...}}
    sandbox: str
    model: str
    reviewer: str = "user"  # approvalsReviewer: user | auto_review
    status: dict[str, Any] = field(default_factory=lambda: {"type": "idle"})
    preview: str = ""  # the first user message, once a turn has run
    turns: list[str] = field(default_factory=list)
    active: TurnRun | None = None
    total: Usage = field(default_factory=Usage)
    usage_frames: list[dict[str, Any]] = field(default_factory=list)  # every usage notification sent
    history: list[dict[str, Any]] = field(default_factory=list)  # finished turns, full view (thread/resume)
    model_provider: str | None = None  # the home's setup's provider (None: the release's recorded one)

    @property
    def first_turn_id(self) -> str:
        """The first finished turn's id: a thread kept in CODEX_HOME knows it without its history being read
        (fake_server.home_store.StoredHistory)."""
        first = getattr(self.history, "first_id", None)
        return first if isinstance(first, str) else str(self.history[0]["id"])


# --- what the methods beyond the turn core remember -------------------------------------------

PINNED_SECTION_ID = "01984de2-8f74-7c91-a3b2-5c5e937cf318"  # the real server's built-in "Pinned" section


@dataclass(slots=True)
class ThreadExtra:
    name: str | None = None
    forked_from: str | None = None
    archived: bool = False
    loaded: bool = True
    deleted: bool = False
    materialised: bool = False  # its rollout can be found by id (a turn ran, it was named or forked)
    from_store: bool = False  # an earlier process of this CODEX_HOME left it (fake_server.home_store)
    # its rollout holds its model (a turn context) with no turn: written by inject_items and thread/revert
    model_written: bool = False
    section: str | None = None
    goal: dict[str, Any] | None = None
    revision: str | None = None
    git_info: dict[str, Any] | None = None


@dataclass(slots=True)
class SurfaceState:
    threads: dict[str, ThreadExtra] = field(default_factory=dict)
    sections: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {PINNED_SECTION_ID: {"id": PINNED_SECTION_ID, "name": "Pinned", "appearance": None}}
    )
    attachments: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)  # (thread, type, key)
    watches: dict[str, str] = field(default_factory=dict)  # watchId -> path
    config_version: int = 0
    config_values: dict[str, Any] = field(default_factory=dict)  # config/value/write and batchWrite
    fs: Any = None  # fs_search.Overlay, made on first use
    elicitations: dict[str, int] = field(default_factory=dict)  # thread id -> paused count
    search_sessions: dict[str, list[str]] = field(default_factory=dict)  # fuzzy search session -> roots
    method_counts: dict[str, int] = field(default_factory=dict)  # requests per method ([[methods]] n)

    def extra(self, thread_id: str) -> ThreadExtra:
        extra = self.threads.get(thread_id)
        if extra is None:
            extra = self.threads[thread_id] = ThreadExtra()
        return extra
