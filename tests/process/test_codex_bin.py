"""Reading a codex binary's version: bounded, and a timeout leaves no process behind."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from pathlib import Path

import pytest

from codex_client.process import run_marker, set_run_marker
from conformance.noleak import marked_processes
from harness.codex_bin import CodexNotFound, codex_version


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "codex"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def test_version_is_read_from_the_output(tmp_path: Path) -> None:
    assert codex_version(_script(tmp_path, 'echo "codex-cli 9.8.7"\n')) == "9.8.7"


def test_a_hanging_launcher_and_its_child_are_killed_at_the_timeout(tmp_path: Path) -> None:
    # Like the npm launcher: the shell starts a child, then both hang.
    binary = _script(tmp_path, "sleep 60 &\nsleep 60\n")
    previous = set_run_marker(uuid.uuid4().hex)
    try:
        started = time.monotonic()
        with pytest.raises(CodexNotFound, match=r"did not answer within 0\.5 s"):
            codex_version(binary, timeout=0.5)
        assert time.monotonic() - started < 10
        left = _left_running(run_marker())
    finally:
        set_run_marker(previous)
    assert not left, "the launcher's child outlived the version probe"


def _left_running(marker: str, wait_s: float = 5.0) -> list[int]:
    """The marked processes still alive after ``wait_s`` (killed here, so a failing test leaks nothing)."""
    deadline = time.monotonic() + wait_s
    while (left := marked_processes(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)  # the kernel reaps asynchronously
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
    return left
