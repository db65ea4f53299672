"""The statuses the client trace speaks, from the client's own statuses (pure)."""

from __future__ import annotations


def turn_status(status: str, killed: bool) -> str:
    if status == "completed":
        return "completed"
    if status == "failed":
        return "failed"
    # an interrupted turn ends `cancelled`; one whose server was killed stopped with its runtime
    return "aborted" if killed else "cancelled"


def tool_status(status: str | None) -> str:
    if status == "completed":
        return "completed"
    if status in ("failed", "declined"):
        return "failed"
    return "aborted"
