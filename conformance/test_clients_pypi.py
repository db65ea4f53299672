"""Third-party app-server clients from PyPI over the whole catalogue, green on their known failures only.

The clients of ``conformance/clients/pypi.json`` marked ``"suite": true`` run here against their baseline
(``conformance/clients/NAME.baseline.json``): each failing check must be listed with its one-line explanation
(the bug in that client, file:line), and each listed failure must still fail. A check that both passed and
failed over the regenerating runs is ``flaky``: tolerated either way. docs/clients.md shows the same entries.
Skipped with the reason where the client cannot be installed (no network, no pip), except in CI.

In the suite, one test per client plays the catalogue the way ``run --client-cmd --jobs`` does (scenarios at
once: the client's hangs cost one deadline, not one each) and names every new and stale failure at once. The
same check one test per scenario (to rerun one, or to see each pass) is on demand:
``CODEX_HARNESS_PER_SCENARIO=1 pytest -m clients conformance/test_clients_pypi.py``. Either way the catalogue
is what ``run`` plays over stdio: these clients speak stdio only, so the websocket scenarios are left out.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conformance.clients.pypi import ClientUnavailable, PypiClient, against_baseline, clients
from fake_server.catalogue import builtin_names, load_builtin
from harness.outside.command import DEFAULT_JOBS, run_clients
from harness.outside.runner import ClientSpec
from harness.scenario_lookup import playable_over

pytestmark = pytest.mark.clients
DOC = Path(__file__).resolve().parents[1] / "docs" / "clients.md"
IN_SUITE = [c for c in clients().values() if c.suite]
#: What ``run --client-cmd`` plays for a stdio client (the websocket scenarios left out, as run leaves them).
OVER_STDIO = [s.name for s in playable_over([load_builtin(n) for n in builtin_names()], "stdio")]
PER_SCENARIO = os.environ.get("CODEX_HARNESS_PER_SCENARIO") == "1"
#: Scenarios at once here: run's default (two per core). 16 would overlap every hang (the unofficial SDK hangs on
#: 14 scenarios, the official one on 5, idle until a 73 s deadline), but with two such catalogues at once on a
#: loaded 2-core machine the clients started last took over 20 s to start their server and failed the 20 s
#: deadline of hang_alive and drop_turn_completed: a verdict of the load. At the default every measurement held
#: every verdict equal to the one played alone (bench/jobs.py, tests/process/test_outside_jobs.py).
SUITE_JOBS = DEFAULT_JOBS
#: A row of a known-failures table: | `scenario` | contract / check | fail|flaky | why | reproduce |
_ROW = re.compile(
    r"^\| `(?P<scenario>[^`]+)` \| (?P<contract>\w+) / (?P<name>[^|]+?) \| (?P<status>fail|flaky) \| .+\|$"
)


def baseline(client: PypiClient) -> list[dict[str, Any]]:
    return list(json.loads(client.baseline.read_text()))


_COMMANDS: dict[str, list[str]] = {}


def command(client: PypiClient) -> list[str]:
    if client.name not in _COMMANDS:
        try:
            _COMMANDS[client.name] = client.client_cmd()
        except ClientUnavailable as exc:
            # Installing it needs PyPI: CI reaches it, so there a missing client is a failure, never a skip.
            if os.environ.get("CODEX_HARNESS_REQUIRE_REAL") == "1":
                pytest.fail(f"{client.package} could not be installed: {exc}")
            pytest.skip(str(exc))
    return _COMMANDS[client.name]


@pytest.mark.parametrize("client", IN_SUITE, ids=lambda c: c.name)
def test_client_fails_only_its_known_checks_over_the_catalogue(client: PypiClient) -> None:
    scenarios = [load_builtin(n) for n in OVER_STDIO]
    spec = ClientSpec(command(client), profile=client.release)
    runs = run_clients(spec, scenarios, report_dir=None, progress=None, jobs=SUITE_JOBS)
    assert [r.scenario for r in runs] == OVER_STDIO
    new, stale = against_baseline([c for r in runs for c in r.checks], baseline(client), set(OVER_STDIO))
    problems = [f"new failure of {client.package} (not in {client.baseline.name}): {line}" for line in new]
    problems += [f"listed as failing but passing now (remove from {client.baseline.name}): {line}" for line in stale]
    assert not problems, "\n".join(problems)


if PER_SCENARIO:  # on demand: the same check, one test per scenario

    @pytest.mark.parametrize("scenario", OVER_STDIO)
    @pytest.mark.parametrize("client", IN_SUITE, ids=lambda c: c.name)
    def test_client_fails_only_its_known_checks(
        client: PypiClient, scenario: str, run_scenario: Callable[..., Any]
    ) -> None:
        run = run_scenario(scenario, client=command(client), release=client.release)
        new, stale = against_baseline(run.checks, baseline(client), {scenario})
        assert not new, f"new failures of {client.package} on {scenario} (not in {client.baseline.name}): {new}"
        assert not stale, f"listed as failing but passing now (remove from {client.baseline.name}): {stale}"


@pytest.mark.parametrize("client", list(clients().values()), ids=lambda c: c.name)
def test_docs_and_baseline_list_the_same_entries(client: PypiClient) -> None:
    """docs/clients.md's section for the client holds exactly its baseline's rows, each explained."""
    text = DOC.read_text()
    start = text.index(f"<!-- known failures: {client.name} -->")
    end = text.index("<!-- end -->", start)
    documented = {
        (m["scenario"], m["contract"], m["name"].strip(), m["status"])
        for m in map(_ROW.match, text[start:end].splitlines())
        if m
    }
    listed = {(e["scenario"], e["contract"], e["name"], e["status"]) for e in baseline(client)}
    assert documented == listed
    assert all(e["why"] and not e["why"].startswith("TODO") for e in baseline(client))


@pytest.mark.parametrize("client", list(clients().values()), ids=lambda c: c.name)
def test_the_docs_verdict_table_has_a_row_for_every_scenario_run_plays(client: PypiClient) -> None:
    """A client out of the suite is judged by hand (``--regenerate``): a scenario added to the catalogue since its
    table was made shows here, not as a new failure a user meets first (its baseline would lack the scenario)."""
    text = DOC.read_text()
    marker = text.index(f"<!-- known failures: {client.name} -->")
    table = text.rindex("| scenario | terminal_status |", 0, marker)
    rows = text[table:marker].split("\n\n", 1)[0].splitlines()[2:]
    assert sorted(row.split("|")[1].strip() for row in rows) == sorted(OVER_STDIO)


def test_every_client_names_an_adapter_that_exists_and_a_release_the_fake_plays() -> None:
    from fake_server import profiles

    for client in clients().values():
        assert client.adapter.is_file(), client
        assert profiles.get(client.release).release == client.release, client
