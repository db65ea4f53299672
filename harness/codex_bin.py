"""Finding the real `codex` binary and reading its version."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

_VERSION_RE = re.compile(r"(\d+\.\d+\.\d+(?:[-+.][0-9A-Za-z.]+)?)")


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


def codex_version(binary: str | os.PathLike[str], timeout: float = 30.0) -> str:
    """``codex --version`` → ``"0.171.0"``. Raises CodexNotFound with the reason when it cannot run."""
    try:
        out = subprocess.run(
            [os.fspath(binary), "--version"], capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CodexNotFound(f"cannot run {binary} --version: {exc}") from exc
    match = _VERSION_RE.search(out.stdout)
    if out.returncode != 0 or not match:
        raise CodexNotFound(f"{binary} --version gave no version (exit {out.returncode}): {out.stdout!r}")
    return match.group(1)
