"""The official Python SDK (``openai-codex``) over the whole catalogue, green on its known failures only.

Each failing check must be listed in ``conformance/clients/openai_codex_sdk.baseline.json`` with its one-line
explanation, and each listed failure must still fail (a fixed one is stale: remove it). Checks that both
passed and failed over three runs are ``flaky``: tolerated either way, never a known failure. docs/clients.md
shows the same entries (a test below keeps them in step). Skipped with the reason where the SDK cannot be
installed (no network, no pip).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conformance.clients.sdk import BASELINE, SDK_VERSION, SdkUnavailable, client_cmd
from fake_server.catalogue import builtin_names

pytestmark = pytest.mark.clients
DOC = Path(__file__).resolve().parents[1] / "docs" / "clients.md"
#: A row of the known-failures table: | `scenario` | contract / check | fail|flaky | why | reproduce |
_ROW = re.compile(
    r"^\| `(?P<scenario>[^`]+)` \| (?P<contract>\w+) / (?P<name>[^|]+?) \| (?P<status>fail|flaky) \| .+\|$"
)


def baseline() -> list[dict[str, Any]]:
    return list(json.loads(BASELINE.read_text()))


@pytest.fixture(scope="session")
def sdk_cmd() -> list[str]:
    try:
        return client_cmd()
    except SdkUnavailable as exc:
        # Installing it needs PyPI: CI reaches it, so there a missing SDK is a failure, never a skip.
        if os.environ.get("CODEX_HARNESS_REQUIRE_REAL") == "1":
            pytest.fail(f"the official Python SDK could not be installed: {exc}")
        pytest.skip(str(exc))


def over_stdio(names: list[str]) -> list[str]:
    """The catalogue a stdio client plays (its websocket scenarios need a client that speaks ws)."""
    from contracts.faults import transport_problem
    from fake_server.catalogue import load_builtin

    return [n for n in names if transport_problem({f.kind for f in load_builtin(n).faults}, "stdio") is None]


@pytest.mark.parametrize("scenario", over_stdio(builtin_names()))
def test_sdk_fails_only_its_known_checks(scenario: str, run_scenario: Callable[..., Any], sdk_cmd: list[str]) -> None:
    run = run_scenario(scenario, client=sdk_cmd, release=SDK_VERSION)  # the SDK's own release profile
    mine = [e for e in baseline() if e["scenario"] == scenario]
    known = {(e["contract"], e["name"]) for e in mine if e["status"] == "fail"}
    flaky = {(e["contract"], e["name"]) for e in mine if e["status"] == "flaky"}
    failing = {(c.contract, c.name): c.detail for c in run.checks if c.status == "fail"}
    new = {k: v for k, v in failing.items() if k not in known | flaky}
    stale = known - set(failing)
    assert not new, f"new failures of the SDK on {scenario} (not in {BASELINE.name}): {new}"
    assert not stale, f"listed as failing but passing now (remove from {BASELINE.name}): {stale}"


def test_docs_and_baseline_list_the_same_entries() -> None:
    text = DOC.read_text()
    start = text.index("<!-- known failures: openai_codex_sdk -->")  # other clients' tables follow
    documented = {
        (m["scenario"], m["contract"], m["name"].strip(), m["status"])
        for m in map(_ROW.match, text[start : text.index("<!-- end -->", start)].splitlines())
        if m
    }
    listed = {(e["scenario"], e["contract"], e["name"], e["status"]) for e in baseline()}
    assert documented == listed
    assert all(e["why"] and not e["why"].startswith("TODO") for e in baseline())
