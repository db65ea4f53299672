"""Release profiles: the release the fake plays, read from that release's folder (:mod:`contracts.releases`).

The engine is release-neutral; what a release's fake plays is data of its folder, each difference measured on
the real release (``codex-harness diff --scenario NAME --codex <release>`` over every model-level built-in
scenario, recordings under ``tests/data/real/<release>/``):

- its version (``--version``, the ``userAgent`` of ``initialize``, threads' ``cliVersion``): the folder's;
- its client methods: its schema pin's, with those the deserializer lists beyond it (``release.json``'s
  ``methods``); the rest get ``-32600 unknown variant``;
- the frames it builds: the field sets of its ``shapes.json`` (:mod:`fake_server.shapes`) and the answers
  recorded in its ``answers.json`` (:mod:`fake_server.surface.static`);
- the trace bundle format it writes (``release.json``'s ``trace``);
- ``fake.switches``: the named turn-flow differences of :data:`SWITCHES`; a switch a folder does not name
  plays its neutral value (the engine's own behaviour);
- ``fake.not_written``: fields the release does not write, taken out of every frame the fake sends
  (:meth:`Profile.reshape_frame`), as ``[where, field]``: ``item`` (any item object), ``thread``, or a
  method (the top level of its params or result).

Which profile plays: ``fake-codex --release X`` > ``$FAKE_CODEX_RELEASE`` > the scenario's ``release`` key >
the default release (:func:`select`). An unknown release given by flag or environment is a usage error that
lists the profiles (exit 3): every release, shipped or in the user's store, whose folder has a ``fake`` part;
one a scenario names makes the scenario invalid (:func:`playable`, exit 2, naming the file), as every other key a
scenario gets wrong.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from contracts import releases, schema_store
from contracts.exitcodes import UsageError
from contracts.releases import MethodTable, Release, ReleaseError

if TYPE_CHECKING:  # not at run time: `fake-codex --version` needs neither (bench/fake_start.py)
    from contracts.scenario import Scenario
    from contracts.trace_format import BundleFormat

RELEASE_ENV: Final = "FAKE_CODEX_RELEASE"


@dataclass(frozen=True, slots=True)
class Switch:
    """A named way a release's turns differ from the engine's own behaviour (its neutral value)."""

    values: tuple[bool | str, ...]
    neutral: bool | str
    meaning: str


SWITCHES: Final[dict[str, Switch]] = {
    "diff_after_tools": Switch(
        (False, True),
        False,
        "one more turn/diff/updated once a response whose file change completed has had its usage reported "
        "(after account/rateLimits/updated)",
    ),
    "abort_leaves_tools_open": Switch(
        (False, True),
        False,
        "a turn aborted (interrupt, or an approval answered cancel) never ends its open tool calls in the trace "
        "bundle, pending approval or running (closure invariants 3 and 5 fail)",
    ),
    "trace_history": Switch(
        ("none", "ids", "output"),
        "output",
        "which history_item_accepted events the bundle has: none; the context, input, output and tool-output "
        "items by id; the same with each tool output's payload",
    ),
    "failed_turn_traced": Switch(("failed", "completed"), "failed", "the status of a failed turn's codex_turn_ended"),
    "input_while_streaming": Switch(
        ("abandons", "waits"),
        "abandons",
        "input that arrives while the model streams (turn/steer, turn/start on the busy thread): the stream is "
        "abandoned and the model called again at once with it; or the response streams to its end (its item "
        "completed, its usage reported) and the input goes with the next model request",
    ),
}


@dataclass(frozen=True)
class Profile:
    release: str
    trace: BundleFormat  # the rollout-trace bundle format this release writes
    diff_after_tools: bool = False
    abort_leaves_tools_open: bool = False
    trace_history: str = "output"  # none | ids | output
    failed_turn_traced: str = "failed"
    input_while_streaming: str = "abandons"  # abandons | waits
    #: (where, field) the release does not write: ``item`` (any item object), ``thread``, or a method's params
    not_written: frozenset[tuple[str, str]] = frozenset()
    origin: Release | None = field(default=None, compare=False, repr=False)

    @property
    def trace_schema(self) -> int:
        return self.trace.schema

    @property
    def schema_release(self) -> str:
        """The pinned wire schema frames of this profile validate against (every profile has its own pin)."""
        return self.release

    @property
    def version_line(self) -> str:
        return f"codex-cli {self.release}"

    @property
    def methods(self) -> MethodTable:
        """The client methods of this release (read from its pin on first use; raises ReleaseError)."""
        return self._origin().methods

    @property
    def notifications(self) -> frozenset[str]:
        """The notifications its pin has: the engine sends none of its own that the release cannot send."""
        return self._origin().notifications

    @functools.cached_property
    def shapes(self) -> Any:
        """The field sets of the frames this release writes (:class:`fake_server.shapes.Shapes`)."""
        from fake_server.shapes import Shapes

        origin = self._origin()
        return Shapes(origin.data("shapes.json"), f"release {self.release}: shapes.json")

    def verify(self) -> None:
        """Read now what every session needs of the release's folder (its pin's methods and notifications, its
        shapes and answers): a folder that cannot be used (a corrupt, oversized or missing ``stable.json.zst``)
        is a ReleaseError naming the file at start (exit 3), not an Internal error on every request."""
        _ = self.methods, self.notifications, self.shapes
        self.answers()

    def answers(self) -> dict[str, Any]:
        """The answers recorded from the release (``answers.json``), read on first use; raises ReleaseError."""
        answers = self._origin().data("answers.json")
        if not isinstance(answers, dict):
            raise ReleaseError(f"release {self.release}: answers.json: expected an object of answers by key")
        return answers

    def policy(self) -> dict[str, Any] | None:
        """The release's approval table (``policy.json``, :mod:`fake_server.policy`); None when it has none."""
        origin = self._origin()
        if not origin.has("policy.json"):
            return None
        table = origin.data("policy.json")
        if not isinstance(table, dict):
            raise ReleaseError(f"release {self.release}: policy.json: expected an object")
        return table

    def _origin(self) -> Release:
        return self.origin if self.origin is not None else releases.get(self.release)

    def reshape_frame(self) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
        """A function taking the fields this release does not write out of a frame (a copy); None: none to take."""
        if not self.not_written:
            return None
        fields: dict[str, frozenset[str]] = {}
        for where, name in self.not_written:
            fields[where] = fields.get(where, frozenset()) | {name}
        return functools.partial(_reshape, fields)


class UnknownRelease(UsageError):
    """A release the fake has no profile for (exit 3); ``str()`` lists the profiles."""


def from_release(release: Release) -> Profile:
    """The profile of a release folder: its ``fake`` part checked against :data:`SWITCHES`, its shapes read.
    Raises ReleaseError naming the folder's file and key."""
    where = f"release {release.version}: {release.folder / releases.DESCRIPTION_FILE}"
    fake = release.fake
    if fake is None:
        raise UnknownRelease(
            f"release {release.version} ({release.folder}) has only a schema pin: the fake cannot play it "
            f"(profiles: {', '.join(names()) or 'none'})"
        )
    switches = dict(fake.get("switches", {}))
    for name, value in switches.items():
        switch = SWITCHES.get(name)
        if switch is None:
            raise ReleaseError(f"{where}: fake.switches.{name}: not a switch of the fake ({', '.join(SWITCHES)})")
        if value not in switch.values or type(value) is not type(switch.neutral):
            raise ReleaseError(f"{where}: fake.switches.{name}: expected one of {list(switch.values)}, got {value!r}")
    trace = release.trace
    if trace is None:
        raise ReleaseError(f"{where}: trace: the fake needs the trace format the release writes")
    profile = Profile(
        release.version,
        trace,
        not_written=frozenset(tuple(pair) for pair in fake.get("not_written", ())),
        origin=release,
        **{name: switches.get(name, switch.neutral) for name, switch in SWITCHES.items()},
    )
    _ = profile.shapes  # a folder whose shapes the engine cannot fill fails here, not mid-session
    return profile


@functools.lru_cache(maxsize=32)
def _profile(release: Release) -> Profile:
    return from_release(release)


def names() -> list[str]:
    """The releases the fake can play, oldest first."""
    return [release.version for release in releases.playable()]


def get(release: str) -> Profile:
    name = release.strip()
    try:
        found = releases.get(name)
    except releases.ReleaseNotFound:
        raise UnknownRelease(f"no release profile {release!r} (profiles: {', '.join(names())})") from None
    return _profile(found)


def switches_of(release: str | None) -> dict[str, bool | str]:
    """The switches of a release that has a profile (shipped, or learned into the user's store), by its folder,
    never by its version string; ``{}`` when it has none (every switch reads as not on). Expectations that follow
    a known server bug (``[expect.switch.NAME]``) read these, the same for the fake and the real binary."""
    if not release:
        return {}
    try:
        profile = get(release)
    except (UsageError, ReleaseError):
        return {}
    return {name: getattr(profile, name) for name in SWITCHES}


def playable(scenario: Scenario) -> Scenario:
    """``scenario`` once the ``release`` it names has a profile; else :class:`ScenarioError` naming its file."""
    from contracts.scenario_file import ScenarioError

    known = names()
    if scenario.release and scenario.release.strip() not in known:
        expected = f"a release the fake has a profile for ({', '.join(known)})"
        raise ScenarioError(scenario.source or scenario.name, "release", expected, scenario.release)
    return scenario


def default() -> Profile:
    """The profile of the default release (:func:`contracts.releases.default_version`)."""
    return get(releases.default_version())


def select(flag: str | None = None, env: str | None = None, scenario: str | None = None) -> Profile:
    """The profile to play: the first of flag, environment, scenario that is set; else the default."""
    for value in (flag, env, scenario):
        if value:
            return get(value)
    return default()


def nearest(version: str) -> tuple[Profile, bool]:
    """The profile for a binary's ``version``: its own, else the newest not newer than it (else the oldest).

    Returns (profile, exact).
    """
    known = names()
    if version in known:
        return get(version), True
    key = schema_store.version_key(version)
    older = [v for v in known if schema_store.version_key(v) <= key]
    if older:
        return get(max(older, key=schema_store.version_key)), False
    return get(min(known, key=schema_store.version_key)), False


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
