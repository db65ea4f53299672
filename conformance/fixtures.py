"""Fixtures of the codex-harness pytest plugin: ``fake_codex``, ``codex_session``, ``run_scenario``.

- ``fake_codex``: the ``fake-codex`` executable, with the argv / environment that make it serve a
  scenario, for a client under test in any language; ``fake_codex.release("X.Y.Z")`` plays that release.
- ``codex_session``: an open, initialized client :class:`~codex_client.session.Session` against the
  in-process fake (a trio fixture: an ``async def`` test that takes it runs under trio without any
  configuration of yours, ``trio_mode`` or not; pick the scenario with ``@pytest.mark.codex_scenario("NAME")``,
  default ``plain``, and the release with ``@pytest.mark.codex_release("X.Y.Z")``; use pytest-trio's
  ``autojump_clock`` to run on virtual time).
- ``client_env``: ``os.environ`` with the test's run marker, for starting an outside client by hand.
- ``run_scenario``: plays a scenario (built-in name, file path or :class:`Scenario`) on a target
  (``release=`` the profile a fake plays) and returns the judged :class:`~harness.runner.ScenarioRun`; the
  session record is saved under the test's ``tmp_path`` so a failure can be replayed with ``codex-harness show``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from pytest_trio import trio_fixture

from contracts.scenario import Scenario
from harness import scenario_lookup
from harness.targets.fake import fake_codex_argv

if TYPE_CHECKING:
    from harness.runner import ScenarioRun

DEFAULT_SCENARIO = "plain"


@dataclass(frozen=True, slots=True)
class FakeCodex:
    """The fake executable. ``argv`` starts it (``fake-codex``, or the interpreter running its module)."""

    argv: tuple[str, ...]
    #: the release profile it plays (``--release`` / ``FAKE_CODEX_RELEASE``); None: the scenario's, else the default
    release_played: str | None = None

    @property
    def path(self) -> str:
        return self.argv[0]

    def release(self, release: str) -> FakeCodex:
        """The same executable playing ``release`` (one of fake_server.profiles.names(); checked here)."""
        from fake_server import profiles

        return dataclasses.replace(self, release_played=profiles.get(release).release)

    def app_server(self, scenario: str | os.PathLike[str] = DEFAULT_SCENARIO) -> list[str]:
        """``fake-codex app-server --scenario NAME|PATH [--release X]``."""
        extra = ["--release", self.release_played] if self.release_played else []
        return [*self.argv, "app-server", "--scenario", os.fspath(scenario), *extra]

    def env(self, scenario: str | os.PathLike[str], base: dict[str, str] | None = None) -> dict[str, str]:
        """An environment selecting the scenario (and the release) for clients that spawn ``codex app-server``
        with fixed argv."""
        env = dict(os.environ if base is None else base)
        env["FAKE_CODEX_SCENARIO"] = os.fspath(scenario)
        if self.release_played:
            env["FAKE_CODEX_RELEASE"] = self.release_played
        return env


@pytest.fixture(scope="session")
def fake_codex() -> FakeCodex:
    return FakeCodex(tuple(fake_codex_argv()))


def _scenario(spec: str | os.PathLike[str] | Scenario) -> Scenario:
    return spec if isinstance(spec, Scenario) else scenario_lookup.resolve(os.fspath(spec))


#: The fixtures that only a trio test can take; the plugin runs an ``async def`` test that takes one under trio.
TRIO_FIXTURES = ("codex_session",)


# trio_fixture, not pytest.fixture: pytest-trio handles it even in a project without ``trio_mode = true``
# (a plain async fixture there is "an async fixture with no plugin that handled it").
@trio_fixture
async def codex_session(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[object]:
    from codex_client.session import open_session
    from fake_server.inprocess import serve_in_process
    from harness.runner import approval_policy, session_options

    marker = request.node.get_closest_marker("codex_scenario")
    scenario = _scenario(marker.args[0] if marker else DEFAULT_SCENARIO)
    release_marker = request.node.get_closest_marker("codex_release")
    release = str(release_marker.args[0]) if release_marker else None
    options = dataclasses.replace(session_options(scenario.client, tmp_path / "client-trace"), initialize=True)
    async with serve_in_process(scenario, trace_root=tmp_path / "server-trace", release=release) as server:
        async with open_session(server, options, policy=approval_policy(scenario.client)) as session:
            yield session


@pytest.fixture
def run_scenario(tmp_path: Path, pytestconfig: pytest.Config) -> Callable[..., ScenarioRun]:
    """``run_scenario(spec, target="fake", codex=None, client=None, client_deadline=None, release=None,
    budgets=None)`` → ScenarioRun.

    ``client=["python", "my_client.py"]`` judges that outside client instead of ours (on ``fake-process``,
    as ``codex-harness run --client-cmd`` does; ``target="real", codex=PATH``: on the real binary behind the
    recorder relay, as ``--target real`` does); it runs with this test's run marker, so the leak check
    covers it and everything it starts. ``budgets={"turn_timeout_ms": 600000}``: what the client declares
    (``run --budget``).
    """
    from harness.runner import run_one

    counter = iter(range(1_000_000))

    def run(
        spec: str | os.PathLike[str] | Scenario,
        target: str = "fake",
        codex: Path | None = None,
        client: Sequence[str] | None = None,
        client_deadline: float | None = None,
        release: str | None = None,
        budgets: dict[str, int] | None = None,
    ) -> ScenarioRun:
        scenario = _scenario(spec)
        if budgets and client is None:  # our own client keeps the budgets it is given (harness.budgets)
            from harness.budgets import with_budgets

            scenario = with_budgets(scenario, budgets)
        if client is not None:
            from harness.outside.runner import REAL, TARGET, ClientSpec, check_command, run_outside_one

            if target not in ("fake", TARGET, REAL):
                raise ValueError(f"an outside client runs on target {TARGET} or {REAL}, not {target}")
            check_command(list(client))
            save = tmp_path / f"record-{next(counter)}-{scenario.name}-client"
            spec_ = ClientSpec(list(client), client_deadline, release, dict(budgets or {}))
            if target == REAL:
                from harness.targets.real_adapter import preflight

                spec_.target, (spec_.codex, spec_.version) = REAL, preflight(codex)  # cannot run: TargetUnavailable
            return run_outside_one(scenario, spec_, save_dir=save, work_root=tmp_path)
        save = tmp_path / f"record-{next(counter)}-{scenario.name}-{target}"
        if release is not None:
            from fake_server import profiles

            profiles.get(release)  # an unknown release fails the test here, with the list of profiles
        return run_one(scenario, target, codex=codex, save_dir=save, work_root=tmp_path, release=release)

    return run


@pytest.fixture
def client_env(no_leaked_processes: str) -> dict[str, str]:
    """``os.environ`` plus this test's run marker (``CODEX_HARNESS_RUN_MARKER``).

    Start an outside client with ``env=client_env``: it and everything it starts inherit the marker, so the
    no-leak check fails the test on whatever of it is still alive afterwards.
    """
    from codex_client.process import RUN_MARKER_ENV

    return {**os.environ, RUN_MARKER_ENV: no_leaked_processes}
