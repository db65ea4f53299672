"""Reading a codex binary's version: bounded, and a timeout leaves no process behind."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

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
    pidfile = tmp_path / "child.pid"
    binary = _script(tmp_path, f"sleep 60 &\necho $! > {pidfile}\nsleep 60\n")
    started = time.monotonic()
    with pytest.raises(CodexNotFound, match=r"did not answer within 0\.5 s"):
        codex_version(binary, timeout=0.5)
    assert time.monotonic() - started < 10
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # a real process: the kernel reaps it asynchronously
    alive = Path(f"/proc/{child}").exists() and "Z" not in Path(f"/proc/{child}/stat").read_text().split()[2]
    if alive:
        os.kill(child, 9)
    assert not alive, "the launcher's child outlived the version probe"
