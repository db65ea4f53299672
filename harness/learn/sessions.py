"""The sessions ``release learn`` plays on the binary: the reference set, played a few at a time, confined."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from contracts import safe_read
from contracts.exitcodes import UsageError
from contracts.record import SessionRecord
from contracts.scenario import Scenario
from harness import scenario_lookup

REPO: Final = Path(__file__).resolve().parents[2]
REFERENCE: Final = REPO / "tests" / "data" / "real" / "reference.txt"
#: Sessions learned from beyond the reference set: a file change (whether one more turn/diff/updated follows
#: the response whose patch completed).
EXTRA: Final = (("transcripts", "file_change_approval", "file_change_approval"),)
#: Real sessions at a time: the binary mostly waits on the mock model; three keep two cores busy.
WORKERS: Final = 3
#: A reference listing is a few dozen lines; more is not one.
MAX_LISTING_BYTES: Final = 1024 * 1024
#: A session that broke is played once more (a loaded machine), then left out and named.
ATTEMPTS: Final = 2


@dataclass(slots=True)
class Session:
    set: str  # transcripts | probes
    name: str
    scenario: Scenario
    record: SessionRecord | None = None
    lines: list[dict[str, Any]] = field(default_factory=list)  # the masked transcript (harness.transcript)
    problem: str | None = None
    seconds: float = 0.0

    @property
    def model_level(self) -> bool:
        """It plays turns on the model: its server side is the fake's turn flow (switches are fitted on it)."""
        return bool(self.scenario.turns)


def reference_entries(listing: Path = REFERENCE) -> list[tuple[str, str, str]]:
    """(set, name, scenario) of each line of the reference listing, then :data:`EXTRA`. Raises UsageError."""
    try:
        text = safe_read.read_bounded(listing, MAX_LISTING_BYTES).decode("utf-8")
    except OSError as exc:
        raise UsageError(f"--reference {safe_read.explain(listing, exc)}") from None
    except UnicodeDecodeError:
        raise UsageError(f"--reference {listing}: not UTF-8 text") from None
    out = []
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        if len(parts) != 3 or parts[0] not in ("transcripts", "probes"):
            raise UsageError(f"--reference {listing}: {line!r} is not 'set name scenario'")
        out.append((parts[0], parts[1], parts[2]))
    names = {name for _, name, _ in out}
    return out + [entry for entry in EXTRA if entry[1] not in names]


def _scenario(spec: str, root: Path) -> Scenario:
    try:
        return scenario_lookup.resolve(str(root / spec) if spec.endswith(".toml") else spec)
    except scenario_lookup.ScenarioError as exc:
        raise UsageError(f"the reference set names a scenario that cannot be read: {exc}") from None


def _record_one(session: Session, codex: Path, work: Path, stop: threading.Event | None = None) -> Session:
    from harness.runner import play
    from harness.transcript import handshake_problem, transcript

    started = time.monotonic()
    for attempt in range(ATTEMPTS):
        if stop is not None and stop.is_set():  # interrupted: no new session starts
            session.problem = "not played: the command was interrupted"
            break
        run_dir = work / f"{session.set}-{session.name}-{attempt}"
        try:
            record = play(session.scenario, "real", work_dir=run_dir, codex=codex)
        except Exception as exc:  # a broken run is a session left out, named
            session.problem = f"the run broke: {type(exc).__name__}: {exc}"
            continue
        problem = "; ".join(record.client_errors) or handshake_problem(record, session.scenario.client.handshake)
        if problem is None and record.server_trace is None:
            problem = "the server wrote no trace bundle"
        if problem is None:
            session.record, session.problem = record, None
            session.lines = transcript(record, [run_dir])
            break
        session.problem = problem
    session.seconds = time.monotonic() - started
    return session




def _end_running(futures: list[concurrent.futures.Future[Session]]) -> None:
    """Kill again, until every running session ended (bounded): one that started its binary just after the
    signal handler's kill would otherwise play its whole session while the process exits."""
    from codex_sandbox import proctree

    deadline = time.monotonic() + proctree.STOP_S
    while any(f.running() for f in futures) and time.monotonic() < deadline:
        proctree.end_all()
        time.sleep(0.05)


def record_sessions(
    entries: list[tuple[str, str, str]],
    codex: Path,
    work: Path,
    root: Path,
    progress: Callable[[str], None],
    workers: int = WORKERS,
) -> list[Session]:
    """Each entry played on the binary, ``workers`` at a time (each a confined process of its own)."""
    sessions = [Session(s, name, _scenario(spec, root)) for s, name, spec in entries]
    stop = threading.Event()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers))
    try:
        futures = [pool.submit(_record_one, session, codex, work, stop) for session in sessions]
        for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
            session = future.result()
            state = "recorded" if session.problem is None else f"left out: {session.problem}"
            progress(f"[{done}/{len(sessions)}] {session.name}: {state} ({session.seconds:.1f} s)")
    except BaseException:
        # SIGTERM / Ctrl-C (a KeyboardInterrupt here): the queued sessions are dropped and none starts again; the
        # running ones' binaries were killed by the signal handler (codex_sandbox.interrupts), so their threads end at
        # once. Waiting for the pool as ``with`` does played the whole queue first (231 s).
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)
        _end_running(futures if "futures" in locals() else [])
        raise
    pool.shutdown(wait=True)
    return sessions
