"""Renderers of the one report model (:mod:`contracts.report`), shared by every command.

- :mod:`harness.report.terminal`: the table a person reads (``run``, ``show``), ``latency``'s summary lines;
- :mod:`harness.report.markdown`: ``report.md`` (validate-release), ``matrix.md``, a run's checks;
- :mod:`harness.report.documents`: ``report.json``, ``matrix.json``, ``latency.json``;
- :mod:`harness.report.junit`: ``junit.xml``;
- ``checks.json`` is the model's own file (:mod:`contracts.report.checks_file`), read back by ``--baseline``;
- the HTML pages are :mod:`harness.html`.

The verdict (the ``RESULT:`` word and the exit code) is :func:`contracts.report.judge`, one function for every
command. The names below are the ones callers have always imported from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contracts.checks import Check
from contracts.report import (
    BaselineEntry,
    Verdict,
    checks_json,
    judge,
    load_baseline,
    read_checks_json,
    write_checks_json,
)
from contracts.report.verdict import MAX_BASELINE_BYTES
from harness.report.junit import junit_xml, write_junit
from harness.report.terminal import ASCII_SYMBOLS, SYMBOLS, render_table, result_line


def summary_dict(checks: Sequence[Check], verdict: Verdict) -> dict[str, Any]:
    return verdict.summary(checks)


__all__ = [
    "ASCII_SYMBOLS",
    "MAX_BASELINE_BYTES",
    "SYMBOLS",
    "BaselineEntry",
    "Verdict",
    "checks_json",
    "judge",
    "junit_xml",
    "load_baseline",
    "read_checks_json",
    "render_table",
    "result_line",
    "summary_dict",
    "write_checks_json",
    "write_junit",
]
