"""What fake-codex keeps in CODEX_HOME between processes and answers from the client's own setup, against what
codex-cli 0.171.0 was observed to do (``tests/thread_store_observe.py``), and a client that starts one server per
turn judged like a one-server client."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import thread_store_observe
import trio

from contracts.record import SessionRecord, WireEntry
from fake_server.catalogue import resolve
from fake_server.engine import Engine
from fake_server.home_config import ConfigError, Setup, parse_override, read_setup
from fake_server.home_store import FOLDER, HomeStore, StoreError
from harness.outside.record import session_record

OBSERVED = Path(__file__).parent / "data" / "real" / "0.171.0" / "thread_store" / "observed.json"
CLIENTS = Path(__file__).resolve().parents[1] / "conformance" / "clients"
CAREFUL = [sys.executable, str(CLIENTS / "careful.py")]
PER_TURN = [sys.executable, str(CLIENTS / "per_turn.py")]


def _answers(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # Notifications are left out: which answer a late one lands behind is timing (observed to vary run to run).
    return [{k: v for k, v in step.items() if k != "notes"} for step in steps]


@pytest.fixture(scope="module")
def fake_observed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home = thread_store_observe.fake_home(tmp_path_factory.mktemp("store"))
    return dict(trio.run(thread_store_observe.observe, home))


@pytest.mark.parametrize("case", sorted(orjson.loads(OBSERVED.read_bytes())))
def test_the_fake_answers_every_process_as_the_real_did(case: str, fake_observed: dict[str, Any]) -> None:
    real = orjson.loads(OBSERVED.read_bytes())[case]
    assert _answers(fake_observed[case]) == _answers(real)


def test_the_observation_is_not_blind() -> None:
    """A second process that forgot the threads (the fake before it kept them) differs from the recording."""
    real = _answers(orjson.loads(OBSERVED.read_bytes())["threads"])
    second = real.index({"process": 2})
    listed = next(n for n in range(second, len(real)) if real[n].get("method") == "thread/list")
    assert real[listed]["data"], "the real binary listed the first process's threads"
    forgetful = [dict(s) for s in real]
    forgetful[listed] = {**forgetful[listed], "data": []}
    assert forgetful != real
    resumed = [s for s in real[second:] if s.get("method") == "thread/resume" and "thread" in s]
    assert resumed, "the real binary resumed a thread from a new process"


# --- the store: bounded, no links, one counter per home ---------------------------------------------


def _engine(home: Path) -> Engine:
    return Engine(resolve("plain_two_turns"), codex_home=str(home), store=HomeStore.open(str(home)))


def test_the_turn_count_is_the_homes_across_stores(tmp_path: Path) -> None:
    first, second = HomeStore.open(str(tmp_path)), HomeStore.open(str(tmp_path))
    assert [first.next_turn(), second.next_turn(), first.next_turn()] == [0, 1, 2]


def test_a_linked_store_folder_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    (home / FOLDER).symlink_to(elsewhere)
    with pytest.raises(StoreError, match="cannot keep threads"):
        HomeStore.open(str(home))
    assert list(elsewhere.iterdir()) == []


def test_hostile_thread_files_are_skipped_and_named(tmp_path: Path) -> None:
    store = HomeStore.open(str(tmp_path))
    threads = tmp_path / FOLDER / "threads"
    tid = "01a23649-2e79-7a60-b0f7-d9b4358c0814"
    secret = tmp_path / "secret.json"
    secret.write_text('{"thread_id": "x"}')
    (threads / f"{tid}.json").symlink_to(secret)  # a link: never followed
    other = "01a23649-2e79-7a60-b0f7-d9b4358c0815"
    (threads / f"{other}.json").write_text("not json")
    wrong = "01a23649-2e79-7a60-b0f7-d9b4358c0816"
    (threads / f"{wrong}.json").write_bytes(orjson.dumps({"thread_id": other}))
    os.mkfifo(threads / "01a23649-2e79-7a60-b0f7-d9b4358c0817.json")  # never opened
    engine = Engine(resolve("plain"), codex_home=str(tmp_path), store=store)
    store.fill(engine.world)
    assert engine.world.threads == {}
    assert len(store.problems) == 2 and all("not a thread fake-codex kept" in p for p in store.problems)


def test_a_kept_thread_is_found_by_a_new_engine_not_loaded(tmp_path: Path) -> None:
    from fake_server.state import ThreadState

    engine = _engine(tmp_path)
    tid = "01a23649-2e79-7a60-b0f7-d9b4358c0814"
    thread = ThreadState(tid, "/w", 5, False, "/h/sessions/x.jsonl", "never", "read-only", "mock-model")
    thread.turns, thread.history = ["t1"], [{"id": "t1", "items": [], "status": "completed"}]
    engine.world.threads[tid] = thread
    engine.world.store.save(engine.world)
    again = _engine(tmp_path)
    again.world.store.fill(again.world)
    found = again.world.threads[tid]
    assert (found.turns, found.history, found.model) == (thread.turns, thread.history, "mock-model")
    assert again.world.surface.extra(tid).loaded is False


# --- the setup: config.toml and -c -------------------------------------------------------------------


def test_overrides_parse_as_toml_else_as_text() -> None:
    assert parse_override('model="o3"') == {"model": "o3"}
    assert parse_override("features.plugins=false") == {"features": {"plugins": False}}
    assert parse_override("model=o3") == {"model": "o3"}  # not TOML: the raw string, as the real binary
    with pytest.raises(ConfigError):
        parse_override("model")


def test_a_linked_config_toml_is_not_read(tmp_path: Path) -> None:
    target = tmp_path / "real.toml"
    target.write_text('model = "secret"\n')
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").symlink_to(target)
    with pytest.raises(ConfigError, match="cannot read"):
        read_setup(str(home), [])
    assert read_setup(str(tmp_path / "empty"), []) == Setup()  # no file: an empty home


# --- every server of a run judged together --------------------------------------------------------


def test_a_session_record_tells_the_servers_ids_apart() -> None:
    def record(*entries: WireEntry) -> SessionRecord:
        return SessionRecord("s", "fake-process", resolve("plain").expect, wire=list(entries))

    first = record(WireEntry(0.1, "c2s", {"id": 1, "method": "a"}), WireEntry(0.2, "s2c", {"id": 1, "result": {}}))
    second = record(WireEntry(0.15, "c2s", {"id": 1, "method": "b"}), WireEntry(0.3, "s2c", {"id": 1, "result": {}}))
    merged = session_record([first, second])
    assert [(e.t, e.frame["id"]) for e in merged.wire if e.frame] == [
        (0.1, "1:1"),
        (0.15, "2:1"),
        (0.2, "1:1"),
        (0.3, "2:1"),
    ]
    assert session_record([first]) is first


def _verdicts(run: Any) -> dict[tuple[str, str], str]:
    """Each check's worst status, a server's checks under their own name (``server 2: x`` counts as ``x``)."""
    rank = {"fail": 3, "warn": 2, "pass": 1, "skip": 0}
    out: dict[tuple[str, str], str] = {}
    for check in run.checks:
        name = re.sub(r"^server \d+: ", "", check.name)
        key = (check.contract, name)
        if key not in out or rank[check.status] > rank[out[key]]:
            out[key] = check.status
    return out


@pytest.mark.parametrize("scenario", ["resume", "late_events_next_turn"])
def test_a_client_with_a_server_per_turn_gets_the_one_server_verdicts(
    run_scenario: Callable[..., Any], scenario: str
) -> None:
    one = run_scenario(scenario, client=CAREFUL)
    many = run_scenario(scenario, client=PER_TURN)
    servers = len(many.record.meta["outside"]["servers"])
    assert servers == len(resolve(scenario).turns)
    assert _verdicts(many) == _verdicts(one), [c for c in many.checks if c.status == "fail"]


def test_the_harness_config_in_the_home_gives_the_recorded_answers(tmp_path: Path) -> None:
    """What run --client-cmd puts in the home it gives (harness.targets.real.write_mock_config) changes no frame."""
    from fake_server.home_config import config_answer, providers_answer
    from fake_server.profiles import default
    from fake_server.surface import static
    from harness.targets.real import write_mock_config

    scenario = resolve("plain")
    write_mock_config(tmp_path, scenario.config)
    setup = read_setup(str(tmp_path), [])
    profile = default()
    layers = static.answer(profile, "config/read+layers", cwd="/w", codex_home=str(tmp_path))
    for key in ("config/read", "config/read+layers"):
        recorded = static.answer(profile, key, cwd="/w", codex_home=str(tmp_path))
        empty = static.answer(profile, f"{key}+empty", cwd="/w", codex_home=str(tmp_path))
        assert config_answer(empty, recorded, layers, setup, str(tmp_path)) == recorded
    providers = static.answer(profile, "modelProvider/list", cwd="/w", codex_home=str(tmp_path))
    assert providers_answer(providers, setup) == providers
    assert (setup.model, setup.provider) == (scenario.config.model, "mock_provider")
    other = read_setup(str(tmp_path), ['model="other"'])
    assert config_answer(None, layers, layers, other, str(tmp_path))["layers"][0]["name"] == {"type": "sessionFlags"}
