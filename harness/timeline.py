"""A readable timeline of one recorded session, for fault-injection debugging.

One line per wire entry: time since the first entry, direction (``→`` client to server, ``←`` server to
client, ``·`` a note), method (or the answered request), a short summary. Marked: lines that were not
frames and frames the schema rejects (``!!``), windows opened and closed (approvals, items, turns,
interrupts) and, at the end, windows still open and the record's contract failures.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from contracts.checks import Check
from contracts.checks.wire_index import id_key, is_request, is_response, turn_id_of
from contracts.jsonval import as_object
from contracts.record import WireEntry
from contracts.text import one_line

_ARROWS = {"c2s": "→", "s2c": "←", "note": "·"}
_TEXT = 60
_NAME = 80  # a method name, a status, a type
_ID = 40


def _clip(text: Any, width: int = _TEXT) -> str:
    """A value from the wire as one line of at most ``width`` characters, escaped (contracts.text)."""
    return one_line(text, width)


def _id(value: Any) -> str:
    return _clip(value, _ID)


def _quoted(text: Any, width: int) -> str:
    """Quoted text (a delta, a turn's input): escaped once, not passed through ``repr`` as well."""
    return f"'{_clip(text, width)}'"


def _usage(b: Any) -> str:
    if not isinstance(b, dict):
        return "?"
    return f"in {b.get('inputTokens')} cached {b.get('cachedInputTokens')} out {b.get('outputTokens')}"


def summarize(frame: dict[str, Any]) -> str:
    """A short, method-aware summary of one frame's params or result."""
    params = as_object(frame.get("params"))
    method = frame.get("method")
    if method is not None and not isinstance(method, str):
        return f"!! method is not a string: {_clip(method, 40)}"
    if method is None:
        if "error" in frame:
            err = frame["error"] if isinstance(frame["error"], dict) else {}
            return f"error {err.get('code')}: {_clip(err.get('message', ''))}"
        result = frame.get("result")
        if isinstance(result, dict):
            if "decision" in result:
                return f"decision {_clip(result['decision'], 40)}"
            if isinstance(result.get("turn"), dict):
                return f"turn {_id(result['turn'].get('id'))} {_clip(result['turn'].get('status'), _NAME)}"
            if isinstance(result.get("thread"), dict):
                return f"thread {_id(result['thread'].get('id'))}"
            return _clip(",".join(result) or "{}")
        return _clip(result)
    if method in ("item/agentMessage/delta", "item/reasoning/summaryTextDelta", "item/reasoning/textDelta"):
        return _quoted(params.get("delta", ""), 40)
    if method in ("item/started", "item/completed"):
        item = as_object(params.get("item"))
        status = f" {_clip(item['status'], _NAME)}" if item.get("status") else ""
        return f"{_clip(item.get('type'), _NAME)} {_id(item.get('id'))}{status}"
    if method in ("turn/started", "turn/completed"):
        turn = as_object(params.get("turn"))
        error = turn.get("error")
        msg = f" error: {_clip(error.get('message', ''), 40)}" if isinstance(error, dict) else ""
        return f"turn {_id(turn.get('id'))} {_clip(turn.get('status'), _NAME)}{msg}"
    if method == "thread/status/changed":
        thread_status = as_object(params.get("status"))
        return _clip(thread_status.get("type"), _NAME)
    if method == "thread/tokenUsage/updated":
        usage = as_object(params.get("tokenUsage"))
        return f"last {_usage(usage.get('last'))}; total {_usage(usage.get('total'))}"
    if method == "error":
        err = as_object(params.get("error"))
        return f"willRetry={_id(params.get('willRetry'))} {_clip(err.get('message', ''), 50)}"
    if method.endswith("requestApproval"):
        what = params.get("command") or params.get("reason") or ""
        return f"item {_id(params.get('itemId'))} {_clip(what, 40)}"
    if method == "serverRequest/resolved":
        return f"request {_id(params.get('requestId'))}"
    if method in ("turn/start", "turn/steer"):
        inputs = params.get("input")
        texts = [i.get("text", "") for i in inputs if isinstance(i, dict)] if isinstance(inputs, list) else []
        return _quoted(" ".join(str(t) for t in texts), 40)
    if method == "turn/interrupt":
        return f"turn {_id(params.get('turnId'))}"
    if method == "initialize":
        info = as_object(params.get("clientInfo"))
        return f"{_clip(info.get('name'), _NAME)} {_clip(info.get('version'), _ID)}"
    return _clip(",".join(f"{k}" for k in params))


#: Bounds of what a timeline remembers while it streams (a transcript may hold millions of frames):
#: open windows beyond this are forgotten oldest first (and counted); request methods likewise.
MAX_OPEN_WINDOWS = 10_000
MAX_REQUESTS = 100_000


@dataclass(slots=True)
class _Windows:
    open: dict[str, str] = field(default_factory=dict)  # key -> description, oldest first
    forgotten: int = 0

    def opened(self, key: str, what: str) -> str:
        self.open.pop(key, None)
        self.open[key] = what
        if len(self.open) > MAX_OPEN_WINDOWS:
            del self.open[next(iter(self.open))]
            self.forgotten += 1
        return f"[opens {what}]"

    def closed(self, key: str, how: str = "closes") -> str:
        what = self.open.pop(key, None)
        return f"[{how} {what}]" if what else ""


@dataclass(slots=True)
class _Requests:
    """Request id → method per direction, so an answer shows what it answers (bounded, oldest forgotten)."""

    methods: dict[tuple[str, str], str] = field(default_factory=dict)

    def seen(self, direction: str, frame: dict[str, Any]) -> None:
        key = (direction, id_key(frame["id"]))
        if key in self.methods:
            return  # a reused id: the first request keeps it (as the contracts' index does)
        self.methods[key] = _clip(frame["method"], _NAME)  # clipped once: a 10 MB name is not kept
        if len(self.methods) > MAX_REQUESTS:
            del self.methods[next(iter(self.methods))]

    def answered(self, entry: WireEntry) -> str | None:
        """For an answer frame, the method of the request it answers (sent the other way)."""
        frame = entry.frame
        if not isinstance(frame, dict) or not is_response(frame):
            return None
        return self.methods.get(("s2c" if entry.dir == "c2s" else "c2s", id_key(frame["id"])))


def render(
    entries: Sequence[WireEntry],
    *,
    checks: Sequence[Check] = (),
    validator: Any = None,
    title: str = "",
) -> str:
    return "\n".join(render_lines(entries, checks=checks, validator=validator, title=title)) + "\n"


def render_lines(
    entries: Iterable[WireEntry],
    *,
    checks: Sequence[Check] = (),
    validator: Any = None,
    title: str = "",
) -> Iterator[str]:
    """The timeline one line at a time; ``entries`` is read once, in order, in bounded memory."""
    requests = _Requests()
    windows = _Windows()
    if title:
        yield _clip(title, 400)  # made of a record's fields: another program may have written them
    t0: float | None = None
    for entry in entries:
        if t0 is None:
            t0 = entry.t
        when = f"{(entry.t - t0) * 1000:10.1f}ms"
        arrow = _ARROWS.get(entry.dir, "?")
        if entry.dir == "note":
            yield f"{when} {arrow}     -- {_clip(entry.note, 300)}"
            continue
        if entry.frame is None:
            size = f" ({entry.size} bytes)" if entry.size else ""
            raw = f": {_clip(repr(entry.raw), 60)}" if entry.raw else ""
            yield f"{when} {arrow} {entry.dir} !! not a frame: {_clip(entry.error, _NAME)}{size}{raw}"
            continue
        try:
            yield _frame_line(entry, f"{when} {arrow} {entry.dir}", requests, windows, validator)
        except RecursionError:  # a hostile frame nested past what str() can walk
            yield f"{when} {arrow} {entry.dir} !! frame too deeply nested to show"
        except (AttributeError, KeyError, TypeError, ValueError) as exc:  # a shape no real frame has
            yield f"{when} {arrow} {entry.dir} !! frame of an unexpected shape ({type(exc).__name__}: {_clip(exc)})"
    if windows.open:
        yield ""
        yield "Open at the end of the transcript:"
        for what in windows.open.values():
            yield f"  {what}"
        if windows.forgotten:
            yield f"  (+{windows.forgotten} older open windows not shown)"
    failures = [c for c in checks if c.status in ("fail", "warn")]
    if checks:
        yield ""
        yield f"Contracts: {sum(c.status == 'pass' for c in checks)} passed, {len(failures)} failed or warned"
        for c in failures:
            what = f"{_clip(c.contract, _NAME)} / {_clip(c.name, _NAME)}"
            yield f"  {c.status.upper()} {what}: {_clip(c.detail, 300)} [{_clip(c.reference, _NAME)}]"


def _frame_line(entry: WireEntry, prefix: str, requests: _Requests, windows: _Windows, validator: Any) -> str:
    frame: dict[str, Any] = entry.frame or {}  # the caller shows lines that were not frames itself
    marks: list[str] = []
    if is_request(frame):
        requests.seen(entry.dir, frame)
        label = f"{_clip(frame['method'], _NAME)} #{_id(frame['id'])}"
        if entry.dir == "s2c":
            marks.append(windows.opened(f"req:{id_key(frame['id'])}", f"server request {_id(frame['id'])}"))
        elif frame["method"] == "turn/interrupt":
            marks.append(windows.opened(f"int:{id_key(frame['id'])}", f"interrupt #{_id(frame['id'])}"))
    elif is_response(frame):
        method = requests.answered(entry) or "unknown request"
        label = f"answer #{_id(frame['id'])} ({method})"
        if entry.dir == "c2s":
            mark = windows.closed(f"req:{id_key(frame['id'])}", "answers")
            marks.append(mark or "!! no open request with this id")
        else:
            mark = windows.closed(f"int:{id_key(frame['id'])}", "answers")
            if mark:
                marks.append(mark)
    else:
        label = _clip(frame.get("method"), _NAME)
        marks += _notification_marks(frame, windows)
    if validator is not None:
        violations = validator.validate(frame, entry.dir, requests.answered(entry))
        if violations:
            marks.append(f"!! schema: {_clip(violations[0].message, 80)}")
    text = f"{prefix} {label}  {summarize(frame)}"
    return " ".join([text, *[m for m in marks if m]]).rstrip()


def _notification_marks(frame: dict[str, Any], windows: _Windows) -> list[str]:
    method = frame.get("method")
    params = as_object(frame.get("params"))
    if method == "item/started" and isinstance(params.get("item"), dict):
        item = params["item"]
        return [windows.opened(f"item:{item.get('id')}", f"{_clip(item.get('type'), _NAME)} {_id(item.get('id'))}")]
    if method == "item/completed" and isinstance(params.get("item"), dict):
        return [windows.closed(f"item:{params['item'].get('id')}")]
    if method == "turn/started":
        return [windows.opened(f"turn:{turn_id_of(frame)}", f"turn {_id(turn_id_of(frame))}")]
    if method == "turn/completed":
        marks = [windows.closed(f"turn:{turn_id_of(frame)}")]
        left = [w for k, w in windows.open.items() if k.startswith("item:")]
        if left:
            marks.append(f"!! left open: {', '.join(left)}")
            for key in [k for k in windows.open if k.startswith("item:")]:
                windows.open.pop(key)
        return marks
    if method == "serverRequest/resolved" and "requestId" in params:
        return [windows.closed(f"req:{id_key(params['requestId'])}", "resolves")]
    return []
