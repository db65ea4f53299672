"""The session record: everything a contract needs, nothing it has to re-run.

Wire transcript (every frame both ways with monotonic timestamps), each turn's Result, the client
and server trace bundles, the server's exit status and stderr tail, the budgets the client ran
with, and the scenario's ground truth. A record saves to a directory and loads back:

    DIR/record.json      everything but the wire and the bundles
    DIR/wire.jsonl       {"t", "dir", "msg"} per line, the format of the shared real transcripts
                         (dir "c2s" / "s2c" / "note"; a line that was not a frame is {"_raw": ...})
    DIR/model.jsonl      the mock Responses API's traffic, when the target had one (format 2 on):
                         {"t", "dir", "msg"} per line, dir "c2m" (a request codex sent the model) or "m2c"
                         (what the mock answered: an HTTP status, an SSE event, the end of the stream)
    DIR/stderr.txt       the server's stderr tail
    DIR/client-trace/    the client's trace bundle
    DIR/server-trace/    the server's trace bundle, when the target writes one
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from contracts import bounded_parse, budget_defaults, safe_read
from contracts.clip import KEEP as CLIP_KEEP
from contracts.clip import clip
from contracts.exitcodes import InvalidInput
from contracts.expect import Expect
from contracts.safe_dir import CopyBudget, SafeDir, Slot
from contracts.usage import UsageBuckets

Direction = Literal["c2s", "s2c", "note"]
ModelDirection = Literal["c2m", "m2c"]
#: 1: the first format (no model.jsonl); 2: model.jsonl. A loader reads every format up to its own.
RECORD_FORMAT = 2
#: Bound on the other threads' server trace bundles kept in a record (forks; a session has a few at most).
MAX_OTHER_SERVER_TRACES = 32
#: Bound on the model traffic kept in a record (a stream of 100,000 events stays far below it in size).
MAX_MODEL_ENTRIES = 200_000
#: What a record copies of files another program wrote (bundles, a recording, a result file), in all.
MAX_RECORD_COPY_BYTES = 16 * 1024 * 1024
MAX_NOT_COPIED = 100
#: Bounds of a saved record's members when it is loaded back (a record dir may come from anyone).
MAX_RECORD_JSON_BYTES = 256 * 1024 * 1024
MAX_WIRE_FILE_BYTES = 512 * 1024 * 1024
MAX_STDERR_BYTES = 16 * 1024 * 1024
#: A file or tree to copy into a record: a path, or (directory fd, path below it) read from a held directory.
CopySource = Path | tuple[Path, int]


class RecordFormatError(InvalidInput, ValueError):
    """A record written by a newer codex-harness (or not a record at all)."""


@dataclass(frozen=True, slots=True)
class WireEntry:
    """One line of the transcript.

    ``t`` is seconds on the session's monotonic clock (virtual under trio's MockClock).
    ``frame`` is the parsed JSON object; for a line that was not a frame, ``frame`` is None,
    ``error`` names the wire error kind and ``raw`` holds a bounded sample of the line.
    ``dir == "note"`` marks an event that is not a line (kill sent, stdin closed, cancel asked);
    ``note`` says which.
    """

    t: float
    dir: Direction
    frame: dict[str, Any] | None = None
    error: str | None = None
    raw: str | None = None
    note: str | None = None
    size: int | None = None  # bytes of the line, for wire errors

    def to_json(self) -> dict[str, Any]:
        if self.dir == "note":
            msg: dict[str, Any] = {"note": self.note}
        elif self.frame is not None:
            msg = self.frame
        else:
            msg = {"_raw": self.raw, "_error": self.error, "_size": self.size}
        return {"t": round(self.t, 6), "dir": self.dir, "msg": msg}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WireEntry:
        msg = data.get("msg") or {}
        direction = data["dir"]
        if direction == "note":
            return cls(float(data["t"]), "note", note=msg.get("note") if isinstance(msg, dict) else str(msg))
        if isinstance(msg, dict) and "_raw" in msg:
            return cls(
                float(data["t"]),
                direction,
                error=msg.get("_error") or "raw_line",
                raw=msg["_raw"],
                size=msg.get("_size"),
            )
        return cls(float(data["t"]), direction, frame=msg)


@dataclass(frozen=True, slots=True)
class ModelEntry:
    """One event of the mock Responses API's traffic, on the session's clock (the real target only).

    ``msg``: for ``c2m``, ``{"method", "path", "turn", "response", "status"}``; for ``m2c``, ``{"event": type}``
    for an SSE event, ``{"http": status}`` for an error answer, ``{"end": "complete" | "cut"}``.
    """

    t: float
    dir: ModelDirection
    msg: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"t": round(self.t, 6), "dir": self.dir, "msg": self.msg}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModelEntry:
        direction = data.get("dir")
        if direction not in ("c2m", "m2c"):
            raise RecordFormatError(f"model.jsonl: unknown direction {direction!r}")
        msg = data.get("msg")
        return cls(float(data["t"]), direction, msg if isinstance(msg, dict) else {})


@dataclass(slots=True)
class TurnResult:
    """Exactly one per turn the client started, on every path.

    Times are on the same monotonic clock as the wire entries.
    """

    index: int  # 0-based, in the order the session started turns
    #: ``unsupported`` only from an outside client's result file: it cannot do what the plan asks of the turn
    status: Literal["completed", "aborted", "failed", "timeout", "unsupported"]
    error: str | None = None
    thread_id: str | None = None
    turn_id: str | None = None
    final_text: str = ""
    #: usage per model; empty when every bucket is zero
    usage: dict[str, UsageBuckets] = field(default_factory=dict)
    #: why the usage is not judged (an outside client that reports none, or cannot); None: ``usage`` is what
    #: the client reported, and empty means zero
    usage_unjudged: str | None = None
    #: how the client counts usage (an outside client's declared ``usage_style``: ``input``
    #: uncached|with_cache, ``scope`` turn|last_request); empty: the buckets of docs/client-rules.md §4.3
    usage_style: dict[str, str] = field(default_factory=dict)
    #: the buckets the client does not expose (an outside client's ``null``): not judged, never zeros
    usage_unexposed: list[str] = field(default_factory=list)
    #: the parts of the turn's plan the client reported it cannot do (``action N`` / ``approval N``, 1-based in
    #: the turn), with its reason: everything else of the turn is judged, its status by the wire
    unsupported: list[str] = field(default_factory=list)
    #: ``turn.status`` of the consumed turn/completed, None when none arrived
    server_status: str | None = None
    #: how many turn/completed notifications for this turn the client consumed (must be <= 1); None: not known
    #: (an outside client: what it read is not on the wire)
    completed_consumed: int | None = 0
    started_at: float = 0.0  # turn/start sent
    ended_at: float | None = None  # Result delivered; None: not known (an outside client's result file has no times)
    cancel_at: float | None = None  # cancellation requested (scope cancelled or turn.cancel())
    interrupt_sent_at: float | None = None
    interrupt_answered_at: float | None = None
    turn_completed_at: float | None = None
    killed: bool = False  # the client killed the server's process group for this turn
    kill_reason: str | None = None
    items_closed_locally: list[str] = field(default_factory=list)  # open at turn/completed, closed as aborted
    approvals_closed_locally: list[str] = field(default_factory=list)  # pending at the end, closed as cancelled

    def total_usage(self) -> UsageBuckets:
        total = UsageBuckets()
        for buckets in self.usage.values():
            total = total + buckets
        return total

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["usage"] = {model: b.to_dict() for model, b in self.usage.items()}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TurnResult:
        data = dict(data)
        data["usage"] = {m: UsageBuckets.from_dict(b) for m, b in (data.get("usage") or {}).items()}
        return cls(**data)


@dataclass(slots=True)
class TeardownStep:
    name: str  # close_stdin | wait_stdout_eof | wait_exit | kill
    started_at: float
    ended_at: float
    outcome: str  # done | timeout | skipped | error: ...


@dataclass(slots=True)
class Budgets:
    """What the client ran with, so latency checks judge against the real numbers."""

    interrupt_s: float = budget_defaults.INTERRUPT_BUDGET_MS / 1000  # the interrupt answer + turn/completed
    teardown_s: float = budget_defaults.TEARDOWN_MS / 1000  # bound of the whole teardown (every step)
    request_s: float = budget_defaults.REQUEST_TIMEOUT_MS / 1000  # per-request timeout


@dataclass(slots=True)
class SessionRecord:
    scenario: str
    target: str  # fake | fake-process | real
    expect: Expect
    wire: list[WireEntry] = field(default_factory=list)
    results: list[TurnResult] = field(default_factory=list)
    budgets: Budgets = field(default_factory=Budgets)
    #: True when the clock was trio's MockClock: latencies are virtual, not measured
    virtual_time: bool = False
    client_trace: Path | None = None
    server_trace: Path | None = None
    #: the bundles of the session's other threads (a fork gets its own), first started first
    other_server_traces: list[Path] = field(default_factory=list)
    server_exit: int | None = None
    stderr_tail: str = ""
    teardown: list[TeardownStep] = field(default_factory=list)
    #: the client's own structured log records ("codex turn interrupted", ...) as dicts
    log: list[dict[str, Any]] = field(default_factory=list)
    #: exceptions that escaped the client, as text (a correct client has none)
    client_errors: list[str] = field(default_factory=list)
    server_version: str | None = None
    #: the release whose pinned schema the frames validate against (default: the default release)
    schema_release: str = field(default_factory=lambda: _default_release())
    experimental_api: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    #: the mock Responses API's traffic (real target); empty for the fakes and for format-1 records
    model: list[ModelEntry] = field(default_factory=list)
    #: what another program wrote that was not copied into the saved record (a link, a FIFO, past the budget)
    not_copied: list[str] = field(default_factory=list)

    # --- persistence ---------------------------------------------------------------------------

    def save(
        self,
        directory: str | Path | Slot,
        *,
        files: Mapping[str, bytes] | None = None,
        copies: Mapping[str, CopySource] | None = None,
    ) -> Path:
        """Write the record to ``directory`` whole (built aside and swapped in: a record saved there before is
        replaced, nothing planted there is followed); returns its path.

        ``files``: more files of the record (name → bytes). ``copies``: files or trees another program wrote,
        copied in (name → path, or (directory fd, path below it)) within :data:`MAX_RECORD_COPY_BYTES` with the
        record's bundles; what was refused or cut is named in ``not_copied``."""
        if isinstance(directory, Slot):
            with directory.parent.replacing(directory.name) as out:
                self._save_into(out, files or {}, copies or {})
            return directory.path
        path = Path(directory)
        with SafeDir.open(path.parent) as parent, parent.replacing(path.name) as out:
            self._save_into(out, files or {}, copies or {})
        return path

    def _save_into(self, out: SafeDir, files: Mapping[str, bytes], copies: Mapping[str, CopySource]) -> None:
        budget = CopyBudget(MAX_RECORD_COPY_BYTES)
        client_trace = _copy_bundle(out, self.client_trace, "client-trace", budget)
        server_trace = _copy_bundle(out, self.server_trace, "server-trace", budget)
        others = [
            name
            for n, bundle in enumerate(self.other_server_traces[:MAX_OTHER_SERVER_TRACES], start=2)
            if _copy_bundle(out, bundle, name := f"server-trace-{n}", budget)
        ]
        for name, source in copies.items():
            where, anchor = source if isinstance(source, tuple) else (source, None)
            out.copy_in(where, name, budget, source_dir_fd=anchor)
        self.not_copied = list(dict.fromkeys([*self.not_copied, *budget.not_copied]))[:MAX_NOT_COPIED]
        for name, data in files.items():
            out.write(name, data)
        # Over-long strings are saved as head, tail, length and hash (contracts.clip): the record says how many.
        cuts: list[int] = []
        out.write("wire.jsonl", _jsonl(clip(entry.to_json(), cuts) for entry in self.wire))
        if self.model:
            out.write("model.jsonl", _jsonl(clip(e.to_json(), cuts) for e in self.model[:MAX_MODEL_ENTRIES]))
        out.write_text("stderr.txt", self.stderr_tail)
        body = {
            "format": RECORD_FORMAT,
            "scenario": self.scenario,
            "target": self.target,
            "expect": self.expect.to_dict(),
            "results": [clip(r.to_json(), cuts) for r in self.results],
            "budgets": asdict(self.budgets),
            "virtual_time": self.virtual_time,
            "client_trace": "client-trace" if client_trace else None,
            "server_trace": "server-trace" if server_trace else None,
            "other_server_traces": others,
            "server_exit": self.server_exit,
            "teardown": [asdict(s) for s in self.teardown],
            "log": self.log,
            "client_errors": self.client_errors,
            "server_version": self.server_version,
            "schema_release": self.schema_release,
            "experimental_api": self.experimental_api,
            "meta": clip(self.meta, cuts),
            "not_copied": self.not_copied,
        }
        if cuts:  # said in the record: what was cut, so a reader knows the saved text is not all of it
            body["cut_strings"] = {"count": len(cuts), "chars": sum(cuts), "kept_each_end": CLIP_KEEP}
        out.write("record.json", orjson.dumps(body, option=orjson.OPT_INDENT_2))

    @classmethod
    def load(cls, directory: str | Path) -> SessionRecord:
        """Read a saved record; its members are read bounded, none through a link, none that is not a file."""
        src = Path(directory)
        fd = safe_read.open_dir(src, follow=True)  # the directory named; nothing below it is followed
        try:
            return cls._load(src, fd)
        finally:
            os.close(fd)

    @classmethod
    def _load(cls, src: Path, fd: int) -> SessionRecord:
        body = safe_read.read_json("record.json", MAX_RECORD_JSON_BYTES, dir_fd=fd, shown=src / "record.json")
        if not isinstance(body, dict):
            raise RecordFormatError(f"{src / 'record.json'}: not a record (expected a JSON object)")
        version = body.get("format", 1)
        if not isinstance(version, int) or version > RECORD_FORMAT:
            raise RecordFormatError(
                f"{src}: record format {version!r}; this codex-harness reads formats 1 to {RECORD_FORMAT}"
            )
        model = []
        if version >= 2 and safe_read.is_regular("model.jsonl", dir_fd=fd):
            with safe_read.open_bounded(
                "model.jsonl", MAX_WIRE_FILE_BYTES, dir_fd=fd, shown=src / "model.jsonl"
            ) as fh:  # read no further than the bound
                lines = itertools.islice(fh, MAX_MODEL_ENTRIES)
                model = [ModelEntry.from_json(_loads(line)) for line in lines if line.strip()]
        with safe_read.open_bounded("wire.jsonl", MAX_WIRE_FILE_BYTES, dir_fd=fd, shown=src / "wire.jsonl") as fh:
            wire = [WireEntry.from_json(_loads(line)) for line in fh if line.strip()]
        try:  # a tail that is not a file (a FIFO would block) is left out
            stderr = safe_read.read_bounded("stderr.txt", MAX_STDERR_BYTES, dir_fd=fd).decode("utf-8", "replace")
        except OSError:
            stderr = ""
        not_copied = body.get("not_copied")
        return cls(
            scenario=body["scenario"],
            target=body["target"],
            expect=Expect.from_dict(body["expect"]),
            wire=wire,
            results=[TurnResult.from_json(r) for r in body.get("results", [])],
            budgets=Budgets(**body.get("budgets", {})),
            virtual_time=bool(body.get("virtual_time")),
            client_trace=src / body["client_trace"] if body.get("client_trace") else None,
            server_trace=src / body["server_trace"] if body.get("server_trace") else None,
            other_server_traces=[
                src / name
                for name in list(body.get("other_server_traces") or [])[:MAX_OTHER_SERVER_TRACES]
                if isinstance(name, str) and name.startswith("server-trace-") and "/" not in name
            ],
            server_exit=body.get("server_exit"),
            stderr_tail=stderr,
            teardown=[TeardownStep(**s) for s in body.get("teardown", [])],
            log=list(body.get("log", [])),
            client_errors=list(body.get("client_errors", [])),
            server_version=body.get("server_version"),
            schema_release=body.get("schema_release") or _default_release(),
            experimental_api=bool(body.get("experimental_api")),
            meta=dict(body.get("meta", {})),
            model=model,
            not_copied=[str(n) for n in not_copied[:MAX_NOT_COPIED]] if isinstance(not_copied, list) else [],
        )


def _jsonl(rows: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    for row in rows:
        yield orjson.dumps(row) + b"\n"


def _copy_bundle(out: SafeDir, bundle: Path | None, name: str, budget: CopyBudget) -> bool:
    """Copy a trace bundle into the record (whoever wrote it: links and non-files are refused, bytes bounded)."""
    return bundle is not None and out.copy_in(bundle, name, budget)


def _default_release() -> str:
    from contracts.releases import default_version

    return default_version()


def _loads(line: bytes) -> Any:
    """One line of a recording, as deep as it was sent (the bounded parser's record depth)."""
    return bounded_parse.loads_json(line, bounded_parse.MAX_RECORD_DEPTH)
