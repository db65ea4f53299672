"""Session records built from a ``fake-codex --record`` folder: what the fake saw of an outside client.

One :class:`ServerRecording` per ``DIR/<n>-<pid>/``; :func:`server_record` turns one into a
:class:`~contracts.record.SessionRecord` whose wire is the server's view (rebased so ``t`` counts from the
client's start), whose server trace is the recording's bundle, and whose ``meta["outside"]`` carries the
facts :mod:`contracts.checks.client_run` judges.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson

from contracts.record import Budgets, SessionRecord, WireEntry
from contracts.scenario import Scenario
from contracts.trace.reader import bundles_under
from fake_server.recording import MAX_WIRE_BYTES

#: A recorder stops at MAX_WIRE_BYTES and adds one note; anything bigger was not written by it.
MAX_READ_BYTES = MAX_WIRE_BYTES + 1024 * 1024


class RecordingError(Exception):
    """A folder that is not a readable fake-codex recording; ``str()`` says why."""


@dataclass(slots=True)
class ServerRecording:
    folder: Path
    start: dict[str, Any]
    end: dict[str, Any] | None
    wire: list[WireEntry]
    trace_bundle: Path | None

    @property
    def n(self) -> int:
        return int(self.start.get("n") or 0)

    @property
    def pid(self) -> int:
        return int(self.start.get("pid") or 0)


def is_recording(path: Path) -> bool:
    return (path / "start.json").is_file() and (path / "wire.jsonl").is_file()


def recording_folders(root: Path) -> list[Path]:
    """``root/<n>-<pid>`` folders in order of ``n``."""
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and is_recording(p) and p.name.split("-", 1)[0].isdigit()]
    return sorted(found, key=lambda p: int(p.name.split("-", 1)[0]))


def _json(path: Path) -> dict[str, Any] | None:
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, orjson.JSONDecodeError) as exc:
        raise RecordingError(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        raise RecordingError(f"{path}: not a JSON object")
    return data


def _first_bundle(root: Path) -> Path | None:
    bundles = bundles_under(root)
    return bundles[0] if bundles else None


def read_recording(folder: Path) -> ServerRecording:
    start = _json(folder / "start.json")
    if start is None:
        raise RecordingError(f"{folder}: no start.json (not a fake-codex recording)")
    wire_path = folder / "wire.jsonl"
    try:
        if wire_path.stat().st_size > MAX_READ_BYTES:
            raise RecordingError(f"{wire_path}: larger than {MAX_READ_BYTES} bytes")
        data = wire_path.read_bytes()
    except OSError as exc:
        raise RecordingError(f"cannot read {wire_path}: {exc.strerror}") from None
    wire = []
    lines = data.splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            wire.append(WireEntry.from_json(orjson.loads(line)))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            if n == len(lines):
                break  # a last line cut by a SIGKILL mid-write
            raise RecordingError(f"{wire_path}:{n}: not a transcript line ({exc})") from None
    return ServerRecording(folder, start, _json(folder / "end.json"), wire, _first_bundle(folder / "server-trace"))


def read_recordings(root: Path) -> list[ServerRecording]:
    return [read_recording(f) for f in recording_folders(root)]


def _rebase(value: Any, zero: float) -> Any:
    return round(value - zero, 6) if isinstance(value, int | float) and not isinstance(value, bool) else value


def server_facts(server: ServerRecording, zero: float, killed_by_harness: bool) -> dict[str, Any]:
    """What the contracts need of one server, times relative to ``zero`` (the client's start)."""
    end = None
    if server.end is not None:
        end = {k: (_rebase(v, zero) if k.endswith("t") else v) for k, v in server.end.items()}
    return {
        "n": server.n,
        "pid": server.pid,
        "folder": server.folder.name,
        "scenario": server.start.get("scenario"),
        "scenario_hash": server.start.get("scenario_hash"),
        "profile": server.start.get("profile"),
        "started_t": _rebase(server.start.get("started_t"), zero),
        "end": end,
        "killed_by_harness": killed_by_harness,
    }


def server_record(
    scenario: Scenario,
    server: ServerRecording | None,
    *,
    zero: float,
    facts: dict[str, Any],
    target: str = "fake-process",
) -> SessionRecord:
    """A record of one server of the run (None: the client started no server; an empty wire)."""
    plan = scenario.client
    # The server's exit status follows from how the client ended it, judged by client_run, not [expect].
    expect = replace(scenario.expect, server_exit=None)
    record = SessionRecord(
        scenario.name,
        target,
        expect,
        budgets=Budgets(
            interrupt_s=plan.interrupt_budget_ms / 1000,
            teardown_s=plan.teardown_ms / 1000,
            request_s=plan.request_timeout_ms / 1000,
        ),
        experimental_api=plan.experimental_api,
        meta={"scenario_turns": len(scenario.turns), "outside": facts},
    )
    if server is not None:
        record.wire = [replace(e, t=round(e.t - zero, 6)) for e in server.wire]
        record.server_trace = server.trace_bundle
        record.server_version = server.start.get("profile")
        record.schema_release = str(server.start.get("profile") or "0.171.0")
        end = server.end
        record.server_exit = end.get("exit_code") if end else None
    return record
