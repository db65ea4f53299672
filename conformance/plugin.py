"""pytest plugin of codex-harness: options, markers and fixtures for suites that drive an app-server.

Real-binary tests (marker ``real_codex``) run when a binary is selected with ``--codex PATH``,
``CODEX_BIN`` or ``--real-codex`` (``codex`` on PATH), and are skipped with that reason otherwise.
With ``CODEX_HARNESS_REQUIRE_REAL=1`` a missing binary is a failure, not a skip.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import pytest

from conformance.fixtures import TRIO_FIXTURES, client_env, codex_session, fake_codex, run_scenario
from conformance.noleak import no_leaked_processes  # noqa: F401  (autouse: registers the no-leak check)
from harness.codex_bin import CodexNotFound, find_codex

REQUIRE_REAL_ENV = "CODEX_HARNESS_REQUIRE_REAL"
__all__ = ["client_env", "codex_bin", "codex_session", "fake_codex", "run_scenario"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("codex-harness")
    group.addoption("--codex", metavar="PATH", default=None, help="real codex binary for real_codex tests")
    group.addoption("--real-codex", action="store_true", help="use `codex` on PATH for real_codex tests")
    group.addoption(
        "--scenario-dir", metavar="DIR", action="append", default=[], help="also run the scenario files of DIR"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "real_codex: needs the real codex binary")
    config.addinivalue_line("markers", "fuzz: hypothesis fault fuzzing")
    config.addinivalue_line("markers", "codex_scenario(name): the scenario the codex_session fixture plays")
    config.addinivalue_line("markers", "codex_release(version): the release profile the codex_session fake plays")


def _selected_codex(config: pytest.Config) -> tuple[Path | None, str]:
    try:
        path = find_codex(config.getoption("--codex"), use_path=config.getoption("--real-codex"))
    except CodexNotFound as exc:
        return None, str(exc)
    if path is None:
        return None, "no real codex selected (use --codex PATH, CODEX_BIN or --real-codex)"
    return path, ""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _run_under_trio(items)
    path, reason = _selected_codex(config)
    if path is not None:
        return
    if os.environ.get(REQUIRE_REAL_ENV) == "1":
        return  # every real_codex test takes the `codex_bin` fixture, which fails instead of skipping
    for item in items:
        if item.get_closest_marker("real_codex"):
            item.add_marker(pytest.mark.skip(reason=reason))


def _run_under_trio(items: list[pytest.Item]) -> None:
    """An ``async def`` test taking one of :data:`TRIO_FIXTURES` runs under trio, as if marked ``trio``.

    The client is trio code; a project that does not use pytest-trio's ``trio_mode`` (or marks nothing) would
    otherwise see its test refused, or never awaited.
    """
    for item in items:
        function = getattr(item, "obj", None)
        takes = set(getattr(item, "fixturenames", ())) & set(TRIO_FIXTURES)
        if takes and inspect.iscoroutinefunction(function) and item.get_closest_marker("trio") is None:
            item.add_marker(pytest.mark.trio)


def _model_level_scenarios() -> list[str]:
    """Built-in scenarios the real binary can play (no fake-only fault)."""
    from fake_server.catalogue import model_level

    return [s.name for s in model_level()]


class _RealRunCounter:
    """Counts passed real_codex tests, so CI fails when the real binary silently did not run.

    Only the controlling process counts (under xdist the workers' reports reach it).
    """

    def __init__(self) -> None:
        self.passed = 0

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" and report.passed and "real_codex" in report.keywords:
            self.passed += 1

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if session.config.option.collectonly or exitstatus not in (0, 1):
            return
        needed = len(_model_level_scenarios())
        if self.passed < needed:
            reporter = session.config.pluginmanager.get_plugin("terminalreporter")
            message = (
                f"{REQUIRE_REAL_ENV}=1: only {self.passed} real_codex test(s) passed, fewer than the "
                f"{needed} model-level built-in scenarios; the real binary did not really run"
            )
            if reporter is not None:
                reporter.write_line(message, red=True, bold=True)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    is_worker = hasattr(config, "workerinput")
    if os.environ.get(REQUIRE_REAL_ENV) == "1" and not is_worker and not config.pluginmanager.has_plugin("real-count"):
        config.pluginmanager.register(_RealRunCounter(), "real-count")


@pytest.fixture(scope="session")
def codex_bin(pytestconfig: pytest.Config) -> Path:
    """The selected real codex binary; fails (never skips) when CODEX_HARNESS_REQUIRE_REAL=1."""
    path, reason = _selected_codex(pytestconfig)
    if path is None:
        if os.environ.get(REQUIRE_REAL_ENV) == "1":
            pytest.fail(f"{REQUIRE_REAL_ENV}=1 but {reason}")
        pytest.skip(reason)
    return path
