"""Session records built from a ``fake-codex --record`` folder: what the fake saw of an outside client.

One :class:`ServerRecording` per ``DIR/<n>-<pid>/``; :func:`server_record` turns one into a
:class:`~contracts.record.SessionRecord` whose wire is the server's view (rebased so ``t`` counts from the
client's start), whose server trace is the recording's bundle, and whose ``meta["outside"]`` carries the
facts :mod:`contracts.checks.client_run` judges.
"""

from __future__ import annotations

import errno
import itertools
import math
import os
import re
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from contracts import bounded_parse, safe_read
from contracts.exitcodes import InvalidInput
from contracts.record import Budgets, ModelEntry, RecordFormatError, SessionRecord, WireEntry
from contracts.releases import default_version
from contracts.scenario import Scenario
from contracts.trace.reader import bundles_under
from fake_server.recording import END_REASONS, MAX_SERVERS, MAX_WIRE_BYTES, WRITE_FAILED_PREFIX
from harness.wire_file import WireFileError, parse_line

#: A recorder stops at MAX_WIRE_BYTES and adds one note; anything bigger was not written by it.
MAX_READ_BYTES = MAX_WIRE_BYTES + 1024 * 1024
#: start.json and end.json are a few hundred bytes.
MAX_JSON_BYTES = 1024 * 1024
MAX_TEXT = 4096
MAX_PID = 2**31 - 1


class RecordingError(InvalidInput):
    """A folder that is not a readable fake-codex recording; ``str()`` says why."""


@dataclass(slots=True)
class ServerRecording:
    folder: Path
    start: dict[str, Any]
    end: dict[str, Any] | None
    wire: list[WireEntry]
    trace_bundle: Path | None
    #: the mock Responses API's traffic (``model.jsonl``: a relay to the real binary writes it; monotonic ``t``)
    model: list[ModelEntry] = field(default_factory=list)

    @property
    def n(self) -> int:
        return int(self.start["n"])

    @property
    def pid(self) -> int:
        return int(self.start["pid"])


def _folder_name(name: str) -> bool:
    n, _, pid = name.partition("-")
    return n.isdigit() and pid.isdigit()


def _hold(path: Path, parent_fd: int | None) -> int:
    """A descriptor of the directory ``path``: its name opened in ``parent_fd`` (the held directory it is in),
    not followed; without one, the path as named (a link the user made is theirs)."""
    if parent_fd is not None:
        return safe_read.open_dir(path.name, dir_fd=parent_fd)
    return safe_read.open_dir(path, follow=True)


def is_recording(path: Path) -> bool:
    return safe_read.is_regular(path / "start.json") and safe_read.is_regular(path / "wire.jsonl")


def recording_folders(root: Path, *, parent_fd: int | None = None) -> list[Path]:
    """``root/<n>-<pid>`` folders with a start.json (whatever it is: reading it says) in order of ``n`` (real
    directories only: a link is not a recording).
    ``parent_fd``: the held directory ``root`` is in (:func:`_hold`)."""
    try:
        fd = _hold(root, parent_fd)
    except OSError:
        return []
    try:
        found = [
            name
            for name, mode in safe_read.entries_of(fd, root, limit=4 * MAX_SERVERS)
            if stat.S_ISDIR(mode) and _folder_name(name) and safe_read.exists(f"{name}/start.json", dir_fd=fd)
        ]
    except OSError:
        return []
    finally:
        os.close(fd)
    return [root / name for name in sorted(found, key=lambda name: int(name.split("-", 1)[0]))]


def _json(fd: int, folder: Path, name: str) -> dict[str, Any] | None:
    try:
        data = safe_read.read_json(name, MAX_JSON_BYTES, dir_fd=fd, shown=folder / name)
    except FileNotFoundError:
        return None
    except safe_read.Refused as exc:
        raise RecordingError(str(exc)) from None
    except (OSError, orjson.JSONDecodeError) as exc:
        raise RecordingError(f"{folder / name}: {exc}") from None
    if not isinstance(data, dict):
        raise RecordingError(f"{folder / name}: not a JSON object")
    return data


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _check(where: Path, data: dict[str, Any], key: str, ok: bool, want: str) -> None:
    if not ok:
        raise RecordingError(
            f"{where}: {key!r} must be {want}, got {data.get(key)!r:.80} (fake-codex never writes that)"
        )


def _text(value: Any) -> bool:
    return value is None or (isinstance(value, str) and len(value) <= MAX_TEXT)


def _checked_start(where: Path, folder_name: str, start: dict[str, Any]) -> dict[str, Any]:
    """start.json as fake-codex writes it: every field the harness uses of the type it has, in its range."""
    n, pid = start.get("n"), start.get("pid")
    _check(where, start, "n", type(n) is int and 1 <= n <= MAX_SERVERS, f"an integer in 1..{MAX_SERVERS}")
    _check(where, start, "pid", type(pid) is int and 1 <= pid <= MAX_PID, "a process id")
    _check(where, start, "started_t", _number(start.get("started_t")), "a finite number of seconds")
    process_t = start.get("process_started_t")  # absent from older recordings, None where /proc could not say
    _check(where, start, "process_started_t", process_t is None or _number(process_t), "a finite number of seconds")
    for key in ("scenario", "scenario_ref", "scenario_hash", "profile", "run_marker"):
        _check(where, start, key, _text(start.get(key)), f"a string of at most {MAX_TEXT} characters")
    for key in ("play", "play_sources"):  # what decided the play, and where each input came from
        value = start.get(key)
        shaped = value is None or (
            isinstance(value, dict) and len(value) <= 16 and all(_text(k) and _text(v) for k, v in value.items())
        )
        _check(where, start, key, shaped, "an object of at most 16 strings")
    if folder_name != f"{n}-{pid}":
        raise RecordingError(f"{where}: n {n} and pid {pid} are not those of its folder {folder_name!r}")
    return start


def _checked_end(where: Path, end: dict[str, Any]) -> dict[str, Any]:
    code = end.get("exit_code")
    _check(where, end, "reason", end.get("reason") in END_REASONS, f"one of {', '.join(END_REASONS)}")
    _check(where, end, "t", _number(end.get("t")), "a finite number of seconds")
    _check(where, end, "exited_t", end.get("exited_t") is None or _number(end["exited_t"]), "a number or null")
    closed = end.get("stdin_closed_t")
    _check(where, end, "stdin_closed_t", closed is None or _number(closed), "a number or null")
    _check(where, end, "exit_code", code is None or (type(code) is int and -255 <= code <= 255), "an exit status")
    _check(where, end, "signal", _text(end.get("signal")), "a signal name or null")
    _check(where, end, "truncated", isinstance(end.get("truncated", False), bool), "true or false")
    _check(where, end, "write_failed", _text(end.get("write_failed")), "a string or null")
    return end


def _first_bundle(root: Path) -> Path | None:
    bundles = bundles_under(root)
    return bundles[0] if bundles else None


def read_recording(folder: Path, *, parent_fd: int | None = None) -> ServerRecording:
    """One ``<n>-<pid>`` folder, read with the bounded reader (``parent_fd``: :func:`_hold`)."""
    try:
        fd = _hold(folder, parent_fd)
    except OSError as exc:
        raise RecordingError(safe_read.explain(folder, exc)) from None
    try:
        return _read_recording(folder, fd)
    finally:
        os.close(fd)


def _read_recording(folder: Path, fd: int) -> ServerRecording:
    start = _json(fd, folder, "start.json")
    if start is None:
        raise RecordingError(f"{folder}: no start.json (not a fake-codex recording)")
    start = _checked_start(folder / "start.json", folder.name, start)
    wire_path = folder / "wire.jsonl"
    wire: list[WireEntry] = []
    try:
        with safe_read.open_bounded("wire.jsonl", MAX_READ_BYTES, dir_fd=fd, shown=wire_path) as fh:
            lines = fh.read().splitlines()
    except safe_read.Refused as exc:
        raise RecordingError(str(exc)) from None
    except OSError as exc:
        raise RecordingError(f"cannot read {wire_path}: {exc.strerror}") from None
    for n, line in enumerate(lines, 1):
        try:
            entry = parse_line(line, str(wire_path), n)
        except WireFileError as exc:
            if n == len(lines):
                break  # a last line cut by a SIGKILL mid-write
            raise RecordingError(str(exc)) from None
        if entry is not None:
            wire.append(entry)
    end = _json(fd, folder, "end.json")
    end = _checked_end(folder / "end.json", end) if end is not None else None
    trace = _first_bundle(folder / "server-trace") if safe_read.is_dir("server-trace", dir_fd=fd) else None
    return ServerRecording(folder, start, end, wire, trace, _model(fd, folder))


#: model.jsonl: the mock keeps at most 100,000 events of a few hundred bytes.
MAX_MODEL_BYTES = 64 * 1024 * 1024


def _model(fd: int, folder: Path) -> list[ModelEntry]:
    """The mock's traffic a relay left (none from fake-codex); a line that is not one is a RecordingError."""
    if not safe_read.is_regular("model.jsonl", dir_fd=fd):
        return []
    try:
        with safe_read.open_bounded("model.jsonl", MAX_MODEL_BYTES, dir_fd=fd, shown=folder / "model.jsonl") as fh:
            lines = fh.read().splitlines()
    except safe_read.Refused as exc:
        raise RecordingError(str(exc)) from None
    except OSError as exc:
        raise RecordingError(f"cannot read {folder / 'model.jsonl'}: {exc.strerror}") from None
    out = []
    for n, line in enumerate(lines, 1):
        try:
            data = bounded_parse.loads_json(line, bounded_parse.MAX_RECORD_DEPTH)
            if not isinstance(data, dict) or not _number(data.get("t")):
                raise RecordFormatError("not {t, dir, msg}")
            out.append(ModelEntry.from_json(data))
        except (orjson.JSONDecodeError, RecordFormatError, KeyError, TypeError, ValueError) as exc:
            if n == len(lines):
                break  # a last line cut by a SIGKILL mid-write
            raise RecordingError(f"{folder / 'model.jsonl'}:{n}: {exc}") from None
    return out


def read_recordings(
    root: Path, *, parent_fd: int | None = None, problems: list[str] | None = None
) -> list[ServerRecording]:
    """Every recording under ``root`` in order of ``n`` (``parent_fd``: :func:`_hold`). ``problems``: a folder
    that is not one fake-codex wrote is said there and left out; without it, its RecordingError is raised."""
    try:
        fd = _hold(root, parent_fd)
    except FileNotFoundError:
        return []
    except OSError as exc:
        if problems is None:
            raise RecordingError(safe_read.explain(root, exc)) from None
        problems.append(safe_read.explain(root, exc))
        return []
    try:
        servers = []
        for folder in recording_folders(root, parent_fd=parent_fd):
            try:
                servers.append(read_recording(folder, parent_fd=fd))
            except RecordingError as exc:
                if problems is None:
                    raise
                problems.append(str(exc))
        return servers
    finally:
        os.close(fd)


#: At most this many of a recording root's entries are looked at for what went wrong (a client may fill it).
_MAX_LOOKED_AT = 1000


def cut_recordings(root: Path) -> tuple[list[str], set[str]]:
    """What the disk kept from the recordings under ``root``, one line per server, and the folders it cut: a write
    the disk refused (the ``write-failed-*`` file a recorder leaves at its first failed write), a number claimed
    with no folder made. Names only are read (a full disk may hold nothing else); links are not followed. A
    folder missing its files without saying why is not fake-codex's (read_recordings names it)."""
    try:
        with os.scandir(root) as it:
            entries = list(itertools.islice(it, _MAX_LOOKED_AT))
    except OSError:
        return [], set()
    folders = {e.name.split("-", 1)[0]: e for e in entries if e.is_dir(follow_symlinks=False) and _numbered(e.name)}
    claimed = sorted({e.name[3:] for e in entries if e.name.startswith(".n-") and e.name[3:].isdigit()}, key=int)
    problems, cut = [], set()
    for n in sorted(set(claimed) | set(folders), key=int):
        folder = folders.get(n)
        if folder is None:
            problems.append(f"server {n}: its recording folder could not be made")
            continue
        what = f"server {n} (pid {folder.name.split('-', 1)[1]})"
        try:
            with os.scandir(folder.path) as it:
                names = {e.name for e in itertools.islice(it, _MAX_LOOKED_AT)}
        except OSError as exc:
            problems.append(f"{what}: its recording cannot be read ({exc.strerror})")
            continue
        failed = sorted(name[len(WRITE_FAILED_PREFIX) :] for name in names if name.startswith(WRITE_FAILED_PREFIX))
        if failed:
            # Only a known errno name is repeated: the file name is another program's text.
            code = failed[0] if failed[0] in errno.errorcode.values() else None
            said = f"{os.strerror(getattr(errno, code))} ({code})" if code else "an error it did not name"
            problems.append(f"{what}: its recording could not be written: {said}")
            cut.add(folder.name)
    return problems, cut


def not_cut(problems: list[str], cut: set[str]) -> list[str]:
    """``problems`` (read_recordings') but those of the folders the disk cut (:func:`cut_recordings`)."""
    return [p for p in problems if not any(re.search(rf"(^|/){re.escape(f)}(/|:|$)", p) for f in cut)]


def _numbered(name: str) -> bool:
    n, _, pid = name.partition("-")
    return n.isdigit() and pid.isdigit()


def disk_free(path: Path) -> int | None:
    """Bytes an unprivileged writer may still write on the filesystem holding ``path`` (None: unknown)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


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
        "play": server.start.get("play"),  # judged by client / played as given, which checks its shape
        "play_sources": server.start.get("play_sources"),
        "started_t": _rebase(server.start.get("started_t"), zero),
        # when the client started the process (the wire's clock starts once the process is ready)
        "process_started_t": _rebase(server.start.get("process_started_t"), zero),
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
        meta={
            "scenario_turns": len(scenario.turns),
            "outside": facts,
            "approval_turns": scenario.approval_turns,
            # What the scenario foresees of its server's exit (a crash fault's status) for the checks that ask
            # whether the server's going was foreseen (client / plan followed), not compared with the exit.
            "foreseen_server_exit": scenario.expect.server_exit,
        },
    )
    if server is not None:
        record.wire = [replace(e, t=round(e.t - zero, 6)) for e in server.wire]
        record.server_trace = server.trace_bundle
        record.server_version = server.start.get("profile")
        record.schema_release = str(server.start.get("profile") or default_version())
        end = server.end
        record.server_exit = end.get("exit_code") if end else None
    return record


def session_record(records: list[SessionRecord]) -> SessionRecord:
    """The run's servers as one session, for what the client reports of the whole run (its result file): a client
    that starts a server per task plays the scenario's turns across them. Every server's wire, in time order
    (one clock: the client's start), each server's JSON-RPC ids told apart (``"2:7"`` is server 2's id 7) so a
    request is matched with its answer from the same server. One server: its record as it is."""
    if len(records) <= 1:
        return records[0]
    entries: list[tuple[float, int, int, WireEntry]] = []
    for k, record in enumerate(records, 1):
        for n, entry in enumerate(record.wire):
            frame = entry.frame
            if isinstance(frame, dict) and frame.get("id") is not None:
                shown = frame["id"] if isinstance(frame["id"], str) else orjson.dumps(frame["id"]).decode()
                entry = replace(entry, frame={**frame, "id": f"{k}:{shown}"})
            entries.append((entry.t, k, n, entry))
    entries.sort(key=lambda e: e[:3])
    return replace(records[0], wire=[e[3] for e in entries])


def saved_other_servers(primary: SessionRecord, saved: Path) -> list[SessionRecord]:
    """The records of a saved run's servers after the first, rebuilt from its ``recording/`` (the record keeps the
    first server's wire only; the checks over the whole run, plan followed, need them all)."""
    facts = primary.meta.get("outside") or {}
    out = []
    for server in (facts.get("servers") or [])[1:]:
        if not isinstance(server, dict) or not isinstance(server.get("folder"), str):
            continue
        folder = saved / "recording" / Path(server["folder"]).name
        if not is_recording(folder):
            continue
        recording = read_recording(folder)
        started = recording.start.get("started_t")
        rebased = server.get("started_t")
        if not isinstance(started, int | float) or not isinstance(rebased, int | float):
            continue
        zero = float(started) - float(rebased)
        own = {k: v for k, v in facts.items() if k not in ("stdout_tail", "stderr_tail", "result")}
        own.update(primary=False, server=server)
        record = replace(primary, meta={**primary.meta, "outside": own}, results=[])
        record.wire = [replace(e, t=round(e.t - zero, 6)) for e in recording.wire]
        record.server_trace = recording.trace_bundle
        out.append(record)
    return out
