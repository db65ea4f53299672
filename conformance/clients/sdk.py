"""The official Python SDK as an outside client: its private venv and the ``--client-cmd`` that runs it.

``python -m conformance.clients.sdk`` installs ``openai-codex`` (once, into a venv under the user cache,
without its bundled ``codex`` binary: the harness brings the server) and prints the command line, so

    codex-harness run --client-cmd "$(python -m conformance.clients.sdk)"

runs the SDK over the catalogue. The SDK is never a dependency of this project.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from conformance.clients import pypi
from conformance.clients.pypi import ClientUnavailable as SdkUnavailable  # the SDK cannot be installed here
from conformance.clients.pypi import baseline_from_runs

__all__ = ["BASELINE", "SDK_VERSION", "SdkUnavailable", "baseline_from_runs", "client_cmd", "ensure_sdk", "markdown"]

#: The SDK release compared (``sdk.json``): it ships the codex release of the same number, which the fake plays.
SDK_VERSION: str = json.loads((Path(__file__).resolve().parent / "sdk.json").read_text(encoding="utf-8"))["version"]
ADAPTER = Path(__file__).resolve().parent / "openai_codex_sdk.py"
INSTALL_TIMEOUT_S = pypi.INSTALL_TIMEOUT_S
#: How the SDK is installed: --no-deps, for it pins openai-codex-cli-bin (the real binary, ~100 MB) and the
#: harness brings the server; then what it imports.
SDK = pypi.PypiClient(
    name="openai_codex_sdk",
    package="openai-codex",
    version=SDK_VERSION,
    probe="import openai_codex, pydantic",
    adapter=ADAPTER,
    release=SDK_VERSION,
    deps=("pydantic>=2.12", "packaging"),
    no_deps=True,
    why="the official Python SDK",
    suite=False,  # conformance/test_clients_sdk.py judges it
)


def default_venv() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "codex-harness" / f"bench-openai-codex-{SDK_VERSION}"  # shared with bench/sdk_compare.py


def ensure_sdk(venv: Path | None = None, timeout: float = INSTALL_TIMEOUT_S) -> Path:
    """The venv's python with ``openai_codex`` importable; created on first use, under a lock beside the venv
    (pytest workers may ask at once; the wait is bounded by ``timeout`` too)."""
    return SDK.ensure(venv or default_venv(), timeout)


def client_cmd(venv: Path | None = None) -> list[str]:
    return [str(ensure_sdk(venv)), str(ADAPTER)]


BASELINE = Path(__file__).resolve().parent / "openai_codex_sdk.baseline.json"


def markdown(checks: list[dict[str, Any]], entries: list[dict[str, Any]]) -> str:
    """The verdict table (scenario x contract, worst status) and the known-failures table of docs/clients.md."""
    return pypi.markdown(checks, entries, f'codex-harness run --client-cmd "$CMD" --release {SDK_VERSION}')


def main(argv: list[str] | None = None) -> int:
    """Print the --client-cmd; ``--baseline-from RUN/checks.json...`` rewrites the baseline from real runs."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--baseline-from"]:
        runs = [json.loads(Path(p).read_text()) for p in args[1:]]
        old = json.loads(BASELINE.read_text()) if BASELINE.exists() else []
        BASELINE.write_text(json.dumps(baseline_from_runs(runs, old), indent=2) + "\n")
        print(f"{BASELINE}: {len(runs)} run(s)")
        return 0
    if args[:1] == ["--markdown"]:
        print(markdown(json.loads(Path(args[1]).read_text()), json.loads(BASELINE.read_text())), end="")
        return 0
    try:
        print(shlex.join(client_cmd()))
    except SdkUnavailable as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
