"""The fuzzer walks a scenario on the approval table of the release the fake plays, not the default release's.

The shipped releases' tables agree, so the test learns a release whose table differs: the default release's folder
under another version, in a user's store, its table asking about every tool call the default release runs. A
scenario drawn for that release names it, and its truth (the approval asked, answered by the plan's decision) is
the one the fake plays: our client passes it on the in-process fake. Walked on the default release's table, the
same scenarios fail: a declined command's turn is judged as if the command had run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from support.learned_release import store_with_unnamed_release

from contracts import schema_store
from contracts.releases import default_version
from contracts.scenario import ClientPlan, CommandItem, ModelResponse, TurnScript, Usage
from harness.fuzz.invariants import run_example
from harness.fuzz.strategies import scenarios
from harness.fuzz.truth import derive

LEARNED = "99.0.0"
#: a command the default release runs without asking (no approval flag: the loader's policy asks for nothing)
RUNNING = (TurnScript(responses=(ModelResponse((CommandItem(command="make"),), Usage(5, 0, 3)),)),)


@pytest.fixture(scope="module")
def runs_everything(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    store = store_with_unnamed_release(tmp_path_factory.mktemp("store"), LEARNED, like=default_version())
    policy = store / f"codex-cli-{LEARNED}" / "policy.json"
    table = orjson.loads(policy.read_bytes())
    for outcomes in table["outcomes"].values():
        outcomes.update({what: "ask" for what, said in outcomes.items() if said == "run"})
    policy.write_bytes(orjson.dumps(table))
    with schema_store.using_user_store(Path(store)):
        yield


def test_the_truth_follows_the_release_table(runs_everything: None) -> None:
    assert [t.approvals_seen for t in derive(RUNNING, ClientPlan()).turns] == [0]
    assert [t.approvals_seen for t in derive(RUNNING, ClientPlan(), None, LEARNED).turns] == [1]


@settings(max_examples=25, suppress_health_check=list(HealthCheck), database=None, deadline=None)
@given(scenarios(release=LEARNED, faults=False))
def test_a_scenario_drawn_for_a_release_names_it_and_passes_on_its_fake(runs_everything: None, scenario) -> None:
    assert scenario.release == LEARNED
    example = run_example(scenario, "fake")
    assert not example.failures, [f"{c.contract}/{c.name}: {c.detail}" for c in example.failures]
