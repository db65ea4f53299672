"""Each release profile of the fake against its real release (0.163.0, 0.169.0, 0.171.0).

Every model-level built-in scenario: the server sides are structurally equal with the fake playing that
release's profile, and every frame of both sides validates against that release's pinned schema (an
excluded scenario would be listed in EXCLUDED with its reason: none is). The real bundles of each release
are judged for trace closure, pass or fail, never a skip for their format. 0.171.0's fidelity is
tests/real/test_real_fidelity.py; here it gets the profile and trace checks.

One xdist group for all of them (``make test`` runs ``--dist loadgroup``; tests/conftest.py names the group
for the scheduler): one real session at a time, about 1-3 s each, beside the other workers.

The binaries: ``CODEX_BIN_0_163_0`` and ``CODEX_BIN_0_169_0`` (``make test`` sets them), ``CODEX_BIN`` for 0.171.0.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from contracts.fidelity import render
from fake_server.catalogue import model_level
from harness import scenario_lookup
from harness.codex_bin import codex_version
from harness.fidelity_run import fidelity_diff
from harness.runner import run_one

OLDER = ("0.163.0", "0.169.0")
RELEASES = (*OLDER, "0.171.0")
#: scenario -> why it is not compared on the older releases (empty: every model-level scenario is)
EXCLUDED: dict[str, str] = {}


def model_level_scenarios() -> list[str]:
    return [s.name for s in model_level()]


def release_binary(release: str, codex_bin: Path) -> Path:
    """The binary of ``release``: its CODEX_BIN_<release> (0.171.0: the selected codex)."""
    if release == "0.171.0":
        return codex_bin
    variable = "CODEX_BIN_" + release.replace(".", "_")
    value = os.environ.get(variable)
    if not value:
        if os.environ.get("CODEX_HARNESS_REQUIRE_REAL") == "1":
            pytest.fail(f"{variable} is not set (make test installs codex {release})")
        pytest.skip(f"codex {release} not selected (set {variable})")
    return Path(value)


@pytest.mark.real_codex
@pytest.mark.parametrize("release", RELEASES)
def test_the_binary_is_the_release_of_its_profile(release: str, codex_bin: Path) -> None:
    assert codex_version(release_binary(release, codex_bin)) == release


@pytest.mark.real_codex
@pytest.mark.parametrize("name", [n for n in model_level_scenarios() if n not in EXCLUDED])
@pytest.mark.parametrize("release", OLDER)
def test_profile_and_release_agree(release: str, name: str, codex_bin: Path, tmp_path: Path) -> None:
    binary = release_binary(release, codex_bin)
    result = fidelity_diff(scenario_lookup.load_builtin(name), binary, work_root=tmp_path)
    assert result.skipped is None and result.error is None, result.to_json()
    assert result.profile == release, result.profile_note
    assert not result.invalid_frames, result.invalid_frames
    shown = render(result.differences) + "".join(f"\n{line}" for line in result.trace_differences)
    assert result.equal, f"{name}: profile {release} vs real codex {result.server_version}:\n{shown}"


@pytest.mark.real_codex
@pytest.mark.parametrize("name", ["command_approval", "interrupt_pending_approval"])
@pytest.mark.parametrize("release", RELEASES)
def test_trace_closure_is_judged_on_each_release(release: str, name: str, codex_bin: Path, tmp_path: Path) -> None:
    """As validate-release judges the real binary: the verdict [expect] declares for that release, never a skip."""
    binary = release_binary(release, codex_bin)
    run = run_one(scenario_lookup.load_builtin(name), "real", codex=binary, work_root=tmp_path)
    closure = [c for c in run.checks if c.contract == "trace_closure"]
    assert {c.name for c in closure} == {"client trace", "server trace"}
    assert all(c.status == "pass" for c in closure), [c.detail for c in closure]
    assert all(c.status == "pass" for c in run.checks if c.status != "skip"), [
        (c.contract, c.name, c.detail) for c in run.checks if c.status == "fail"
    ]


@pytest.mark.real_codex
@pytest.mark.parametrize(("release", "accepted"), [("0.163.0", True), ("0.169.0", False)])
def test_each_reducer_on_an_event_after_the_rollout_ended(
    release: str, accepted: bool, codex_bin: Path, tmp_path: Path
) -> None:
    """What the release's own `codex debug trace-reduce` does with a late event, our reader does too."""
    from test_trace_writer_formats import DATA, move_runtime_end_last

    from contracts.trace import check_bundle

    bundle = tmp_path / "late"
    shutil.copytree(DATA / release / "trace-bundles" / "running_command_interrupt", bundle)
    move_runtime_end_last(bundle)
    out = subprocess.run(
        [str(release_binary(release, codex_bin)), "debug", "trace-reduce", str(bundle), "-o", str(tmp_path / "s.json")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (out.returncode == 0) is accepted, out.stderr[-300:]
    assert (check_bundle(bundle).verdict != "invalid") is accepted


@pytest.mark.real_codex
def test_validate_release_judges_the_trace_closure_of_0_169(codex_bin: Path, tmp_path: Path) -> None:
    """The issue's acceptance: every trace_closure check is judged on 0.169.0 (schema 2), none fails for the
    format, and the fidelity diff compares with the fake playing 0.169.0."""
    import json

    from harness.cli import main

    out = tmp_path / "report"
    binary = release_binary("0.169.0", codex_bin)
    args = ["validate-release", "--codex", str(binary), "--out", str(out), "--latency-samples", "0"]
    for name in ("command_approval", "interrupt_pending_approval", "running_command_interrupt"):
        args += ["--scenario", name]
    main(args)
    body = json.loads((out / "report.json").read_text())
    assert body["contracts"]["failed"] == [], body["contracts"]["failed"]
    assert body["contracts"]["passed"] > 0 and body["schema"]["pin"] == "already pinned, identical"
    assert body["profile"]["release"] == "0.169.0" and "own release" in body["profile"]["note"]
    assert all(f["equal"] for f in body["fidelity"]), body["fidelity"]
    assert "The fake played release profile 0.169.0" in (out / "report.md").read_text()
