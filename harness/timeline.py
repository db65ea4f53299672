"""A readable timeline of one recorded session, for fault-injection debugging.

One line per wire entry: time since the first entry, direction (``→`` client to server, ``←`` server to
client, ``·`` a note), method (or the answered request), a short summary. Marked: lines that were not
frames and frames the schema rejects (``!!``), windows opened and closed (approvals, items, turns,
interrupts) and, at the end, windows still open and the record's contract failures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from contracts.checks import Check
from contracts.checks.wire_index import WireIndex, id_key, is_request, is_response, turn_id_of
from contracts.record import WireEntry

_ARROWS = {"c2s": "→", "s2c": "←", "note": "·"}
_TEXT = 60


def _clip(text: Any, width: int = _TEXT) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= width else s[: width - 1] + "…"


def _usage(b: Any) -> str:
    if not isinstance(b, dict):
        return "?"
    return f"in {b.get('inputTokens')} cached {b.get('cachedInputTokens')} out {b.get('outputTokens')}"


def summarize(frame: dict[str, Any]) -> str:
    """A short, method-aware summary of one frame's params or result."""
    params = frame.get("params") if isinstance(frame.get("params"), dict) else {}
    method = frame.get("method")
    if method is None:
        if "error" in frame:
            err = frame["error"] if isinstance(frame["error"], dict) else {}
            return f"error {err.get('code')}: {_clip(err.get('message', ''))}"
        result = frame.get("result")
        if isinstance(result, dict):
            if "decision" in result:
                return f"decision {_clip(result['decision'], 40)}"
            if isinstance(result.get("turn"), dict):
                return f"turn {result['turn'].get('id')} {result['turn'].get('status')}"
            if isinstance(result.get("thread"), dict):
                return f"thread {result['thread'].get('id')}"
            return _clip(",".join(result) or "{}")
        return _clip(result)
    if method in ("item/agentMessage/delta", "item/reasoning/summaryTextDelta", "item/reasoning/textDelta"):
        return repr(_clip(params.get("delta", ""), 40))
    if method in ("item/started", "item/completed"):
        item = params.get("item") if isinstance(params.get("item"), dict) else {}
        status = f" {item['status']}" if item.get("status") else ""
        return f"{item.get('type')} {item.get('id')}{status}"
    if method in ("turn/started", "turn/completed"):
        turn = params.get("turn") if isinstance(params.get("turn"), dict) else {}
        error = turn.get("error")
        msg = f" error: {_clip(error.get('message', ''), 40)}" if isinstance(error, dict) else ""
        return f"turn {turn.get('id')} {turn.get('status')}{msg}"
    if method == "thread/status/changed":
        status = params.get("status") if isinstance(params.get("status"), dict) else {}
        return str(status.get("type"))
    if method == "thread/tokenUsage/updated":
        usage = params.get("tokenUsage") if isinstance(params.get("tokenUsage"), dict) else {}
        return f"last {_usage(usage.get('last'))}; total {_usage(usage.get('total'))}"
    if method == "error":
        err = params.get("error") if isinstance(params.get("error"), dict) else {}
        return f"willRetry={params.get('willRetry')} {_clip(err.get('message', ''), 50)}"
    if method.endswith("requestApproval"):
        what = params.get("command") or params.get("reason") or ""
        return f"item {params.get('itemId')} {_clip(what, 40)}"
    if method == "serverRequest/resolved":
        return f"request {params.get('requestId')}"
    if method in ("turn/start", "turn/steer"):
        inputs = params.get("input") if isinstance(params.get("input"), list) else []
        texts = [i.get("text", "") for i in inputs if isinstance(i, dict)]
        return repr(_clip(" ".join(texts), 40))
    if method == "turn/interrupt":
        return f"turn {params.get('turnId')}"
    if method == "initialize":
        info = params.get("clientInfo") if isinstance(params.get("clientInfo"), dict) else {}
        return f"{info.get('name')} {info.get('version')}"
    return _clip(",".join(f"{k}" for k in params))


@dataclass(slots=True)
class _Windows:
    open: dict[str, str] = field(default_factory=dict)  # key -> description

    def opened(self, key: str, what: str) -> str:
        self.open[key] = what
        return f"[opens {what}]"

    def closed(self, key: str, how: str = "closes") -> str:
        what = self.open.pop(key, None)
        return f"[{how} {what}]" if what else ""


def render(
    entries: Sequence[WireEntry],
    *,
    checks: Sequence[Check] = (),
    validator: Any = None,
    title: str = "",
) -> str:
    index = WireIndex.build(list(entries))
    windows = _Windows()
    lines = [title] if title else []
    t0 = entries[0].t if entries else 0.0
    for entry in entries:
        when = f"{(entry.t - t0) * 1000:10.1f}ms"
        arrow = _ARROWS.get(entry.dir, "?")
        if entry.dir == "note":
            lines.append(f"{when} {arrow}     -- {entry.note}")
            continue
        if entry.frame is None:
            size = f" ({entry.size} bytes)" if entry.size else ""
            raw = f": {_clip(entry.raw, 40)!r}" if entry.raw else ""
            lines.append(f"{when} {arrow} {entry.dir} !! not a frame: {entry.error}{size}{raw}")
            continue
        frame = entry.frame
        marks: list[str] = []
        if is_request(frame):
            label = f"{frame['method']} #{frame['id']}"
            if entry.dir == "s2c":
                marks.append(windows.opened(f"req:{id_key(frame['id'])}", f"server request {frame['id']}"))
            elif frame["method"] == "turn/interrupt":
                marks.append(windows.opened(f"int:{id_key(frame['id'])}", f"interrupt #{frame['id']}"))
        elif is_response(frame):
            method = index.request_method(entry) or "unknown request"
            label = f"answer #{frame['id']} ({method})"
            if entry.dir == "c2s":
                mark = windows.closed(f"req:{id_key(frame['id'])}", "answers")
                marks.append(mark or "!! no open request with this id")
            else:
                mark = windows.closed(f"int:{id_key(frame['id'])}", "answers")
                if mark:
                    marks.append(mark)
        else:
            label = str(frame.get("method"))
            marks += _notification_marks(frame, windows)
        if validator is not None:
            violations = validator.validate(frame, entry.dir, index.request_method(entry))
            if violations:
                marks.append(f"!! schema: {_clip(violations[0].message, 80)}")
        text = f"{when} {arrow} {entry.dir} {label}  {summarize(frame)}"
        lines.append(" ".join([text, *[m for m in marks if m]]).rstrip())
    if windows.open:
        lines += ["", "Open at the end of the transcript:"]
        lines += [f"  {what}" for what in windows.open.values()]
    failures = [c for c in checks if c.status in ("fail", "warn")]
    if checks:
        lines += ["", f"Contracts: {sum(c.status == 'pass' for c in checks)} passed, {len(failures)} failed or warned"]
        for c in failures:
            lines.append(f"  {c.status.upper()} {c.contract} / {c.name}: {_clip(c.detail, 300)} [{c.reference}]")
    return "\n".join(lines) + "\n"


def _notification_marks(frame: dict[str, Any], windows: _Windows) -> list[str]:
    method = frame.get("method")
    params = frame.get("params") if isinstance(frame.get("params"), dict) else {}
    if method == "item/started" and isinstance(params.get("item"), dict):
        item = params["item"]
        return [windows.opened(f"item:{item.get('id')}", f"{item.get('type')} {item.get('id')}")]
    if method == "item/completed" and isinstance(params.get("item"), dict):
        return [windows.closed(f"item:{params['item'].get('id')}")]
    if method == "turn/started":
        return [windows.opened(f"turn:{turn_id_of(frame)}", f"turn {turn_id_of(frame)}")]
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
