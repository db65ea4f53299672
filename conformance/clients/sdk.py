"""The official Python SDK as an outside client: its private venv and the ``--client-cmd`` that runs it.

``python -m conformance.clients.sdk`` installs ``openai-codex`` (once, into a venv under the user cache,
without its bundled ``codex`` binary: the harness brings the server) and prints the command line, so

    codex-harness run --client-cmd "$(python -m conformance.clients.sdk)"

runs the SDK over the catalogue. The SDK is never a dependency of this project.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: The SDK release compared (``sdk.json``): it ships the codex release of the same number, which the fake plays.
SDK_VERSION: str = json.loads((Path(__file__).resolve().parent / "sdk.json").read_text(encoding="utf-8"))["version"]
ADAPTER = Path(__file__).resolve().parent / "openai_codex_sdk.py"
INSTALL_TIMEOUT_S = 300.0


class SdkUnavailable(Exception):
    """The SDK cannot be installed here (no network, no pip); ``str()`` says why."""


def default_venv() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "codex-harness" / f"bench-openai-codex-{SDK_VERSION}"  # shared with bench/sdk_compare.py


def ensure_sdk(venv: Path | None = None, timeout: float = INSTALL_TIMEOUT_S) -> Path:
    """The venv's python with ``openai_codex`` importable; created on first use.

    Under a lock beside the venv: pytest workers (the SDK suite, the benchmark smoke test) may ask at once,
    and two pip runs into one venv break it. The wait for the lock is bounded by ``timeout`` too.
    """
    venv = venv or default_venv()
    venv.parent.mkdir(parents=True, exist_ok=True)
    with _locked(venv.parent / f"{venv.name}.lock", timeout):
        return _ensure_sdk(venv, timeout)


@contextlib.contextmanager
def _locked(path: Path, timeout: float) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise SdkUnavailable(f"another process holds {path} for more than {timeout:g} s") from None
                time.sleep(0.2)  # another worker is installing: bounded by the deadline above
        yield
    finally:
        os.close(fd)


def _ensure_sdk(venv: Path, timeout: float) -> Path:
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


BASELINE = Path(__file__).resolve().parent / "openai_codex_sdk.baseline.json"


def _key(check: dict[str, Any]) -> tuple[str, str, str, str]:
    return (check["scenario"], check["target"], check["contract"], check["name"])


def baseline_from_runs(runs: list[list[dict[str, Any]]], explained: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Baseline entries from several runs' checks.json: a check failing in every run is ``fail``; one that both
    passed and failed is ``flaky`` (listed, never baselined as a known failure). Each keeps its ``why``."""
    why = {_key(e): e.get("why", "") for e in explained}
    outcomes: dict[tuple[str, str, str, str], set[str]] = {}
    for checks in runs:
        for c in checks:
            outcomes.setdefault(_key(c), set()).add(c["status"])
    entries = []
    for key, seen in sorted(outcomes.items()):
        if "fail" not in seen:
            continue
        status = "fail" if seen == {"fail"} and all(key in {_key(c) for c in run} for run in runs) else "flaky"
        scenario, target, contract, name = key
        entry = {"scenario": scenario, "target": target, "contract": contract, "name": name, "status": status}
        entries.append(entry | {"why": why.get(key) or "TODO: explain in one line"})
    return entries


_CELL = {"pass": "pass", "fail": "**FAIL**", "skip": "skip", "warn": "warn", "should": "should"}
#: A cell shows its worst *judged* status, as every report does (contracts.checks.worst): a skip only where nothing
#: was judged, a should-level failure (a recommendation) below a must failure.
_ORDER = {"skip": 0, "pass": 1, "warn": 2, "should": 3, "fail": 4}


def markdown(checks: list[dict[str, Any]], entries: list[dict[str, Any]]) -> str:
    """The verdict table (scenario x contract, worst status) and the known-failures table of docs/clients.md."""
    # latency and trace_closure are always skips for an outside client (docs/clients.md, "What is judged")
    contracts = ["terminal_status", "usage", "schema", "protocol", "client"]
    rows: dict[str, dict[str, str]] = {}
    for c in checks:
        cells = rows.setdefault(c["scenario"], {})
        old = cells.get(c["contract"])
        status = "should" if c["status"] == "fail" and c.get("level") == "should" else c["status"]
        if old is None or _ORDER[status] > _ORDER[old]:
            cells[c["contract"]] = status
    out = ["| scenario | " + " | ".join(contracts) + " |", "|---" * (len(contracts) + 1) + "|"]
    for scenario, cells in sorted(rows.items()):
        out.append(f"| {scenario} | " + " | ".join(_CELL.get(cells.get(k, ""), "") for k in contracts) + " |")
    out += ["", "| scenario | check | status | why | reproduce |", "|---|---|---|---|---|"]
    for e in entries:
        repro = f'`codex-harness run --client-cmd "$CMD" --release {SDK_VERSION} --scenario {e["scenario"]}`'
        out.append(f"| `{e['scenario']}` | {e['contract']} / {e['name']} | {e['status']} | {e['why']} | {repro} |")
    return "\n".join(out) + "\n"


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
