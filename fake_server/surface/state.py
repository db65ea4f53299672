"""What the surface methods remember per connection: names, archives, forks, goals, sections, watches."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PINNED_SECTION_ID = "01984de2-8f74-7c91-a3b2-5c5e937cf318"  # the real server's built-in "Pinned" section


@dataclass(slots=True)
class ThreadExtra:
    name: str | None = None
    forked_from: str | None = None
    archived: bool = False
    loaded: bool = True
    deleted: bool = False
    materialised: bool = False  # its rollout can be found by id (a turn ran, it was named or forked)
    section: str | None = None
    goal: dict[str, Any] | None = None
    revision: str | None = None
    git_info: dict[str, Any] | None = None


@dataclass(slots=True)
class SurfaceState:
    threads: dict[str, ThreadExtra] = field(default_factory=dict)
    sections: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {PINNED_SECTION_ID: {"id": PINNED_SECTION_ID, "name": "Pinned", "appearance": None}}
    )
    attachments: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)  # (thread, type, key)
    watches: dict[str, str] = field(default_factory=dict)  # watchId -> path
    config_version: int = 0
    config_values: dict[str, Any] = field(default_factory=dict)  # config/value/write and batchWrite
    fs: Any = None  # fs_search.Overlay, made on first use
    elicitations: dict[str, int] = field(default_factory=dict)  # thread id -> paused count
    search_sessions: dict[str, list[str]] = field(default_factory=dict)  # fuzzy search session -> roots
    method_counts: dict[str, int] = field(default_factory=dict)  # requests per method ([[methods]] n)

    def extra(self, thread_id: str) -> ThreadExtra:
        extra = self.threads.get(thread_id)
        if extra is None:
            extra = self.threads[thread_id] = ThreadExtra()
        return extra
