"""Where the tests' files are, from a test module in any folder of tests/ (docs/tests.md): a module names the
repository, tests/ or tests/data through these, never by counting ``Path(__file__).parents``, so that it can move
between tests/unit, tests/process and tests/real."""

from __future__ import annotations

from pathlib import Path

#: tests/
TESTS = Path(__file__).resolve().parents[1]
#: The repository's root.
REPO = TESTS.parent
#: tests/data/: recordings of the real binaries, older releases' folders, schema and trace-format samples.
DATA = TESTS / "data"
#: The folders of tests/ by cost (docs/tests.md).
FOLDERS = ("unit", "process", "real")


def module(stem: str) -> Path:
    """The test module ``stem`` (``test_x``), in whichever folder of tests/ it is."""
    for folder in FOLDERS:
        if (TESTS / folder / f"{stem}.py").is_file():
            return TESTS / folder / f"{stem}.py"
    return TESTS / f"{stem}.py"
