"""A session record as a transcript: one ``{"t", "dir", "msg"}`` JSON object per line, machine values masked.

The format of the project's reference transcripts (``tests/data/real/<version>/``): ``t`` = seconds since
the server was started, ``dir`` = ``c2s`` / ``s2c`` / ``note``, ``msg`` = the frame, ``{"_raw": line}`` for
a client line sent verbatim, ``{"note": text}`` for an event that is not a line.

Only what differs from machine to machine is masked, so two recordings of one scenario differ only where
the server does: the run directory becomes ``/RUN`` (``/RUN/codex_home``, ``/RUN/workdir``), the
installation id ``<installation-id>``, the host name ``<hostname>``, process ids ``<pid>``, and the
platform part of ``userAgent`` ``(<os> <os-version>; <arch>) <terminal>``. Ids and times stay as recorded.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from contracts.record import SessionRecord, WireEntry

RUN = "/RUN"
INSTALLATION_ID = "<installation-id>"
HOSTNAME = "<hostname>"
PID = "<pid>"
PID_KEYS = frozenset({"processId", "pid"})


def _is_pid(value: object) -> bool:
    """An OS process id (a number, or digits): a handle a client chose (``"p1"``) is not the host's."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, str) and value.isdigit())
#: "name/version (Debian 12.0.0; x86_64) xterm (name; version)": the platform and terminal part.
_USER_AGENT_PLATFORM = re.compile(r"\([^()]*;[^()]*\) \S+ \(")
USER_AGENT_PLATFORM = "(<os> <os-version>; <arch>) <terminal> ("


def _collect(value: Any, key: str | None, found: dict[str, set[str]]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _collect(v, k, found)
    elif isinstance(value, list):
        for v in value:
            _collect(v, key, found)
    elif isinstance(value, str) and key == "installationId" and value:
        found["installation"].add(value)


class Masker:
    """Masks one session's machine values: the run directories under ``run_parents``, the host's name,
    the installation ids the server announced, process ids and the userAgent platform."""

    def __init__(self, run_parents: Iterable[Path], hostname: str | None = None) -> None:
        self.hostname = hostname if hostname is not None else socket.gethostname()
        self.paths: list[tuple[re.Pattern[str], str]] = []
        for parent in run_parents:
            for form in dict.fromkeys((str(parent), str(Path(parent).resolve()))):
                # the real target's run directory is a mkdtemp child of the work directory
                self.paths.append((re.compile(re.escape(form) + r"/codex-harness-real-[A-Za-z0-9_]+"), RUN))
                self.paths.append((re.compile(re.escape(form) + r"(?=/|\b)"), RUN))
        self.installation_ids: set[str] = set()

    def learn(self, frames: Iterable[Any]) -> None:
        found: dict[str, set[str]] = {"installation": set()}
        for frame in frames:
            _collect(frame, None, found)
        self.installation_ids |= found["installation"]

    def text(self, value: str) -> str:
        for pattern, replacement in self.paths:
            value = pattern.sub(replacement, value)
        for installation in self.installation_ids:
            value = value.replace(installation, INSTALLATION_ID)
        return value

    def value(self, value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict):
            return {k: self.value(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v, key) for v in value]
        if key in PID_KEYS and _is_pid(value):
            return PID
        if not isinstance(value, str):
            return value
        if self.hostname and value == self.hostname:
            return HOSTNAME
        if key == "userAgent":
            value = _USER_AGENT_PLATFORM.sub(USER_AGENT_PLATFORM, value, count=1)
        return self.text(value)


def entry_line(entry: WireEntry, t0: float, masker: Masker) -> dict[str, Any]:
    """One transcript line of ``entry`` (``t`` counted from ``t0``)."""
    if entry.dir == "note":
        msg: Any = {"note": masker.text(entry.note or "")}
    elif entry.frame is not None:
        msg = masker.value(entry.frame)
    elif entry.dir == "c2s":
        msg = {"_raw": entry.raw}  # a probe's verbatim line: exactly what was sent
    else:
        msg = {"_raw": masker.text(entry.raw or ""), "_error": entry.error, "_size": entry.size}
    return {"t": round(entry.t - t0, 6), "dir": entry.dir, "msg": msg}


def transcript(record: SessionRecord, run_parents: Iterable[Path], hostname: str | None = None) -> list[dict[str, Any]]:
    """The masked transcript of ``record``; ``run_parents``: directories the run's paths start with."""
    masker = Masker(run_parents, hostname)
    masker.learn(e.frame for e in record.wire if e.frame is not None)
    started = record.meta.get("started_at")
    t0 = float(started) if isinstance(started, int | float) else (record.wire[0].t if record.wire else 0.0)
    return [entry_line(e, t0, masker) for e in record.wire]


def dumps(lines: Iterable[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


#: The requests of the handshake a recording must hold answered (the reference sets start every session so).
HANDSHAKE = ("initialize", "thread/start")
_SAMPLE = 80


def handshake_problem(record: SessionRecord, handshake: bool = True) -> str | None:
    """Why ``record`` is no reference transcript of the binary: a server line that was not a frame (the real binary
    writes none), or, when the client did the handshake (``handshake``), no handshake request answered with a
    result object. Probe steps may send more of them (a second initialize): one answered with a result is enough."""
    from contracts.checks.wire_index import WireIndex

    index = WireIndex.build(record.wire)
    garbage = [e for e in record.wire if e.dir == "s2c" and e.frame is None]
    said = ""
    if garbage:
        first = (garbage[0].raw or "")[:_SAMPLE]
        said = f"{len(garbage)} line(s) that are not JSON-RPC frames, the first {first!r}"
    for method in HANDSHAKE if handshake else ():
        sent = [r for r in index.client_requests.values() if r.method == method]
        if not sent and method != "initialize":
            continue  # the client stopped before it: the initialize answer says why
        answers = [a for r in sent for _, _, a in r.answers]
        if not any(isinstance(a.get("result"), dict) for a in answers):
            got = f"an answer without a result object ({str(answers[0])[:_SAMPLE]!r})" if answers else "no answer"
            return f"the server did not answer {method} with a result: {got}" + (f"; it wrote {said}" if said else "")
    return f"the server wrote {said}" if garbage else None
