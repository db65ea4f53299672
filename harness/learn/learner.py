"""``release learn``: a release folder derived from sessions recorded on the binary, never typed by hand.

What it does, in order (:func:`learn`):

1. pins the binary's schema (``generate-json-schema``, as ``schema pin``);
2. plays the reference set (``tests/data/real/reference.txt``, what ``make reference`` records: the
   transcripts and the probes) and :data:`EXTRA` on the binary, :data:`WORKERS` sessions at a time, each
   through the confined launcher as every real session is, keeping each server's trace bundle;
3. records ``config/read`` from an empty home (:mod:`harness.learn.empty_home`, in a network namespace of its
   own);
4. derives what the release does (:mod:`harness.learn.derive`): the methods its deserializer lists beyond
   the pin, its trace bundle format, the answers it gives beyond the turn core; then the profile it is
   closest to (each playable profile's fake against the recordings, :mod:`harness.learn.fit`), the switch
   values under which the fake plays the recordings with the fewest differences, and the fields that
   profile's frames carry that the release never writes;
5. plays the policy observation (:mod:`harness.learn.policy_observe`: what each approval policy × sandbox ×
   reviewer does with a command and a patch) and keeps its table (:mod:`harness.learn.policy`);
6. writes ``release.json``, ``answers.json``, ``shapes.json`` and ``policy.json`` next to the pin in the store.

The folder holds what the release does; the recordings are thrown away (no transcript is kept to replay).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts import releases, schema_store
from contracts.exitcodes import UsageError
from harness.learn.sessions import REFERENCE, REPO, WORKERS, Session, record_sessions, reference_entries


@dataclass(slots=True)
class Learned:
    version: str
    folder: Path
    base: str  # the profile it was closest to (its shapes.json is the template)
    description: dict[str, Any]
    sessions: list[Session]
    remaining: dict[str, list[str]]  # session -> differences left with the learned profile
    seconds: dict[str, float]
    notes: list[str] = field(default_factory=list)


def learn(
    codex: Path,
    store: Path,
    *,
    reference: Path = REFERENCE,
    progress: Callable[[str], None] = lambda _: None,
    workers: int = WORKERS,
) -> Learned:
    """Learn the release of ``codex`` into ``store`` (see the module). Raises UsageError (the binary does not
    run, a store that cannot be written) and ReleaseError (what was learned cannot be written)."""
    from harness.codex_bin import codex_version
    from harness.learn import empty_home, fit
    from harness.schema_pin import pin_schema

    seconds: dict[str, float] = {}
    clock = time.monotonic()
    version = codex_version(codex)
    if not schema_store.is_version(version):
        raise UsageError(f"{codex}: `--version` printed no release version ({version!r})")
    if schema_store.is_shipped(store):
        raise UsageError(f"{store} holds the releases shipped with the package and is never written")
    state, _ = pin_schema(codex, version, store)
    if state.startswith("failed"):
        raise UsageError(f"codex-cli {version}: the schema could not be pinned: {state}")
    pin_root = schema_store.SHIPPED_ROOT if version in schema_store.shipped_releases() else store
    progress(f"codex-cli {version}: schema {state} ({pin_root})")
    seconds["pin"] = time.monotonic() - clock
    entries = reference_entries(reference)
    with tempfile.TemporaryDirectory(prefix=f"codex-harness-learn-{version}-") as tmp:
        work = Path(tmp)
        clock = time.monotonic()
        sessions = record_sessions(entries, codex, work / "real", REPO, progress, workers)
        seconds["record"] = time.monotonic() - clock
        recorded = [s for s in sessions if s.record is not None]
        if not any(s.model_level for s in recorded):
            raise releases.ReleaseError(f"codex-cli {version}: no session could be recorded ({sessions[0].problem})")
        clock = time.monotonic()
        candidate = work / "candidate"
        _copy_pin(schema_store.release_dir(version, pin_root), schema_store.release_dir(version, candidate))
        result = fit.fit_release(version, recorded, candidate, work / "fake", progress)
        seconds["derive"] = time.monotonic() - clock
        clock = time.monotonic()
        empty = empty_home.record(codex, work / "empty")
        seconds["empty home"] = time.monotonic() - clock
    clock = time.monotonic()
    progress(f"codex-cli {version}: approval settings (policy.json)")
    result.data["policy.json"] = learn_policy(codex, version)
    seconds["policy"] = time.monotonic() - clock
    notes = [f"{s.set}/{s.name}: left out ({s.problem})" for s in sessions if s.problem is not None]
    if empty is not None:  # config/read from an empty home, the base of every setup's answer
        result.data["answers.json"].update(empty)
    else:
        notes.append(f"config/read from an empty home: no network namespace here; {result.base}'s answers kept")
    compared = sum(1 for s in recorded if s.model_level)
    if result.remaining:  # said in the folder, so every later reader knows the fake is not the release there
        result.description.setdefault("learned_from", {})[PARTLY] = partly_learned_note(result.remaining, compared)
    folder = releases.write(version, result.description, result.data, root=store)
    if version in schema_store.shipped_releases():
        notes.append(f"{version} is shipped with the package: the shipped folder is the one played; {folder} is kept")
    return Learned(version, folder, result.base, result.description, sessions, result.remaining, seconds, notes)


#: the ``learned_from`` note of a release the learned profile does not play whole
PARTLY = "partly_learned"


def partly_learned_note(remaining: dict[str, list[str]], compared: int, limit: int = 900) -> str:
    """"partly learned: N of M sessions ..." naming them, bounded (a release.json note has a size cap)."""
    names = ", ".join(sorted(remaining))
    text = f"partly learned: {len(remaining)} of {compared} learning sessions still play differently ({names})"
    return text if len(text) <= limit else text[: limit - 2] + "…)"


#: Policy sessions at a time: each mostly waits on the server and the mock (four short turns).
POLICY_JOBS = 4


def learn_policy(codex: Path, version: str) -> dict[str, Any]:
    """The release's approval table: the ``thread:`` cases of the policy observation played on ``codex``."""
    from harness.learn import policy, policy_observe

    observed = {
        **policy_observe.observe_real(codex, only="thread: ", jobs=POLICY_JOBS),
        **policy_observe.observe_real(codex, only="config: on-failure", jobs=POLICY_JOBS),
        **policy_observe.observe_real(codex, only="config: untrusted", jobs=POLICY_JOBS),
    }
    return policy.table(
        observed, version, f"`release learn`: the policy observation (thread/start) on codex-cli {version}"
    )


def _copy_pin(source: Path, target: Path) -> None:
    """The pin files (meta.json, the bundles) into the candidate folder the fits are played from."""
    target.mkdir(parents=True, exist_ok=True)
    for name in (schema_store.META_FILE, *schema_store.BUNDLE_FILES.values()):
        shutil.copyfile(source / name, target / name, follow_symlinks=False)
