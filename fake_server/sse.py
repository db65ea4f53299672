"""A scenario's model responses as Responses API server-sent events (sans-IO: no sockets, no clock).

The mock Responses API (:mod:`fake_server.responses_api`) plays one :class:`ModelResponse` per
request. This module turns it into what goes on the wire: a list of :class:`Chunk` (the bytes of
one SSE event and how long to wait before sending it) and how the HTTP exchange ends. The event
shapes are those codex-cli consumes (``docs/real-binary.md``, "How scripted steps reach the wire").

Ids: messages ``msg-N``, reasoning ``rs_N``, tool calls ``call_N`` unless the scenario names them;
``N`` counts items of that kind across the session (1-based), like the fake app-server does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Literal

import orjson

from contracts.scenario import (
    CommandItem,
    FileChangeItem,
    MessageItem,
    ModelResponse,
    ReasoningItem,
    Usage,
)

#: The shell tool of the real binary (unified exec); apply_patch travels inside it as a heredoc.
EXEC_TOOL = "exec_command"
#: How long codex waits for a command to exit before handing the model a "still running" note instead
#: (and completing the turn without the command's item/completed). Generous, so a loaded host running
#: a quick command inside the sandbox never crosses it; codex returns as soon as the command exits.
MIN_YIELD_MS = 10000
MAX_YIELD_MS = 30000


def sse_event(event_type: str, data: dict[str, Any]) -> bytes:
    """One server-sent event in the format codex parses: ``event:`` line, ``data:`` line, blank line."""
    payload = {"type": event_type, **data}
    return b"event: " + event_type.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


@dataclass(frozen=True, slots=True)
class Chunk:
    delay_s: float  # wait this long before sending
    data: bytes


@dataclass(frozen=True, slots=True)
class HttpError:
    status: int
    body: bytes


@dataclass(frozen=True, slots=True)
class StreamPlan:
    """What to send for one request: either an HTTP error or a 200 event stream.

    ``ending``: ``complete`` ends the HTTP body normally after the last event; ``cut`` drops the
    connection mid-body (a transport error on the client's side).
    """

    response_id: str
    chunks: tuple[Chunk, ...] = ()
    ending: Literal["complete", "cut"] = "complete"
    http_error: HttpError | None = None


_ITEM_DONE = b"event: response.output_item.done\n"


def usage_json(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input,
        "input_tokens_details": {"cached_tokens": usage.cached},
        "output_tokens": usage.output,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning},
        "total_tokens": usage.total,
    }


def apply_patch_command(path: str, content: str) -> str:
    """The heredoc codex intercepts as an apply_patch (a file-change item, not a command)."""
    lines = content.splitlines() or [""]
    body = "".join(f"+{line}\n" for line in lines)
    return f"apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch\nEOF\n"


def command_yield_ms(item: CommandItem) -> int:
    """Long enough that a command of ``duration_ms`` finishes (or is interrupted) inside its item."""
    return max(MIN_YIELD_MS, min(MAX_YIELD_MS, item.duration_ms + 5000))


@dataclass(slots=True)
class IdCounter:
    """Session-wide counters for generated item ids."""

    counts: dict[str, int] = field(default_factory=dict)

    def next(self, prefix: str) -> str:
        n = self.counts.get(prefix, 0) + 1
        self.counts[prefix] = n
        return f"{prefix}{n}"


def build_stream(response: ModelResponse, *, response_id: str, workdir: PurePosixPath, ids: IdCounter) -> StreamPlan:
    """The wire form of one scripted model response. ``workdir`` must be absolute (codex requires it)."""
    if not workdir.is_absolute():
        raise ValueError(f"workdir must be absolute: {workdir}")
    if response.end == "http_error":
        body = orjson.dumps({"error": {"message": response.error, "type": "server_error", "code": "server_error"}})
        return StreamPlan(response_id=response_id, http_error=HttpError(response.http_status, body))
    chunks: list[Chunk] = [Chunk(0.0, sse_event("response.created", {"response": {"id": response_id}}))]
    for index, item in enumerate(response.items):
        item_chunks = _item_chunks(item, index, workdir, ids)
        if response.end == "disconnect":
            # A cut stream leaves its items open: no output_item.done, so no tool call either.
            item_chunks = [c for c in item_chunks if not c.data.startswith(_ITEM_DONE)]
        chunks.extend(item_chunks)
    if response.end == "completed":
        done: dict[str, Any] = {"id": response_id}
        if response.usage is not None:
            done["usage"] = usage_json(response.usage)
        chunks.append(Chunk(0.0, sse_event("response.completed", {"response": done})))
        return StreamPlan(response_id=response_id, chunks=tuple(chunks))
    if response.end == "failed":
        failed = {"id": response_id, "error": {"code": "server_error", "message": response.error}}
        chunks.append(Chunk(0.0, sse_event("response.failed", {"response": failed})))
        return StreamPlan(response_id=response_id, chunks=tuple(chunks))
    # disconnect: the body ends without response.completed ("stream closed before response.completed")
    return StreamPlan(response_id=response_id, chunks=tuple(chunks))


def _item_chunks(
    item: MessageItem | ReasoningItem | CommandItem | FileChangeItem, index: int, workdir: PurePosixPath, ids: IdCounter
) -> list[Chunk]:
    if isinstance(item, MessageItem):
        return _message_chunks(item, index, item.id or ids.next("msg-"))
    if isinstance(item, ReasoningItem):
        return _reasoning_chunks(item, index, item.id or ids.next("rs_"))
    call = function_call_item(item, item.call_id or ids.next("call_"), workdir)
    return [Chunk(0.0, sse_event("response.output_item.done", {"output_index": index, "item": call}))]


def function_call_item(item: CommandItem | FileChangeItem, call_id: str, workdir: PurePosixPath) -> dict[str, Any]:
    """The Responses ``function_call`` item codex receives for a command or a file change."""
    arguments: dict[str, Any]
    if isinstance(item, CommandItem):
        arguments = {"cmd": item.command, "workdir": str(workdir), "yield_time_ms": command_yield_ms(item)}
        if item.approval:
            arguments["sandbox_permissions"] = "require_escalated"
            arguments["justification"] = item.justification
    else:
        arguments = {
            "cmd": apply_patch_command(item.path, item.content),
            "workdir": str(workdir),
            "yield_time_ms": MIN_YIELD_MS,
        }
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": EXEC_TOOL,
        "arguments": orjson.dumps(arguments).decode(),
    }


def output_item(
    item: MessageItem | ReasoningItem | CommandItem | FileChangeItem, item_id: str, workdir: PurePosixPath
) -> dict[str, Any]:
    """The completed Responses item (``response.output_item.done``) for one scripted item; for a tool
    ``item_id`` is its call id. What a rollout trace's ``output_items`` hold."""
    if isinstance(item, MessageItem):
        return {
            "type": "message",
            "role": "assistant",
            "id": item_id,
            "content": [{"type": "output_text", "text": item.text}],
        }
    if isinstance(item, ReasoningItem):
        return {
            "type": "reasoning",
            "id": item_id,
            "summary": [_summary(item, item.summary)],
            "encrypted_content": _ENCRYPTED_REASONING,
        }
    return function_call_item(item, item_id, workdir)


def _message_chunks(item: MessageItem, index: int, item_id: str) -> list[Chunk]:
    delay = item.delay_ms / 1000
    added = {"type": "message", "role": "assistant", "id": item_id, "content": []}
    chunks = [Chunk(0.0, sse_event("response.output_item.added", {"output_index": index, "item": added}))]
    for delta in item.deltas:
        data = {"item_id": item_id, "output_index": index, "content_index": 0, "delta": delta}
        chunks.append(Chunk(delay, sse_event("response.output_text.delta", data)))
    done = output_item(item, item_id, PurePosixPath("/"))
    chunks.append(Chunk(0.0, sse_event("response.output_item.done", {"output_index": index, "item": done})))
    return chunks


def _reasoning_chunks(item: ReasoningItem, index: int, item_id: str) -> list[Chunk]:
    delay = item.delay_ms / 1000
    added = {"type": "reasoning", "id": item_id, "summary": []}
    where = {"item_id": item_id, "output_index": index, "summary_index": 0}
    chunks = [
        Chunk(0.0, sse_event("response.output_item.added", {"output_index": index, "item": added})),
        Chunk(0.0, sse_event("response.reasoning_summary_part.added", {**where, "part": _summary(item, "")})),
    ]
    for delta in item.deltas:
        chunks.append(Chunk(delay, sse_event("response.reasoning_summary_text.delta", {**where, "delta": delta})))
    chunks.append(Chunk(0.0, sse_event("response.reasoning_summary_text.done", {**where, "text": item.summary})))
    done = output_item(item, item_id, PurePosixPath("/"))
    chunks.append(Chunk(0.0, sse_event("response.output_item.done", {"output_index": index, "item": done})))
    return chunks


_ENCRYPTED_REASONING = "bW9jay1yZWFzb25pbmc="


def _summary(item: ReasoningItem, text: str) -> dict[str, str]:
    return {"type": "summary_text", "text": text}
