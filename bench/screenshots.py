"""Regenerate the screenshots of docs/report.md: the HTML report of three sessions and of a 100,000-delta one.

    make screenshots        (or: .venv/bin/python bench/screenshots.py [--out docs/img])

Plays ``interrupt_pending_approval``, ``crash_mid_turn`` and ``flood`` on the in-process fake, writes each
session's page (what ``show --html`` writes) and screenshots it in headless Chromium at its full height.
Needs Chromium (``apt-get install chromium``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # support: the headless-Chromium driver of the tests

from support import browser  # noqa: E402

from bench.report_html import delta_session  # noqa: E402
from contracts.record import SessionRecord  # noqa: E402
from harness import scenario_lookup  # noqa: E402
from harness.html.report import write_session_html  # noqa: E402
from harness.runner import run_one  # noqa: E402

SCENARIOS = ("interrupt_pending_approval", "crash_mid_turn", "flood")
WIDTH = 1100


def shoot(record: SessionRecord, checks: list, out: Path, work: Path) -> Path:
    page = write_session_html(work / f"{record.scenario}.html", record, checks)
    height = int(browser.load(page, width=WIDTH, height=200).number("height"))  # the content's own height
    png = browser.screenshot(page, out / f"report-{record.scenario}.png", width=WIDTH, height=min(height, 4000))
    print(f"{png.relative_to(REPO) if png.is_relative_to(REPO) else png} ({WIDTH}x{min(height, 4000)})")
    return png


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img", help="where the PNGs go (docs/img)")
    args = parser.parse_args()
    if browser.find_chromium() is None:
        print("no Chromium installed (apt-get install chromium)", file=sys.stderr)
        return 3
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="codex-harness-shots-") as tmp:
        work = Path(tmp)
        for name in SCENARIOS:
            run = run_one(scenario_lookup.resolve(name), "fake")
            if run.record is None:
                print(f"{name}: no record ({run.skipped or run.checks[:1]})", file=sys.stderr)
                return 1
            shoot(run.record, run.checks, args.out, work)
        shoot(delta_session(100_000), [], args.out, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
