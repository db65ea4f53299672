"""The rollout-trace bundle format: names, vocabulary, record framing, and the older schemas the reader takes.

The vocabulary here is envelope schema :data:`SCHEMA_VERSION`'s (zstd payload shards, ``recording_completed`` closes),
the newest the reader and writer know. Which schema a release writes, and what that schema leaves out, is data of the
release's folder (``release.json``'s ``trace``, :mod:`contracts.releases`): the reader replays every format a release
declares (:func:`contracts.releases.trace_formats`), with the same events and closure rules, and the differences each
release's own ``codex debug trace-reduce`` showed when fields were taken out of its real bundles one at a time.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

SCHEMA_VERSION: Final = 3
MANIFEST_NAME: Final = "manifest.json"
EVENT_LOG_NAME: Final = "trace.jsonl"
PAYLOADS_DIR_NAME: Final = "payloads"
MANIFEST_FIELDS: Final = (
    "schema_version",
    "trace_id",
    "rollout_id",
    "root_thread_id",
    "started_at_unix_ms",
    "raw_event_log",
    "payloads_dir",
)

ROLLOUT_STATUSES: Final = ("running", "completed", "failed", "aborted")
EXECUTION_STATUSES: Final = ("running", "completed", "failed", "cancelled", "aborted")
CODE_CELL_STATUSES: Final = ("starting", "running", "yielded", "completed", "failed", "terminated")
CAPTURE_STATUSES: Final = ("complete", "truncated", "omitted")

PAYLOAD_KINDS: Final = (
    "inference_request",
    "prepared_prompt",
    "model_item",
    "content_value",
    "warmup_context",
    "inference_response",
    "compaction_request",
    "compaction_checkpoint",
    "compaction_response",
    "tool_invocation",
    "tool_result",
    "tool_runtime_event",
    "terminal_runtime_event",
    "protocol_event",
    "session_metadata",
    "agent_result",
)

# Required payload fields per event type, in the reducer's variant order (its "expected one of" list).
EVENT_REQUIRED_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "recording_completed": (),
    "rollout_started": ("trace_id", "root_thread_id"),
    "rollout_ended": ("status",),
    "thread_started": ("thread_id", "agent_path"),
    "thread_ended": ("thread_id", "status"),
    "thread_resumed": ("thread_id",),
    "codex_turn_started": ("codex_turn_id", "thread_id"),
    "codex_turn_ended": ("codex_turn_id", "status"),
    "history_item_accepted": ("item_id",),
    "inference_started": (
        "inference_call_id",
        "thread_id",
        "codex_turn_id",
        "model",
        "provider_name",
        "request_payload",
        "prepared_prompt_payload",
    ),
    "inference_completed": ("inference_call_id", "response_payload"),
    "inference_failed": ("inference_call_id", "error"),
    "inference_cancelled": ("inference_call_id", "reason"),
    "tool_call_started": ("tool_call_id", "requester", "kind", "summary"),
    "tool_call_runtime_started": ("tool_call_id", "kind", "runtime_payload"),
    "tool_call_runtime_ended": ("tool_call_id", "status", "runtime_payload"),
    "tool_call_ended": ("tool_call_id", "status"),
    "mcp_tool_call_correlation_assigned": ("tool_call_id", "mcp_call_id"),
    "stdin_target_resolved": ("tool_call_id", "exec_tool_call_id"),
    "code_cell_started": ("runtime_cell_id", "model_visible_call_id", "source_js"),
    "code_cell_initial_response": ("runtime_cell_id", "status"),
    "code_cell_ended": ("runtime_cell_id", "status"),
    "code_cell_wait_target_resolved": ("tool_call_id", "runtime_cell_id"),
    "compaction_request_started": (
        "compaction_id",
        "compaction_request_id",
        "thread_id",
        "codex_turn_id",
        "model",
        "provider_name",
        "request_payload",
    ),
    "compaction_request_completed": ("compaction_id", "compaction_request_id", "response_payload"),
    "compaction_request_failed": ("compaction_id", "compaction_request_id", "error"),
    "compaction_installed": ("compaction_id", "checkpoint_payload"),
    "agent_result_observed": ("edge_id", "child_thread_id", "child_codex_turn_id", "parent_thread_id", "message"),
    "protocol_event_observed": ("event_type", "event_payload"),
    "other": ("kind", "summary"),
}
EVENT_TYPES: Final = tuple(EVENT_REQUIRED_FIELDS)


@dataclass(frozen=True, slots=True)
class BundleFormat:
    """One envelope schema as a release writes it."""

    schema: int
    release: str  # the release whose real bundles this was learned from ("": none, the vocabulary's own)
    #: Payloads as one JSON file each, referenced by ``path`` (schemas 1 and 2), not zstd shards (schema 3).
    payload_files: bool
    #: The event that ends a recording as this release writes it (the fake's writer follows it): schema 1 has no
    #: ``recording_completed``; its last event is ``rollout_ended``. The reader does not take it from here: it
    #: reads which event closed a bundle from the bundle (the first writers of schema 2 write no recording_completed).
    closing_event: str
    #: Fields schema 3 requires that this schema does not write (its reducer reads bundles without them).
    not_written: frozenset[tuple[str, str]] = frozenset()

    def required_fields(self) -> dict[str, tuple[str, ...]]:
        return {
            etype: tuple(f for f in fields if (etype, f) not in self.not_written)
            for etype, fields in EVENT_REQUIRED_FIELDS.items()
        }


#: Schema :data:`SCHEMA_VERSION` as the vocabulary above describes it, for when no release declares it
#: (the formats the reader takes: :func:`contracts.releases.trace_formats`).
NATIVE: Final = BundleFormat(SCHEMA_VERSION, "", payload_files=False, closing_event="recording_completed")


#: The longest ``path`` a payload reference of schemas 1 and 2 may carry (``payloads/<n>.json``).
MAX_PAYLOAD_PATH: Final = 256

# Fields holding one RawPayloadRef (or null) and fields holding a list of them.
PAYLOAD_REF_FIELDS: Final = (
    "metadata_payload",
    "event_payload",
    "request_payload",
    "prepared_prompt_payload",
    "warmup_context_payload",
    "response_payload",
    "partial_response_payload",
    "invocation_payload",
    "result_payload",
    "runtime_payload",
    "tool_output_payload",
    "checkpoint_payload",
    "carried_payload",
)
PAYLOAD_REF_LIST_FIELDS: Final = ("payloads",)

# Where each event type carries payload references (single-ref slots; ``other`` also has a list).
REF_SLOTS_BY_TYPE: Final[dict[str, tuple[str, ...]]] = {
    "thread_started": ("metadata_payload",),
    "protocol_event_observed": ("event_payload",),
    "history_item_accepted": ("tool_output_payload",),
    "inference_started": ("request_payload", "prepared_prompt_payload", "warmup_context_payload"),
    "inference_completed": ("response_payload",),
    "inference_failed": ("partial_response_payload",),
    "inference_cancelled": ("partial_response_payload",),
    "tool_call_started": ("invocation_payload",),
    "tool_call_runtime_started": ("runtime_payload",),
    "tool_call_runtime_ended": ("runtime_payload",),
    "tool_call_ended": ("result_payload",),
    "code_cell_initial_response": ("response_payload",),
    "code_cell_ended": ("response_payload",),
    "compaction_request_started": ("request_payload",),
    "compaction_request_completed": ("response_payload",),
    "compaction_installed": ("checkpoint_payload",),
    "agent_result_observed": ("carried_payload",),
}

# Slots whose payload kind the reducer checks (observed: a wrong kind is "mislabeled ... evidence").
CHECKED_SLOT_KINDS: Final[dict[tuple[str, str], str]] = {
    ("inference_started", "request_payload"): "inference_request",
    ("inference_started", "prepared_prompt_payload"): "prepared_prompt",
}

# Which (event type, status field) pairs use which status enum.
STATUS_ENUMS: Final[dict[str, tuple[str, ...]]] = {
    "rollout_ended": ROLLOUT_STATUSES,
    "thread_ended": ROLLOUT_STATUSES,
    "codex_turn_ended": EXECUTION_STATUSES,
    "tool_call_runtime_ended": EXECUTION_STATUSES,
    "tool_call_ended": EXECUTION_STATUSES,
    "code_cell_initial_response": CODE_CELL_STATUSES,
    "code_cell_ended": CODE_CELL_STATUSES,
}

_RECORD_HEADER: Final = struct.Struct("<HQ")
RECORD_HEADER_SIZE: Final = _RECORD_HEADER.size
MAX_ID_LEN: Final = 0xFFFF


def shard_name(shard: int) -> str:
    return f"{shard:06d}.zst"


def payload_id(n: int) -> str:
    return f"raw_payload:{n}"


def encode_record(record_id: str, body: bytes) -> bytes:
    """One payload record: ``u16 LE id_len | u64 LE body_len | id | body``."""
    rid = record_id.encode("utf-8")
    if len(rid) > MAX_ID_LEN:
        raise ValueError(f"payload id longer than {MAX_ID_LEN} bytes")
    return _RECORD_HEADER.pack(len(rid), len(body)) + rid + body


def unpack_record_header(data: bytes | memoryview, offset: int) -> tuple[int, int]:
    return _RECORD_HEADER.unpack_from(data, offset)
