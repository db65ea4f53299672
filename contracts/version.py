"""The harness's own version: what every report, header and ``--version`` names as the judge."""

from __future__ import annotations

from functools import cache
from importlib import metadata

DISTRIBUTION = "codex-harness"


@cache
def harness_version() -> str:
    """The installed distribution's version; ``unknown`` from a tree that was never installed."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"


def version_line() -> str:
    return f"{DISTRIBUTION} {harness_version()}"
