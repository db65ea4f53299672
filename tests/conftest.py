"""What every unit test gets: a schema store of its own.

``schema pin`` and ``validate-release`` write to the user's store (``$CODEX_HARNESS_STORE``, else
``${XDG_DATA_HOME:-~/.local/share}/codex-harness/schemas``). A test must never write into the real home
or the package, so each test's store lives under its own temporary directory.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import ClassVar

import pytest


@pytest.fixture(autouse=True)
def _private_schema_store(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    data_home = tmp_path_factory.mktemp("xdg-data")
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))
    monkeypatch.delenv("CODEX_HARNESS_STORE", raising=False)
    return data_home / "codex-harness" / "schemas"


#: Test modules whose tests share one xdist worker under ``--dist loadgroup`` (``make test``): the real releases'
#: sessions run one at a time; the docs recipes build their wheel and venv once (a module fixture: spread over
#: workers, each built its own, two minutes of pip each); the outside fuzz campaigns do not overlap. The
#: ``xdist_group`` mark would say the same, but pytest-xdist 3.8 under pytest 9.2 silently drops it (it writes the
#: group into a node id field pytest no longer reads: pytest-xdist#1386), so the scheduler is told here by module,
#: and a test marked ``xdist_group`` is refused at collection (it would not be grouped).
XDIST_GROUPS: dict[str, str] = {
    "tests/real/test_real_releases.py": "real_releases",
    "tests/process/test_docs_recipes.py": "docs_recipes",
    "tests/process/test_fuzz_outside.py": "fuzz_outside",
}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class ModuleGroups(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return XDIST_GROUPS.get(module) or super()._split_scope(nodeid)

    return ModuleGroups(config, log)  # type: ignore[arg-type]


# --- cost: what `make test-fast` runs (docs/tests.md) ------------------------------------------------------------

#: The folders of tests/ whose modules start processes (fake-codex, a client, a relay, git, a venv, the real
#: binary) in all or most of their tests (docs/tests.md): each of their tests is marked ``process`` here, so that
#: ``--fast`` (``make test-fast``) leaves them out. tests/unit holds the rest.
PROCESS_FOLDERS: frozenset[Path] = frozenset(Path(__file__).resolve().parent / name for name in ("process", "real"))


@functools.cache
def _in_process_folder(folder: Path) -> bool:
    return folder.resolve() in PROCESS_FOLDERS


#: One test (all its parameters, or one: ``name[id]``) that starts a process in a module of tests/unit, whose other
#: tests start none. A test may also be marked ``@pytest.mark.process`` itself. ``real_codex`` and ``clients`` tests
#: count as process tests too. Under ``--fast`` a test that starts a process anyway fails, naming these tables (the
#: guard below): they were filled from what it found.
PROCESS_TESTS: frozenset[str] = frozenset(
    {
        "test_budgets::test_a_client_waiting_longer_than_the_plan_by_design_passes_with_its_declared_budget",
        "test_check_registry::test_every_check_of_an_outside_client_is_declared",
        "test_client_fake::test_fault_scenario_as_a_process",
        "test_fake_flags::test_the_real_binary_options_are_accepted",
        "test_html_report::test_the_fault_ledger_places_a_fault_whose_point_never_shows[fake-process]",
        "test_layers::test_shared_data_is_read_from_the_repo_only",
        "test_runner_play::test_fake_process_target_records_real_time_exit_and_server_trace",
        "test_schema_store::test_schema_pin_writes_to_the_users_store_only",
        "test_schema_store::test_pinning_a_shipped_release",
        "test_schema_store::test_validate_release_pins_into_the_users_store",
        "test_transport::test_the_stdio_process_transport",
        "test_transport_ws::test_the_websocket_faults_act_on_fake_codex_too",
        "test_transport_ws::test_fake_codex_records_each_websocket_connection_on_its_own",
        "test_triggers::test_the_interpreter_imports_nothing_but_the_standard_library",
    }
)


def _listed(item: pytest.Item, table: frozenset[str]) -> bool:
    """``module::test`` (all its parameters) or ``module::test[id]`` of ``item`` is in ``table``."""
    module = item.path.stem
    return f"{module}::{item.name}" in table or f"{module}::{item.name.split('[', 1)[0]}" in table


#: Tests that start no process but take seconds of CPU (whole-catalogue runs, hypothesis searches over many
#: examples, near-linear-time measures): marked ``slow`` here, left out by ``--fast`` as ``fuzz`` tests are.
#: Measured: each took over 0.5 CPU-seconds (``make test-fast PYTEST_ARGS=--durations=30``); the rest of the fast
#: set takes about 0.02 s a test.
SLOW_TESTS: frozenset[str] = frozenset(
    {
        "test_client_properties::test_every_turn_gets_one_bounded_result",
        "test_contracts_client_plan::test_a_long_plan_is_judged_in_near_linear_time",
        "test_fake_engine::test_nothing_a_client_sends_crashes_the_engine",
        "test_fuzz_driver::test_a_fault_never_struck_is_a_failure_of_the_generator",
        "test_fuzz_driver::test_an_exception_while_playing_is_a_shrunk_failure",
        "test_fuzz_stateful::test_an_exception_escaping_steer_is_caught",
        "test_fuzz_stateful::runTest",
        "test_fuzz_strategies::test_every_fault_kind_and_client_action_is_reachable_over_fixed_seeds",
        "test_html_report::test_100k_deltas_render_as_one_arrow",
        "test_shards::test_three_shards_merged_are_one_run_check_for_check",
        "test_validator_transcripts::test_validate_never_raises",
    }
)

#: The markers of the tests that may start a process (the guard below fails any other that does).
PROCESS_MARKERS: tuple[str, ...] = ("process", "real_codex", "clients")
#: The markers of the tests ``--fast`` leaves out.
SLOW_MARKERS: tuple[str, ...] = ("process", "real_codex", "clients", "fuzz", "slow")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        help="only the tests that start no process (make test-fast, docs/tests.md); one that starts one fails",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "process: starts a process (left out by --fast; docs/tests.md)")
    config.addinivalue_line("markers", "slow: starts no process but takes seconds (left out by --fast)")
    _ProcessGuard.install()  # in every run: an unmarked test that starts a process fails in CI too


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``--fast`` tests/process and tests/real are not even collected: each worker's collection is a quarter
    of the fast run's CPU time, and these modules are the heavier half of it."""
    if config.getoption("--fast") and collection_path.is_dir() and _in_process_folder(collection_path):
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _in_process_folder(item.path.parent) or _listed(item, PROCESS_TESTS):
            item.add_marker(pytest.mark.process)
        if _listed(item, SLOW_TESTS):
            item.add_marker(pytest.mark.slow)
    marked = sorted({item.nodeid.split("::", 1)[0] for item in items if item.get_closest_marker("xdist_group")})
    if marked:
        raise pytest.UsageError(f"xdist_group is dropped by this pytest-xdist: list {marked} in XDIST_GROUPS instead")
    if not config.getoption("--fast"):
        # Longest first: the outside clients' catalogues take minutes each, mostly waiting out a hung client's
        # deadline, and a group runs its tests one after another on one worker. Started first they overlap the rest
        # of the suite instead of ending it alone on one worker.
        items.sort(key=_cost_rank)
        return
    kept, left = [], []
    for item in items:
        (left if any(item.get_closest_marker(m) for m in SLOW_MARKERS) else kept).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept


def _cost_rank(item: pytest.Item) -> int:
    """0 for a client catalogue, 1 for a test of a grouped module (:data:`XDIST_GROUPS`), 2 for the rest."""
    if item.get_closest_marker("clients") is not None:
        return 0
    return 1 if item.nodeid.split("::", 1)[0] in XDIST_GROUPS else 2


class _ProcessGuard:
    """A test not marked as one that starts a process (seen by an audit hook: ``subprocess.Popen``, which trio and
    asyncio use too, ``os.posix_spawn``, ``os.fork``, ``os.system``, ``os.exec``) fails after it ran, naming
    itself, in every run (``make test`` in CI as well as ``--fast``), so that the fast set stays fast as tests are
    added."""

    EVENTS = frozenset({"subprocess.Popen", "os.posix_spawn", "os.fork", "os.forkpty", "os.system", "os.exec"})
    current: ClassVar[list[str]] = []  # the node id of the test running in this process
    started: ClassVar[dict[str, str]] = {}  # node id -> what it started first

    @classmethod
    def install(cls) -> None:
        import sys

        def hook(event: str, args: tuple[object, ...]) -> None:
            if event in cls.EVENTS and cls.current and cls.current[0] not in cls.started:
                what = args[1] if event == "subprocess.Popen" and len(args) > 1 else args[:1]
                cls.started[cls.current[0]] = f"{event} {what!r}"[:300]

        sys.addaudithook(hook)  # cannot be removed: it does nothing once no test is current


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    _ProcessGuard.current[:] = [item.nodeid]
    try:
        return (yield)
    finally:
        _ProcessGuard.current.clear()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> object:
    result = yield
    started = _ProcessGuard.started.pop(item.nodeid, None)
    if started is not None and not any(item.get_closest_marker(m) for m in PROCESS_MARKERS):
        pytest.fail(
            f"this test started a process ({started}) but is not marked as one, so make test-fast would run it: "
            "mark it @pytest.mark.process or list it in PROCESS_TESTS of tests/conftest.py "
            "(or move its module to tests/process: docs/tests.md)",
            pytrace=False,
        )
    return result
