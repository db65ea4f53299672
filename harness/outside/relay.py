"""The recorder relay between an outside client and a server process (``run --client-cmd CMD --target real``).

The client's ``codex`` shim execs this module; it starts the server (the real binary, sealed as ``--target real``
seals it: :func:`main`) and sits between the two pipes. Each direction is one thread doing ``os.read`` then
``os.write`` of exactly the bytes read: nothing is reordered, held back until a newline or merged, so each side
sees what the other wrote as the pipe gave it. After a chunk is forwarded its completed lines are recorded in the
format of ``fake-codex --record`` (:mod:`fake_server.recording`: ``DIR/<n>-<pid>/`` with ``start.json``,
``wire.jsonl``, ``end.json``), ``t`` the monotonic time the chunk was read, so the same wire checks judge it. A
line is held only up to the wire's cap (:class:`contracts.wire.LineFraming`); the wire file stops at
:data:`~fake_server.recording.MAX_WIRE_BYTES` with one ``recording truncated`` note; each write is whole lines
in one ``os.write``, so a relay killed mid-line leaves a readable file.

The client's moves reach the server as they would have: its stdin closed closes the server's (a ``stdin
closed`` note); SIGTERM / SIGINT / SIGHUP sent to the relay go to the server's process group (a ``signal``
note). The relay exits as the server did (its status, or the same signal), after ``end.json``.

``relay.json`` holds the relay's own cost: per message the time from the read of the chunk that completed it to
the end of that chunk's write (in → out), as percentiles per direction (bench/relay.py reads it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from array import array
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from contracts import bounded_parse
from contracts.exitcodes import USAGE
from contracts.wire import DEFAULT_MAX_LINE, Incoming, LineFraming, WireError, parse_items
from fake_server.recording import MAX_WIRE_BYTES, claim_folder, start_fields, wire_entry

READ_BYTES = 65536
#: Overhead samples kept per direction (a flood past it is counted, not sampled).
MAX_SAMPLES = 2_000_000
#: How long the server's stdout may stay open after it exited (a grandchild holding it).
DRAIN_AFTER_EXIT_S = 2.0
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: The environment entry every relay (and what it starts) carries: the recording root, so the harness tells a
#: server's processes from the client's own helpers. Not ``CODEX_*``: that prefix is scrubbed from the binary.
RELAY_ENV = "HARNESS_RELAY_RECORD"


class WireWriter:
    """``wire.jsonl`` of one server: whole lines per ``os.write``, bounded, shared by both directions, in the
    order of the times the chunks were read.

    Each direction records a chunk after forwarding it, so the other direction may answer it before it is
    recorded. Order holds all the same: a chunk's time is taken, and its place claimed, under one lock
    (:meth:`claim`) before it is forwarded, and a place is written only once every earlier one is filled
    (:meth:`fill`). What one side sends in reply to a line was read after that line was forwarded, so it comes
    later in the file, as in time."""

    def __init__(self, path: Path) -> None:
        self._fd: int | None = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
        self._lock = threading.RLock()  # a signal's note may come in the main thread while it holds it
        self._slots: deque[list[bytes | None]] = deque()
        self._written = 0
        self.truncated = False
        self.failure: str | None = None

    def claim(self) -> tuple[list[bytes | None], float]:
        """A place in the file, and the time it stands for (now)."""
        slot: list[bytes | None] = [None]
        with self._lock:
            t = time.monotonic()
            self._slots.append(slot)
        return slot, t

    def fill(self, slot: list[bytes | None], data: bytes) -> None:
        """``data`` (whole lines, maybe none) at its place; written with every filled place before it."""
        with self._lock:
            slot[0] = data
            ready = []
            while self._slots and self._slots[0][0] is not None:
                ready.append(self._slots.popleft()[0])
            if ready:
                self._write(b"".join(ready))  # type: ignore[arg-type]

    def put(self, entries: list[dict[str, Any]], slot: list[bytes | None] | None = None) -> None:
        if slot is None:
            slot, _ = self.claim()
        self.fill(slot, b"".join(orjson.dumps(e) + b"\n" for e in entries))

    def _write(self, data: bytes) -> None:
        with self._lock:
            if not data or self._fd is None or self.truncated:
                return
            if self._written + len(data) > MAX_WIRE_BYTES:
                self.truncated = True
                note = {"t": round(time.monotonic(), 6), "dir": "note", "msg": {"note": "recording truncated"}}
                data = orjson.dumps(note) + b"\n"
            self._written += len(data)
            try:
                while data:
                    data = data[os.write(self._fd, data) :]
            except OSError as exc:  # a full disk stops the recording, never the relay
                self.failure = f"{exc.strerror or exc} writing wire.jsonl"
                self.truncated = True

    def note(self, text: str) -> float:
        """A note at its place; the time it stands for."""
        slot, t = self.claim()
        self.put([{"t": round(t, 6), "dir": "note", "msg": {"note": text}}], slot)
        return t

    def close(self) -> None:
        with self._lock:
            # A place a thread never filled (it was still recording as the relay ended) is left out.
            self._write(b"".join(slot[0] for slot in self._slots if slot[0] is not None))
            self._slots.clear()
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


class Pump(threading.Thread):
    """One direction: read a chunk, write it on at once, then record the lines it completed."""

    def __init__(
        self,
        direction: str,
        src: int,
        dst: int,
        wire: WireWriter,
        *,
        on_eof: Callable[[float], None] | None = None,
        eof_note: str | None = None,
        close_dst: bool = True,
        record: bool = True,
    ) -> None:
        super().__init__(name=f"relay-{direction}", daemon=True)
        self.direction, self.src, self.dst, self.wire = direction, src, dst, wire
        self.framing = LineFraming(DEFAULT_MAX_LINE)
        self.on_eof = on_eof
        #: the note recorded at the end of this direction's input (``stdin closed``), before the other side is told
        self.eof_note = eof_note
        self.close_dst = close_dst
        #: False: forward and time only, lines counted by their newlines (the benchmark's baseline)
        self.record = record
        self.samples = array("d")
        #: per chunk, from its read to the end of its recording (what the next read waits for)
        self.cycles = array("d")
        self.messages = 0
        self.bytes = 0
        self.forward_failed: str | None = None

    def run(self) -> None:
        src, dst, framing, wire, samples = self.src, self.dst, self.framing, self.wire, self.samples
        direction, monotonic, read, write = self.direction, time.monotonic, os.read, os.write
        forwarding = True
        claim = wire.claim
        while True:
            try:
                data = read(src, READ_BYTES)
            except OSError:
                data = b""
            if not data:
                break
            slot, t_in = claim()  # the chunk's time and its place in the file, before the other side can answer
            if forwarding:
                try:
                    view = memoryview(data)
                    while view:
                        view = view[write(dst, view) :]
                except OSError as exc:  # the reader went away: keep recording what the writer still sends
                    forwarding = False
                    self.forward_failed = exc.strerror or str(exc)
            t_out = monotonic()
            self.bytes += len(data)
            if not self.record:
                wire.fill(slot, b"")
                count = data.count(b"\n")
                self.messages += count
                if forwarding and count and len(samples) < MAX_SAMPLES:
                    samples.extend([t_out - t_in] * count)
                    self.cycles.append(monotonic() - t_in)
                continue
            lines = recorded_lines(framing.feed(data), t_in, direction)
            wire.fill(slot, b"".join(lines))
            if lines:
                self.messages += len(lines)
                if forwarding and len(samples) < MAX_SAMPLES:
                    samples.extend([t_out - t_in] * len(lines))
                    self.cycles.append(monotonic() - t_in)
        slot, t_end = claim()  # the torn line and the note take their place before the other side sees the end
        ended = [wire_entry(t_end, direction, item) for item in parse_items(framing.feed_eof())]
        if self.eof_note is not None:
            ended.append({"t": round(t_end, 6), "dir": "note", "msg": {"note": self.eof_note}})
        wire.put(ended, slot)
        if self.close_dst:
            try:
                os.close(dst)
            except OSError:
                pass
        if self.on_eof is not None:
            self.on_eof(t_end)

    def stats(self) -> dict[str, Any]:
        cycle = {f"cycle_{k}": v for k, v in percentiles(self.cycles).items() if k != "sampled"}
        return {"messages": self.messages, "bytes": self.bytes, **percentiles(self.samples), **cycle}


def recorded_lines(payloads: list[Incoming], t: float, direction: str) -> list[bytes]:
    """``wire.jsonl`` lines of what a framing completed. A frame is embedded as the bytes it came in (its JSON
    already checked by one parse, so the reader gets the very object; no second encoding on the relay's path);
    anything else (a framing error, not JSON, not a message) is recorded as ``fake-codex --record`` does."""
    out = []
    head = b'{"t":%.6f,"dir":"%s","msg":' % (t, direction.encode())
    loads = bounded_parse.loads_json
    for one in payloads:
        if type(one) is bytes:
            try:
                obj = loads(one)
            except orjson.JSONDecodeError:
                obj = None
            # A notification (no id, a string method) is a message as it is; anything else is classified.
            if type(obj) is dict and "id" not in obj and type(obj.get("method")) is str:
                out.append(head + one.strip() + b"}\n")
                continue
            if not one.strip():
                continue
        for item in parse_items([one]):
            if isinstance(item, WireError):
                out.append(orjson.dumps(wire_entry(t, direction, item)) + b"\n")
            else:
                out.append(head + one.strip() + b"}\n")  # type: ignore[union-attr]
    return out


def percentiles(samples: Sequence[float]) -> dict[str, Any]:
    """p50 / p99 / max of ``samples`` (seconds) in milliseconds, and how many were sampled."""
    if not samples:
        return {"sampled": 0}
    ordered = sorted(samples)
    n = len(ordered)

    def at(q: float) -> float:
        return round(ordered[min(n - 1, int(q * n))] * 1000, 4)

    return {"sampled": n, "p50_ms": at(0.50), "p99_ms": at(0.99), "max_ms": round(ordered[-1] * 1000, 4)}


class Relay:
    """One server process behind the relay, recorded into ``folder`` (claimed already, ``start.json`` written)."""

    def __init__(self, folder: Path, *, record: bool = True) -> None:
        self.folder = folder
        self.record = record
        self.wire = WireWriter(folder / "wire.jsonl")
        self.stdin_closed_t: float | None = None
        self.signal: str | None = None
        self.signal_t: float | None = None
        self.child: subprocess.Popen[bytes] | None = None
        #: signals that came before the server could be signalled (while it was being started): sent once it is
        self._pending: list[int] = []

    def _stdin_closed(self, t: float) -> None:
        self.stdin_closed_t = t

    def _on_signal(self, signum: int, _frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.signal is None:
            self.signal = name
            self.signal_t = self.wire.note(f"signal {name}")
        child = self.child
        if child is None:
            self._pending.append(signum)
        elif child.returncode is None:
            try:
                os.killpg(child.pid, signum)  # its group: the launcher and the server inside it
            except OSError:
                pass

    def run(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path, stdin: int = 0, stdout: int = 1) -> int:
        """Start ``argv`` and relay ``stdin`` / ``stdout`` to it until it exited; its ``returncode``."""
        for signum in FORWARDED:
            signal.signal(signum, self._on_signal)
        try:
            self.child = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=dict(env),
                cwd=cwd,
                start_new_session=True,  # one group to signal, ours untouched
                bufsize=0,
            )
        except OSError as exc:
            self.abandon(f"server could not start: {exc.strerror or exc}", 127)
            return 127
        assert self.child.stdin is not None and self.child.stdout is not None
        for pending in self._pending:  # what the client sent while the server was starting reaches it now
            try:
                os.killpg(self.child.pid, pending)
            except OSError:
                pass
        to_server = os.dup(self.child.stdin.fileno())
        from_server = os.dup(self.child.stdout.fileno())
        self.child.stdin.close()
        self.child.stdout.close()
        c2s = Pump(
            "c2s", stdin, to_server, self.wire, on_eof=self._stdin_closed, eof_note="stdin closed", record=self.record
        )
        s2c = Pump("s2c", from_server, stdout, self.wire, close_dst=False, record=self.record)
        c2s.start()
        s2c.start()
        code = self.child.wait()
        exited = time.monotonic()
        s2c.join(DRAIN_AFTER_EXIT_S)
        if s2c.is_alive():
            self.wire.note("server's stdout still open after it exited (a process it started holds it)")
        self._finish(code, exited, {"c2s": c2s.stats(), "s2c": s2c.stats()})
        return code

    def abandon(self, why: str, code: int) -> None:
        """No server was started: the note says why, ``end.json`` the status the client gets."""
        self.wire.note(why)
        self._finish(code, time.monotonic(), {})

    def _finish(self, code: int, exited: float, stats: dict[str, Any]) -> None:
        ends = [(t, why) for t, why in ((self.stdin_closed_t, "stdin_closed"), (self.signal_t, "signal")) if t]
        at, reason = min(ends) if ends else (exited, "exit")
        end = {
            "reason": reason,
            "t": at,
            "exited_t": exited,
            "exit_code": max(-255, min(255, code)),
            "signal": self.signal,
            "stdin_closed_t": self.stdin_closed_t,
            "truncated": self.wire.truncated,
            "write_failed": self.wire.failure,
        }
        self.wire.close()
        write_json(self.folder / "relay.json", {"overhead": stats})
        write_json(self.folder / "end.json", end)


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Whole or not at all (a reader never sees half a file)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
        os.replace(tmp, path)
    except OSError:
        pass


def exit_as(code: int) -> int:
    """Leave as the server did: its status, or killed by the same signal."""
    sys.stdout.flush()
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        return 128 - code
    return code


def start_json(folder: Path, extra: dict[str, Any]) -> None:
    write_json(folder / "start.json", start_fields(folder, extra))


def bare(root: Path, argv: list[str], *, record: bool = True) -> int:
    """Relay to ``argv`` itself (no real target, no mock), recorded under ``root``: the flood test and the
    benchmark's peer. ``record=False``: forwarded and timed only (the benchmark's baseline)."""
    folder = claim_folder(root)
    if folder is None:
        return 126
    start_json(folder, {"scenario": None, "profile": None, "relay": {"args": argv[:32]}})
    return Relay(folder, record=record).run(argv, os.environ, Path.cwd())


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.outside.relay --bare ROOT -- ARGV...`` (:func:`bare`; ``--bare-copy``: not recorded).
    The shim of a real run starts :mod:`harness.outside.real_relay` instead."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) >= 4 and args[0] in ("--bare", "--bare-copy") and args[2] == "--":
        return exit_as(bare(Path(args[1]), args[3:], record=args[0] == "--bare"))
    print("harness.outside.relay: usage: relay --bare|--bare-copy ROOT -- ARGV...", file=sys.stderr)
    return USAGE


if __name__ == "__main__":
    sys.exit(main())
