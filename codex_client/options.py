"""What a session runs with: :class:`SessionOptions` (times, bounds, switches) and the :class:`ClientInfo` it
announces in ``initialize``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts import budget_defaults
from contracts.record import Budgets
from contracts.wire import DEFAULT_MAX_LINE


@dataclass(frozen=True, slots=True)
class ClientInfo:
    name: str = "codex_harness"
    title: str | None = "codex-harness"
    version: str = "0.1.0"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "version": self.version}
        if self.title is not None:
            data["title"] = self.title
        return data


@dataclass(frozen=True, slots=True)
class SessionOptions:
    """What a session runs with. Times are seconds on the session clock."""

    client_info: ClientInfo = field(default_factory=ClientInfo)
    experimental_api: bool = False  # stable by default; opt in explicitly
    opt_out_notifications: tuple[str, ...] = ()
    request_timeout: float = budget_defaults.REQUEST_TIMEOUT_MS / 1000  # initialize, turn/start, turn/steer, others
    thread_timeout: float = 60.0  # thread/start, thread/resume
    # initialize's bound is at least this: its answer waits for the server process to start, which takes
    # seconds on a loaded machine, while request_timeout is meant for a running server's requests
    startup_timeout: float = budget_defaults.STARTUP_TIMEOUT_MS / 1000
    interrupt_budget: float = budget_defaults.INTERRUPT_BUDGET_MS / 1000  # ONE budget: interrupt answer + completion
    teardown_timeout: float = budget_defaults.TEARDOWN_MS / 1000  # bound of the whole teardown
    turn_timeout: float | None = None  # hard deadline per turn -> Result `timeout`
    inactivity_timeout: float | None = 600.0  # semantic inactivity, paused while an approval is pending
    approval_timeout: float = 60.0  # a policy past this answers `cancel`
    exit_grace: float = 0.1  # at stdout EOF, how long to wait for the exit status before failing the turn
    max_line: int = DEFAULT_MAX_LINE
    event_buffer: int = 65536  # events kept per turn for the iterator; beyond, events are dropped and counted
    initialize: bool = True  # open_session does initialize + initialized
    trace_dir: Path | None = None  # the client's trace bundle directory (manifest.json inside); None: no bundle
    trace_marker_events: str = "protocol_event"  # approval/interrupt steps as protocol events (replayable) or "other"
    # validate every frame sent and received with jsonschema-rs as it passes (the schema contract validates the
    # record afterwards either way); findings go to Session.schema_violations
    validate_frames: bool = False
    # thread/resume asks `excludeTurns` (the turns are not replayed in its answer); off where the release takes
    # the field only behind experimentalApi and the client did not opt in (contracts.stable_params)
    resume_exclude_turns: bool = True

    def budgets(self) -> Budgets:
        return Budgets(
            interrupt_s=self.interrupt_budget, teardown_s=self.teardown_timeout, request_s=self.request_timeout
        )
