"""Hostile input: each case gets a clear error, the documented exit code and no traceback.

Exit codes (README): 0 success, 1 the thing checked does not hold, 2 invalid input, 3 usage errors and
unreadable paths. Every case runs the real entry point (``main(argv)``) and captures what a user sees.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest


def run_cli(
    capsys: pytest.CaptureFixture[str], main: Callable[[Sequence[str]], int], argv: Sequence[str]
) -> tuple[int, str]:
    """Exit code and everything printed (stdout + stderr); SystemExit is an exit code too."""
    try:
        code = int(main(list(argv)))
    except SystemExit as exc:  # argparse
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out + err


def assert_clean(text: str) -> None:
    assert "Traceback (most recent call last)" not in text, text


# Scenario-file cases and CLI/path cases follow, each in its own section.
