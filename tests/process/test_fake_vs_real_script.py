"""scripts/fake_vs_real.py: one run's checks on fake-process and real, compared check for check."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support import paths

SCRIPT = paths.REPO / "scripts" / "fake_vs_real.py"


def check(scenario: str, target: str, name: str, status: str) -> dict[str, str]:
    return {"scenario": scenario, "target": target, "contract": "client", "name": name, "status": status}


def compare(tmp_path: Path, checks: list[dict[str, str]]) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "checks.json"
    path.write_text(json.dumps(checks))
    return subprocess.run([sys.executable, str(SCRIPT), str(path)], capture_output=True, text=True, timeout=60)


def test_a_check_whose_status_differs_or_that_one_target_lacks_is_named(tmp_path: Path) -> None:
    done = compare(
        tmp_path,
        [
            check("plain", "fake-process", "server started", "pass"),
            check("plain", "real", "server started", "pass"),
            check("file_change_decline", "fake-process", "server started", "pass"),
            check("file_change_decline", "real", "server started", "fail"),
            check("file_change_decline", "real", "exit status", "skip"),
        ],
    )
    assert done.returncode == 1, done
    assert "client / server started: fake pass, real fail" in done.stdout
    assert "client / exit status: fake None, real skip" in done.stdout
    assert done.stdout.splitlines()[-1] == "1 of 2 scenarios and 2 checks differ"


def test_the_same_verdict_exits_0_and_one_target_alone_is_a_usage_error(tmp_path: Path) -> None:
    same = [check("plain", t, "server started", "pass") for t in ("fake-process", "real")]
    assert compare(tmp_path, same).returncode == 0
    assert compare(tmp_path, same[:1]).returncode == 2
