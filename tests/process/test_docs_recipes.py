"""The recipes a team copies work as written, from the built wheel in a fresh venv, in an empty project.

- docs/pytest.md's test file runs under a plain ``pytest`` (no configuration of the project's own): the
  outside-client contracts pass with ``assert_passed``, and ``codex_session`` works in an ``async def`` test.
- docs/ci.md's shell script runs end to end: exit 0 with the careful reference client, ``junit.xml`` and
  ``index.html`` in the report; exit 1 on a client with a new must failure; that failure accepted by a
  baseline, and a fixed failure with ``--stale warn``, exit 0.

Each block is read out of the document itself, so the document cannot drift from what is tested.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import orjson
import pytest
from support import paths

REPO = paths.REPO
#: Building the wheel and installing it with its dependencies (pip's cache or the registry) is bounded.
INSTALL_TIMEOUT_S = 600.0
RUN_TIMEOUT_S = 600.0
CI_SCENARIOS = ["plain", "command_approval"]
#: What a checkout holds beside the source: environments, installed binaries, reports, build leftovers.
NOT_SOURCE = (".git", ".venv", ".tools", "reports", "build", "*.egg-info", "__pycache__", ".*_cache")



def doc_block(doc: str, marker: str, language: str) -> str:
    """The fenced ``language`` block right after the HTML comment containing ``marker`` in docs/``doc``."""
    text = (REPO / "docs" / doc).read_text(encoding="utf-8")
    found = re.search(rf"<!--[^>]*{re.escape(marker)}[^>]*-->\n```{language}\n(.*?)```", text, re.S)
    assert found, f"docs/{doc} has no {language} block after a comment naming {marker}"
    return found.group(1)


def run(
    cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = RUN_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv (outside the repository) with codex-harness installed from its wheel, as a user gets it."""
    root = tmp_path_factory.mktemp("fresh")
    env = clean_env(root)
    wheels = root / "wheel"
    # Built from a copy: an in-tree build writes build/ and *.egg-info into the checkout other tests read.
    source = root / "source"
    shutil.copytree(REPO, source, symlinks=True, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    built = run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels), str(source)],
        root,
        env,
        INSTALL_TIMEOUT_S,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = wheels.glob("codex_harness-*.whl")
    venv = root / "venv"
    made = run([sys.executable, "-m", "venv", str(venv)], root, env)
    assert made.returncode == 0, made.stderr
    installed = run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)], root, env, INSTALL_TIMEOUT_S
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    return venv


def clean_env(home: Path) -> dict[str, str]:
    """The caller's environment without this repository on any path: the new project sees the wheel only."""
    # CODEX_HARNESS_REQUIRE_* are this repository's CI settings (its suite must run the real binary and
    # Chromium); a user's project that copies the recipe has not set them.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PYTEST", "CODEX_HARNESS_REQUIRE_"))
    }
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(REPO)))
    env["XDG_DATA_HOME"] = str(home / "xdg")
    return env


def test_the_wheel_without_extras_is_lean_and_judges_an_outside_client(fresh_venv: Path, tmp_path: Path) -> None:
    """The plain install (no extra) has no pytest, pytest-trio or hypothesis, and `run --client-cmd` works; fuzz
    says which extra it needs. (Runs first in this file: the tests after it add the pytest extra.)"""
    python = str(fresh_venv / "bin" / "python")
    env = clean_env(tmp_path)
    for module in ("pytest", "pytest_trio", "hypothesis"):
        found = run([python, "-c", f"import {module}"], tmp_path, env)
        assert found.returncode != 0, f"{module} is installed without its extra"
    careful = REPO / "conformance" / "clients" / "careful.py"
    cli = str(fresh_venv / "bin" / "codex-harness")
    done = run([cli, "run", "--client-cmd", f"python3 {careful}", "--scenario", "plain"], tmp_path, env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "RESULT: PASS" in done.stdout
    fuzz = run([cli, "fuzz", "--examples", "1"], tmp_path, env)
    assert fuzz.returncode == 3 and "codex-harness[fuzz]" in fuzz.stderr, fuzz.stderr


@pytest.fixture(scope="module")
def pytest_venv(fresh_venv: Path) -> Path:
    """The same venv with the pytest extra, as docs/pytest.md installs it."""
    (wheel,) = (fresh_venv.parent / "wheel").glob("codex_harness-*.whl")
    python = str(fresh_venv / "bin" / "python")
    done = run([python, "-m", "pip", "install", "--quiet", f"{wheel}[pytest]"], fresh_venv, clean_env(fresh_venv))
    assert done.returncode == 0, done.stderr[-3000:]
    return fresh_venv


def test_the_pytest_file_of_docs_pytest_md_passes_in_a_fresh_project(pytest_venv: Path, tmp_path: Path) -> None:
    fresh_venv = pytest_venv
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "test_codex_contracts.py").write_text(doc_block("pytest.md", "test file", "python"))
    done = run(
        [str(fresh_venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        project,
        clean_env(tmp_path),
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert re.search(r"\b5 passed\b", done.stdout), done.stdout[-2000:]
    assert "requested an async fixture" not in done.stdout


def test_the_failure_message_names_the_failed_check_and_the_session(pytest_venv: Path, tmp_path: Path) -> None:
    fresh_venv = pytest_venv
    # The same fixture and helper on a client with a known bug: the test fails, and says why.
    project = tmp_path / "project"
    project.mkdir()
    buggy = REPO / "conformance" / "clients" / "buggy.py"
    (project / "test_buggy.py").write_text(
        "import sys\nfrom conformance import assert_passed\n\n"
        "def test_buggy(run_scenario):\n"
        f"    assert_passed(run_scenario('plain', client=[sys.executable, {str(buggy)!r}, '--reasoning-in-output']))\n"
    )
    done = run(
        [str(fresh_venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        project,
        clean_env(tmp_path),
    )
    assert done.returncode == 1, done.stdout[-4000:]
    assert "plain [fake-process]: FAIL" in done.stdout
    assert re.search(r"usage / turn 1 usage \[must\]: .*docs/", done.stdout), done.stdout[-4000:]
    assert "codex-harness show " in done.stdout
    assert "Traceback" not in done.stdout


def test_the_shell_recipe_of_docs_ci_md_fails_only_on_new_must_failures(fresh_venv: Path, tmp_path: Path) -> None:
    script = tmp_path / "codex-contracts.sh"
    script.write_text(doc_block("ci.md", "the script", "bash"))
    env = clean_env(tmp_path)
    env.update(
        CODEX_HARNESS=str(next((fresh_venv.parent / "wheel").glob("*.whl"))),
        VENV=str(fresh_venv),
        SCENARIOS=" ".join(f"--scenario {s}" for s in CI_SCENARIOS),
    )
    careful = REPO / "conformance" / "clients" / "careful.py"
    ok = run(["bash", str(script)], tmp_path, {**env, "CLIENT_CMD": f"python3 {careful}", "OUT": "out-careful"})
    assert ok.returncode == 0, ok.stdout[-4000:] + ok.stderr[-2000:]
    assert (tmp_path / "known-failures.toml").read_text() == "failures = []\n"  # the first run made it
    suites = ET.parse(tmp_path / "out-careful" / "junit.xml").getroot()
    assert {s.get("name", "").split("[")[0].strip() for s in suites.iter("testsuite")} >= set(CI_SCENARIOS)
    assert (tmp_path / "out-careful" / "index.html").is_file()

    # A new must failure fails the job, and the report still says why.
    buggy = f"python3 {REPO / 'conformance' / 'clients' / 'buggy.py'} --reasoning-in-output"
    bad = run(["bash", str(script)], tmp_path, {**env, "CLIENT_CMD": buggy, "OUT": "out-buggy"})
    assert bad.returncode == 1, bad.stdout[-4000:] + bad.stderr[-2000:]
    failed = [c for c in orjson.loads((tmp_path / "out-buggy" / "checks.json").read_bytes()) if c["status"] == "fail"]
    assert failed and all(c["level"] == "must" for c in failed)

    # Accepted in the baseline (as the recipe says: `codex-harness baseline OUT`), it no longer fails the job;
    # fixed (the careful client again), it is stale: listed, and with --stale warn the job still passes.
    made = run([str(fresh_venv / "bin" / "codex-harness"), "baseline", "out-buggy"], tmp_path, env)
    assert made.returncode == 0, made.stderr
    assert made.stdout.count("\n    \"") == len(failed)  # one id a line, only the failures
    (tmp_path / "known-failures.toml").write_text(made.stdout)
    accepted = run(["bash", str(script)], tmp_path, {**env, "CLIENT_CMD": buggy, "OUT": "out-accepted"})
    assert accepted.returncode == 0, accepted.stdout[-4000:]
    fixed = run(["bash", str(script)], tmp_path, {**env, "CLIENT_CMD": f"python3 {careful}", "OUT": "out-fixed"})
    assert fixed.returncode == 0, fixed.stdout[-4000:]
    assert "Stale baseline entries" in fixed.stdout


def test_the_docs_script_is_the_actions_own_step() -> None:
    """docs/ci.md's shell recipe is scripts/codex-contracts.sh, and action.yml runs that script with its inputs."""
    script = (REPO / "scripts" / "codex-contracts.sh").read_text(encoding="utf-8")
    assert doc_block("ci.md", "the script", "bash") == script
    action = (REPO / "action.yml").read_text(encoding="utf-8")
    assert "using: composite" in action
    assert 'run: bash "${{ github.action_path }}/scripts/codex-contracts.sh"' in action
    for variable in re.findall(r"\$\{([A-Z_]+)[:}]", script):  # every input the script reads is set by the action
        assert f"        {variable}: ${{{{" in action, variable
    assert "actions/upload-artifact" in action and "if: always()" in action
