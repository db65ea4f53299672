"""matrix.html in a real browser (headless Chromium, as tests/process/test_html_browser.py): readable at 1400 px.

The table holds counts, not lists: at a 1400 px window its ``scrollWidth`` stays within it even with eight
release columns, long binary paths and every scenario differing; the lists are folded below it, breaking
entries marked; a column whose schema pin failed says why.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import browser
from test_matrix import report

from contracts.report import BehaviourChange, FidelityEntry
from harness.commands.matrix import matrix_report, neighbours
from harness.html.matrix import render_matrix

WIDTH = 1400


@pytest.fixture(scope="module")
def chromium() -> str:
    return browser.chromium_or_skip()


def wide_matrix() -> str:
    versions = ["0.163.0", "0.169.0", "0.171.0", "0.172.0", "0.173.0", "0.174.0", "0.175.0", "0.176.0"]
    columns = []
    for version in versions:
        column = report(version, failed=True)
        assert column.release is not None and column.schema is not None and column.fidelity is not None
        column.release.codex = "/very/long/path/to/a/release/folder/node_modules/@openai/codex/bin/" + "x" * 60
        column.fidelity.entries = [
            FidelityEntry({"scenario": f"a_rather_long_scenario_name_{n}", "equal": False, "skipped": None})
            for n in range(24)
        ]
        column.schema.pin = "already pinned, identical"
        columns.append(column)
    assert columns[3].schema is not None
    columns[3].schema.pin = "failed: `codex app-server generate-json-schema` exited 2: unknown subcommand " + "y" * 80
    steps = neighbours(versions)
    steps[1].behaviour = [BehaviourChange("file_change_approval", ("segment 1: only on 0.169.0: ...",), ())]
    return render_matrix(matrix_report(columns, steps, "codex-harness matrix " + "--codex PATH " * 8))


def test_the_matrix_fits_1400_px_and_folds_its_details(chromium: str, tmp_path: Path) -> None:
    page = tmp_path / "matrix.html"
    page.write_text(wide_matrix(), encoding="utf-8")
    loaded = browser.load(page, binary=chromium, width=WIDTH, height=900, selftest=False)
    assert loaded.errors == []
    assert loaded.attrs.get("ready") == "1"
    assert 0 < loaded.number("table-width") <= WIDTH
    assert loaded.number("width") <= WIDTH
    html = page.read_text(encoding="utf-8")
    assert "<details open><summary>breaking (" in html and '<li class="breaking">' in html
    assert "<summary>exhaustive-match risk (" in html and "<summary>additive (" in html
    assert "fidelity differs on 24 scenario(s)" in html and "0/24 equal; 24 differ" in html
    assert "failed: `codex app-server generate-json-schema` exited 2" in html  # the pin's why, in its column


def test_the_old_table_did_not_fit(chromium: str, tmp_path: Path) -> None:
    """The check can fail: the same page with the cells held on one line is wider than the window."""
    page = tmp_path / "matrix.html"
    page.write_text(wide_matrix().replace('class="sum matrix"', 'class="sum"'), encoding="utf-8")
    loaded = browser.load(page, binary=chromium, width=WIDTH, height=900, selftest=False)
    assert loaded.number("table-width") > WIDTH
