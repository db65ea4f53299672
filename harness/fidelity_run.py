"""One scenario played on the real binary and on the fake, and the structural difference of their server sides
(``diff``, ``validate-release``, ``release learn``); the real binary a command uses, checked to run at all."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts.exitcodes import UsageError
from contracts.fidelity import Difference, diff_server_sides
from contracts.record import SessionRecord
from contracts.scenario import Scenario
from harness.sides import server_side, trace_differences

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


def select_binary(codex: str | None, *, require_pinned_schema: bool = True) -> Path:
    """The real binary, once checked to run at all (:func:`harness.targets.real_adapter.preflight`); else exit 3."""
    from harness.targets import TargetUnavailable
    from harness.targets.real_adapter import preflight

    try:
        return preflight(Path(codex) if codex else None, require_pinned_schema=require_pinned_schema)[0]
    except TargetUnavailable as exc:
        raise UsageError(str(exc)) from None
