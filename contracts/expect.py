"""The ground truth of a scenario (its ``[expect]`` part), written as literal values.

Contracts judge a session record against this and excuse only what it declares; ground truth
never comes from harness code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from contracts.usage import UsageBuckets

ResultStatus = Literal["completed", "aborted", "failed", "timeout"]
TraceExpectation = Literal["closed", "unclosed", "violation", "none"]

RESULT_STATUSES: tuple[str, ...] = ("completed", "aborted", "failed", "timeout")
TRACE_EXPECTATIONS: tuple[str, ...] = ("closed", "unclosed", "violation", "none")
#: what ``[expect.release."X"]`` may change
RELEASE_KEYS: tuple[str, ...] = ("server_trace", "client_trace", "server_exit")


def switch_matches(condition: str, switches: Mapping[str, Any]) -> bool:
    """``NAME`` (the switch is on) or ``NAME=VALUE`` against a release's switches (absent: not on)."""
    name, sep, value = condition.partition("=")
    have = switches.get(name)
    return str(have).lower() == value.lower() if sep else have is True


@dataclass(frozen=True, slots=True)
class ExpectTurn:
    """One turn's truth: the client's Result status and its usage per bucket (None: not checked)."""

    status: ResultStatus
    usage: UsageBuckets | None = None
    #: ``turn.status`` of the server's turn/completed (completed / interrupted / failed), or "none"
    #: when the server never sends one (crash, hang); None: not checked.
    server_status: str | None = None
    #: other Result statuses a correct client may report (``also`` in the file): the truth is what any
    #: correct client may do, not what one client does (after an unknown server request answered with an
    #: error, one fails the turn, another lets it complete as the server says).
    also: tuple[ResultStatus, ...] = ()

    @property
    def statuses(self) -> tuple[ResultStatus, ...]:
        """Every Result status this turn may end with: ``status`` first."""
        return (self.status, *(s for s in self.also if s != self.status))


@dataclass(frozen=True, slots=True)
class Allowance:
    """A violation the scenario's faults legitimately cause, excused by the named contract.

    ``what`` names the kind of violation (for example ``server_frames_invalid``,
    ``wire_errors``, ``unknown_response_id``, ``late_events``); ``count`` is exact when given.
    """

    contract: str
    what: str
    count: int | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Expect:
    turns: tuple[ExpectTurn, ...] = ()
    #: verdict of the server's trace bundle when the target writes one
    server_trace: TraceExpectation = "closed"
    #: verdict of the client's own trace bundle (always closed for a correct client)
    client_trace: TraceExpectation = "closed"
    #: the server's exit status after the session (None: not checked); a crash fault sets it
    server_exit: int | None = None
    allow: tuple[Allowance, ...] = ()
    notes: dict[str, Any] = field(default_factory=dict)
    #: ``[expect.release."X"]``: what differs on release X (the fake's profile or the real binary of X);
    #: only the trace verdicts and the server exit (RELEASE_KEYS), e.g. a bundle a release leaves unclosed.
    releases: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: ``[expect.switch.NAME]`` / ``[expect.switch."NAME=VALUE"]``: what differs on any release whose learned
    #: switch NAME is on (or has VALUE), shipped or learned, whatever its version (the same keys as a release's)
    switches: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: ``[[expect.or]]``: other courses the session may take with a correct client, each a whole truth of its
    #: own (one client fails the turn on a 40 MiB line, another reads it whole and the turn completes). The
    #: client's Result statuses select the course (:meth:`course_for`).
    alternatives: tuple[Expect, ...] = ()
    #: why this course is one a correct client may take (``why`` of an ``[[expect.or]]``; empty for the first)
    why: str = ""

    def for_release(self, release: str | None, switches: Mapping[str, Any] | None = None) -> Expect:
        """This truth as it holds on ``release`` whose learned ``switches`` are given: the overrides of every
        ``[expect.switch]`` block the switches match, then the release's own (the same when none applies)."""
        overrides: dict[str, Any] = {}
        for condition, values in self.switches.items():
            if switch_matches(condition, switches or {}):
                overrides.update(values)
        overrides.update(self.releases.get(release or "", {}))
        alternatives = tuple(a.for_release(release, switches) for a in self.alternatives)
        if not overrides:
            return replace(self, alternatives=alternatives) if alternatives != self.alternatives else self
        return replace(self, **overrides, alternatives=alternatives)

    def course_for(self, statuses: dict[int, str]) -> Expect:
        """The course whose turns allow every reported status (turn index → Result status); this one first,
        and this one when none does (its checks then say what differs)."""
        for course in (self, *self.alternatives):
            if all(i >= len(course.turns) or s in course.turns[i].statuses for i, s in statuses.items()):
                return course
        return self

    def allowance(self, contract: str, what: str) -> Allowance | None:
        for item in self.allow:
            if item.contract == contract and item.what == what:
                return item
        return None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "turns": [_turn_to_dict(t) for t in self.turns],
            "server_trace": self.server_trace,
            "client_trace": self.client_trace,
        }
        if self.server_exit is not None:
            data["server_exit"] = self.server_exit
        if self.allow:
            data["allow"] = [
                {
                    k: v
                    for k, v in (("contract", a.contract), ("what", a.what), ("count", a.count), ("reason", a.reason))
                    if v is not None and v != ""
                }
                for a in self.allow
            ]
        if self.notes:
            data["notes"] = dict(self.notes)
        if self.releases:
            data["release"] = {k: dict(v) for k, v in self.releases.items()}
        if self.switches:
            data["switch"] = {k: _overrides_to_dict(v) for k, v in self.switches.items()}
        if self.alternatives:
            data["or"] = [a.to_dict() for a in self.alternatives]
        if self.why:
            data["why"] = self.why
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Expect:
        """Trusting constructor for saved records; scenario files go through the scenario loader's checks."""
        return cls(
            turns=_turns_from(data.get("turns", ())),
            server_trace=data.get("server_trace", "closed"),
            client_trace=data.get("client_trace", "closed"),
            server_exit=data.get("server_exit"),
            allow=tuple(
                Allowance(a["contract"], a["what"], a.get("count"), a.get("reason", "")) for a in data.get("allow", ())
            ),
            notes=dict(data.get("notes", {})),
            releases={str(k): dict(v) for k, v in data.get("release", {}).items()},
            switches={str(k): _overrides_from(v) for k, v in data.get("switch", {}).items()},
            alternatives=tuple(cls.from_dict(a) for a in data.get("or", ())),
            why=str(data.get("why", "")),
        )


def _turns_from(turns: Any) -> tuple[ExpectTurn, ...]:
    return tuple(
        ExpectTurn(
            status=t["status"],
            usage=UsageBuckets.from_dict(t["usage"]) if t.get("usage") is not None else None,
            server_status=t.get("server_status"),
            also=tuple(t.get("also", ())),
        )
        for t in turns
    )


def _overrides_to_dict(overrides: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(overrides)
    if "turns" in out:
        out["turns"] = [_turn_to_dict(t) for t in out["turns"]]
    return out


def _overrides_from(data: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(data)
    if "turns" in out:
        out["turns"] = _turns_from(out["turns"])
    return out


def _turn_to_dict(turn: ExpectTurn) -> dict[str, Any]:
    data: dict[str, Any] = {"status": turn.status}
    if turn.usage is not None:
        u = turn.usage
        data["usage"] = {"input": u.input, "cache_read": u.cache_read, "cache_write": u.cache_write, "output": u.output}
        if u.reasoning:
            data["usage"]["reasoning"] = u.reasoning
    if turn.server_status is not None:
        data["server_status"] = turn.server_status
    if turn.also:
        data["also"] = list(turn.also)
    return data
