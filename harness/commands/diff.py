"""``codex-harness diff``: play a scenario on the fake and on the real binary, compare the server sides.

The comparison is structural (:mod:`contracts.fidelity`): method, item type and status, turn status,
thread status and active flags, ``willRetry``; ids, timestamps, texts and ambient notifications are
ignored, runs of identical deltas count once, and ``serverRequest/resolved`` is counted per turn
rather than placed. The fake plays the release profile of the binary's version (fake_server.profiles), else
the closest by measured behaviour (harness.learn.choose), or ``--profile X``, and says which and why; every
frame of both sides must also
validate against its release's pinned schema. The two servers' trace bundles are compared too, event by
event (:mod:`contracts.trace.sequence`: types, statuses, which history items; ids and payloads ignored).
Exit 0 when the two sides agree, 1 when they differ (or a side could not be played), 2 for an invalid
scenario file or a fake-only scenario, 3 for usage errors (no binary).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts.exitcodes import FAILED, INVALID_INPUT, OK, UsageError
from contracts.fidelity import Difference, diff_server_sides, render
from contracts.record import SessionRecord
from contracts.scenario import Scenario
from contracts.text import one_line
from harness import scenario_lookup, store_option
from harness.sides import server_side, trace_differences
from sandbox import confine

NAME = "diff"
HELP = "play a scenario on the fake and on the real codex; print the structural difference of the server sides"
FAKE_TARGETS = ("fake", "fake-process")
#: How every line of a diff names its two sides, on the wire and in the trace (fake first).
SIDES = ("fake", "real")


@dataclass(slots=True)
class FidelityResult:
    """The comparison of one scenario: differences (empty: equal), or why it could not be made."""

    scenario: str
    fake_target: str
    differences: list[Difference] = field(default_factory=list)
    skipped: str | None = None  # the scenario cannot run on the real binary
    error: str | None = None  # a side could not be played
    server_version: str | None = None
    fake_frames: int = 0
    real_frames: int = 0
    profile: str | None = None  # the release profile the fake played
    profile_note: str = ""  # how it was chosen (its own release, the closest measured, --profile)
    invalid_frames: list[str] = field(default_factory=list)  # frames failing their release's schema
    trace_differences: list[str] = field(default_factory=list)  # the fake's trace events against the real's
    # The real side as played (not in the JSON): another release's is compared with it (validate-release --from).
    real_side: list[Any] | None = None
    real_trace_events: list[str] | None = None

    @property
    def equal(self) -> bool:
        return (
            self.skipped is None
            and self.error is None
            and not self.differences
            and not self.invalid_frames
            and not self.trace_differences
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "fake_target": self.fake_target,
            "equal": self.equal,
            "skipped": self.skipped,
            "error": self.error,
            "server_version": self.server_version,
            "frames": {"fake": self.fake_frames, "real": self.real_frames},
            "profile": self.profile,
            "profile_note": self.profile_note,
            "invalid_frames": self.invalid_frames,
            "trace_differences": self.trace_differences,
            "differences": [
                {"segment": d.segment, "what": d.what, "fake": d.expected, "real": d.actual, "text": str(d)}
                for d in self.differences
            ],
        }


def profile_for(version: str, binary: Path | None = None, override: str | None = None) -> tuple[str, str]:
    """The fake's release profile for a binary of ``version``, and the sentence that says how it was chosen: its
    own; else, with the ``binary``, the closest by measured behaviour (:mod:`harness.learn.choose`); else by
    version. ``override``: ``--profile X``."""
    from harness.learn.choose import choose_profile

    return choose_profile(version, binary, override)


def _invalid_frames(record: SessionRecord, side: str) -> list[str]:
    """Frames of ``record`` that do not validate against its release's pinned schema, as check details."""
    from contracts.checks import schema

    return [f"{side}: {c.name}: {c.detail}" for c in schema.check(record) if c.status == "fail"]


def fidelity_diff(
    scenario: Scenario,
    codex: Path,
    *,
    fake_target: str = "fake",
    work_root: Path | None = None,
    release: str | None = None,
    profile: str | None = None,
) -> FidelityResult:
    """Play ``scenario`` on the real ``codex`` and on ``fake_target``; the structural difference (fake expected).

    The fake plays ``release`` when given, else the profile of the binary (:func:`profile_for`; ``profile``:
    ``--profile X``).
    """
    from harness.runner import play
    from harness.targets import TargetUnavailable

    result = FidelityResult(scenario.name, fake_target)
    for target in (fake_target, "real"):
        supported, reason = scenario.supports(target)
        if not supported:
            result.skipped = f"{target}: {reason}"
            return result
    records: dict[str, SessionRecord] = {}
    with tempfile.TemporaryDirectory(prefix=f"codex-harness-diff-{scenario.name}-", dir=work_root) as tmp:
        for target in ("real", fake_target):  # the real one first: its version picks the fake's profile
            if target == fake_target and release is None:
                release, result.profile_note = profile_for(records["real"].server_version or "", codex, profile)
            try:
                record = play(scenario, target, work_dir=Path(tmp) / target, codex=codex, release=release)
            except TargetUnavailable as exc:
                result.error = f"{target}: not available: {exc}"
                return result
            except Exception as exc:  # a broken run is a result, not a traceback
                result.error = f"{target}: the run broke: {type(exc).__name__}: {exc}"
                return result
            if record.client_errors:
                result.error = f"{target}: {'; '.join(record.client_errors)}"
                return result
            records[target] = record
        result.trace_differences = trace_differences(records[fake_target].server_trace, records["real"].server_trace)
        result.real_trace_events = _events(records["real"].server_trace)  # read while the bundle is there
    fake, real = server_side(records[fake_target]), server_side(records["real"])
    result.server_version = records["real"].server_version
    result.profile = records[fake_target].server_version
    result.invalid_frames = _invalid_frames(records[fake_target], "fake") + _invalid_frames(records["real"], "real")
    result.fake_frames, result.real_frames = len(fake), len(real)
    result.real_side = real
    result.differences = diff_server_sides(fake, real, collapse_deltas=True, sides=SIDES)
    return result


def _events(bundle: Path | None) -> list[str] | None:
    """A bundle's event shapes (:func:`contracts.trace.sequence.event_shapes`); None: none, or unreadable."""
    from contracts.trace.errors import TraceInvalid, TraceUnreadable
    from contracts.trace.sequence import event_shapes

    if bundle is None:
        return None
    try:
        return event_shapes(bundle)
    except (TraceInvalid, TraceUnreadable):
        return None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", metavar="NAME|PATH", required=True, help="a built-in scenario or a scenario file")
    parser.add_argument("--codex", metavar="PATH", help="the real codex binary (else $CODEX_BIN)")
    confine.add_argument(parser)
    parser.add_argument(
        "--fake-target", choices=FAKE_TARGETS, default="fake", help="which fake to compare (default: in-process)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument(
        "--profile",
        metavar="RELEASE",
        help="the profile the fake plays (default: the binary's own release, else the closest by measured behaviour)",
    )
    store_option.add_argument(parser)


def select_binary(codex: str | None, *, require_pinned_schema: bool = True) -> Path:
    """The real binary, once checked to run at all (:func:`harness.targets.real_adapter.preflight`); else exit 3."""
    from harness.targets import TargetUnavailable
    from harness.targets.real_adapter import preflight

    try:
        return preflight(Path(codex) if codex else None, require_pinned_schema=require_pinned_schema)[0]
    except TargetUnavailable as exc:
        raise UsageError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    with store_option.using(args):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    try:
        scenario = scenario_lookup.resolve(args.scenario)
    except scenario_lookup.ScenarioError as exc:
        print(f"codex-harness diff: {exc}", file=sys.stderr)
        return INVALID_INPUT
    for target in (args.fake_target, "real"):  # invalid input (2) is said before the binary is looked at
        supported, reason = scenario.supports(target)
        if not supported:
            print(f"{scenario.name}: cannot be compared: {target}: {reason}")
            return INVALID_INPUT
    codex = select_binary(args.codex)
    result = fidelity_diff(scenario, codex, fake_target=args.fake_target, profile=args.profile)
    if args.json:
        print(json.dumps(result.to_json(), indent=2, default=list))
    elif result.skipped:
        print(f"{scenario.name}: cannot be compared: {result.skipped}")
    elif result.error:
        print(f"{scenario.name}: {one_line(result.error, 400)}")
    else:
        version = result.server_version or "?"
        played = f"{args.fake_target} playing {result.profile} ({result.profile_note})"
        print(f"{scenario.name}: {played} vs real codex {version}")
        print(render(result.differences))
        for line in result.invalid_frames:
            print(f"invalid against its release's schema: {one_line(line, 400)}")
        if result.trace_differences:
            print("trace bundle events (fake / real):")
            for line in result.trace_differences[:50]:
                print(f"  {one_line(line, 400)}")
        else:
            print("trace bundles: the same events")
    if result.skipped:
        return INVALID_INPUT
    return OK if result.equal else FAILED
