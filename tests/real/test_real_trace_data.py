"""Trace bundles recorded from the real binary (tests/data/real/0.171.0/trace-bundles/) and the reducer cross-check.

Our checker must call every recorded bundle closed (the SIGKILLed one unclosed); with the real binary,
``codex debug trace-reduce`` must accept them too, and must accept / reject each bundle of the trace
mutation corpus as the corpus says (where our checker is stricter by design, the corpus records the
reducer's own verdict).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import paths
from test_real_driver import reduce_with_codex
from test_reference_set import reference_set

from contracts.trace.closure import check_bundle

DATA = paths.DATA / "real" / "0.171.0" / "trace-bundles"
#: Recorded by test_real_codex (CODEX_HARNESS_RECORD_BUNDLES) and copied from the project's earlier
#: reference material (the mutation corpus's bases); see the folder's README.
KEPT = {
    "real-as-interrupt-running-command": "closed",
    "real-as-plain-turn": "closed",
    "real-as-sigterm-pending-approval": "closed",
    "real-as-interrupt-pending-approval": "closed",
    "real-as-decline-approval": "closed",
    "real-as-pending-sigkill": "unclosed",
}
#: One bundle per session of the reference set (`make reference`), all closed.
EXPECTED = KEPT | {entry.name: "closed" for entry in reference_set()}
RECORDED = sorted(EXPECTED)


def test_recorded_bundles_present() -> None:
    present = sorted(p.name for p in DATA.iterdir() if (p / "manifest.json").is_file())
    assert present == RECORDED
    assert (DATA / "README.md").is_file()


@pytest.mark.parametrize("name", RECORDED)
def test_recorded_bundle_verdict(name: str) -> None:
    verdict = check_bundle(DATA / name)
    assert verdict.verdict == EXPECTED[name], verdict.to_json()
    assert verdict.recording_status == ("complete" if EXPECTED[name] == "closed" else "unclosed")


@pytest.mark.real_codex
@pytest.mark.parametrize("name", RECORDED)
def test_reducer_accepts_recorded_bundle(codex_bin: Path, tmp_path: Path, name: str) -> None:
    reduced = reduce_with_codex(codex_bin, DATA / name, tmp_path / "state.json")
    assert reduced.returncode == 0, reduced.stderr
    assert (tmp_path / "state.json").is_file()


def _mutations() -> list[object]:
    try:
        from test_trace_support import MUTATIONS
    except ImportError:  # the corpus lives with the trace tests
        return []
    return list(MUTATIONS)


@pytest.mark.real_codex
@pytest.mark.parametrize("mutation", _mutations(), ids=lambda m: m.name)
def test_reducer_agrees_with_corpus(codex_bin: Path, tmp_path: Path, mutation: object) -> None:
    from test_trace_support import build

    bundle = build(mutation, tmp_path / "bundle")  # type: ignore[arg-type]
    reduced = reduce_with_codex(codex_bin, bundle, tmp_path / "state.json")
    got = "accept" if reduced.returncode == 0 else "reject"
    assert got == mutation.reducer, f"{mutation.name}: reducer {got}s ({reduced.stderr.strip()[-300:]})"  # type: ignore[attr-defined]


CROSS_CHECK_SCENARIOS = ("plain", "interrupt_pending_approval", "running_command", "trace_unclosed_tool")
#: The fake server's bundles also with reasoning items, file changes (a cancelled patch's runtime left open)
#: and two tool calls in one response.
FAKE_SERVER_SCENARIOS = (*CROSS_CHECK_SCENARIOS, "reasoning", "file_change_cancel", "two_approvals")


def bundles_of_run(codex_bin: Path, tmp_path: Path, name: str, target: str) -> dict[str, Path]:
    from harness import scenario_lookup
    from harness.runner import play

    scenario = scenario_lookup.load_builtin(name)
    if not scenario.supports(target)[0]:
        pytest.skip(f"{name} does not run on {target}")
    record = play(scenario, target, work_dir=tmp_path / target, codex=codex_bin)
    found = {"server": record.server_trace, "client": record.client_trace}
    return {side: bundle for side, bundle in found.items() if bundle is not None}


def disagreements(codex_bin: Path, tmp_path: Path, bundles: dict[str, Path]) -> list[str]:
    """Bundles where our reader and the real reducer disagree on accept / reject (closure violations and
    unclosed recordings are ours to judge: the reducer accepts them)."""
    out = []
    for side, bundle in bundles.items():
        verdict = check_bundle(bundle)
        reduced = reduce_with_codex(codex_bin, bundle, tmp_path / f"state-{side}.json")
        if (reduced.returncode == 0) != (verdict.verdict != "invalid"):
            error = next((line for line in reduced.stderr.splitlines() if line.startswith("Error:")), "")
            out.append(f"{side}: ours {verdict.verdict}, reducer exit {reduced.returncode} {error}")
    return out


@pytest.mark.real_codex
@pytest.mark.parametrize("name", CROSS_CHECK_SCENARIOS[:3])  # trace_unclosed_tool is a fake-only fault
def test_reducer_agrees_on_real_run_bundles(codex_bin: Path, tmp_path: Path, name: str) -> None:
    bundles = bundles_of_run(codex_bin, tmp_path, name, "real")
    assert set(bundles) == {"server", "client"}
    assert disagreements(codex_bin, tmp_path, bundles) == []


@pytest.mark.real_codex
@pytest.mark.parametrize("name", CROSS_CHECK_SCENARIOS)
def test_reducer_agrees_on_fake_process_client_bundle(codex_bin: Path, tmp_path: Path, name: str) -> None:
    """The client's own bundle (codex_client/trace.py) replays with the real reducer."""
    bundles = bundles_of_run(codex_bin, tmp_path, name, "fake-process")
    assert disagreements(codex_bin, tmp_path, {"client": bundles["client"]}) == []
    assert check_bundle(bundles["client"]).verdict == "closed"  # so the reducer accepted it


@pytest.mark.real_codex
@pytest.mark.parametrize("name", FAKE_SERVER_SCENARIOS)
def test_reducer_agrees_on_fake_server_bundle(codex_bin: Path, tmp_path: Path, name: str) -> None:
    """The fake's payloads are what the reducer reads (message roles, function calls, runtimes)."""
    bundles = bundles_of_run(codex_bin, tmp_path, name, "fake-process")
    assert disagreements(codex_bin, tmp_path, {"server": bundles["server"]}) == []
    assert check_bundle(bundles["server"]).verdict != "invalid"  # so the reducer accepted it
