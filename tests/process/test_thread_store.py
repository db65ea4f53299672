"""What fake-codex keeps in CODEX_HOME between processes and answers from the client's own setup, against what
codex-cli 0.171.0 was observed to do (``tests/thread_store_observe.py``), and a client that starts one server per
turn judged like a one-server client."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import thread_store_observe
import trio
from support import paths

from contracts.record import SessionRecord, WireEntry
from fake_server.catalogue import resolve
from fake_server.engine import Engine
from fake_server.home_config import ConfigError, Setup, parse_override, read_setup
from fake_server.home_store import FOLDER, HomeStore, StoreError
from harness.outside.record import session_record

OBSERVED = paths.DATA / "real" / "0.171.0" / "thread_store" / "observed.json"
CLIENTS = paths.REPO / "conformance" / "clients"
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


# --- the store indexes: heads only, histories read when asked, bounded, bad files remembered -----------------

FAKE = [sys.executable, "-m", "fake_server.cli", "app-server", "--scenario", "plain"]


def _kept_thread(home: Path, tid: str, turns: int, item_bytes: int) -> None:
    """A thread written by the store itself (whatever its file format), ``turns`` turns of one big message."""
    from fake_server.state import ThreadState

    engine = _engine(home)
    thread = ThreadState(tid, "/w", 5, False, "/h/sessions/x.jsonl", "never", "read-only", "mock-model")
    text = "x" * item_bytes
    thread.turns = [f"t{n}" for n in range(turns)]
    thread.history = [
        {"id": f"t{n}", "status": "completed", "items": [{"type": "agentMessage", "id": f"i{n}", "text": text}]}
        for n in range(turns)
    ]
    engine.world.threads[tid] = thread
    engine.world.store.save(engine.world)
    engine.world.store.close()


def _session(home: Path, requests: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str, int]:
    """fake-codex in ``home`` given ``requests`` after initialize: its answers, its stderr, its peak RSS (KiB,
    measured by a parent of its own: the peak of its only child)."""
    home.mkdir(exist_ok=True)
    frames = [{"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}}]
    frames += [{"method": "initialized"}, *({"id": n + 1, **r} for n, r in enumerate(requests))]
    script = (
        "import resource, subprocess, sys\n"
        "subprocess.run(sys.argv[1:])\n"
        "sys.stderr.write('MAXRSS %d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, *FAKE],
        input=b"".join(orjson.dumps(f) + b"\n" for f in frames),
        capture_output=True,
        timeout=120,
        env={**os.environ, "CODEX_HOME": str(home)},
    )
    stderr = proc.stderr.decode("utf-8", "replace")
    rss = int(re.findall(r"MAXRSS (\d+)", stderr)[-1])
    answers = [orjson.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return [a for a in answers if "id" in a and "method" not in a], stderr, rss


def test_listing_kept_threads_reads_their_heads_not_their_histories(tmp_path: Path) -> None:
    """Six threads of 24 MiB: listing them took them all in (the probe: 8 of 60 MiB, 1,078 MiB of RSS); the
    list now reads each head, and reading one thread's turns reads that one only."""
    tids = [f"01a23649-2e79-7a60-b0f7-d9b4358c08{n:02d}" for n in range(6)]
    for tid in tids:
        _kept_thread(tmp_path, tid, turns=3, item_bytes=8 * 1024 * 1024)
    _, _, baseline = _session(tmp_path / "empty", [{"method": "thread/list", "params": {}}])
    answers, stderr, rss = _session(tmp_path, [{"method": "thread/list", "params": {}}])
    assert "Traceback" not in stderr
    assert sorted(t["id"] for t in answers[-1]["result"]["data"]) == sorted(tids)
    assert rss - baseline < 40 * 1024, (baseline, rss)
    read = {"method": "thread/read", "params": {"threadId": tids[0], "includeTurns": True}}
    answers, stderr, rss = _session(tmp_path, [{"method": "thread/list", "params": {}}, read])
    turns = answers[-1]["result"]["thread"]["turns"]
    assert [len(t["items"][0]["text"]) for t in turns] == [8 * 1024 * 1024] * 3
    assert rss - baseline < 150 * 1024, (baseline, rss)  # one history of 24 MiB, not six


def test_a_bad_thread_file_is_read_once_not_on_every_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four truncated 8 MiB files were read and parsed again on every request (ten thread/list: 28 s)."""
    from contracts import safe_read

    for n in range(4):
        tid = f"01a23649-2e79-7a60-b0f7-d9b4358c08{n:02d}"
        _kept_thread(tmp_path, tid, turns=1, item_bytes=8 * 1024 * 1024)
        path = tmp_path / FOLDER / "threads" / f"{tid}.json"
        os.truncate(path, path.stat().st_size // 2)
    (tmp_path / FOLDER / "threads" / "01a23649-2e79-7a60-b0f7-d9b4358c0899.json").write_bytes(b"\x00" * 4096)
    read: list[int] = []
    for name in ("read_bounded", "read_prefix"):
        real = getattr(safe_read, name)

        def counted(*args: Any, _real: Callable[..., bytes] = real, **kwargs: Any) -> bytes:
            data = _real(*args, **kwargs)
            read.append(len(data))
            return data

        monkeypatch.setattr(safe_read, name, counted)
    engine = _engine(tmp_path)
    for _ in range(10):
        engine.world.store.fill(engine.world)
    assert len(read) <= 5, f"{len(read)} reads, {sum(read)} bytes"
    assert len(engine.world.store.problems) <= 5


@pytest.mark.parametrize(
    "history",
    [
        [1, "two", None],
        [{"status": "completed", "items": []}],  # no id
        [{"id": "t0", "items": [1, 2]}],
        [{"id": "t0", "items": {"a": 1}}],
        "[" * 600 + "]" * 600,  # too deep to parse
    ],
    ids=["not-objects", "no-id", "items-not-objects", "items-not-a-list", "deep"],
)
def test_a_thread_file_of_the_wrong_shape_is_skipped_not_a_32603(history: Any, tmp_path: Path) -> None:
    """thread/list, thread/read and thread/items/list answered -32603 with a traceback on stderr."""
    tid = "01a23649-2e79-7a60-b0f7-d9b4358c0814"
    _kept_thread(tmp_path, tid, turns=1, item_bytes=10)
    path = tmp_path / FOLDER / "threads" / f"{tid}.json"
    lines = path.read_bytes().splitlines()
    bad = history.encode() if isinstance(history, str) else orjson.dumps(history)
    if len(lines) == 2:  # head, then history
        path.write_bytes(lines[0] + b"\n" + bad + b"\n")
    else:  # one document (the format before the store indexed)
        text = path.read_bytes().decode()
        whole = orjson.loads(text)
        path.write_bytes(
            orjson.dumps({k: v for k, v in whole.items() if k != "history"})[:-1] + b',"history":' + bad + b"}"
        )
    requests = [
        {"method": "thread/list", "params": {}},
        {"method": "thread/read", "params": {"threadId": tid, "includeTurns": True}},
        {"method": "thread/items/list", "params": {"threadId": tid}},
        {"method": "thread/turns/list", "params": {"threadId": tid}},
    ]
    answers, stderr, _ = _session(tmp_path, requests)
    assert "Traceback" not in stderr, stderr
    assert all(a.get("error", {}).get("code") != -32603 for a in answers), answers
    assert "is not a thread fake-codex kept" in stderr


def test_a_turn_counter_locked_by_another_process_is_waited_for_boundedly(tmp_path: Path) -> None:
    """turn/start waited forever on the lock, deaf to SIGTERM and stdin EOF; now at most LOCK_WAIT_S, then the
    process counts its own turns and says so."""
    import fcntl
    import time

    HomeStore.open(str(tmp_path)).close()
    holder = os.open(tmp_path / FOLDER / "turns", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        frames = [
            {"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}},
            {"method": "initialized"},
            {"id": 1, "method": "thread/start", "params": {}},
        ]
        proc = subprocess.Popen(
            FAKE,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "CODEX_HOME": str(tmp_path)},
        )
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b"".join(orjson.dumps(f) + b"\n" for f in frames))
        proc.stdin.flush()
        thread_id = None
        while thread_id is None:
            answer = orjson.loads(proc.stdout.readline())
            if answer.get("id") == 1:
                thread_id = answer["result"]["thread"]["id"]
        text = [{"type": "text", "text": "hi"}]
        turn = {"id": 2, "method": "turn/start", "params": {"threadId": thread_id, "input": text}}
        started = time.monotonic()
        try:  # stdin EOF right after the turn/start: the process must still end
            out, err = proc.communicate(orjson.dumps(turn) + b"\n", timeout=30)
        finally:
            proc.kill()
        assert time.monotonic() - started < 20
        assert b'"id":2,"result"' in out, err.decode()
        assert b"is locked by another process" in err and b"Traceback" not in err
    finally:
        os.close(holder)
