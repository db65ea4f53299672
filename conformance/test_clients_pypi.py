"""Third-party app-server clients from PyPI over the whole catalogue, green on their known failures only.

The clients of ``conformance/clients/pypi.json`` marked ``"suite": true`` run here, each scenario against its
baseline (``conformance/clients/NAME.baseline.json``): each failing check must be listed with its one-line
explanation (the bug in that client, file:line), and each listed failure must still fail. A check that both
passed and failed over the regenerating runs is ``flaky``: tolerated either way. docs/clients.md shows the same
entries. Skipped with the reason where the client cannot be installed (no network, no pip), except in CI.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conformance.clients.pypi import ClientUnavailable, PypiClient, clients
from fake_server.catalogue import builtin_names

pytestmark = pytest.mark.clients
DOC = Path(__file__).resolve().parents[1] / "docs" / "clients.md"
IN_SUITE = [c for c in clients().values() if c.suite]
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


@pytest.mark.parametrize("scenario", builtin_names())
@pytest.mark.parametrize("client", IN_SUITE, ids=lambda c: c.name)
def test_client_fails_only_its_known_checks(
    client: PypiClient, scenario: str, run_scenario: Callable[..., Any]
) -> None:
    run = run_scenario(scenario, client=command(client), release=client.release)
    mine = [e for e in baseline(client) if e["scenario"] == scenario]
    known = {(e["contract"], e["name"]) for e in mine if e["status"] == "fail"}
    flaky = {(e["contract"], e["name"]) for e in mine if e["status"] == "flaky"}
    failing = {(c.contract, c.name): c.detail for c in run.checks if c.status == "fail"}
    new = {k: v for k, v in failing.items() if k not in known | flaky}
    stale = known - set(failing)
    assert not new, f"new failures of {client.package} on {scenario} (not in {client.baseline.name}): {new}"
    assert not stale, f"listed as failing but passing now (remove from {client.baseline.name}): {stale}"


@pytest.mark.parametrize("client", IN_SUITE, ids=lambda c: c.name)
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


def test_every_client_names_an_adapter_that_exists_and_a_release_the_fake_plays() -> None:
    from fake_server import profiles

    for client in clients().values():
        assert client.adapter.is_file(), client
        assert profiles.get(client.release).release == client.release, client
