"""The official Python SDK as an outside client: its private venv and the ``--client-cmd`` that runs it.

``python -m conformance.clients.sdk`` installs ``openai-codex`` (once, into a venv under the user cache,
without its bundled ``codex`` binary: the harness brings the server) and prints the command line, so

    codex-harness run --client-cmd "$(python -m conformance.clients.sdk)"

runs the SDK over the catalogue. The SDK is never a dependency of this project.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

SDK_VERSION = "0.163.0"
ADAPTER = Path(__file__).resolve().parent / "openai_codex_sdk.py"
INSTALL_TIMEOUT_S = 300.0


class SdkUnavailable(Exception):
    """The SDK cannot be installed here (no network, no pip); ``str()`` says why."""


def default_venv() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "codex-harness" / f"bench-openai-codex-{SDK_VERSION}"  # shared with bench/sdk_compare.py


def ensure_sdk(venv: Path | None = None, timeout: float = INSTALL_TIMEOUT_S) -> Path:
    """The venv's python with ``openai_codex`` importable; created on first use."""
    venv = venv or default_venv()
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import openai_codex, pydantic"]
    try:
        if python.exists() and subprocess.run(probe, capture_output=True, timeout=timeout).returncode == 0:
            return python
        quiet = {"check": True, "timeout": timeout, "capture_output": True}
        subprocess.run([sys.executable, "-m", "venv", str(venv)], **quiet)  # type: ignore[call-overload]
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        # --no-deps: the SDK pins openai-codex-cli-bin (the real binary, ~100 MB); the harness brings the server.
        subprocess.run([*pip, "--no-deps", f"openai-codex=={SDK_VERSION}"], **quiet)  # type: ignore[call-overload]
        subprocess.run([*pip, "pydantic>=2.12", "packaging"], **quiet)  # type: ignore[call-overload]
        subprocess.run(probe, **quiet)  # type: ignore[call-overload]
    except (subprocess.SubprocessError, OSError) as exc:
        raise SdkUnavailable(f"openai-codex {SDK_VERSION} is not installable here: {exc}") from None
    return python


def client_cmd(venv: Path | None = None) -> list[str]:
    return [str(ensure_sdk(venv)), str(ADAPTER)]


def main() -> int:
    try:
        print(shlex.join(client_cmd()))
    except SdkUnavailable as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
