"""``fake-codex --record DIR``: what the fake saw, for judging a client we did not write.

Each server process gets its own folder ``DIR/<n>-<pid>/`` (``n`` counts the servers of the
recording from 1, claimed atomically so concurrent servers never share a number):

    start.json     pid, argv, the scenario's name, reference and hash, the release profile, the run
                   marker, when it started (monotonic and Unix seconds) and when its process started
                   (``process_started_t``, monotonic: the client's clock on ``initialize`` may run from
                   there, while the wire's starts once the process is ready); ``play``: what decides what
                   the fake plays (:func:`play_identity`) and ``play_sources``: where each came from
                   (a flag, a variable, the scenario, the default), so a wrapper that gave one value
                   sees a client that changed it
    wire.jsonl     every line both ways, ``{"t", "dir", "msg"}`` as ``codex-harness show`` reads it;
                   ``t`` is CLOCK_MONOTONIC seconds (system-wide on Linux, so comparable with the
                   harness's own clock); notes mark stdin EOF and signals
    server-trace/  the server's rollout-trace bundle
    end.json       how it ended: ``stdin_closed`` | ``signal`` | ``crash`` | ``exit``, when, the exit
                   code. No ``end.json`` means the process was killed (SIGKILL) or died unrecorded.

Bounded: a message is kept up to the wire cap and reported as its framing's error past it (on stdio
``oversized_line``); the wire file
stops at :data:`MAX_WIRE_BYTES` with one ``recording truncated`` note; every write is one ``os.write``
of whole lines, so a SIGKILL leaves a readable file.

Never in the server's way: a write that fails (a full disk, a quota) stops the recording, never the
server. The first failure is said once on stderr and left in the folder as an empty file named for it,
``write-failed-ENOSPC`` (a name needs no data block of a full disk), so that whoever reads the recording
can tell a recording the disk cut from a client that did nothing; ``end.json`` names it too when it can
still be written.
"""

from __future__ import annotations

import errno
import hashlib
import os
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from contracts.releases import default_version
from contracts.text import escape
from contracts.wire import DEFAULT_MAX_LINE, Incoming, LineFraming, WireError, parse_items

if TYPE_CHECKING:  # `fake-codex --version` reads RECORD_ENV here without the scenario model (bench/fake_start.py)
    from contracts.scenario import Scenario

RECORD_ENV = "FAKE_CODEX_RECORD"
RUN_MARKER_ENV = "CODEX_HARNESS_RUN_MARKER"
RECORDING_FORMAT = 1
MAX_WIRE_BYTES = 64 * 1024 * 1024
MAX_SERVERS = 10_000  # folders one recording may hold; past it the server runs unrecorded
_RAW_SAMPLE = 120
END_REASONS = ("stdin_closed", "signal", "crash", "exit")
#: The empty file a failed write leaves in the folder: ``write-failed-<errno name>``.
WRITE_FAILED_PREFIX = "write-failed-"


def scenario_hash(scenario: Scenario) -> str:
    """sha256 of the scenario's canonical TOML (its ``source`` left out: the same script from two paths)."""
    from contracts.scenario_file import dumps

    return hashlib.sha256(dumps(replace(scenario, source=None)).encode("utf-8")).hexdigest()


def play_identity(scenario: Scenario, release: str) -> dict[str, str]:
    """What decides what the fake plays, as a recording names it and a wrapper expects it: the scenario (its
    hash) and the release profile. Every input that changes the play belongs here, so that one comparison
    catches a client that changed any of them (``-c`` settings change nothing: the fake honours none)."""
    return {"scenario_hash": scenario_hash(scenario), "release": release}


def _claim_folder(root: Path) -> Path | None:
    """``root/<n>-<pid>``, ``n`` the first number no other server of the recording claimed."""
    root.mkdir(parents=True, exist_ok=True)
    pid = os.getpid()
    claimed = len([p for p in root.iterdir() if p.name.startswith(".n-")])
    for n in range(claimed + 1, MAX_SERVERS + 1):
        try:
            fd = os.open(root / f".n-{n}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            continue
        os.close(fd)
        folder = root / f"{n}-{pid}"
        folder.mkdir()
        return folder
    return None


#: Public names for other recorders of the same format (harness.outside.relay).
def claim_folder(root: Path) -> Path | None:
    """``root/<n>-<pid>`` for this process (:func:`_claim_folder`), None when the recording is full."""
    return _claim_folder(root)


def wire_entry(t: float, direction: str, item: Any) -> dict[str, Any]:
    """One ``wire.jsonl`` line's object: a parsed frame, or a framing error as ``_raw`` / ``_error`` / ``_size``."""
    return _entry(t, direction, item)



def process_started_t() -> float | None:
    """When this process started (the client's spawn of it: the shim execs the fake in the same process), on
    CLOCK_MONOTONIC; None where ``/proc`` or CLOCK_BOOTTIME cannot say. ``/proc/self/stat`` gives the start in
    clock ticks since boot; its age now on CLOCK_BOOTTIME, taken from the monotonic clock, places it there."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            stat = fh.read(4096)
        ticks = int(stat[stat.rindex(b")") + 2 :].split()[19])  # field 22, counted after the command's ")"
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return round(time.monotonic() - max(0.0, age), 6)


def start_fields(folder: Path, extra: dict[str, Any]) -> dict[str, Any]:
    """A recording's ``start.json``: which folder of the run (``n``), which process, and what it plays
    (``extra``); every recorder (fake-codex, the relay in front of a real binary) writes this shape."""
    return {
        "format": RECORDING_FORMAT,
        "n": int(folder.name.split("-", 1)[0]),
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "argv": sys.argv[:32],
        **extra,
        "started_t": time.monotonic(),
        "started_unix": time.time(),
        "process_started_t": process_started_t(),
    }

class _Direction:
    """Messages of one direction, as the reader at the other end gets them (the wire's framing bounds them).
    The start of a message never finished (a crash mid-write, or ``partial_line``: then silence) is recorded when
    it is written: a server then killed (SIGKILL) never reaches the end of its stream, and the record must not
    depend on how the client ended it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.framing = LineFraming(DEFAULT_MAX_LINE)  # the fake records its stdio

    def entries(self, messages: list[Incoming], t: float) -> list[dict[str, Any]]:
        """Messages a framing already bounded (what the fake read)."""
        return [_entry(t, self.name, item) for item in parse_items(messages)]

    def written(self, messages: list[bytes], t: float, torn: bytes = b"") -> list[dict[str, Any]]:
        """Payloads the fake wrote, bounded here as the client's reader bounds them."""
        out = self.entries(self.framing.check(messages), t)
        if torn.strip():
            out.append(_entry(t, self.name, self.framing.torn(torn)))
        return out


def _entry(t: float, direction: str, item: Any) -> dict[str, Any]:
    if isinstance(item, WireError):
        raw = item.sample[:_RAW_SAMPLE].decode("utf-8", "replace")
        msg: dict[str, Any] = {"_raw": raw, "_error": str(item.kind), "_size": item.size}
    else:
        msg = item.frame
    return {"t": round(t, 6), "dir": direction, "msg": msg}


class Recorder:
    """The recording of one server process. Not thread-safe; the fake is one trio task per direction."""

    def __init__(
        self,
        folder: Path,
        scenario: Scenario,
        spec: str | None,
        profile: str,
        sources: dict[str, str] | None = None,
    ) -> None:
        self.folder = folder
        self._c2s = _Direction("c2s")
        self._s2c = _Direction("s2c")
        self._written = 0
        self._truncated = False
        #: the first write that failed, as said on stderr; None while the recording is whole
        self.failure: str | None = None
        self.stdin_closed_at: float | None = None
        self.signal: str | None = None
        self.signal_at: float | None = None
        self.ended = False
        self._fd: int | None = None
        try:
            self._fd = os.open(folder / "wire.jsonl", os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
        except OSError as exc:
            self._failed("wire.jsonl", exc)
        start = start_fields(
            folder,
            {
                "scenario": scenario.name,
                "scenario_ref": spec,
                "scenario_hash": scenario_hash(scenario),
                "profile": profile,
                "play": play_identity(scenario, profile),
                "play_sources": dict(sources or {}),
                "run_marker": os.environ.get(RUN_MARKER_ENV),
            },
        )
        self._write_json("start.json", start)

    def _failed(self, name: str, exc: OSError) -> None:
        """The recording stops at its first failed write: said once, and left in the folder as a file's name."""
        self._truncated = True
        if self.failure is not None:
            return
        code = errno.errorcode.get(exc.errno or 0, "EIO")
        self.failure = f"{exc.strerror or exc} ({code}) writing {name}"
        try:
            os.close(os.open(self.folder / f"{WRITE_FAILED_PREFIX}{code}", os.O_CREAT | os.O_WRONLY, 0o644))
        except OSError:
            pass  # not even a name fits: the missing files say it
        _say(f"fake-codex: recording into {self.folder} stopped: {self.failure}; the server goes on")

    def _write_json(self, name: str, data: dict[str, Any]) -> None:
        tmp = self.folder / f"{name}.tmp"
        try:
            tmp.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
            os.replace(tmp, self.folder / name)
        except OSError as exc:
            self._failed(name, exc)
            try:
                tmp.unlink()  # a partial file would read as a forged one
            except OSError:
                pass

    @property
    def trace_root(self) -> Path:
        return self.folder / "server-trace"

    def _put(self, entries: list[dict[str, Any]]) -> None:
        if not entries or self._truncated:
            return
        data = b"".join(orjson.dumps(e) + b"\n" for e in entries)
        if self._written + len(data) > MAX_WIRE_BYTES:
            self._truncated = True
            note = {"t": round(time.monotonic(), 6), "dir": "note", "msg": {"note": "recording truncated"}}
            data = orjson.dumps(note) + b"\n"
        self._written += len(data)
        if self._fd is None:
            return
        try:
            while data:
                data = data[os.write(self._fd, data) :]
        except OSError as exc:
            self._failed("wire.jsonl", exc)  # a full disk stops the recording, never the server

    def inbound(self, messages: list[Incoming]) -> None:
        self._put(self._c2s.entries(messages, time.monotonic()))

    def outbound(self, messages: list[bytes], torn: bytes = b"") -> None:
        self._put(self._s2c.written(messages, time.monotonic(), torn))

    def note(self, text: str) -> None:
        self._put([{"t": round(time.monotonic(), 6), "dir": "note", "msg": {"note": text}}])

    def on_stdin_eof(self) -> None:
        if self.stdin_closed_at is None:
            self.stdin_closed_at = time.monotonic()
            self.note("stdin closed")

    def keep_signals(self) -> None:
        """Record SIGTERM/SIGINT that come outside the server's own loop (just before it leaves) and carry on
        to ``finish``: the default action would kill the process before ``end.json`` is written."""
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda n, _frame: self.on_signal(signal.Signals(n).name))

    def on_signal(self, name: str) -> None:
        if self.signal is None:
            self.signal, self.signal_at = name, time.monotonic()
            self.note(f"signal {name}")

    def finish(self, code: int, crashed: bool) -> None:
        """Write ``end.json``. Called once, just before the process leaves."""
        if self.ended:
            return
        self.ended = True
        now = time.monotonic()
        ends = [(t, why) for t, why in ((self.stdin_closed_at, "stdin_closed"), (self.signal_at, "signal")) if t]
        if crashed:
            reason, at = "crash", now
        elif ends:
            at, reason = min(ends)  # the client's first move ends the session (close stdin, then SIGTERM)
        else:
            reason, at = "exit", now
        end = {
            "reason": reason,
            "t": at,
            "exited_t": now,
            "exit_code": code,
            "signal": self.signal,
            "stdin_closed_t": self.stdin_closed_at,
            "truncated": self._truncated,
            "write_failed": self.failure,
        }
        self._write_json("end.json", end)
        if self._fd is not None:
            fd, self._fd = self._fd, None  # a signal after this (close stdin, then SIGTERM) writes nothing
            try:
                os.close(fd)
            except OSError:
                pass


def _say(text: str) -> None:
    """One line on stderr, escaped (the folder's name is the caller's text: contracts.text)."""
    try:
        os.write(2, (escape(text) + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def open_recorder(
    root: str | None,
    scenario: Scenario,
    spec: str | None,
    release: str | None = None,
    sources: dict[str, str] | None = None,
) -> Recorder | None:
    """The recorder for ``root`` (``--record`` or ``$FAKE_CODEX_RECORD``), None when not recording.

    An unusable root is reported on stderr and the server runs unrecorded: the client still gets a server.
    """
    if not root:
        return None
    try:
        folder = _claim_folder(Path(root))
    except OSError as exc:
        print(f"fake-codex: cannot record into {root}: {exc.strerror}", file=sys.stderr)
        return None
    if folder is None:
        print(f"fake-codex: {root} already holds {MAX_SERVERS} recordings; not recording", file=sys.stderr)
        return None
    # ``release``: the profile fake-codex plays (fake_server.profiles), which the recording names.
    return Recorder(folder, scenario, spec, release or default_version(), sources)


class RecordingIo:
    """The stdio I/O of the fake with every message both ways going through the recorder too."""

    def __init__(self, io: Any, recorder: Recorder) -> None:
        self._io = io
        self.recorder = recorder

    def __getattr__(self, name: str) -> Any:
        return getattr(self._io, name)

    async def read(self) -> list[Incoming]:
        messages: list[Incoming] = await self._io.read()
        if messages:
            self.recorder.inbound(messages)
        else:
            self.recorder.on_stdin_eof()
        return messages

    async def write(self, messages: list[bytes], torn: bytes = b"") -> None:
        if not self._io.stdout_closed:
            self.recorder.outbound(messages, torn)
        await self._io.write(messages, torn)

    async def close_stdout(self) -> None:
        self.recorder.note("server closed stdout")
        await self._io.close_stdout()

    def write_stderr(self, text: str) -> None:
        self._io.write_stderr(text)

    async def spawn_grandchild(self, hold_ms: int) -> None:
        await self._io.spawn_grandchild(hold_ms)

    def trace(self, event: Any) -> None:
        self._io.trace(event)
