"""The ``real`` target: the real ``codex app-server`` driven offline through the mock Responses API.

For one scenario, :func:`real_target` prepares an isolated run — a fresh ``CODEX_HOME`` whose
``config.toml`` points at a mock Responses API on 127.0.0.1 (``docs/real-binary.md``, "How a real run is set up"), a
private ``TMPDIR`` and ``HOME``, a work directory, an environment scrubbed of ``OPENAI_*`` / ``CODEX_*`` — and
yields the argv / env / cwd to start ``codex app-server --listen stdio://`` with, behind the confined
launcher (:mod:`codex_sandbox.confine`: it writes only in that run directory and its trace root; the process
transport starts it), the mock's recorded requests, and the pinned schema release matching the
binary's version. Leaving the block stops the mock and removes the temporary directories.
"""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any, Final

import orjson
import tomli_w
import trio

from codex_sandbox import confine
from contracts.exitcodes import InternalError
from contracts.scenario import CommandItem, FileChangeItem, Scenario, ServerConfig
from contracts.unix_socket import private_dir, socket_home
from fake_server.responses_api import MockResponsesServer, RecordedRequest, serve_responses_api
from harness.codex_bin import CodexNotFound, RunDir, codex_version, run_dir
from harness.targets.base import write_files

TARGET = "real"
PROVIDER_ID = "mock_provider"
APPROVAL_POLICIES = ("never", "on-request", "on-failure")
SANDBOX_MODES = ("read-only", "workspace-write", "danger-full-access")
#: What keeps a real run on this machine. The real binary syncs the curated plugin marketplace at
#: start-up (``git ls-remote https://github.com/openai/plugins.git``, then api.github.com, then
#: chatgpt.com); the ``plugins`` feature gates that sync and the remote plugin catalogue. Analytics and
#: the update check are the other start-up calls home. ``tests/process/test_real_hermetic.py`` proves under
#: strace that with these settings a session connects to nothing but 127.0.0.1 (and that without them it
#: does not).
HERMETIC_CONFIG: dict[str, Any] = {
    "check_for_update_on_startup": False,
    "analytics": {"enabled": False},
    "features": {"plugins": False},
}


class RealTargetError(InternalError):
    """The real target cannot run this scenario or binary; ``str()`` says why."""


class ScenarioNotSupported(RealTargetError):
    """A fake-only scenario (faults only the fake app-server can produce)."""


class SchemaNotPinned(RealTargetError):
    """The binary's release has no pinned schema to validate its frames against."""


@dataclass(frozen=True, slots=True)
class RealTarget:
    """One prepared real-binary run. ``argv`` / ``env`` / ``cwd`` are what to start the server with.

    ``argv`` is ``server_argv`` behind the confined launcher (:mod:`codex_sandbox.confine`): the server can write
    only in the run directory and the trace root, and cannot read the homes.
    """

    scenario: Scenario
    codex: Path
    version: str
    schema_release: str | None  # the pinned schema release for ``version`` (None: not pinned, not required)
    argv: tuple[str, ...]
    server_argv: tuple[str, ...]
    confinement: str  # the launcher's mechanism: bwrap | unshare | none (--unconfined)
    env: Mapping[str, str]
    cwd: Path
    workdir: Path
    codex_home: Path
    tmpdir: Path
    home: Path
    trace_root: Path | None
    mock: MockResponsesServer
    #: a confined unix listener's socket folder on the host (:func:`socket_folder`), else None
    socket_dir: Path | None = None
    #: the confined launcher of this run: a command put behind it as ``argv`` is
    launch: Callable[[Sequence[str]], list[str]] | None = None

    def argv_with(self, extra: Sequence[str]) -> tuple[str, ...]:
        """``argv`` with ``extra`` arguments for the server, put in before the launcher wraps it: arguments
        appended to ``argv`` reach bwrap's command but not the one the unshare fallback's init starts."""
        if self.launch is None:
            return (*self.argv, *extra)
        return tuple(self.launch((*self.server_argv, *extra)))

    @property
    def requests(self) -> list[RecordedRequest]:
        """What the mock Responses API received so far, in order."""
        return list(self.mock.requests)

    @property
    def config_path(self) -> Path:
        return self.codex_home / "config.toml"


def check_supported(scenario: Scenario) -> None:
    ok, reason = scenario.supports(TARGET)
    if not ok:
        raise ScenarioNotSupported(f"scenario {scenario.name} cannot run on the real binary: {reason}")


def effective_config(scenario: Scenario) -> ServerConfig:
    """The scenario's server config, with ``on-request`` forced when a step needs an approval."""
    config = scenario.config
    needs_approval = any(
        isinstance(item, CommandItem | FileChangeItem) and item.approval
        for turn in scenario.turns
        for response in turn.responses
        for item in response.items
    )
    if config.approval_policy == "untrusted":
        # The real binary refuses to start with it in config.toml (docs/real-binary.md, "How a real run is set up").
        raise RealTargetError('approval_policy "untrusted" is not accepted in config.toml by the real binary')
    if config.approval_policy not in APPROVAL_POLICIES:
        raise RealTargetError(f"unknown approval_policy {config.approval_policy!r}")
    if config.sandbox not in SANDBOX_MODES:
        raise RealTargetError(f"unknown sandbox mode {config.sandbox!r}")
    if needs_approval and config.approval_policy == "never":
        config = replace(config, approval_policy="on-request")
    return config


def home_config(scenario: Scenario) -> ServerConfig:
    """The settings a real run's ``config.toml`` holds for ``scenario`` (:func:`effective_config`), or the scenario's
    own where the real target refuses them: what a fake given the same kind of home reads."""
    try:
        return effective_config(scenario)
    except RealTargetError:
        return scenario.config


def config_toml(config: ServerConfig, base_url: str) -> dict[str, Any]:
    """The ``config.toml`` of a real run, as a mapping (``tomli_w.dumps`` writes it)."""
    return {
        "model": config.model,
        "approval_policy": config.approval_policy,
        "approvals_reviewer": "user",
        "sandbox_mode": config.sandbox,
        "model_provider": PROVIDER_ID,
        **HERMETIC_CONFIG,
        "model_providers": {
            PROVIDER_ID: {
                "name": "Mock Responses API of codex-harness",
                "base_url": base_url,
                "wire_api": "responses",
                "request_max_retries": 0,
                "stream_max_retries": config.stream_max_retries,
                "supports_websockets": False,
            }
        },
    }


#: The base URL the fake's recorded answers show for the mock provider (it serves no Responses API itself).
FAKE_BASE_URL = "http://127.0.0.1:0/v1"


def write_mock_config(codex_home: Path, config: ServerConfig, base_url: str = FAKE_BASE_URL) -> None:
    """The harness's mock-provider ``config.toml`` in a home the harness made: what a server given that home answers
    ``config/read``, ``modelProvider/list`` and a new thread's model from (fake-codex reads it as the real does)."""
    (codex_home / "config.toml").write_text(tomli_w.dumps(config_toml(config, base_url)))


#: The ``-c`` key that points one server of a shared run directory at its own mock.
MOCK_BASE_URL_KEY = f"model_providers.{PROVIDER_ID}.base_url"


def shared_run(root: Path, scenario: Scenario) -> RunDir:
    """The run directory every server of one outside client's run shares (``root``, made here, kept: the caller
    removes it): one ``CODEX_HOME`` (its ``config.toml`` names the mock provider; each server's mock is given by
    a ``-c`` override), ``HOME``, ``TMPDIR`` and work directory (the scenario's files written once)."""
    check_supported(scenario)
    config = effective_config(scenario)
    root.mkdir(mode=0o700)
    top = root.resolve()
    run = RunDir(top, top / "codex_home", top / "home", top / "tmp", top / "workdir")
    for directory in (run.codex_home, run.home, run.tmpdir, run.workdir):
        directory.mkdir()
    write_files(run.workdir, scenario.client.files)
    (run.codex_home / "config.toml").write_text(tomli_w.dumps(config_toml(config, FAKE_BASE_URL)))
    return run


def server_argv(codex: Path, listen: str = "stdio://") -> tuple[str, ...]:
    return (os.fspath(codex), "app-server", "--listen", listen)


#: the real target's socket folder, in the run directory (the binary's ``/tmp/codex-daemon-<uid>`` inside)
SOCKET_DIR: Final = "sockets"


def socket_folder(argv: tuple[str, ...], run_root: Path, mechanism: str) -> Path | None:
    """Where a confined ``--listen unix://PATH`` server's socket is, on the host (None: nothing to prepare).

    The real binary binds its socket in ``/tmp/codex-daemon-<uid>/`` (named by the SHA-256 of PATH) and links
    PATH to it. Confined, its ``/tmp`` is its own and its uid :data:`codex_sandbox.confine.SANDBOX_ID`: this folder of
    the run's (private, 0700, made the one way, :func:`contracts.unix_socket.private_dir`) is bound there, and
    our client connects to the socket in it (the link's text names the path inside). Never the host's
    ``/tmp/codex-daemon-<uid>``, which another user may have made. Unconfined, the binary uses and checks that
    one itself."""
    if mechanism == confine.UNCONFINED or not any(a.startswith("unix://") for a in argv):
        return None
    folder = run_root / SOCKET_DIR
    os.close(private_dir(os.fspath(folder)))
    return folder


def pinned_schema_for(version: str) -> str | None:
    """The pinned schema release matching ``version``, or None."""
    from contracts import schema_store

    return version if version in schema_store.pinned_releases() else None


def schema_not_pinned_message(version: str) -> str:
    from contracts import schema_store

    pinned = ", ".join(schema_store.pinned_releases()) or "none"
    return (
        f"no pinned schema for codex-cli {version} (pinned: {pinned}); pin it with "
        f"`codex-harness schema pin --codex PATH` or run `codex-harness validate-release --codex PATH` "
        f"(into {schema_store.user_store()}; {schema_store.store_hint()})"
    )


async def read_version(codex: Path) -> str:
    try:
        return await trio.to_thread.run_sync(codex_version, codex)
    except CodexNotFound as exc:
        raise RealTargetError(str(exc)) from exc


@asynccontextmanager
async def real_target(
    scenario: Scenario,
    codex: Path,
    *,
    trace_root: Path | None = None,
    require_pinned_schema: bool = True,
    base_dir: Path | None = None,
    version: str | None = None,
    listen: str | None = None,
    server_args: tuple[str, ...] = (),
    command: tuple[str, ...] | None = None,
    shared: RunDir | None = None,
    turn_counter: Callable[[], int] | None = None,
) -> AsyncIterator[RealTarget]:
    """Prepare a real-binary run of ``scenario`` and keep its mock Responses API up for the block.

    ``trace_root``: where the server writes its rollout-trace bundle (``CODEX_ROLLOUT_TRACE_ROOT``);
    None: no trace. ``base_dir``: parent of the run's temporary directory (default: the system's).
    ``version``: skip running ``codex --version`` (already known). ``listen``: the ``--listen`` value (default
    ``stdio://``; ``{run}`` in it is the run's directory, for a unix socket there). ``server_args``: more
    ``app-server`` flags (``--ws-auth …``; ``{run}`` as in ``listen``). ``command``: the binary's arguments as
    an outside client gave them (:mod:`harness.outside.real_relay`), instead of ``app-server --listen …``.
    ``shared``: the run directory of a run of several servers (:func:`shared_run`: one ``CODEX_HOME``, so a later
    server finds the threads an earlier one left), kept when the block ends; this server's mock is given to the
    binary by a ``-c`` override (its ``config.toml`` is the run's). ``turn_counter``: the run's turn count, shared
    by its servers' mocks (:class:`fake_server.responses_api.RunTurnCounter`).

    Raises :class:`ScenarioNotSupported` for a fake-only scenario, :class:`SchemaNotPinned` when
    ``require_pinned_schema`` and the binary's release is not pinned, :class:`RealTargetError` when
    the binary cannot report its version or cannot be confined (:mod:`codex_sandbox.confine`; ``--unconfined``
    lifts that). The caller starts the process from ``argv`` / ``env`` /
    ``cwd`` and must have stopped it before the block ends (the directories are removed then).
    """
    check_supported(scenario)
    config = effective_config(scenario)
    codex = Path(codex)
    if not codex.exists():
        raise RealTargetError(f"codex binary not found: {codex}")
    if trace_root is not None:  # it is bound into the confinement: it must exist, at its real path
        trace_root.mkdir(parents=True, exist_ok=True)
        trace_root = trace_root.resolve()
    try:
        launcher = confine.current()
    except confine.ConfinementUnavailable as exc:
        raise RealTargetError(str(exc)) from None
    version = version or await read_version(codex)
    release = pinned_schema_for(version)
    if release is None and require_pinned_schema:
        raise SchemaNotPinned(schema_not_pinned_message(version))
    with run_dir("codex-harness-real-", base_dir) if shared is None else nullcontext(shared) as run:
        if shared is None:
            write_files(run.workdir, scenario.client.files)
        async with serve_responses_api(scenario, workdir=PurePosixPath(run.workdir), turn_counter=turn_counter) as mock:
            if shared is None:
                (run.codex_home / "config.toml").write_text(tomli_w.dumps(config_toml(config, mock.base_url)))
                own: tuple[str, ...] = ()
            else:  # the run's config.toml names the mock provider; each server is pointed at its own mock
                own = ("-c", f"{MOCK_BASE_URL_KEY}={orjson.dumps(mock.base_url).decode()}")
            env = run.env(os.environ, trace_root=trace_root)
            if command is not None:
                argv = (os.fspath(codex), *own, *command)
            else:
                argv = server_argv(codex, (listen or "stdio://").replace("{run}", os.fspath(run.root)))
                argv += tuple(a.replace("{run}", os.fspath(run.root)) for a in server_args)
            writable = [run.root] if trace_root is None else [run.root, trace_root]
            sockets = socket_folder(argv, run.root, launcher.mechanism)
            moved = [] if sockets is None else [(sockets, socket_home(confine.SANDBOX_ID))]
            where = confine.layout(
                codex, writable=writable, cwd=run.workdir, scratch=run.root, path_env=env.get("PATH"), moved=moved
            )
            yield RealTarget(
                scenario=scenario,
                codex=codex,
                version=version,
                schema_release=release,
                argv=tuple(launcher.wrap(argv, where)),
                server_argv=argv,
                launch=functools.partial(launcher.wrap, where=where),
                confinement=launcher.mechanism,
                env=env,
                cwd=run.workdir,
                workdir=run.workdir,
                codex_home=run.codex_home,
                tmpdir=run.tmpdir,
                home=run.home,
                trace_root=trace_root,
                mock=mock,
                socket_dir=sockets,
            )
