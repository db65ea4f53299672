#!/usr/bin/env python3
"""Fake against real, check for check: the checks of one run on ``--target fake-process --target real`` compared.

    codex-harness run --client-cmd "$CMD" --target fake-process --target real --codex PATH --report out/
    python scripts/fake_vs_real.py out/checks.json

Prints each scenario whose verdict differs between the two targets and, under it, each check whose status differs
(a check only one target has counts: ``None`` on the other), then the counts; exit 1 when anything differs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

FAKE, REAL = "fake-process", "real"


def differences(checks: list[dict[str, Any]]) -> dict[str, list[tuple[str, str | None, str | None]]]:
    """scenario -> [(contract / check, fake's status, real's status)] for every check whose status differs."""
    status: dict[tuple[str, str], dict[str, str]] = {}
    for c in checks:
        status.setdefault((c["scenario"], f"{c['contract']} / {c['name']}"), {})[c["target"]] = c["status"]
    out: dict[str, list[tuple[str, str | None, str | None]]] = {}
    for (scenario, check), by_target in sorted(status.items()):
        if by_target.get(FAKE) != by_target.get(REAL):
            out.setdefault(scenario, []).append((check, by_target.get(FAKE), by_target.get(REAL)))
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    checks = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    targets = {c["target"] for c in checks}
    if not {FAKE, REAL} <= targets:
        print(f"{args[0]}: needs both targets, has {sorted(targets)}", file=sys.stderr)
        return 2
    found = differences(checks)
    for scenario, rows in found.items():
        print(scenario)
        for check, fake, real in rows:
            print(f"  {check}: fake {fake}, real {real}")
    scenarios = len({c["scenario"] for c in checks})
    print(f"{len(found)} of {scenarios} scenarios and {sum(map(len, found.values()))} checks differ")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
