"""Replay a recorded request probe (tests/data/real/0.171.0/probes/*.jsonl) on the fake or the real binary.

A probe recording is a ``{"t","dir","msg"}`` transcript of one session on the real binary (the format
and masking of harness.transcript: ``c2s``/``s2c``, seconds, run paths as ``/RUN/...``): the client's
requests and everything the server wrote. Replaying it sends the same requests, in order,
each once every earlier request is answered and as many ``turn/completed`` have arrived as had
arrived before it in the recording; the ids the server made up (threads, turns, sections) are
mapped from the recording's to the replay's by aligning the answers. The work directory holds the
files the probes were recorded with (:data:`WORKDIR_FILES`).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from contracts.scenario import Scenario
from contracts.skeleton import UUID_RE

PROBES = Path(__file__).parent / "data" / "real" / "0.171.0" / "probes"
RECORDED_WORKDIR = "/RUN/workdir"
RECORDED_CODEX_HOME = "/RUN/codex_home"
RECORDED_TMP = "/RUN/tmp"
WORKDIR_FILES = {"hello.txt": "hello world\n", "sub/notes.md": "# notes\n"}
#: Server frames a step waits for (as many as had arrived before it in the recording).
WAIT_FOR = (
    "turn/completed",
    "item/agentMessage/delta",
    "item/commandExecution/requestApproval",
    "item/fileChange/requestApproval",
    "item/started",
)
#: The probes of the methods beyond the turn core (tests/process/test_fake_surface.py).
SURFACE_PROBES = (
    "account_login",
    "config_account",
    "experimental",
    "fs_search",
    "goal",
    "plugins_skills",
    "thread_actions",
    "threads_after_turn",
    "threads_fresh",
)
#: Pending input (tests/process/test_fake_pending_input.py): probe -> the scenario its model side played.
PENDING_PROBES = {
    "pending_start_then_steer": "tests/data/real/scenarios/pending_busy.toml",
    "pending_steer_then_start": "tests/data/real/scenarios/pending_busy.toml",
    "pending_wrong_turn": "tests/data/real/scenarios/pending_busy.toml",
    "pending_steer_during_approval": "command_approval",
    "pending_steer_during_command": "running_command",
}

Frame = dict[str, Any]


@dataclass(slots=True)
class Step:
    frame: Frame  # what the client sent (recorded ids and paths)
    waits: dict[str, int]  # notification -> how many had arrived before it was sent


@dataclass(slots=True)
class Probe:
    name: str
    steps: list[Step]
    received: list[Frame]  # everything the real server wrote, in order
    final: Step | None = None  # what had arrived by the end: replays wait for it too (bounded)

    def answer(self, request_id: Any) -> Frame | None:
        return next((f for f in self.received if f.get("id") == request_id and "method" not in f), None)

    def requests(self) -> list[Frame]:
        return [s.frame for s in self.steps if "id" in s.frame and "method" in s.frame]


def load(name: str) -> Probe:
    path = PROBES / f"{name}.jsonl"
    steps: list[Step] = []
    received: list[Frame] = []
    counts: dict[str, int] = {}
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        entry = orjson.loads(line)
        msg = entry["msg"]
        if entry["dir"] == "note":
            continue
        if entry["dir"] == "c2s":
            steps.append(Step(msg, dict(counts)))
        else:
            received.append(msg)
            method = msg.get("method")
            if isinstance(method, str):
                counts[method] = counts.get(method, 0) + 1
    return Probe(name, steps, received, Step({}, dict(counts)))


def names() -> list[str]:
    return list(SURFACE_PROBES)


def make_workdir(root: Path) -> Path:
    for rel, text in WORKDIR_FILES.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return root


# --- id mapping -------------------------------------------------------------------------------


def learn_ids(recorded: Any, replayed: Any, ids: dict[str, str]) -> None:
    """Map every id-like string of ``recorded`` to the string at the same place in ``replayed``."""
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        for key, value in recorded.items():
            if key in replayed:
                learn_ids(value, replayed[key], ids)
    elif isinstance(recorded, list) and isinstance(replayed, list):
        for a, b in zip(recorded, replayed, strict=False):
            learn_ids(a, b, ids)
    elif isinstance(recorded, str) and isinstance(replayed, str) and UUID_RE.fullmatch(recorded):
        ids.setdefault(recorded, replayed)


def fill(frame: Frame, ids: dict[str, str], paths: dict[str, str]) -> Frame:
    text = orjson.dumps(frame).decode()
    for old, new in sorted(paths.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(old, new)
    for old, new in ids.items():
        text = text.replace(old, new)
    return orjson.loads(text)


# --- playing ------------------------------------------------------------------------------------


@dataclass(slots=True)
class Replay:
    """What one replay produced: every server frame, and the answer to each recorded request id."""

    frames: list[Frame] = field(default_factory=list)
    paths: dict[str, str] = field(default_factory=dict)  # replay path -> recorded placeholder


def _ready(step: Step, get_frames: Callable[[], list[Frame]], pending: set[Any]) -> Callable[[], bool]:
    def check() -> bool:
        frames = get_frames()
        answered = {f.get("id") for f in frames if "method" not in f}
        if pending - answered:
            return False
        for method in WAIT_FOR:
            if sum(1 for f in frames if f.get("method") == method) < step.waits.get(method, 0):
                return False
        return True

    return check


def _answered(get_frames: Callable[[], list[Frame]], pending: set[Any]) -> Callable[[], bool]:
    return lambda: pending <= {f.get("id") for f in get_frames() if "method" not in f}


def play_fake(probe: Probe, scenario: Scenario, workdir: Path) -> Replay:
    from support.virtual import VirtualServer

    from fake_server.engine import Engine

    codex_home = str(workdir.parent / "codex_home")
    tmp = str(workdir.parent / "tmp")
    server = VirtualServer(scenario)
    server.engine = Engine(scenario, cwd=str(workdir), codex_home=codex_home)
    server.out.clear()
    paths = {RECORDED_WORKDIR: str(workdir), RECORDED_CODEX_HOME: codex_home, RECORDED_TMP: tmp}
    ids: dict[str, str] = {}
    pending: set[Any] = set()
    for step in probe.steps:
        # A turn the fake does not start (0.171.0's goal continuation) is waited for in vain, within bounds.
        server.run_until_state(_ready(step, lambda: server.frames, pending), within_ms=120_000)
        assert server.run_until_state(_answered(lambda: server.frames, pending)), (
            f"{probe.name}: unanswered before {step}"
        )
        _learn_answers(probe, server.frames, ids)
        frame = fill(step.frame, ids, paths)
        if "id" in frame and "method" in frame:
            pending.add(frame["id"])
        server.send(frame)
    server.run_until_state(lambda: pending <= {f.get("id") for f in server.frames if "method" not in f})
    if probe.final is not None:
        server.run_until_state(_ready(probe.final, lambda: server.frames, pending), within_ms=120_000)
    server.settle(1000)
    return Replay(list(server.frames), {v: k for k, v in paths.items()})


def _learn_answers(probe: Probe, frames: list[Frame], ids: dict[str, str]) -> None:
    for frame in frames:
        if "method" in frame or "id" not in frame:
            continue
        recorded = probe.answer(frame["id"])
        if recorded is not None:
            learn_ids(recorded.get("result"), frame.get("result"), ids)


async def play_real(probe: Probe, scenario: Scenario, codex: Path) -> Replay:
    from harness.targets.real import real_target

    async with real_target(scenario, codex) as target:
        make_workdir(target.workdir)
        paths = {
            RECORDED_WORKDIR: str(target.workdir),
            RECORDED_CODEX_HOME: str(target.codex_home),
            RECORDED_TMP: str(target.tmpdir),
        }
        return await play_process(probe, list(target.argv), dict(target.env), target.cwd, paths)


async def play_fake_codex(probe: Probe, scenario_path: Path, workdir: Path) -> Replay:
    """The probe on ``fake-codex app-server`` (a real process, real time) playing ``scenario_path``."""
    import os
    import sys

    make_workdir(workdir)
    argv = [sys.executable, "-m", "fake_server.cli", "app-server", "--scenario", str(scenario_path)]
    paths = {RECORDED_WORKDIR: str(workdir), RECORDED_CODEX_HOME: str(workdir.parent / "codex_home")}
    return await play_process(probe, argv, dict(os.environ), workdir, paths, notification_wait_s=2)


async def play_process(
    probe: Probe,
    argv: list[str],
    env: dict[str, str],
    cwd: Path,
    paths: dict[str, str],
    notification_wait_s: float = 60,
) -> Replay:
    """Replay ``probe`` on an app-server process over stdio (every wait bounded)."""
    import trio

    from contracts.wire import LineDecoder

    replay = Replay(paths={v: k for k, v in paths.items()})
    process = await trio.lowlevel.open_process(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd
    )
    try:
        assert process.stdin is not None and process.stdout is not None
        decoder = LineDecoder()
        ids: dict[str, str] = {}
        pending: set[Any] = set()

        async def read_until(check: Callable[[], bool], within_s: float = 60) -> None:
            with trio.fail_after(within_s):
                while not check():
                    data = await process.stdout.receive_some(1 << 16)
                    assert data, "the server closed stdout"
                    replay.frames.extend(m.frame for m in decoder.feed(data) if hasattr(m, "frame"))

        for step in probe.steps:
            # A notification a fake never sends (0.171.0's own goal turns) is waited for in vain, within bounds.
            with trio.move_on_after(notification_wait_s):
                await read_until(_ready(step, lambda: replay.frames, pending))
            await read_until(_answered(lambda: replay.frames, pending))
            _learn_answers(probe, replay.frames, ids)
            frame = fill(step.frame, ids, paths)
            if "id" in frame and "method" in frame:
                pending.add(frame["id"])
            await process.stdin.send_all(orjson.dumps(frame) + b"\n")
        await read_until(lambda: pending <= {f.get("id") for f in replay.frames if "method" not in f})
        if probe.final is not None:
            with trio.move_on_after(notification_wait_s):
                await read_until(_ready(probe.final, lambda: replay.frames, pending))
        with trio.move_on_after(0.5):  # whatever trails the last answer
            while data := await process.stdout.receive_some(1 << 16):
                replay.frames.extend(m.frame for m in decoder.feed(data) if hasattr(m, "frame"))
    finally:
        process.kill()
        with trio.fail_after(30):
            await process.wait()
    return replay


# --- the docs table -------------------------------------------------------------------------------

#: Stable methods not probed on the real binary, and why (the fake gives the smallest schema-valid answer).
NOT_PROBED = {"feedback/upload": "uploads logs off the machine"}
#: Turn-core methods: recorded in the reference transcripts, compared by the fidelity tests.
TURN_CORE = {"turn/interrupt": "transcripts (stream_interrupt, approval_interrupt)"}


def _recorded_answers() -> dict[str, list[tuple[str, Frame]]]:
    found: dict[str, list[tuple[str, Frame]]] = {}
    for name in [*SURFACE_PROBES, *PENDING_PROBES]:
        probe = load(name)
        for request in probe.requests():
            answer = probe.answer(request["id"])
            if answer is not None:
                found.setdefault(request["method"], []).append((name, answer))
    return found


def methods_table(methods: list[str]) -> str:
    """docs/real-binary.md's table: for each method, what 0.171.0 answered offline and what the fake does."""
    answers = _recorded_answers()
    lines = ["| method | 0.171.0 offline (recorded) | the fake | probe |", "|---|---|---|---|"]
    for method in methods:
        recorded = answers.get(method, [])
        results = [a for _, a in recorded if "result" in a]
        errors = sorted(
            {(a["error"]["code"], _short_message(a["error"]["message"])) for _, a in recorded if "error" in a}
        )
        probes = ", ".join(sorted({n for n, _ in recorded}))
        if method in NOT_PROBED:
            real, fake, probes = f"not probed ({NOT_PROBED[method]})", "schema-only (smallest valid answer)", "-"
        elif method in TURN_CORE and not recorded:
            real, fake, probes = "answers", "real shape (turn core)", TURN_CORE[method]
        elif results:
            real = "answers" + (f"; errors {', '.join(f'{c} `{m}`' for c, m in errors)}" if errors else "")
            fake, probes = "real shape", probes
        else:
            real = "error " + ", ".join(f"{c} `{m}`" for c, m in errors)
            fake = "the real error"
        lines.append(f"| `{method}` | {real} | {fake} | {probes} |")
    return "\n".join(lines) + "\n"


def _short_message(message: str) -> str:
    from contracts.skeleton import normalise_message

    text = normalise_message(message, [(RECORDED_WORKDIR, "<cwd>")]).replace("|", "\\|").replace("`", "'")
    return text if len(text) <= 70 else text[:67] + "..."
