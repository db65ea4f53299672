"""The client's own rollout-trace bundle (placeholder until the trace writer lands)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class NullTrace:
    """Records nothing; same interface as the bundle-writing recorder."""

    path: Path | None = None

    def thread_started(self, thread_id: str, *, resumed: bool = False, metadata: dict[str, Any] | None = None) -> None:
        pass

    def turn_started(self, turn_id: str, thread_id: str) -> None:
        pass

    def turn_ended(self, turn_id: str, status: str) -> None:
        pass

    def tool_started(self, item_id: str, item_type: str, item: dict[str, Any], thread_id: str, turn_id: str) -> None:
        pass

    def tool_ended(self, item_id: str, status: str, item: dict[str, Any] | None = None) -> None:
        pass

    def other(self, kind: str, metadata: dict[str, Any], *, turn_id: str | None = None) -> None:
        pass

    def close(self, status: str) -> None:
        pass
