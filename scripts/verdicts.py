#!/usr/bin/env python3
"""Every verdict the project gives, collected as (scenario, target, check, status) rows, and two collections compared.

A refactoring that keeps behaviour keeps these rows: run ``collect`` before and after and ``compare`` the two
files (zero differences, exit 0). It drives the installed ``codex-harness`` command, so it measures what a user
gets, whatever the code's shape:

    python scripts/verdicts.py collect before.json [--real CODEX ...] [--clients] [--sdk]
    python scripts/verdicts.py compare before.json after.json

What is collected: the built-in scenarios on the in-process fake and on ``fake-codex``; with ``--real`` each
given binary's run (``--target real``, one label per binary's version); with ``--clients`` the two reference
outside clients (``conformance/clients/careful.py`` and ``careless.py``); with ``--sdk`` the official Python SDK
(installed on demand into its private venv, as ``conformance/clients/sdk.py`` does).
A check's detail (timings, pids) is left out: only which checks exist and their status are compared.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
#: A whole catalogue run is bounded: a hang here is a finding, not a wait.
RUN_TIMEOUT_S = 3600.0

Row = tuple[str, str, str, str]


def harness(*args: str) -> list[str]:
    exe = BIN / "codex-harness"
    return [str(exe), *args] if exe.exists() else [sys.executable, "-m", "harness.cli", *args]


def run_catalogue(label: str, argv: list[str]) -> list[Row]:
    """One ``codex-harness run`` into a fresh report; its checks.json as rows labelled ``label``."""
    with tempfile.TemporaryDirectory(prefix="verdicts-") as tmp:
        report = Path(tmp) / "report"
        cmd = [*argv, "--report", str(report)]
        print(f"[{label}] {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        checks = report / "checks.json"
        if not checks.is_file():
            raise SystemExit(f"[{label}] no checks.json (exit {done.returncode}): {done.stderr[-2000:]}")
        rows = json.loads(checks.read_text())
    return sorted({(r["scenario"], label, f"{r['contract']} / {r['name']}", r["status"]) for r in rows})


def real_version(codex: str) -> str:
    out = subprocess.run([codex, "--version"], capture_output=True, text=True, timeout=30, env=_scrubbed())
    return out.stdout.split()[-1] if out.stdout.split() else codex


def _scrubbed() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_"))}


def collect(args: argparse.Namespace) -> int:
    rows: list[Row] = []
    rows += run_catalogue("fake", harness("run", "--target", "fake"))
    rows += run_catalogue("fake-process", harness("run", "--target", "fake-process"))
    for codex in args.real or ():
        rows += run_catalogue(f"real-{real_version(codex)}", harness("run", "--target", "real", "--codex", codex))
    if args.clients:
        for name in ("careful", "careless"):
            client = f"{sys.executable} {ROOT / 'conformance' / 'clients' / (name + '.py')}"
            rows += run_catalogue(f"client-{name}", harness("run", "--client-cmd", client))
    if args.sdk:
        sys.path.insert(0, str(ROOT))
        from conformance.clients.sdk import SDK_VERSION, client_cmd

        cmd = " ".join(client_cmd())
        rows += run_catalogue("client-sdk", harness("run", "--client-cmd", cmd, "--release", SDK_VERSION))
    Path(args.out).write_text(json.dumps([list(r) for r in rows], indent=0) + "\n")
    labels = sorted({r[1] for r in rows})
    print(f"{len(rows)} verdicts over {', '.join(labels)} -> {args.out}")
    return 0


def compare(args: argparse.Namespace) -> int:
    before = {tuple(r) for r in json.loads(Path(args.before).read_text())}
    after = {tuple(r) for r in json.loads(Path(args.after).read_text())}
    keys_before = {r[:3]: r[3] for r in before}
    keys_after = {r[:3]: r[3] for r in after}
    changed = sorted(k for k in keys_before.keys() & keys_after.keys() if keys_before[k] != keys_after[k])
    gone = sorted(keys_before.keys() - keys_after.keys())
    new = sorted(keys_after.keys() - keys_before.keys())
    for key in changed:
        print(f"changed  {' | '.join(key)}: {keys_before[key]} -> {keys_after[key]}")
    for key in gone:
        print(f"gone     {' | '.join(key)} ({keys_before[key]})")
    for key in new:
        print(f"new      {' | '.join(key)} ({keys_after[key]})")
    total = len(changed) + len(gone) + len(new)
    print(f"{len(keys_before)} before, {len(keys_after)} after: {total} differences")
    return 1 if total else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="run the catalogues and write their verdicts")
    c.add_argument("out")
    c.add_argument("--real", action="append", metavar="CODEX", help="also the real binary (repeatable)")
    c.add_argument("--clients", action="store_true", help="also the two reference outside clients")
    c.add_argument("--sdk", action="store_true", help="also the official Python SDK (installed on demand)")
    c.set_defaults(func=collect)
    d = sub.add_parser("compare", help="the differences between two collections (exit 1 when any)")
    d.add_argument("before")
    d.add_argument("after")
    d.set_defaults(func=compare)
    args = parser.parse_args()
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
