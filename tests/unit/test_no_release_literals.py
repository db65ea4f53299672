"""A release is data: no code outside the release folders names a release's version.

The folders under ``contracts/releases/`` (read by :mod:`contracts.releases`) are the one home of what is true
of a release, and ``contracts/releases/default.json`` names the default one; a version written into code would
be a second home that a new release silently misses.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import paths

ROOT = paths.REPO
PACKAGES = ("contracts", "fake_server", "harness", "conformance")
VERSION = re.compile(r"0\.1[0-9]{2}\.[0-9]+")


def _sources() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py") if p.is_file())


def test_there_is_code_to_search() -> None:
    assert len(_sources()) > 100  # a wrong root would make the next test pass on nothing


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_release_version_in_code(path: Path) -> None:
    hits = [f"{n}: {line.strip()}" for n, line in enumerate(path.read_text().splitlines(), 1) if VERSION.search(line)]
    assert hits == [], f"{path.relative_to(ROOT)} names a release; say it in its folder instead: {hits}"
