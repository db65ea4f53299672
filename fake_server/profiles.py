"""Release profiles: which codex-cli release the fake plays, as data plus a few small hooks.

The engine is one (it behaves like 0.171.0); a profile names what an older release does differently, each
difference measured on the real release (``codex-harness diff --scenario NAME --codex <release>`` over every
model-level built-in scenario, recordings under ``tests/data/real/<release>/``):

- its ``--version`` answer and the version in ``initialize``'s ``userAgent`` and in thread objects;
- its pinned wire schema (``contracts/schema/codex-cli-<release>``), from which its client methods come;
- the trace bundle format it writes (envelope schema 1, 2 or 3: :data:`contracts.trace.format.FORMATS`);
- ``diff_after_tools``: 0.163.0 and 0.169.0 send one more ``turn/diff/updated`` once a response whose file
  change completed has had its usage reported (after ``account/rateLimits/updated``);
- ``not_written``: fields 0.163.0 does not write yet (items' ``startedAtMs``, ``completedAtMs`` and
  ``moderation``, ``contentTokenCount`` of ``item/completed``, threads' ``attachedToThreadId``), taken out of
  every frame the fake sends (:meth:`Profile.reshape_frame`);
- ``abort_leaves_tools_open``: on 0.163.0 and 0.169.0 a turn aborted (interrupt, or an approval answered
  ``cancel``) never ends its open tool calls in the trace bundle, pending approval or running (closure
  invariants 3 and 5 fail; fixed in 0.171.0): :class:`fake_server.server_trace.ServerTrace` leaves them open.
- ``trace_history``: which ``history_item_accepted`` events the bundle has: none (0.163.0); the context,
  input, output and tool-output items by id (0.169.0); the same with each tool output's payload (0.171.0).
- ``failed_turn_traced``: the status of a failed turn's ``codex_turn_ended`` (0.163.0 writes ``completed``).

Which profile plays: ``fake-codex --release X`` > ``$FAKE_CODEX_RELEASE`` > the scenario's ``release`` key >
:data:`DEFAULT_RELEASE` (:func:`select`). An unknown release given by flag or environment is a usage error that
lists the profiles (exit 3); one a scenario names makes the scenario invalid (:func:`playable`, exit 2, naming
the file), as every other key a scenario gets wrong.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from contracts.exitcodes import UsageError
from contracts.scenario import Scenario
from contracts.scenario_file import ScenarioError

RELEASE_ENV: Final = "FAKE_CODEX_RELEASE"
DEFAULT_RELEASE: Final = "0.171.0"


@dataclass(frozen=True, slots=True)
class Profile:
    release: str
    trace_schema: int  # the rollout-trace envelope schema this release writes
    diff_after_tools: bool = False
    abort_leaves_tools_open: bool = False
    trace_history: str = "output"  # none | ids | output
    failed_turn_traced: str = "failed"
    #: (where, field) the release does not write: ``item`` (any item object), ``thread``, or a method's params
    not_written: frozenset[tuple[str, str]] = frozenset()

    @property
    def schema_release(self) -> str:
        """The pinned wire schema frames of this profile validate against (every profile has its own pin)."""
        return self.release

    @property
    def version_line(self) -> str:
        return f"codex-cli {self.release}"

    def client_methods(self) -> frozenset[str]:
        """The client request methods of this release's pinned experimental schema (empty: no pin readable)."""
        return _client_methods(self.schema_release)

    def reshape_frame(self) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
        """A function taking the fields this release does not write out of a frame (a copy); None: none to take."""
        if not self.not_written:
            return None
        fields: dict[str, frozenset[str]] = {}
        for where, name in self.not_written:
            fields[where] = fields.get(where, frozenset()) | {name}
        return functools.partial(_reshape, fields)

    def missing_methods(self) -> frozenset[str]:
        """Client methods the newest profile knows and this release's pin does not: "unknown variant" here."""
        return _missing_methods(self.release)


PROFILES: Final[dict[str, Profile]] = {
    "0.163.0": Profile(
        "0.163.0",
        trace_schema=1,
        diff_after_tools=True,
        abort_leaves_tools_open=True,
        trace_history="none",
        failed_turn_traced="completed",
        not_written=frozenset(
            {
                ("item", "startedAtMs"),
                ("item", "completedAtMs"),
                ("item", "moderation"),
                ("thread", "attachedToThreadId"),
                ("item/completed", "contentTokenCount"),
            }
        ),
    ),
    "0.169.0": Profile(
        "0.169.0", trace_schema=2, diff_after_tools=True, abort_leaves_tools_open=True, trace_history="ids"
    ),
    "0.171.0": Profile("0.171.0", trace_schema=3),
}
DEFAULT: Final = PROFILES[DEFAULT_RELEASE]


class UnknownRelease(UsageError):
    """A release the fake has no profile for (exit 3); ``str()`` lists the profiles."""


def names() -> list[str]:
    return list(PROFILES)


def get(release: str) -> Profile:
    profile = PROFILES.get(release.strip())
    if profile is None:
        raise UnknownRelease(f"no release profile {release!r} (profiles: {', '.join(PROFILES)})")
    return profile


def playable(scenario: Scenario) -> Scenario:
    """``scenario`` once the ``release`` it names has a profile; else :class:`ScenarioError` naming its file."""
    if scenario.release and scenario.release.strip() not in PROFILES:
        expected = f"a release the fake has a profile for ({', '.join(PROFILES)})"
        raise ScenarioError(scenario.source or scenario.name, "release", expected, scenario.release)
    return scenario


def select(flag: str | None = None, env: str | None = None, scenario: str | None = None) -> Profile:
    """The profile to play: the first of flag, environment, scenario that is set; else the default."""
    for value in (flag, env, scenario):
        if value:
            return get(value)
    return DEFAULT


def nearest(version: str) -> tuple[Profile, bool]:
    """The profile for a binary's ``version``: its own, else the newest not newer than it (else the oldest).

    Returns (profile, exact).
    """
    from contracts.schema_store import version_key

    if version in PROFILES:
        return PROFILES[version], True
    key = version_key(version)
    older = [p for p in PROFILES.values() if version_key(p.release) <= key]
    if older:
        return max(older, key=lambda p: version_key(p.release)), False
    return min(PROFILES.values(), key=lambda p: version_key(p.release)), False


def _strip(value: Any, fields: dict[str, frozenset[str]], where: str | None) -> Any:
    """``value`` without the fields of ``where`` (its key: ``item``, an element of ``items``, ``thread``), deeply."""
    if isinstance(value, list):
        return [_strip(v, fields, where) for v in value]
    if not isinstance(value, dict):
        return value
    drop = fields.get(where or "", frozenset())
    return {k: _strip(v, fields, _where(k)) for k, v in value.items() if k not in drop}


def _where(key: str) -> str | None:
    return "item" if key in ("item", "items") else "thread" if key in ("thread", "threads", "data") else key


def _reshape(fields: dict[str, frozenset[str]], frame: dict[str, Any]) -> dict[str, Any]:
    out = dict(frame)
    for part in ("params", "result"):
        if isinstance(out.get(part), dict):
            body = _strip(out[part], fields, None)
            top = fields.get(str(frame.get("method")), frozenset())
            out[part] = {k: v for k, v in body.items() if k not in top}
    return out


@functools.cache
def _missing_methods(release: str) -> frozenset[str]:
    if release == DEFAULT_RELEASE:
        return frozenset()
    mine = _client_methods(release)
    return _client_methods(DEFAULT_RELEASE) - mine if mine else frozenset()


@functools.cache
def _client_methods(release: str) -> frozenset[str]:
    try:
        from fake_server.methods import pinned_client_requests

        return frozenset(pinned_client_requests(release)[1])
    except Exception:  # a missing pin only makes the fake less strict about method names
        return frozenset()
