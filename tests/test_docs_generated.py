"""No number or table the code knows is typed by hand in the docs: `make docs` rewrites them, and this fails when
one is stale (scripts/docs.py --check)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import docs  # noqa: E402


def test_every_generated_block_and_count_is_current() -> None:
    assert docs.stale(write=False) == [], "run `make docs`"


def test_a_stale_count_is_found_and_rewritten() -> None:
    numbers = docs.counts()
    text = "We ship <!-- count: scenarios -->3<!-- /count --> scenarios.\n"
    new = docs.refresh(text, {}, numbers, "x.md")
    assert new == f"We ship <!-- count: scenarios -->{numbers['scenarios']}<!-- /count --> scenarios.\n"
    assert numbers["scenarios"] == numbers["scenarios-stdio"] + numbers["scenarios-ws-only"]


def test_the_check_mode_exits_1_on_a_stale_doc(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "docs.py"), "--check"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
