"""A recorded session as rows of a sequence diagram (sans-IO: no SVG here, see :mod:`harness.html.sequence`).

Lanes: the client, the server and, when the record holds the mock Responses API's traffic, the model.
One row per drawn thing, in wire order:

- ``msg``: one arrow. A request, an answer, a server request (approvals) and its decision are one arrow
  each; a *run* of consecutive notifications of one method in one direction (a stream of deltas) is one
  arrow with its count; so are consecutive lines that were not frames, of one error kind. A run is cut at
  a frame a failed check points at (that frame gets its own arrow) and after a frame a fault struck at.
- ``model``: the same between the server and the model lane (a request to the mock, its SSE events by
  kind with their count, the end of the stream).
- ``note``: an event that is not a line (cancel asked, stdin closed, kill, exit).
- ``fault``: a scripted fault, drawn after the frame it struck at.
- ``fold``: when a session still has more than :data:`MAX_ROWS` rows, stretches of plain notification
  arrows (then of every arrow that no check, fault, approval or interrupt marks) fold into one row that
  says how many frames of which methods it holds and their wire lines. Nothing is dropped unsaid.

Requests are paired with their answers (:attr:`Diagram.pairs`), the interrupt with the turn/completed
that followed (:attr:`Diagram.intervals`, in ms), and windows still open at the end are listed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from contracts.checks import Check
from contracts.checks.scenario import scripted_faults, struck_faults
from contracts.checks.wire_index import id_key, is_request, is_response, turn_id_of
from contracts.jsonval import as_object
from contracts.record import ModelEntry, SessionRecord, WireEntry
from contracts.text import one_line
from harness.timeline import summarize

#: Rows of one diagram before folding starts (a row is about 22 px: about 9,000 px of diagram).
MAX_ROWS = 400
#: Rows kept at each end when even the marked rows are too many.
KEEP_ENDS = 150
#: Labels longer than this are clipped (the full text is in the arrow's tooltip).
LABEL_WIDTH = 64
METHOD_WIDTH = 80
ID_WIDTH = 40
_APPROVAL_SUFFIX = "requestApproval"


@dataclass(slots=True)
class Row:
    kind: str  # msg | model | note | fault | fold
    src: str = "client"  # lane: client | server | model
    dst: str = "server"
    label: str = ""
    detail: str = ""  # tooltip / second text
    t: float = 0.0
    t_end: float = 0.0
    first: int = 0  # 0-based wire position of the first frame (model rows: -1)
    last: int = 0
    count: int = 1  # frames (or model events) this row stands for
    css: tuple[str, ...] = ()
    marks: list[str] = field(default_factory=list)  # failed checks pointing here, left-open notes
    failed: bool = False
    method: str = ""  # the collapse key's method ("" for non-notifications)

    @property
    def frames(self) -> int:
        """Wire frames this row stands for (model rows and notes stand for none)."""
        return self.count if self.kind == "msg" or (self.kind == "fold" and self.src != "model") else 0


@dataclass(slots=True)
class Pair:
    """A request and its answer: rows ``start`` and ``end`` (None: never answered)."""

    start: int
    end: int | None
    server: bool  # a server request (approval), answered by the client
    label: str


@dataclass(slots=True)
class Interval:
    start: int
    end: int
    ms: float
    label: str


@dataclass(slots=True)
class Diagram:
    rows: list[Row]
    lanes: tuple[str, ...]
    pairs: list[Pair] = field(default_factory=list)
    intervals: list[Interval] = field(default_factory=list)
    open_at_end: list[str] = field(default_factory=list)
    frames: int = 0  # wire frames (lines that are not notes) in the record
    folded_frames: int = 0
    t0: float = 0.0
    virtual_time: bool = False

    @property
    def arrows(self) -> int:
        """Drawn arrows: message rows (wire and model); a fold is not an arrow."""
        return sum(1 for r in self.rows if r.kind in ("msg", "model"))


def _clip(text: str, width: int = LABEL_WIDTH) -> str:
    return one_line(text, width)


def _method(frame: dict[str, Any]) -> str:
    """The frame's method for a label (a frame may carry a 10 MB one: clipped once, here)."""
    return _clip(str(frame.get("method")), METHOD_WIDTH)


def _rid(frame: dict[str, Any]) -> str:
    return _clip(str(frame["id"]), ID_WIDTH)


# --- where faults struck ---------------------------------------------------------------------------


def _point_matches(point: str, entry: WireEntry) -> bool:
    frame = entry.frame
    if not isinstance(frame, dict):
        return False
    method = frame.get("method")
    if point == "initialize":
        return entry.dir == "c2s" and method == "initialize"
    if point == "interrupt":
        return entry.dir == "c2s" and method == "turn/interrupt"
    if entry.dir != "s2c":
        return False
    return {
        "start": method == "turn/started",
        "delta": method == "item/agentMessage/delta",
        "item_started": method == "item/started",
        "approval_pending": isinstance(method, str) and method.endswith(_APPROVAL_SUFFIX) and "id" in frame,
        "usage": method == "thread/tokenUsage/updated",
        "after_end": method == "turn/completed",
    }.get(point, False)


def fault_positions(record: SessionRecord) -> dict[int, list[str]]:
    """Wire position → faults that struck right after it.

    On the fakes the fault ledger (``meta.faults_struck``) says where each fault struck: after the server
    had written so many lines and read so many; it is drawn after both on the client's wire. A fault the
    ledger says never struck is drawn after its turn's last frame (or the session's), saying so.

    Without line counts (the real binary's model faults, older records) the point is found as the engine
    counts it: the n-th such frame of the turn (turn i spans from the i-th turn/start to the next);
    ``end`` strikes just before turn/completed. A point that never shows on the wire places the fault after
    the turn's last frame, saying so.
    """
    faults = record.meta.get("faults")
    if not isinstance(faults, list) or not faults:
        return {}
    struck_list = record.meta.get("faults_struck")
    ledger = struck_faults(struck_list) if isinstance(struck_list, list) else None
    wire = record.wire
    starts = [
        p
        for p, e in enumerate(wire)
        if e.dir == "c2s" and isinstance(e.frame, dict) and e.frame.get("method") == "turn/start"
    ]
    out: dict[int, list[str]] = {}
    for turn, index, fault in scripted_faults(record):
        n = fault.get("n", 1)
        if not isinstance(n, int):
            continue
        text = _fault_label(fault, turn, n)
        if ledger is not None:
            counts = ledger.get((turn, index), _NOT_STRUCK)
            if counts is _NOT_STRUCK:
                out.setdefault(_turn_end(wire, starts, turn), []).append(text + ": never struck")
                continue
            if counts is not None:
                out.setdefault(_after_lines(wire, *counts), []).append(text)
                continue
        point = str(fault.get("at", ""))
        if point == "request":
            _place_request_fault(wire, fault, text, out)
            continue
        if point == "initialize":
            lo, hi = 0, (starts[0] if starts else len(wire))
        elif 0 <= turn < len(starts):
            lo, hi = starts[turn], (starts[turn + 1] if turn + 1 < len(starts) else len(wire))
        else:
            continue  # the turn never started: nothing struck
        where = None
        if point == "end":
            done = [p for p in range(lo, hi) if _point_matches("after_end", wire[p])]
            where = done[0] - 1 if done else None
        else:
            seen = 0
            for p in range(lo, hi):
                if _point_matches(point, wire[p]):
                    seen += 1
                    if seen == n:
                        where = p
                        break
        if where is None:
            frames = [p for p in range(lo, hi) if wire[p].dir != "note"]
            if not frames:
                continue
            where, text = frames[-1], text + ": its point is not on the wire"
        out.setdefault(max(where, 0), []).append(text)
    return out


_NOT_STRUCK: Any = object()


def _fault_label(fault: dict[str, Any], turn: int, n: int) -> str:
    if fault.get("at") == "request":
        return f"⚡ {fault.get('kind')} at request {fault.get('method')} ([[methods]])"
    params = as_object(fault.get("params"))
    shown = "".join(f" {k}={v}" for k, v in list(params.items())[:3])
    point = fault.get("at", "")
    return f"⚡ {fault.get('kind')}{shown} at {point}" + (f" #{n}" if n != 1 else "") + f" (turn {turn + 1})"


def _after_lines(wire: Sequence[WireEntry], sent: int, received: int) -> int:
    """The wire position by which the client had read ``sent`` server lines and written ``received`` lines
    (the last of each direction when the wire holds fewer)."""
    want = {"s2c": sent, "c2s": received}
    reached = {"s2c": -1, "c2s": -1}
    seen = {"s2c": 0, "c2s": 0}
    for p, entry in enumerate(wire):
        if entry.dir in seen and seen[entry.dir] < want[entry.dir]:
            seen[entry.dir] += 1
            reached[entry.dir] = p
    return max(reached["s2c"], reached["c2s"], 0)


def _turn_end(wire: Sequence[WireEntry], starts: list[int], turn: int) -> int:
    """The last frame of turn ``turn`` (0-based), or of the session when it never started or is a
    ``[[methods]]`` fault's."""
    hi = starts[turn + 1] if 0 <= turn and turn + 1 < len(starts) else len(wire)
    lo = starts[turn] if 0 <= turn < len(starts) else 0
    frames = [p for p in range(lo, hi) if wire[p].dir != "note"]
    return frames[-1] if frames else max(len(wire) - 1, 0)


def _place_request_fault(
    wire: Sequence[WireEntry], fault: dict[str, Any], text: str, out: dict[int, list[str]]
) -> None:
    """A ``[[methods]]`` fault: right after the request it struck (the entry's n-th, or first, of its method)."""
    method, n = fault.get("method"), fault.get("n")
    nth = n if isinstance(n, int) and n > 0 else 1
    asked = [
        p
        for p, e in enumerate(wire)
        if e.dir == "c2s" and isinstance(e.frame, dict) and e.frame.get("method") == method and "id" in e.frame
    ]
    if len(asked) >= nth:
        out.setdefault(asked[nth - 1], []).append(text)


# --- building the rows -----------------------------------------------------------------------------


def _check_marks(checks: Sequence[Check], n: int) -> dict[int, list[str]]:
    """Wire position → failed (or warned) checks pointing at it."""
    out: dict[int, list[str]] = {}
    for check in checks:
        if check.status not in ("fail", "warn"):
            continue
        sign = "✗" if check.status == "fail" else "!"
        for line in check.at:
            if 0 < line <= n:
                out.setdefault(line - 1, []).append(f"{sign} {check.contract} / {check.name}")
    return out


class _Builder:
    def __init__(self, record: SessionRecord, checks: Sequence[Check]) -> None:
        self.record = record
        self.wire = record.wire
        self.marks = _check_marks(checks, len(self.wire))
        self.faults = fault_positions(record)
        self.rows: list[Row] = []
        self.row_of: dict[int, int] = {}  # wire position -> row index (pre-fold)
        # open windows: key -> (description, row index of the opening)
        self.open: dict[str, tuple[str, int]] = {}
        self.request_rows: dict[str, tuple[int, str, bool]] = {}  # "c2s:id"/"s2c:id" -> (row, label, server)
        self.pairs: list[Pair] = []
        self.methods: dict[str, str] = {}  # "c2s:id" -> method, for labelling answers

    def build(self) -> None:
        run: Row | None = None
        run_key: tuple[str, str] | None = None
        for pos, entry in enumerate(self.wire):
            if entry.dir == "note":
                run = None
                self._append(
                    Row("note", "client", "server", _clip(str(entry.note)), "", entry.t, entry.t, pos, pos), pos
                )
                self._after(pos)
                continue
            key = self._run_key(entry)
            standalone = pos in self.marks
            if run is not None and key is not None and key == run_key and not standalone:
                run.count += 1
                run.last, run.t_end = pos, entry.t
                self.row_of[pos] = len(self.rows) - 1
            else:
                row = self._row(pos, entry)
                self._append(row, pos)
                run = row if key is not None and not standalone else None
                run_key = key
            if pos in self.marks:
                # Red only for a failure; a warning is named on the right without the band.
                self.rows[-1].failed |= any(m.startswith("✗") for m in self.marks[pos])
                self.rows[-1].marks += self.marks[pos]
            if pos in self.faults:
                run = None
            self._after(pos)
        for run_row in self.rows:
            if run_row.kind == "msg" and run_row.count > 1:
                span = (run_row.t_end - run_row.t) * 1000
                run_row.label = f"{run_row.method} ×{run_row.count:,}"
                run_row.detail = f"in {span:,.1f} ms, wire lines {run_row.first + 1}–{run_row.last + 1}"

    def _append(self, row: Row, pos: int) -> None:
        self.rows.append(row)
        self.row_of[pos] = len(self.rows) - 1

    def _after(self, pos: int) -> None:
        for text in self.faults.get(pos, ()):
            t = self.wire[pos].t
            self.rows.append(Row("fault", "server", "server", text, "", t, t, pos, pos, 0, ("fault",)))

    @staticmethod
    def _run_key(entry: WireEntry) -> tuple[str, str] | None:
        """What makes consecutive frames one arrow: notifications of one method, bad lines of one error."""
        frame = entry.frame
        if frame is None:
            return (entry.dir, f"not a frame: {entry.error}")
        if "method" in frame and "id" not in frame and isinstance(frame["method"], str):
            method = frame["method"]
            if method in ("turn/started", "turn/completed", "serverRequest/resolved", "error"):
                return None  # each of these is an event in itself
            return (entry.dir, method)
        return None

    def _row(self, pos: int, entry: WireEntry) -> Row:
        src, dst = ("client", "server") if entry.dir == "c2s" else ("server", "client")
        row = Row("msg", src, dst, t=entry.t, t_end=entry.t, first=pos, last=pos, css=(entry.dir,))
        frame = entry.frame
        if frame is None:
            size = f" ({entry.size:,} bytes)" if entry.size else ""
            row.label, row.method, row.css = (
                f"not a frame: {_clip(str(entry.error), METHOD_WIDTH)}",
                f"not a frame: {_clip(str(entry.error), METHOD_WIDTH)}",
                (
                    entry.dir,
                    "bad",
                ),
            )
            row.detail = _clip(f"{size} {entry.raw or ''}".strip(), 200)
            return row
        here = len(self.rows)
        if is_request(frame):
            method = _method(frame)
            key = f"{entry.dir}:{id_key(frame['id'])}"
            self.methods[key] = method
            server = entry.dir == "s2c"
            approval = server and str(frame["method"]).endswith(_APPROVAL_SUFFIX)
            row.label = ("⚠ " if approval else "") + f"{method} #{_rid(frame)}"
            row.css = (entry.dir, "request", *(("approval",) if approval else ()))
            row.detail = _clip(summarize(frame), 200)
            self.request_rows[key] = (here, f"{method} #{_rid(frame)}", server)
            what = f"{'server request' if server else 'request'} {method} #{_rid(frame)}"
            self.open[f"req:{key}"] = (what, here)
            if method == "turn/interrupt":
                row.css += ("interrupt",)
            return row
        if is_response(frame):
            other = "s2c" if entry.dir == "c2s" else "c2s"
            key = f"{other}:{id_key(frame['id'])}"
            method = self.methods.get(key, "unknown request")
            error = frame.get("error")
            if error is not None:
                code = error.get("code") if isinstance(error, dict) else error
                code = _clip(str(code), ID_WIDTH)
                row.label, row.css = f"#{_rid(frame)} {method} → error {code}", (entry.dir, "answer", "error")
            elif entry.dir == "c2s" and isinstance(frame.get("result"), dict) and "decision" in frame["result"]:
                row.label = f"#{_rid(frame)} decision: {_clip(str(frame['result']['decision']), 30)}"
                row.css = (entry.dir, "answer", "decision")
            else:
                row.label, row.css = f"#{_rid(frame)} {method} ✓", (entry.dir, "answer")
            row.detail = _clip(summarize(frame), 200)
            opened = self.request_rows.pop(key, None)
            if opened is not None:
                self.pairs.append(Pair(opened[0], here, opened[2], opened[1]))
                self.open.pop(f"req:{key}", None)
            else:
                row.css += ("orphan",)
            return row
        method = _method(frame)
        row.label, row.method, row.css = method, method, (entry.dir, "notify")
        row.detail = _clip(summarize(frame), 200)
        self._windows(frame, row, here)
        return row

    def _windows(self, frame: dict[str, Any], row: Row, here: int) -> None:
        method = frame.get("method")
        params = as_object(frame.get("params"))
        if method == "item/started" and isinstance(params.get("item"), dict):
            item = params["item"]
            what = f"{_clip(str(item.get('type')), METHOD_WIDTH)} {_clip(str(item.get('id')), ID_WIDTH)}"
            self.open[f"item:{item.get('id')}"] = (what, here)
        elif method == "item/completed" and isinstance(params.get("item"), dict):
            self.open.pop(f"item:{params['item'].get('id')}", None)
        elif method == "turn/started":
            self.open[f"turn:{turn_id_of(frame)}"] = (f"turn {_clip(str(turn_id_of(frame)), ID_WIDTH)}", here)
            row.css += ("turn",)
        elif method == "turn/completed":
            self.open.pop(f"turn:{turn_id_of(frame)}", None)
            row.css += ("turn",)
            left = [k for k in self.open if k.startswith("item:")]
            if left:
                row.marks.append(
                    "left open: "
                    + ", ".join(self.open[k][0] for k in left[:4])
                    + (f" (+{len(left) - 4})" if len(left) > 4 else "")
                )
                for k in left:
                    self.open.pop(k)
        elif method == "serverRequest/resolved" and "requestId" in params:
            key = f"s2c:{id_key(params['requestId'])}"
            self.open.pop(f"req:{key}", None)
            opened = self.request_rows.pop(key, None)
            if opened is not None:
                self.pairs.append(Pair(opened[0], here, True, opened[1] + " (resolved)"))
            row.css += ("resolved",)


def _model_rows(entries: Sequence[ModelEntry]) -> list[Row]:
    rows: list[Row] = []
    for entry in entries:
        msg = entry.msg
        if entry.dir == "c2m":
            turn, response = msg.get("turn"), msg.get("response")
            where = (
                f" (turn {turn + 1}, response {response + 1})"
                if isinstance(turn, int) and isinstance(response, int)
                else ""
            )
            label = f"{msg.get('method', 'POST')} {msg.get('path', '')}{where}"
            status = msg.get("status")
            css = ("c2m", "request") + (("error",) if isinstance(status, int) and status >= 400 else ())
            rows.append(
                Row("model", "server", "model", _clip(label), f"HTTP {status}", entry.t, entry.t, -1, -1, 1, css)
            )
            continue
        if "event" in msg:
            kind = _clip(str(msg["event"]), METHOD_WIDTH)
            last = rows[-1] if rows else None
            if last is not None and last.kind == "model" and last.method == kind:
                last.count += 1
                last.t_end = entry.t
                last.label = f"{kind} ×{last.count:,}"
                continue
            rows.append(Row("model", "model", "server", kind, "", entry.t, entry.t, -1, -1, 1, ("m2c",), method=kind))
        elif "http" in msg:
            rows.append(
                Row(
                    "model", "model", "server", f"HTTP {msg['http']}", "", entry.t, entry.t, -1, -1, 1, ("m2c", "error")
                )
            )
        elif "end" in msg:
            css = ("m2c", "error") if msg["end"] == "cut" else ("m2c",)
            label = "stream cut mid-body" if msg["end"] == "cut" else "end of stream"
            rows.append(Row("model", "model", "server", label, "", entry.t, entry.t, -1, -1, 1, css))
    return rows


def _result_rows(record: SessionRecord) -> list[Row]:
    """Each turn's Result, on the client lane when the client delivered it. A Result whose time is not known (an
    outside client's result file has none) goes after everything else, its time shown as not known: a default
    time would draw it before the session started."""
    rows = []
    last = max([e.t for e in record.wire] + [m.t for m in record.model], default=0.0)
    for r in sorted(record.results, key=lambda r: r.index):
        why = f" — {r.error}" if r.error else ""
        label = _clip(f"Result turn {r.index + 1}: {r.status}{why}", 90)
        css: tuple[str, ...] = ("result",)  # neutral: whether the status was the expected one is a check
        t = r.ended_at
        if t is None:
            t, css = last, ("result", "untimed")
        rows.append(Row("result", "client", "client", label, "", t, t, -1, -1, 0, css))
    return rows


def _before(other: Row, wire_row: Row) -> bool:
    """Whether a model or Result row goes before ``wire_row``. A Result follows the frames of its instant
    (wire times are saved rounded to the µs: a Result at the same instant may compare a little earlier)."""
    if other.kind == "result":
        return other.t + 2e-6 < wire_row.t
    return other.t < wire_row.t


def _merge(wire_rows: list[Row], model_rows: list[Row]) -> tuple[list[Row], list[int]]:
    """Both row lists by time (wire first on a tie); returns the rows and the new index of each wire row."""
    out: list[Row] = []
    index: list[int] = []
    j = 0
    for row in wire_rows:
        while j < len(model_rows) and _before(model_rows[j], row):
            out.append(model_rows[j])
            j += 1
        index.append(len(out))
        out.append(row)
    out += model_rows[j:]
    return out, index


# --- folding ---------------------------------------------------------------------------------------


def _plain(row: Row) -> bool:
    return (
        row.kind in ("msg", "model")
        and not row.failed
        and not row.marks
        and ("notify" in row.css or (row.kind == "model" and "request" not in row.css))
        and "turn" not in row.css
    )


def _keep(row: Row) -> bool:
    """Rows a fold never swallows: what a person looks for first."""
    return (
        row.kind in ("note", "fault", "result")
        or row.failed
        or bool(row.marks)
        or any(c in row.css for c in ("approval", "decision", "interrupt", "turn", "bad", "error", "orphan"))
    )


def _fold(rows: list[Row], foldable: list[bool]) -> tuple[list[Row], list[int]]:
    """Fold maximal stretches (two rows or more) of foldable rows; returns the rows and old → new index."""
    out: list[Row] = []
    mapping: list[int] = []
    i = 0
    while i < len(rows):
        if not foldable[i]:
            mapping.append(len(out))
            out.append(rows[i])
            i += 1
            continue
        j = i
        while j < len(rows) and foldable[j]:
            j += 1
        if j - i < 2:
            mapping.append(len(out))
            out.append(rows[i])
            i += 1
            continue
        out.append(_fold_row(rows[i:j]))
        mapping += [len(out) - 1] * (j - i)
        i = j
    return out, mapping


def _fold_row(stretch: list[Row]) -> Row:
    kinds: Counter[str] = Counter()
    frames = 0
    model_events = 0
    for r in stretch:
        key = r.method or r.label
        if r.kind == "model":
            model_events += r.count
            kinds[f"model {key}"] += r.count
        elif r.kind == "fold":
            frames += r.count
            kinds["(folded before)"] += r.count
        else:
            frames += r.count
            kinds[key] += r.count
    wire_rows = [r for r in stretch if r.first >= 0]
    lines = f"wire lines {wire_rows[0].first + 1}–{wire_rows[-1].last + 1}" if wire_rows else "model traffic"
    top = ", ".join(f"{n:,} {k}" for k, n in kinds.most_common(4))
    more = f", +{len(kinds) - 4} more kinds" if len(kinds) > 4 else ""
    label = f"⋯ {len(stretch)} rows folded: {frames:,} frames" + (
        f", {model_events:,} model events" if model_events else ""
    )
    row = Row("fold", "client", "server", label, f"{top}{more} ({lines})", stretch[0].t, stretch[-1].t_end)
    row.first = wire_rows[0].first if wire_rows else -1
    row.last = wire_rows[-1].last if wire_rows else -1
    row.count = frames
    row.css = ("fold",)
    return row


def _fold_all(rows: list[Row]) -> tuple[list[Row], list[int]]:
    mapping = list(range(len(rows)))
    for rule in (_plain, lambda r: not _keep(r)):
        if len(rows) <= MAX_ROWS:
            break
        rows, step = _fold(rows, [rule(r) for r in rows])
        mapping = [step[m] for m in mapping]
    if len(rows) > MAX_ROWS:  # still too many marked rows: keep both ends, fold the middle
        foldable = [KEEP_ENDS <= i < len(rows) - KEEP_ENDS for i in range(len(rows))]
        rows, step = _fold(rows, foldable)
        mapping = [step[m] for m in mapping]
    return rows, mapping


def build(record: SessionRecord, checks: Sequence[Check] = ()) -> Diagram:
    """The diagram of ``record``, marking the failed checks among ``checks`` at the frames they name."""
    builder = _Builder(record, checks)
    builder.build()
    model_rows = sorted(_model_rows(record.model) + _result_rows(record), key=lambda r: r.t)
    rows, wire_index = _merge(builder.rows, model_rows)
    rows, fold_map = _fold_all(rows)

    def at(old: int) -> int:
        return fold_map[wire_index[old]]

    diagram = Diagram(rows, ("client", "server", "model") if record.model else ("client", "server"))
    diagram.virtual_time = record.virtual_time
    diagram.t0 = record.wire[0].t if record.wire else 0.0
    diagram.frames = sum(1 for e in record.wire if e.dir != "note")
    diagram.folded_frames = sum(r.count for r in rows if r.kind == "fold")
    for pair in builder.pairs:
        start, end = at(pair.start), at(pair.end) if pair.end is not None else None
        if end is not None and end == start:
            continue  # folded together: nothing to bracket
        diagram.pairs.append(Pair(start, end, pair.server, pair.label))
    for key, (what, opened) in builder.open.items():
        diagram.open_at_end.append(what)
        if key.startswith("req:"):
            diagram.pairs.append(Pair(at(opened), None, key.startswith("req:s2c"), what))
    diagram.intervals = _intervals(record, builder, at)
    return diagram


def _intervals(record: SessionRecord, builder: _Builder, at: Any) -> list[Interval]:
    """interrupt → the turn/completed of that turn that followed it, in ms on the wire."""
    out = []
    wire = record.wire
    for pos, entry in enumerate(wire):
        frame = entry.frame
        if entry.dir != "c2s" or not isinstance(frame, dict) or frame.get("method") != "turn/interrupt":
            continue
        params = as_object(frame.get("params"))
        turn_id = params.get("turnId")
        for later in range(pos + 1, len(wire)):
            other = wire[later]
            if (
                other.dir == "s2c"
                and isinstance(other.frame, dict)
                and other.frame.get("method") == "turn/completed"
                and (not turn_id or turn_id_of(other.frame) == turn_id)
            ):
                ms = (other.t - entry.t) * 1000
                clock = " (virtual time)" if record.virtual_time else ""
                label = f"interrupt → turn/completed {ms:.1f} ms{clock}"
                out.append(Interval(at(builder.row_of[pos]), at(builder.row_of[later]), ms, label))
                break
        else:
            end = at(len(builder.rows) - 1)
            out.append(Interval(at(builder.row_of[pos]), end, float("nan"), "interrupt → no turn/completed"))
    return out
