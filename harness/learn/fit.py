"""Fitting the fake to sessions recorded on a release: the closest profile, then its switches, then its fields.

Every step is a measurement: the in-process fake (virtual time, a tenth of a second a session) plays each
recorded session's scenario under a candidate profile, and the candidate's score is how far its server sides
and trace bundles are from the release's (:func:`harness.sides.server_side`,
:func:`contracts.fidelity.diff_server_sides`, :func:`harness.sides.trace_differences`: the comparison
``diff`` makes). The base is the playable profile with the lowest score (its ``shapes.json`` is the template
of the frames); each switch of :data:`fake_server.profiles.SWITCHES` is then set to the value that lowers the
score, one at a time; last, the fields the fake's frames carry that the release never wrote are taken out.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contracts import releases, schema_store
from contracts.fidelity import diff_server_sides
from contracts.record import SessionRecord
from fake_server import profiles
from fake_server.profiles import SWITCHES, Profile
from harness.learn import derive

if TYPE_CHECKING:
    from harness.learn.sessions import Session

Score = tuple[int, int]  # (sessions that differ, differences in all)


@dataclass(slots=True)
class Fit:
    base: str
    description: dict[str, Any]
    data: dict[str, Any]
    remaining: dict[str, list[str]]
    score: Score


def differences(real: SessionRecord, fake: SessionRecord) -> list[str]:
    """What ``diff`` would print for the two sides of one session (empty: equal)."""
    from harness.sides import server_side, trace_differences

    found = [str(d) for d in diff_server_sides(server_side(fake), server_side(real), collapse_deltas=True)]
    return found + trace_differences(fake.server_trace, real.server_trace)


def play_fake(session: Session, release: str | Profile, work: Path) -> SessionRecord | None:
    from harness.runner import play

    with tempfile.TemporaryDirectory(prefix="fit-", dir=work) as tmp:
        try:
            record = play(session.scenario, "fake", work_dir=Path(tmp), release=release)
        except Exception:  # a candidate the engine cannot play scores as a difference, not a traceback
            return None
        return _kept(record, Path(tmp), work)


def _kept(record: SessionRecord, tmp: Path, work: Path) -> SessionRecord:
    """The record with its trace bundle moved out of the run's temporary folder (compared after it is gone)."""
    if record.server_trace is not None and record.server_trace.is_relative_to(tmp):
        kept = Path(tempfile.mkdtemp(prefix="bundle-", dir=work))
        target = kept / record.server_trace.name
        record.server_trace.rename(target)
        record.server_trace = target
    return record


def measure(sessions: Sequence[Session], release: str | Profile, work: Path) -> tuple[Score, dict[str, list[str]]]:
    work.mkdir(parents=True, exist_ok=True)
    found: dict[str, list[str]] = {}
    for session in sessions:
        assert session.record is not None
        fake = play_fake(session, release, work)
        found[session.name] = ["the fake could not play it"] if fake is None else differences(session.record, fake)
    return (sum(1 for v in found.values() if v), sum(len(v) for v in found.values())), found


def _fields(sessions: Iterable[Session], fake: dict[str, SessionRecord] | None = None) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for session in sessions:
        record = session.record if fake is None else fake.get(session.name)
        if record is None:
            continue
        wire = [(entry.dir, entry.frame) for entry in record.wire]
        for where, names in derive.field_sets(derive.server_frames(wire)).items():
            out.setdefault(where, set()).update(names)
    return out


def fit_release(
    version: str, sessions: Sequence[Session], candidate_root: Path, work: Path, progress: Callable[[str], None]
) -> Fit:
    """The folder of ``version`` that plays ``sessions`` closest, written (and played) under ``candidate_root``
    where the pin already is."""
    work.mkdir(parents=True, exist_ok=True)
    model = [s for s in sessions if s.model_level]
    folder = schema_store.release_dir(version, candidate_root)
    pinned = releases.at(folder).methods.client
    s2c = [entry.frame for s in sessions if s.record for entry in s.record.wire if entry.dir == "s2c"]
    listed = derive.deserializer_list(s2c)
    trace = derive.trace_format(s.record.server_trace for s in sessions if s.record and s.record.server_trace)
    if trace is None:
        raise releases.ReleaseError(f"codex-cli {version}: no trace bundle of its sessions could be read")

    scores = {}
    for release in releases.playable():
        scores[release.version], _ = measure(model, release.version, work)
        progress(f"profile {release.version}: {_said(scores[release.version], len(model))}")
    base = min(scores, key=lambda v: (scores[v], _distance(v, version)))
    base_release = releases.get(base)
    base_fake = base_release.fake or {}
    switches = {name: base_fake.get("switches", {}).get(name, s.neutral) for name, s in SWITCHES.items()}
    base_answers = base_release.data("answers.json")
    # Only the methods the release has: a request of any other is answered `unknown variant`, never from here.
    keys = [k for k in base_answers if derive.answer_method(k) in set(pinned) | set(_names(listed))]
    surface = [s.lines for s in sessions if s.set == "probes"]
    answered = derive.answers(surface, keys)
    answers = {**{k: base_answers[k] for k in keys}, **answered}
    data = {"answers.json": answers, "shapes.json": base_release.data("shapes.json")}
    description: dict[str, Any] = {
        "format": releases.FOLDER_FORMAT,
        "release": version,
        "methods": {"beyond_schema": derive.beyond_schema(listed, pinned)} if listed else {},
        "trace": trace,
        "fake": {"switches": switches, "not_written": []},
    }

    def profile_of(desc: dict[str, Any]) -> Profile:
        releases.write(version, desc, data, root=candidate_root)
        return profiles.from_release(releases.at(folder))

    profile = profile_of(description)
    score, _ = measure(model, profile, work)
    for name, switch in SWITCHES.items():
        for value in switch.values:
            if value == getattr(profile, name):
                continue
            change: dict[str, Any] = {name: value}  # a switch's field, named at run time
            trial = dataclasses.replace(profile, **change)
            trial_score, _ = measure(model, trial, work)
            if trial_score < score:
                progress(f"switch {name} = {value!r}: {_said(trial_score, len(model))}")
                profile, score = trial, trial_score
    switches = {name: getattr(profile, name) for name in SWITCHES}
    description["fake"]["switches"] = switches

    fakes = {}
    for session in sessions:
        record = play_fake(session, profile, work)
        if record is not None:
            fakes[session.name] = record
    fake_fields, real_fields = _fields(sessions, fakes), _fields(sessions)
    description["fake"]["not_written"] = derive.not_written(fake_fields, real_fields)
    profile = profile_of(description)
    score, remaining = measure(model, profile, work)
    progress(f"learned: {_said(score, len(model))}")
    unwritten = derive.only_real(fake_fields, real_fields)
    description["learned_from"] = _notes(version, base, sessions, answered, keys, unwritten)
    return Fit(base, description, data, {k: v for k, v in remaining.items() if v}, score)


def _names(listed: list[str] | None) -> list[str]:
    return listed or []


def _distance(a: str, b: str) -> tuple[int, ...]:
    """How far two versions are apart, part by part (a tie between profiles goes to the nearer release)."""
    ka, kb = schema_store.version_key(a)[0], schema_store.version_key(b)[0]
    return tuple(abs(x - y) for x, y in zip(ka, kb, strict=False))


def _said(score: Score, total: int) -> str:
    return f"{total - score[0]}/{total} learning sessions equal ({score[1]} differences)"


def _notes(
    version: str,
    base: str,
    sessions: Sequence[Session],
    answered: dict[str, Any],
    keys: list[str],
    only: list[list[str]],
) -> dict[str, str]:
    names = ", ".join(sorted(s.name for s in sessions))
    missing = sorted(set(keys) - set(answered))
    answers = f"recorded on codex-cli {version} ({len(answered)} of {len(keys)} answers)"
    if missing:
        answers += f"; not asked by its probes, so {base}'s: {', '.join(missing)}"
    shapes = f"codex-cli {base}'s (the closest profile), less the fields fake.not_written names"
    if only:
        shown = ", ".join(f"{w}.{f}" for w, f in only[:20])
        shapes += f"; written by {version} and not by the fake: {shown}{' ...' if len(only) > 20 else ''}"
    return {
        "sessions": f"`codex-harness release learn` on codex-cli {version}: {names}",
        "methods": "the -32600 'unknown variant' answer of its misc_requests probe against its schema pin",
        "trace": "its bundles of those sessions: manifest schema, payload files, closing event, fields never written",
        "answers": answers,
        "shapes": shapes,
        "fake": (
            f"the closest profile ({base}) by the fake's differences from those sessions, then each switch set to "
            "the value with the fewest, then the fields the fake wrote and the release never did"
        ),
    }
