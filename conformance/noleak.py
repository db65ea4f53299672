"""No leaks, provably: an autouse fixture that fails a test leaving a marked process alive.

Every child the client starts carries ``CODEX_HARNESS_RUN_MARKER=<marker>`` in its environment
(:mod:`codex_client.process`), and grandchildren inherit it. Each test gets a fresh marker; after
the test, ``/proc/*/environ`` of this user's processes is scanned for it (other users' environments
are unreadable anyway). Survivors get a bounded grace to finish dying (a SIGKILLed process is
reaped asynchronously), then they are killed by pid so they cannot disturb later tests, and the test
fails naming them. Zombies are not alive and are ignored.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Iterator

import pytest

from codex_client.process import set_run_marker
from codex_sandbox.proctree import procfs

GRACE_S = 2.0
def marked_processes(marker: str) -> list[int]:
    """Live (non-zombie) processes of this user whose environment carries ``marker``."""
    return sorted(procfs.marked(marker))


@pytest.fixture(autouse=True)
def no_leaked_processes() -> Iterator[str]:
    """Fails the test if any process started with this test's run marker is still alive afterwards."""
    marker = f"test-{uuid.uuid4().hex}"
    previous = set_run_marker(marker)
    try:
        yield marker
    finally:
        set_run_marker(previous)
    deadline = time.monotonic() + GRACE_S
    survivors = marked_processes(marker)
    while survivors and time.monotonic() < deadline:
        time.sleep(0.02)  # real processes need real time to die; bounded by GRACE_S
        survivors = marked_processes(marker)
    if survivors:
        described = [procfs.describe(pid) for pid in survivors]
        for pid in survivors:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        pytest.fail(f"processes left alive by the test (marker {marker}): {', '.join(described)}")
