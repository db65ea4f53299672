"""HTML reports: a run's ``index.html`` (summary table, a sequence diagram per session, failed checks),
one session's page (``show --html``), latency histograms, the release report and the release matrix.
Each page renders the one report model (:mod:`contracts.report`). Self-contained files:
inline CSS and SVG, no network.

Modules: :mod:`.diagram` (a record as diagram rows, sans-IO), :mod:`.sequence` (rows as SVG),
:mod:`.histogram` (a latency distribution as SVG), :mod:`.page` (the shared shell), :mod:`.report`
(index and session pages), :mod:`.latency`, :mod:`.release` and :mod:`.matrix` (those commands' pages).
The headless-Chromium driver of the browser test, the report benchmark and the screenshots is test code
(``tests/support/browser.py``).
"""

from harness.html.report import render_index, render_session_page, write_index_html, write_session_html

__all__ = ["render_index", "render_session_page", "write_index_html", "write_session_html"]
