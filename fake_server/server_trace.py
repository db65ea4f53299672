"""The fake's rollout trace bundle (written with :mod:`contracts.trace.writer`)."""

from __future__ import annotations

from pathlib import Path

from fake_server.effects import TraceEvent


class ServerTrace:
    def __init__(self, root: Path) -> None:
        self.root = root

    def on_event(self, event: TraceEvent) -> None:
        pass

    def finish(self, *, graceful: bool) -> None:
        pass
