"""The real target's preparation: config.toml, scrubbed environment, temp dirs, refusals (no binary needed)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest
import trio

from contracts.scenario import (
    CommandItem,
    Fault,
    FileChangeItem,
    ModelResponse,
    Scenario,
    ServerConfig,
    TurnScript,
)
from harness.codex_bin import scrubbed_env
from harness.targets.real import (
    RealTargetError,
    ScenarioNotSupported,
    SchemaNotPinned,
    effective_config,
    real_target,
)

PINNED = "0.171.0"


def scenario(
    *turns: TurnScript, config: ServerConfig | None = None, targets: tuple[str, ...] | None = None
) -> Scenario:
    extra = {"targets": targets} if targets else {}
    return Scenario(name="s", description="", turns=turns, config=config or ServerConfig(), **extra)


@pytest.fixture
def fake_codex(tmp_path: Path) -> Path:
    """Any existing file: the binary is not started by the target, only named in argv."""
    path = tmp_path / "codex"
    path.write_text("#!/bin/sh\necho 'codex-cli 0.171.0'\n")
    path.chmod(0o755)
    return path


async def test_config_env_argv_and_cleanup(fake_codex: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("CODEX_HOME", "/somewhere/else")
    monkeypatch.setenv("CODEX_SANDBOX", "seatbelt")
    sc = scenario(TurnScript(), config=ServerConfig(stream_max_retries=1, sandbox="workspace-write"))
    trace_root = tmp_path / "traces"
    with trio.fail_after(10):
        async with real_target(sc, fake_codex, trace_root=trace_root, base_dir=tmp_path) as target:
            config = tomllib.loads(target.config_path.read_text())
            assert config["model"] == "mock-model"
            assert config["approval_policy"] == "never"
            assert config["approvals_reviewer"] == "user"
            assert config["sandbox_mode"] == "workspace-write"
            assert config["model_provider"] == "mock_provider"
            assert config["check_for_update_on_startup"] is False
            assert config["analytics"] == {"enabled": False}
            provider = config["model_providers"]["mock_provider"]
            assert provider["base_url"] == f"http://127.0.0.1:{target.mock.port}/v1"
            assert provider["wire_api"] == "responses"
            assert provider["request_max_retries"] == 0
            assert provider["stream_max_retries"] == 1
            assert provider["supports_websockets"] is False
            assert "env_key" not in provider

            assert target.server_argv == (str(fake_codex), "app-server", "--listen", "stdio://")
            assert target.confinement in ("bwrap", "unshare")  # behind the confined launcher
            assert target.argv[-4:] == target.server_argv and len(target.argv) > 4
            assert target.version == PINNED and target.schema_release == PINNED
            env = target.env
            assert "OPENAI_API_KEY" not in env and "CODEX_SANDBOX" not in env
            assert env["CODEX_HOME"] == str(target.codex_home) and target.codex_home.is_dir()
            assert env["TMPDIR"] == str(target.tmpdir) and target.tmpdir.is_dir()
            assert env["RUST_LOG"] == "warn"
            assert env["HOME"] == str(target.home) and target.home.is_dir()
            assert env["CODEX_ROLLOUT_TRACE_ROOT"] == str(trace_root)
            assert target.cwd == target.workdir and target.workdir.is_absolute() and target.workdir.is_dir()
            assert target.mock.workdir.as_posix() == str(target.workdir)
            assert target.requests == []
            run_dir = target.codex_home.parent
            assert run_dir.parent == tmp_path
    assert not run_dir.exists()


async def test_no_trace_root_means_no_trace_variable(fake_codex: Path, tmp_path: Path) -> None:
    with trio.fail_after(10):
        async with real_target(scenario(TurnScript()), fake_codex, base_dir=tmp_path, version=PINNED) as target:
            assert "CODEX_ROLLOUT_TRACE_ROOT" not in target.env


def test_scrubbed_env_keeps_the_rest() -> None:
    env = scrubbed_env(
        {"PATH": "/bin", "OPENAI_BASE_URL": "x", "CODEX_X": "y", "HOME": "/h"},
        codex_home=Path("/c"),
        tmpdir=Path("/t"),
        trace_root=None,
    )
    assert env == {"PATH": "/bin", "HOME": "/h", "CODEX_HOME": "/c", "TMPDIR": "/t", "RUST_LOG": "warn"}


def test_approval_steps_force_on_request() -> None:
    cmd = scenario(TurnScript(responses=(ModelResponse(items=(CommandItem("x", approval=True),)),)))
    assert effective_config(cmd).approval_policy == "on-request"
    patch = scenario(TurnScript(responses=(ModelResponse(items=(FileChangeItem("a", "b"),)),)))
    assert effective_config(patch).approval_policy == "on-request"
    running = scenario(TurnScript(responses=(ModelResponse(items=(CommandItem("sleep 30"),)),)))
    assert effective_config(running).approval_policy == "never"


def test_untrusted_and_unknown_settings_refused() -> None:
    with pytest.raises(RealTargetError, match="untrusted"):
        effective_config(scenario(config=ServerConfig(approval_policy="untrusted")))
    with pytest.raises(RealTargetError, match="sandbox"):
        effective_config(scenario(config=ServerConfig(sandbox="open")))


async def test_fake_only_scenario_refused_with_reason(fake_codex: Path) -> None:
    sc = scenario(TurnScript(faults=(Fault(kind="crash", at="delta"),)))
    with pytest.raises(ScenarioNotSupported, match="crash can only be produced by the fake"):
        async with real_target(sc, fake_codex, version=PINNED):
            pass  # pragma: no cover
    with pytest.raises(ScenarioNotSupported, match="declares targets fake"):
        async with real_target(scenario(TurnScript(), targets=("fake",)), fake_codex, version=PINNED):
            pass  # pragma: no cover


async def test_unpinned_release_refused_unless_allowed(fake_codex: Path, tmp_path: Path) -> None:
    with pytest.raises(SchemaNotPinned, match=r"no pinned schema for codex-cli 0\.1\.0 \(pinned: .*0\.171\.0"):
        async with real_target(scenario(TurnScript()), fake_codex, version="0.1.0"):
            pass  # pragma: no cover
    async with real_target(
        scenario(TurnScript()), fake_codex, version="0.1.0", require_pinned_schema=False, base_dir=tmp_path
    ) as target:
        assert target.schema_release is None


async def test_missing_or_broken_binary(tmp_path: Path) -> None:
    with pytest.raises(RealTargetError, match="not found"):
        async with real_target(scenario(TurnScript()), tmp_path / "nope"):
            pass  # pragma: no cover
    broken = tmp_path / "codex"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    with pytest.raises(RealTargetError, match="gave no version"):
        async with real_target(scenario(TurnScript()), broken):
            pass  # pragma: no cover


@pytest.mark.real_codex
async def test_real_binary_version_selects_pinned_schema(codex_bin: Path, tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with real_target(scenario(TurnScript()), codex_bin, base_dir=tmp_path) as target:
            assert target.schema_release == target.version
            assert os.path.isabs(target.argv[0])
