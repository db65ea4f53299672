"""Trace bundles recorded from the real binary (tests/data/trace-bundles/) and the reducer cross-check.

Our checker must call every recorded bundle closed; with the real binary, ``codex debug trace-reduce``
must accept them too, and must accept / reject each bundle of the trace mutation corpus as the
corpus says (where our checker is stricter by design, the corpus records the reducer's own verdict).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_real_driver import reduce_with_codex

from contracts.trace.closure import check_bundle

DATA = Path(__file__).resolve().parent / "data" / "trace-bundles"
RECORDED = sorted(p.name for p in DATA.iterdir() if (p / "manifest.json").is_file())


def test_recorded_bundles_present() -> None:
    assert RECORDED == [
        "real-as-interrupt-running-command",
        "real-as-plain-turn",
        "real-as-sigterm-pending-approval",
    ]
    assert (DATA / "README.md").is_file()


@pytest.mark.parametrize("name", RECORDED)
def test_recorded_bundle_is_closed(name: str) -> None:
    verdict = check_bundle(DATA / name)
    assert verdict.verdict == "closed", verdict.to_json()
    assert verdict.recording_status == "complete"


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
    """The client's own bundle (harness/client/trace.py) replays with the real reducer."""
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
