"""Every frame in both directions validates against the pinned release, except what ``[expect]`` declares.

Kinds an allowance can name: ``server_frames_invalid`` (server frames failing the schema, and lines
that were not frames unless ``wire_errors`` is declared separately), ``wire_errors`` (server lines
that were not JSON frames: garbage, invalid UTF-8, oversized) and ``client_frames_invalid``.
"""

from __future__ import annotations

from typing import Any

from contracts.checks.base import Check, Maker, judge_allowance
from contracts.checks.registry import Contract
from contracts.checks.wire_index import WireIndex
from contracts.record import SessionRecord

NAME = "schema"
REFERENCE = "docs/protocol.md §1"
#: The ids of its checks (other modules name a check by these).
FRAMES = "frames"
SERVER_FRAMES_INVALID = "server_frames_invalid"
WIRE_ERRORS = "wire_errors"
CLIENT_FRAMES_INVALID = "client_frames_invalid"
CONTRACT = Contract(
    NAME, citation=REFERENCE, checks=(FRAMES, SERVER_FRAMES_INVALID, WIRE_ERRORS, CLIENT_FRAMES_INVALID)
)
_SHOWN = 3


def _validator(record: SessionRecord) -> Any:
    from contracts.validator import Validator

    return Validator.for_release(record.schema_release, record.experimental_api)


def _summary(items: list[str]) -> str:
    more = f" (+{len(items) - _SHOWN} more)" if len(items) > _SHOWN else ""
    return "; ".join(items[:_SHOWN]) + more


def _judge(
    make: Maker, record: SessionRecord, what: str, side: str, found: list[str], at: list[int] | None = None
) -> Check:
    ok, why, _ = judge_allowance(record, NAME, what, len(found))
    if not found and ok:
        return make(what, "pass", f"every {side} frame valid against codex-cli {record.schema_release}")
    detail = f"{len(found)} invalid, sent by the {side}" + (f": {_summary(found)}" if found else "")
    if why:
        detail = f"{why} — {detail}"
    return make(what, "pass" if ok else "fail", detail, at=at or ())


@CONTRACT.judge
def check(record: SessionRecord) -> list[Check]:
    make = CONTRACT.maker(record)
    try:
        validator = _validator(record)
    except Exception as exc:  # an unknown release is a skip with its reason, not a verdict on frames
        return [make("frames", "skip", f"no pinned schema for codex-cli {record.schema_release}: {exc}")]
    index = WireIndex.build(record.wire)
    server: list[str] = []
    client: list[str] = []
    wire_errors: list[str] = []
    # Positions of each kind, so the report can mark the frames.
    where: dict[str, list[int]] = {"server": [], "client": [], "wire": []}
    for pos, entry in enumerate(record.wire):
        if entry.dir == "note":
            continue
        sink = server if entry.dir == "s2c" else client
        side = "server" if entry.dir == "s2c" else "client"
        if entry.frame is None:
            size = f" ({entry.size} bytes)" if entry.size else ""
            text = f"t={entry.t:.3f} not a frame: {entry.error or 'raw line'}{size}"
            (wire_errors if entry.dir == "s2c" else client).append(text)
            where["wire" if entry.dir == "s2c" else "client"].append(pos)
            continue
        violations = validator.validate(entry.frame, entry.dir, index.request_method(entry))
        if violations:
            method = entry.frame.get("method") if isinstance(entry.frame, dict) else None
            label = method or f"answer to {index.request_method(entry) or 'unknown request'}"
            sink.append(f"t={entry.t:.3f} {label}: {violations[0].message}")
            where[side].append(pos)
    if record.expect.allowance(NAME, "wire_errors") is not None:
        wire_check = _judge(make, record, "wire_errors", "server", wire_errors, where["wire"])
        checks = [_judge(make, record, "server_frames_invalid", "server", server, where["server"]), wire_check]
    else:
        server_at = sorted(where["wire"] + where["server"])
        checks = [_judge(make, record, "server_frames_invalid", "server", wire_errors + server, server_at)]
    checks.append(_judge(make, record, "client_frames_invalid", "client", client, where["client"]))
    return checks
