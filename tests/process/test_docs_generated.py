"""No number or table the code knows is typed by hand in the docs: `make docs` rewrites them, and this fails when
one is stale (scripts/docs.py --check)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support import paths

REPO = paths.REPO
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


def test_careful_py_runs_as_a_lone_copy_with_the_standard_library_only(tmp_path: Path) -> None:
    """docs/clients.md says to start from careful.py: a copy of that one file, in an empty directory, run by a
    Python that sees no package but the standard library (-I -S), passes."""
    import shutil

    lone = tmp_path / "empty"
    lone.mkdir()
    shutil.copy(REPO / "conformance" / "clients" / "careful.py", lone / "my_client.py")
    from harness.cli import main

    client = f"{sys.executable} -I -S {lone / 'my_client.py'}"
    argv = ["run", "--quiet", "--client-cmd", client, "--scenario", "plain", "--scenario", "cancel_at_started"]
    assert main(argv) == 0
