"""Third-party app-server clients from PyPI as outside clients: each in its private venv, with its adapter.

``python -m conformance.clients.pypi NAME`` installs the client ``NAME`` of ``pypi.json`` (once, into a
venv under the user cache; never a dependency of this project) and prints the ``--client-cmd`` that runs its
adapter, so

    codex-harness run --client-cmd "$(python -m conformance.clients.pypi NAME)" --release X

judges that client. ``python -m conformance.clients.pypi NAME --regenerate`` plays the catalogue three times
and rewrites the client's baseline (``NAME.baseline.json``) and prints the tables docs/clients.md shows.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.exitcodes import InternalError

HERE = Path(__file__).resolve().parent
REGISTRY = HERE / "pypi.json"
INSTALL_TIMEOUT_S = 300.0
#: latency and trace_closure are always skips for an outside client (docs/clients.md, "What is judged")
CONTRACTS = ("terminal_status", "usage", "schema", "protocol", "client")


class ClientUnavailable(InternalError):
    """The client cannot be installed here (no network, no pip, another install holding the lock)."""


@dataclass(frozen=True)
class PypiClient:
    """One client of ``pypi.json``: what to install, what proves it installed, and how it is driven."""

    name: str
    package: str
    version: str
    probe: str  # an import statement that succeeds once the client is usable
    adapter: Path
    release: str  # the fake's release profile it is judged against
    deps: tuple[str, ...]  # installed after the package; with ``no_deps`` the package's own are skipped
    no_deps: bool
    why: str
    suite: bool  # judged in the test suite against its baseline (conformance/test_clients_pypi.py)

    @property
    def baseline(self) -> Path:
        return HERE / f"{self.name}.baseline.json"

    def default_venv(self) -> Path:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        return cache / "codex-harness" / f"client-{self.package}-{self.version}"

    def ensure(self, venv: Path | None = None, timeout: float = INSTALL_TIMEOUT_S) -> Path:
        """The venv's python with the client importable; created on first use, under a lock beside it
        (pytest workers may ask at once, and two pip runs into one venv break it)."""
        venv = venv or self.default_venv()
        venv.parent.mkdir(parents=True, exist_ok=True)
        with _locked(venv.parent / f"{venv.name}.lock", timeout):
            return self._ensure(venv, timeout)

    def _ensure(self, venv: Path, timeout: float) -> Path:
        python = venv / "bin" / "python"
        probe = [str(python), "-c", self.probe]
        quiet: dict[str, Any] = {"check": True, "timeout": timeout, "capture_output": True}
        try:
            if python.exists() and subprocess.run(probe, capture_output=True, timeout=timeout).returncode == 0:
                return python
            subprocess.run([sys.executable, "-m", "venv", str(venv)], **quiet)
            pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
            subprocess.run([*pip, *(["--no-deps"] if self.no_deps else []), f"{self.package}=={self.version}"], **quiet)
            if self.deps:
                subprocess.run([*pip, *self.deps], **quiet)
            subprocess.run(probe, **quiet)
        except (subprocess.SubprocessError, OSError) as exc:
            detail = getattr(exc, "stderr", b"") or b""
            tail = detail.decode(errors="replace").strip().splitlines()[-1:] if isinstance(detail, bytes) else []
            raise ClientUnavailable(f"{self.package} {self.version} is not installable here: {exc} {tail}") from None
        return python

    def client_cmd(self, venv: Path | None = None) -> list[str]:
        return [str(self.ensure(venv)), str(self.adapter)]


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
                    raise ClientUnavailable(f"another process holds {path} for more than {timeout:g} s") from None
                time.sleep(0.2)  # another worker is installing: bounded by the deadline above
        yield
    finally:
        os.close(fd)


def clients() -> dict[str, PypiClient]:
    raw = json.loads(REGISTRY.read_text(encoding="utf-8"))
    return {
        e["name"]: PypiClient(
            name=e["name"],
            package=e["package"],
            version=e["version"],
            probe=e["probe"],
            adapter=HERE / e["adapter"],
            release=e["release"],
            deps=tuple(e.get("deps", ())),
            no_deps=bool(e.get("no_deps", False)),
            why=e.get("why", ""),
            suite=bool(e.get("suite", False)),
        )
        for e in raw["clients"]
    }


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


def against_baseline(
    checks: list[Any], entries: list[dict[str, Any]], scenarios: set[str]
) -> tuple[list[str], list[str]]:
    """(new, stale) failures of ``scenarios``, one line each naming the scenario and the check: a failing ``must``
    check the baseline does not list (``fail`` or ``flaky``), and a listed ``fail`` that did not fail at all.
    A ``should`` check (a recommendation: it fails no run but under ``--strict``) is neither new nor stale.
    ``checks``: the runs' :class:`contracts.checks.Check` objects."""
    mine = [e for e in entries if e["scenario"] in scenarios]
    known = {(e["scenario"], e["contract"], e["name"]) for e in mine if e["status"] == "fail"}
    flaky = {(e["scenario"], e["contract"], e["name"]) for e in mine if e["status"] == "flaky"}
    failing = {(c.scenario, c.contract, c.name): c for c in checks if c.status == "fail"}
    new = [
        f"{s}: {c} / {n}: {check.detail[:300]}"
        for (s, c, n), check in sorted(failing.items())
        if (s, c, n) not in known | flaky and check.level == "must"
    ]
    # A listed should check (a recommendation) that passes now is not stale either: like a flaky entry, it is
    # tolerated either way (late answers to resolved requests come and go with the scheduling of the client).
    should = {(c.scenario, c.contract, c.name) for c in checks if c.level == "should"}
    stale = [f"{s}: {c} / {n}" for s, c, n in sorted(known - set(failing) - should)]
    return new, stale


_CELL = {"pass": "pass", "fail": "**FAIL**", "skip": "skip", "warn": "warn", "should": "should"}
#: A cell shows its worst *judged* status, as every report does (contracts.checks.worst): a skip only where nothing
#: was judged, a should-level failure (a recommendation) below a must failure.
_ORDER = {"skip": 0, "pass": 1, "warn": 2, "should": 3, "fail": 4}


def markdown(checks: list[dict[str, Any]], entries: list[dict[str, Any]], cmd_note: str) -> str:
    """The verdict table (scenario x contract, worst status) and the known-failures table of docs/clients.md."""
    rows: dict[str, dict[str, str]] = {}
    for c in checks:
        cells = rows.setdefault(c["scenario"], {})
        old = cells.get(c["contract"])
        status = "should" if c["status"] == "fail" and c.get("level") == "should" else c["status"]
        if old is None or _ORDER[status] > _ORDER[old]:
            cells[c["contract"]] = status
    out = ["| scenario | " + " | ".join(CONTRACTS) + " |", "|---" * (len(CONTRACTS) + 1) + "|"]
    for scenario, cells in sorted(rows.items()):
        out.append(f"| {scenario} | " + " | ".join(_CELL.get(cells.get(k, ""), "") for k in CONTRACTS) + " |")
    out += ["", "| scenario | check | status | why | reproduce |", "|---|---|---|---|---|"]
    for e in entries:
        repro = f"`{cmd_note} --scenario {e['scenario']}`"
        out.append(f"| `{e['scenario']}` | {e['contract']} / {e['name']} | {e['status']} | {e['why']} | {repro} |")
    return "\n".join(out) + "\n"


def _regenerate(client: PypiClient, runs: int, out: Path, jobs: int | None = None) -> int:
    """Play the catalogue ``runs`` times (``jobs`` scenarios at once: ``run --jobs``, its default when None),
    rewrite the baseline from them, print the tables."""
    cmd = shlex.join(client.client_cmd())
    reports = []
    for i in range(runs):
        report = out / f"run{i + 1}"
        argv = [sys.executable, "-m", "harness.cli", "run", "--client-cmd", cmd, "--release", client.release]
        argv += ["--jobs", str(jobs)] if jobs is not None else []
        print(f"run {i + 1}/{runs}: {report}", file=sys.stderr, flush=True)
        subprocess.run([*argv, "--quiet", "--report", str(report)], check=False)  # exit 1: it has failures
        reports.append(json.loads((report / "checks.json").read_text()))
    old = json.loads(client.baseline.read_text()) if client.baseline.exists() else []
    entries = baseline_from_runs(reports, old)
    client.baseline.write_text(json.dumps(entries, indent=2) + "\n")
    note = f'codex-harness run --client-cmd "$CMD" --release {client.release}'
    print(markdown(reports[-1], entries, note), end="")
    print(f"{client.baseline}: {len(entries)} entries from {runs} run(s)", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    known = clients()
    parser = argparse.ArgumentParser(prog="python -m conformance.clients.pypi", description=__doc__.split("\n")[0])
    parser.add_argument("name", choices=sorted(known), help="the client (conformance/clients/pypi.json)")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--regenerate", action="store_true", help="play the catalogue, rewrite the baseline")
    what.add_argument("--baseline-from", nargs="+", metavar="CHECKS_JSON", help="rewrite the baseline from runs")
    what.add_argument("--markdown", metavar="CHECKS_JSON", help="print the tables of docs/clients.md")
    parser.add_argument("--runs", type=int, default=3, help="runs for --regenerate (default 3)")
    parser.add_argument("--out", type=Path, help="where --regenerate keeps its reports (default: a temp dir)")
    parser.add_argument("--jobs", type=int, help="scenarios at once for --regenerate (default: run's)")
    args = parser.parse_args(argv)
    client = known[args.name]
    try:
        if args.regenerate:
            out = args.out or Path(tempfile.mkdtemp(prefix=f"codex-harness-{client.name}-"))
            return _regenerate(client, max(1, args.runs), out, args.jobs)
        if args.baseline_from:
            runs = [json.loads(Path(p).read_text()) for p in args.baseline_from]
            old = json.loads(client.baseline.read_text()) if client.baseline.exists() else []
            client.baseline.write_text(json.dumps(baseline_from_runs(runs, old), indent=2) + "\n")
            print(f"{client.baseline}: {len(runs)} run(s)")
            return 0
        if args.markdown:
            note = f'codex-harness run --client-cmd "$CMD" --release {client.release}'
            entries = json.loads(client.baseline.read_text()) if client.baseline.exists() else []
            print(markdown(json.loads(Path(args.markdown).read_text()), entries, note), end="")
            return 0
        print(shlex.join(client.client_cmd()))
    except ClientUnavailable as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
