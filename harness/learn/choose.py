"""Which profile the fake plays for a binary whose release has none: the closest by measured behaviour.

A binary whose release has a folder (shipped, or learned into the store by ``release learn``) plays its own.
Any other: a few built-in scenarios (:data:`PROBE_SCENARIOS`, one per turn-flow switch of
:data:`fake_server.profiles.SWITCHES`) are played on the binary, each playable profile's fake plays them too,
and the profile with the fewest differences (server sides and trace bundles, as ``diff`` compares them) is
chosen; a tie goes to the nearer release. The sentence returned says which, how it was chosen and how far each
profile was. ``--profile X`` (the ``override``) wins over both.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Final

from contracts import schema_store
from fake_server import profiles

#: Built-in scenarios recorded on the binary to choose its profile: an approval answered cancel (tools left
#: open, the trace's history), a model error (how a failed turn is traced), a file change (the extra diff),
#: a steer (input while the model streams), and a plain turn.
PROBE_SCENARIOS: Final = ("plain", "approval_cancel", "model_error", "file_change_approval", "steer")


def choose_profile(version: str, binary: Path | None, override: str | None = None) -> tuple[str, str]:
    """(the profile the fake plays for a binary of ``version``, the sentence saying why). Raises
    :class:`fake_server.profiles.UnknownRelease` for an ``override`` with no profile."""
    if override:
        return profiles.get(override).release, "chosen with --profile"
    known = profiles.names()
    if version in known:
        return version, "the binary's own release"
    if binary is not None:
        measured = _measured(str(binary), version, tuple(known), str(schema_store.user_store()))
        if measured is not None:
            return measured
    return by_version(version)


def by_version(version: str) -> tuple[str, str]:
    """Without a measurement: the newest profile not newer than ``version``, else the oldest; said as it is."""
    profile, exact = profiles.nearest(version)
    if exact:
        return profile.release, "the binary's own release"
    known = ", ".join(profiles.names())
    key = schema_store.version_key
    if key(profile.release) <= key(version):
        return profile.release, f"no profile for {version}, so the newest not newer than it (profiles: {known})"
    return profile.release, f"no profile for {version}, older than every profile, so the oldest (profiles: {known})"


@functools.lru_cache(maxsize=8)
def _measured(binary: str, version: str, known: tuple[str, ...], _store: str) -> tuple[str, str] | None:
    from harness.learn.fit import measure
    from harness.learn.sessions import record_sessions

    entries = [("transcripts", name, name) for name in PROBE_SCENARIOS]
    with tempfile.TemporaryDirectory(prefix=f"codex-harness-choose-{version}-") as tmp:
        work = Path(tmp)
        sessions = record_sessions(entries, Path(binary), work / "real", work, lambda _: None)
        recorded = [s for s in sessions if s.record is not None]
        if not recorded:
            return None
        scores = {name: measure(recorded, name, work / "fake")[0] for name in known}
    key = schema_store.version_key

    def distance(name: str) -> tuple[int, ...]:
        return tuple(abs(a - b) for a, b in zip(key(name)[0], key(version)[0], strict=False))

    best = min(known, key=lambda name: (scores[name], distance(name)))
    each = ", ".join(f"{name} {scores[name][0]}" for name in known)
    return best, (
        f"no profile for {version}, so the closest by measured behaviour: {len(recorded)} scenarios recorded on "
        f"the binary ({', '.join(s.name for s in recorded)}), scenarios that differ per profile: {each}; "
        f"`codex-harness release learn` learns its own"
    )
