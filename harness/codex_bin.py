"""Finding the real `codex` binary and reading its version."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

_VERSION_RE = re.compile(r"(\d+\.\d+\.\d+(?:[-+.][0-9A-Za-z.]+)?)")

#: Bound of ``codex --version``: a binary that cannot say its version this fast cannot run a scenario
#: either, and a run should say so at once. ``$CODEX_HARNESS_VERSION_TIMEOUT`` (seconds, at most 600)
#: overrides it (the tests use a fraction of a second).
VERSION_TIMEOUT_S = 7.0
VERSION_TIMEOUT_ENV = "CODEX_HARNESS_VERSION_TIMEOUT"


class CodexNotFound(Exception):
    pass


def find_codex(explicit: str | os.PathLike[str] | None = None, *, use_path: bool = False) -> Path | None:
    """The binary named by ``explicit``, else ``$CODEX_BIN``, else (when ``use_path``) `codex` on PATH."""
    for candidate in (explicit, os.environ.get("CODEX_BIN")):
        if candidate:
            path = Path(candidate).expanduser()
            if not path.exists():
                raise CodexNotFound(f"codex binary not found: {path}")
            return path.resolve()
    if use_path and (found := shutil.which("codex")):
        return Path(found).resolve()
    return None


def version_timeout() -> float:
    """The ``--version`` bound: ``$CODEX_HARNESS_VERSION_TIMEOUT`` when it is a number in (0, 600], else the default."""
    try:
        value = float(os.environ.get(VERSION_TIMEOUT_ENV, ""))
    except ValueError:
        return VERSION_TIMEOUT_S
    return value if 0 < value <= 600 else VERSION_TIMEOUT_S


def codex_version(binary: str | os.PathLike[str], timeout: float | None = None) -> str:
    """``codex --version`` → ``"0.171.0"``. Raises CodexNotFound with the reason when it cannot run.

    ``timeout``: default :func:`version_timeout`.
    """
    limit = version_timeout() if timeout is None else timeout
    try:
        out = run_bounded([os.fspath(binary), "--version"], limit)
    except subprocess.TimeoutExpired:
        raise CodexNotFound(f"{binary} --version did not answer within {limit:g} s") from None
    except OSError as exc:
        raise CodexNotFound(f"cannot run {binary} --version: {exc.strerror or exc}") from None
    stdout = out.stdout.decode("utf-8", "replace")
    match = _VERSION_RE.search(stdout)
    if out.returncode != 0 or not match:
        text = _plain(stdout).strip() or _plain(out.stderr.decode("utf-8", "replace")).strip()
        said = text.splitlines()[0][:200] if text else ""
        raise CodexNotFound(f"{binary} --version gave no version (exit {out.returncode}): {said!r}")
    return match.group(1)


def _plain(text: str) -> str:
    from harness.client.stderr import strip_ansi

    return strip_ansi(text)


def run_bounded(argv: list[str], timeout: float) -> subprocess.CompletedProcess[bytes]:
    """Run in its own process group so a timeout kills the whole tree (the npm shim spawns the binary)."""
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)
