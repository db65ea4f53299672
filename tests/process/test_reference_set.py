"""The reference set recorded from the real binary (tests/data/real/<version>/), and that it stays true.

``tests/data/real/reference.txt`` lists the sessions ``make reference`` records with ``codex-harness
record``; the fidelity, validator and replay tests read the transcripts from here (never from outside the
repository). Missing data fails, it never skips. The ``real_codex`` test records a few sessions again
and requires the same server side, structurally, as the checked-in transcripts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support import paths
from support.replay import load_transcript

from contracts.fidelity import diff_server_sides, render, server_frames
from contracts.scenario import Scenario
from harness import scenario_lookup

REPO = paths.REPO
REAL_DATA = REPO / "tests" / "data" / "real"
VERSION = "0.171.0"
SET_DIR = REAL_DATA / VERSION
SETS = ("transcripts", "probes", "trace-bundles")
#: Sessions the real_codex test records again (a plain turn, an approval race, request and framing probes,
#: probes naming the work directory, its files and earlier answers).
RERECORDED = ("plain", "approval_decline", "misc_requests", "framing", "fs_search", "threads_after_turn")


@dataclass(frozen=True, slots=True)
class Reference:
    set: str  # transcripts | probes
    name: str
    scenario_spec: str  # a built-in name or a file relative to the repository

    @property
    def path(self) -> Path:
        return SET_DIR / self.set / f"{self.name}.jsonl"

    @property
    def bundle(self) -> Path:
        return SET_DIR / "trace-bundles" / self.name

    def scenario(self) -> Scenario:
        spec = self.scenario_spec
        return scenario_lookup.resolve(str(REPO / spec) if spec.endswith(".toml") else spec)

    def transcript(self) -> list[dict[str, Any]]:
        if not self.path.is_file():
            pytest.fail(f"reference transcript missing: {self.path} (part of the repository; `make reference`)")
        return load_transcript(str(self.path))


def reference_set() -> list[Reference]:
    listing = REAL_DATA / "reference.txt"
    out = []
    for line in listing.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            set_name, name, spec = line.split()
            out.append(Reference(set_name, name, spec))
    return out


def replayable_set() -> list[Reference]:
    """The sessions whose recorded client lines replay verbatim on the fake. The method-surface and
    pending-input probes are left out: they need files in the workdir, ids taken from earlier answers or
    input timed against the model, and have their own replays (tests/probe_replay.py)."""
    from probe_replay import PENDING_PROBES, SURFACE_PROBES

    own_replay = set(SURFACE_PROBES) | set(PENDING_PROBES)
    return [r for r in reference_set() if r.name not in own_replay]


def reference(name: str) -> Reference:
    return next(r for r in reference_set() if r.name == name)


def transcript(name: str) -> list[dict[str, Any]]:
    return reference(name).transcript()


def test_the_listing_names_every_session_once() -> None:
    refs = reference_set()
    assert len(refs) == 27
    assert len({r.name for r in refs}) == len(refs)
    assert {r.set for r in refs} == {"transcripts", "probes"}


@pytest.mark.parametrize("ref", reference_set(), ids=lambda r: r.name)
def test_every_session_is_in_the_repository(ref: Reference) -> None:
    entries = ref.transcript()
    assert any(e["dir"] == "s2c" for e in entries) and any(e["dir"] == "c2s" for e in entries)
    assert (ref.bundle / "manifest.json").is_file(), f"trace bundle missing: {ref.bundle}"
    assert ref.scenario().supports("real") == (True, "")


def test_every_transcript_file_is_listed() -> None:
    listed = {r.name for r in reference_set() if r.set == "transcripts"}
    assert {p.stem for p in (SET_DIR / "transcripts").glob("*.jsonl")} == listed


@pytest.mark.parametrize("set_name", SETS)
def test_each_set_says_where_it_came_from(set_name: str) -> None:
    readme = SET_DIR / set_name / "README.md"
    assert readme.is_file(), readme
    text = readme.read_text(encoding="utf-8")
    assert VERSION in text and "make reference" in text


def test_machine_values_are_masked() -> None:
    for ref in reference_set():
        text = ref.path.read_text(encoding="utf-8")
        assert "/tmp/" not in text and "codex-harness-real-" not in text, ref.name
        assert '"installationId":"<installation-id>"' in text or "installationId" not in text, ref.name


# One test per (scenario, target): on fake-process the set took a minute in one test (two probes wait out 3 s
# turn timeouts several times), which pytest-xdist could not share between its workers.
@pytest.mark.parametrize("ref", reference_set(), ids=lambda r: r.name)
@pytest.mark.parametrize("target", ["fake", "fake-process"])
def test_the_reference_scenarios_hold_on_the_fakes(tmp_path: Path, target: str, ref: Reference) -> None:
    """The probe scenarios (and the rest of the set) pass every contract, their deliberate oddities declared."""
    from harness.runner import run_one

    run = run_one(ref.scenario(), target, work_root=tmp_path)
    failed = [f"{ref.name}: {c.contract} / {c.name}: {c.detail}" for c in run.checks if c.status == "fail"]
    assert failed == []


@pytest.mark.real_codex
@pytest.mark.parametrize("name", RERECORDED)
def test_recording_again_gives_the_checked_in_server_side(codex_bin: Path, tmp_path: Path, name: str) -> None:
    from harness.cli import main

    ref = reference(name)
    spec = str(REPO / ref.scenario_spec) if ref.scenario_spec.endswith(".toml") else ref.scenario_spec
    out = tmp_path / f"{name}.jsonl"
    code = main(["record", "--codex", str(codex_bin), "--scenario", spec, "--out", str(out)])
    assert code == 0
    recorded = load_transcript(str(out))
    differences = diff_server_sides(server_frames(ref.transcript()), server_frames(recorded))
    assert differences == [], f"{name}: the checked-in transcript is no longer what codex says:\n{render(differences)}"
    if name in STARTS_THREADS_IN_PROBES:
        assert started_after_next_request(recorded) == []


#: Re-recorded sessions whose probes start or fork a thread and then send more.
STARTS_THREADS_IN_PROBES = ("misc_requests", "fs_search", "threads_after_turn")


def started_after_next_request(entries: list[dict[str, Any]]) -> list[str]:
    """Threads whose ``thread/started`` came after the client's next request: 0.171.0 writes it from another
    task after the answer, so a probe sent at once can overtake it and the recording's order varies by load.
    The probes wait for it; before they did, the client's next line came first in every recording."""
    starts: dict[Any, str] = {}  # request id -> method, for thread/start and thread/fork
    waiting: set[str] = set()  # thread ids answered, not yet announced
    late: list[str] = []
    for entry in entries:
        msg = entry.get("msg")
        if not isinstance(msg, dict):
            continue
        if entry["dir"] == "c2s":
            if msg.get("method") in ("thread/start", "thread/fork"):
                starts[msg.get("id")] = msg["method"]
            if "method" in msg and "id" in msg:
                late += sorted(waiting)
                waiting.clear()
        elif entry["dir"] == "s2c":
            thread = (msg.get("result") or {}).get("thread") if msg.get("id") in starts else None
            if isinstance(thread, dict):
                waiting.add(thread["id"])
            if msg.get("method") == "thread/started":
                waiting.discard(msg["params"]["thread"]["id"])
    return late


def test_the_order_check_finds_a_probe_that_overtook_thread_started() -> None:
    """The checked-in misc_requests was recorded before the probes waited: turn/interrupt went out first."""
    entries = transcript("misc_requests")
    assert len(started_after_next_request(entries)) == 1
    started = next(i for i, e in enumerate(entries) if e["msg"].get("method") == "thread/started")
    overtaking = started - 1
    assert entries[overtaking]["dir"] == "c2s" and entries[overtaking]["msg"]["method"] == "turn/interrupt"
    waited = [*entries[:overtaking], entries[started], entries[overtaking], *entries[started + 1 :]]
    assert started_after_next_request(waited) == []
