"""An assertion for the judged runs ``run_scenario`` returns: the test fails with what failed and why.

As pytest-lsp's checks do, a failure says everything a reader needs without re-running: each failed check
with its level, its detail and the rule it cites, the warnings beside them, the last lines the server
printed on stderr (for an outside client, its own stderr), and the command that shows the saved session
as a timeline::

    def test_my_client_survives_a_crash(run_scenario):
        assert_passed(run_scenario("crash_mid_turn", client=["python", "my_client.py"]))

The verdict is the one every command gives (:func:`contracts.report.judge`): a failed ``must`` check fails,
a failed ``should`` check is a warning (it fails too with ``strict=True``, as ``--strict`` does), and a run in
which nothing was judged is never a pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from contracts.checks.base import Check
from contracts.report import BaselineEntry, judge
from contracts.text import clip, escape

#: How much of the server's stderr the failure message shows (its last lines).
STDERR_LINES = 40
STDERR_CHARS = 8_000


def failure_message(run: Any, *, strict: bool = False, baseline: Sequence[BaselineEntry] = ()) -> str | None:
    """Why ``run`` (a :class:`harness.runner.ScenarioRun`) does not pass, as text; None when it passes."""
    checks: list[Check] = list(run.checks)
    where = f"{run.scenario} [{run.target}]"
    if run.skipped:
        return f"{where} was not played: {escape(run.skipped)}"
    verdict = judge(checks, strict=strict, baseline=baseline)
    if verdict.exit_code == 0:
        return None
    lines = [f"{where}: {'NOTHING JUDGED' if verdict.nothing_judged else 'FAIL'}"]
    sections: list[tuple[str, Sequence[Check]]] = [
        ("failed", verdict.failures),
        ("recommendations not met" + (" (--strict)" if strict else ""), verdict.should_failures),
        ("skipped or warned (--strict)", verdict.strict_failures),
    ]
    for title, found in sections:
        if found:
            lines.append(f"{title}:")
            lines.extend(_check_line(c) for c in found)
    if verdict.stale:
        lines.append("baseline entries that no longer fail:")
        lines.extend(f"  {escape(e.describe())}" for e in verdict.stale)
    if verdict.nothing_judged:
        statuses = ", ".join(sorted({c.status for c in checks})) or "no checks at all"
        lines.append(f"no check passed or failed ({statuses})")
    record = getattr(run, "record", None)
    if record is not None:
        outside = record.meta.get("outside") if isinstance(record.meta, dict) else None
        lines.extend(_tail("server stderr", record.stderr_tail))
        if isinstance(outside, dict):  # an outside client reads the server's stderr itself: show the client's
            lines.extend(_tail("client stderr", outside.get("stderr_tail")))
    if getattr(run, "saved_to", None):
        lines.append(f"the session, as a timeline: codex-harness show {run.saved_to}")
    return "\n".join(lines)


def assert_passed(run: Any, *, strict: bool = False, baseline: Sequence[BaselineEntry] = ()) -> None:
    """Fail the calling test unless ``run`` passes, with :func:`failure_message` as the reason."""
    message = failure_message(run, strict=strict, baseline=baseline)
    if message is not None:
        pytest.fail(message, pytrace=False)


def _tail(title: str, text: object) -> list[str]:
    if not isinstance(text, str) or not text.strip():
        return []
    shown = text[-STDERR_CHARS:].splitlines()[-STDERR_LINES:]
    return [f"{title} (last {len(shown)} lines):", *(f"  | {escape(line)}" for line in shown)]


def _check_line(check: Check) -> str:
    cited = f" ({escape(check.citation)})" if check.citation else ""
    detail = clip(escape(check.detail), 600) if check.detail else ""
    return f"  {check.contract} / {check.name} [{check.level}]: {detail}{cited}"
