"""Release profiles of the fake (0.163.0, 0.169.0, 0.171.0): how one is chosen, what each changes, and the
trace bundles each writes. The differences themselves were measured on the real releases (docs/releases.md);
tests/real/test_real_releases.py compares each profile with its real binary."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from support import paths
from support.learned_release import store_with_unnamed_release
from support.virtual import VirtualServer

from contracts.checks import run_all
from contracts.scenario_file import ScenarioError, dumps, loads
from contracts.trace import check_bundle
from fake_server import profiles
from fake_server.catalogue import builtin_names, load_builtin
from harness.fidelity_run import profile_for
from harness.runner import play, run_one
from harness.targets.fake import fake_codex_argv

#: Every release the fake plays, read from the release folders (a new folder is covered without an edit here).
RELEASES = tuple(profiles.names())
INIT = {"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}}


def fake(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != profiles.RELEASE_ENV} | (env or {})
    return subprocess.run(
        [*fake_codex_argv(), *args], capture_output=True, text=True, timeout=60, env=full, stdin=subprocess.DEVNULL
    )


# --- choosing a profile ------------------------------------------------------------------------------


def test_precedence_is_flag_then_env_then_scenario_then_default() -> None:
    assert profiles.select().release == "0.171.0"
    assert profiles.select(None, None, "0.163.0").release == "0.163.0"
    assert profiles.select(None, "0.169.0", "0.163.0").release == "0.169.0"
    assert profiles.select("0.171.0", "0.169.0", "0.163.0").release == "0.171.0"


def test_an_unknown_release_names_the_profiles() -> None:
    with pytest.raises(profiles.UnknownRelease, match=r"profiles: 0\.163\.0, 0\.169\.0, 0\.171\.0"):
        profiles.select(None, "0.170.0")


@pytest.mark.parametrize(
    ("version", "expected", "exact"),
    [
        ("0.169.0", "0.169.0", True),
        ("0.170.3", "0.169.0", False),  # the newest profile not newer than the binary
        ("0.172.0", "0.171.0", False),
        ("0.100.0", "0.163.0", False),  # older than every profile: the oldest
    ],
)
def test_nearest_profile(version: str, expected: str, exact: bool) -> None:
    profile, is_exact = profiles.nearest(version)
    assert (profile.release, is_exact) == (expected, exact)
    release, note = profile_for(version)
    assert release == expected
    assert ("no profile for" in note) is not exact
    if not exact:  # said as it is: newer than the profile chosen, or older than every profile
        assert ("older than every profile" in note) is (version == "0.100.0"), note


def test_fake_codex_version_follows_flag_then_env() -> None:
    assert fake("--version").stdout.strip() == "codex-cli 0.171.0"
    assert fake("--release", "0.163.0", "--version").stdout.strip() == "codex-cli 0.163.0"
    assert fake("--version", env={profiles.RELEASE_ENV: "0.169.0"}).stdout.strip() == "codex-cli 0.169.0"
    flag_wins = fake("--release", "0.163.0", "--version", env={profiles.RELEASE_ENV: "0.169.0"})
    assert flag_wins.stdout.strip() == "codex-cli 0.163.0"


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (("--release", "0.170.0", "--version"), {}),
        (("app-server", "--release", "latest"), {}),
        (("--version",), {profiles.RELEASE_ENV: "9.9.9"}),
    ],
)
def test_fake_codex_unknown_release_exits_3_listing_profiles(args: tuple[str, ...], env: dict[str, str]) -> None:
    out = fake(*args, env=env)
    assert out.returncode == 3, out
    assert "0.163.0, 0.169.0, 0.171.0" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_scenario_file_with_an_unknown_release_exits_2_naming_it(tmp_path: Path) -> None:
    """An invalid scenario like any other (exit 2, the file named); the release of a flag stays a usage error."""
    path = tmp_path / "s.toml"
    path.write_text(dumps(dataclasses.replace(load_builtin("plain"), release="0.150.0")))
    for env in ({}, {"FAKE_CODEX_SCENARIO": str(path)}):
        out = fake("app-server", *([] if env else ["--scenario", str(path)]), env=env)
        assert out.returncode == 2, out
        assert f"{path}: release: expected a release the fake has a profile for" in out.stderr
        assert "'0.150.0'" in out.stderr and "Traceback" not in out.stderr


# --- the scenario file ----------------------------------------------------------------------------------


PER_RELEASE = """
name = "r"
description = "per release"
release = "0.169.0"
[[turns]]
input = "hi"
[expect]
server_trace = "closed"
[expect.release."0.163.0"]
server_trace = "violation"
server_exit = 0
"""


def test_scenario_release_and_per_release_expect_round_trip() -> None:
    s = loads(PER_RELEASE)
    assert s.release == "0.169.0"
    assert s.expect.for_release("0.163.0").server_trace == "violation"
    assert s.expect.for_release("0.163.0").server_exit == 0
    assert s.expect.for_release("0.169.0") == s.expect
    assert s.expect.for_release(None) == s.expect
    again = loads(dumps(s))
    assert again.release == s.release and again.expect == s.expect


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ('release = "0.169.0"', 'release = "latest"', "release"),
        ('[expect.release."0.163.0"]', '[expect.release."newest"]', "expect.release.newest"),
        ("server_exit = 0\n", "usage = 3\n", "expect.release.0.163.0.usage"),
        ('server_trace = "violation"', 'server_trace = "open"', "expect.release.0.163.0.server_trace"),
    ],
)
def test_scenario_release_keys_are_checked(old: str, new: str, key: str) -> None:
    with pytest.raises(ScenarioError) as info:
        loads(PER_RELEASE.replace(old, new))
    assert info.value.key == key


@pytest.mark.parametrize(
    "name", ["interrupt_pending_approval", "approval_cancel", "running_command_interrupt", "experimental_unread"]
)
def test_builtin_scenarios_declare_the_older_releases_unclosed_tools(name: str) -> None:
    expect = load_builtin(name).expect
    found = {r: expect.for_release(r, profiles.switches_of(r)).server_trace for r in ("0.163.0", "0.169.0", "0.171.0")}
    assert found == {"0.163.0": "violation", "0.169.0": "violation", "0.171.0": "closed"}  # by switch, not name


# --- what a profile changes -----------------------------------------------------------------------------


def session(release: str, name: str = "plain") -> VirtualServer:
    server = VirtualServer(dataclasses.replace(load_builtin(name), release=release))
    server.send(INIT)
    server.send({"id": 1, "method": "thread/start", "params": {}})
    server.settle()
    return server


@pytest.mark.parametrize("release", RELEASES)
def test_user_agent_names_the_release(release: str) -> None:
    answer = next(f for f in session(release).frames if f.get("id") == 0)
    assert answer["result"]["userAgent"].startswith(f"t/{release} ")


@pytest.mark.parametrize(("release", "known"), [("0.163.0", False), ("0.169.0", True), ("0.171.0", True)])
def test_methods_come_from_the_release_pin(release: str, known: bool) -> None:
    """modelProvider/list arrived in 0.169.0: 0.163.0 does not know the variant."""
    server = session(release)
    server.send({"id": 9, "method": "modelProvider/list", "params": {}})
    server.settle()
    answer = next(f for f in server.frames if f.get("id") == 9)
    unknown = "error" in answer and "unknown variant `modelProvider/list`" in answer["error"]["message"]
    assert unknown is not known
    if unknown:
        listed = answer["error"]["message"].split("expected one of", 1)[1]
        assert "`modelProvider/list`" not in listed and "`thread/start`" in listed


def diffs_sent(record: Any) -> int:
    return sum(1 for e in record.wire if e.dir == "s2c" and (e.frame or {}).get("method") == "turn/diff/updated")


@pytest.mark.parametrize(("release", "count"), [("0.163.0", 3), ("0.169.0", 3), ("0.171.0", 2)])
def test_older_releases_send_one_more_diff_after_a_file_change(release: str, count: int, tmp_path: Path) -> None:
    record = play(load_builtin("file_change_approval"), "fake", work_dir=tmp_path, release=release)
    assert record.server_version == release
    assert diffs_sent(record) == count


@pytest.mark.parametrize(
    ("release", "schema", "verdict"),
    [("0.163.0", 1, "violation"), ("0.169.0", 2, "violation"), ("0.171.0", 3, "closed")],
)
def test_each_profile_writes_its_trace_format(release: str, schema: int, verdict: str, tmp_path: Path) -> None:
    record = play(load_builtin("interrupt_pending_approval"), "fake", work_dir=tmp_path, release=release)
    bundle = record.server_trace
    assert bundle is not None
    assert orjson.loads((bundle / "manifest.json").read_bytes())["schema_version"] == schema
    result = check_bundle(bundle)
    assert result.verdict == verdict, [p.describe() for p in result.problems]
    if verdict == "violation":  # the pending tool call never ended: invariants 3 and 5, as the real bundle
        assert {p.invariant for p in result.problems} == {3, 5}


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize(
    ("name", "target"),
    [
        ("interrupt_pending_approval", "fake"),
        ("interrupt_pending_approval", "fake-process"),
        ("file_change_approval", "fake"),
        ("command_approval", "fake"),
    ],
)
def test_every_contract_holds_on_each_profile(release: str, name: str, target: str, tmp_path: Path) -> None:
    """Frames valid against the release's own pin, and the trace verdict the scenario declares for it."""
    run = run_one(load_builtin(name), target, work_root=tmp_path, release=release)
    assert run.record is not None and run.record.schema_release == release
    bad = [(c.contract, c.name, c.detail) for c in run.checks if c.status != "pass"]
    assert not bad


def test_env_chooses_the_release_of_the_in_process_fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(profiles.RELEASE_ENV, "0.163.0")
    assert play(load_builtin("plain"), "fake", work_dir=tmp_path / "a").server_version == "0.163.0"
    explicit = play(load_builtin("plain"), "fake", work_dir=tmp_path / "b", release="0.169.0")
    assert explicit.server_version == "0.169.0"


# --- the pytest fixtures ------------------------------------------------------------------------------


def test_fake_codex_fixture_plays_a_release(fake_codex: Any) -> None:
    older = fake_codex.release("0.169.0")
    assert older.app_server("plain")[-2:] == ["--release", "0.169.0"]
    assert older.env("plain", base={})[profiles.RELEASE_ENV] == "0.169.0"
    assert profiles.RELEASE_ENV not in fake_codex.env("plain", base={})
    with pytest.raises(profiles.UnknownRelease):
        fake_codex.release("0.1.0")
    out = subprocess.run([*older.argv, "--release", "0.169.0", "--version"], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "codex-cli 0.169.0"


@pytest.mark.codex_release("0.163.0")
async def test_codex_session_fixture_plays_the_marked_release(codex_session: Any) -> None:
    assert "/0.163.0 " in (codex_session.initialize_result or {}).get("userAgent", "")


def test_run_scenario_fixture_takes_a_release(run_scenario: Any) -> None:
    run = run_scenario("interrupt_pending_approval", release="0.169.0")
    assert run.record.server_version == "0.169.0"
    assert all(c.status == "pass" for c in run.checks), [c.detail for c in run.checks if c.status != "pass"]


def test_fake_process_takes_a_release_from_the_scenario_file(tmp_path: Path) -> None:
    path = tmp_path / "plain169.toml"
    path.write_text(dumps(dataclasses.replace(load_builtin("plain"), release="0.169.0")))
    env = {k: v for k, v in os.environ.items() if k != profiles.RELEASE_ENV}
    frames = [
        orjson.dumps(INIT),
        orjson.dumps({"method": "initialized"}),
    ]
    out = subprocess.run(
        [*fake_codex_argv(), "app-server", "--scenario", str(path)],
        input=b"\n".join(frames) + b"\n",
        capture_output=True,
        timeout=60,
        env=env,
    )
    first = orjson.loads(out.stdout.splitlines()[0])
    assert first["result"]["userAgent"].startswith("t/0.169.0 "), first


# --- frames carry the fields each release writes -----------------------------------------------------

DATA = paths.DATA / "real"


def _paths(value: Any, prefix: str, out: set[str]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            out.add(f"{prefix}.{key}")
            _paths(inner, f"{prefix}.{key}", out)
    elif isinstance(value, list):
        for inner in value:
            _paths(inner, prefix + "[]", out)


def field_paths(frames: list[tuple[str, Any]]) -> dict[str, set[str]]:
    """Key paths per notification method (and item type) and per answered request method."""
    methods: dict[Any, str] = {}
    out: dict[str, set[str]] = {}
    for direction, frame in frames:
        if not isinstance(frame, dict):
            continue
        if direction == "c2s" and "method" in frame and "id" in frame:
            methods[frame["id"]] = frame["method"]
        elif direction == "s2c" and "method" in frame:
            params = frame.get("params") or {}
            item = params.get("item") if isinstance(params, dict) else None
            key = frame["method"] + (f" {item.get('type')}" if isinstance(item, dict) else "")
            _paths(params, "$", out.setdefault(key, set()))
        elif direction == "s2c" and frame.get("id") in methods:
            _paths(frame.get("result"), "$", out.setdefault("answer " + methods[frame["id"]], set()))
    return out


RECORDINGS = sorted(
    p.relative_to(DATA).as_posix() for r in ("0.163.0", "0.169.0") for p in (DATA / r / "transcripts").glob("*.jsonl")
)


@pytest.mark.parametrize("transcript", RECORDINGS)
def test_each_profile_writes_the_fields_its_release_writes(transcript: str, tmp_path: Path) -> None:
    """Per notification (and item type) and answer both sides send: the same key paths as the recording
    (0.163.0 writes no item times, no moderation, no contentTokenCount and no attachedToThreadId)."""
    release, _, name = transcript.partition("/transcripts/")
    lines = [orjson.loads(line) for line in (DATA / transcript).read_bytes().splitlines()]
    real = field_paths([(e["dir"], e["msg"]) for e in lines if "msg" in e])
    record = play(load_builtin(name.removesuffix(".jsonl")), "fake", work_dir=tmp_path, release=release)
    fake = field_paths([(e.dir, e.frame) for e in record.wire])
    for key in sorted(set(real) & set(fake)):
        assert fake[key] == real[key], (key, sorted(fake[key] ^ real[key]))


@pytest.mark.parametrize("release", RELEASES)
def test_the_unknown_variant_answer_lists_the_releases_methods(release: str) -> None:
    """The recorded answer of the real release to an unknown method, word for word (its method list, in order)."""
    from fake_server.methods import unknown_variant_message

    recording = DATA / release / "probes" / "misc_requests.jsonl"
    lines = [orjson.loads(line) for line in recording.read_bytes().splitlines()]
    answers = [
        e["msg"]["error"]["message"]
        for e in lines
        if isinstance(e.get("msg"), dict) and "unknown variant" in str(e["msg"].get("error", {}).get("message", ""))
    ]
    assert answers, "the recording has no unknown-variant answer"
    method = answers[0].split("`")[1]
    assert unknown_variant_message(method, profiles.get(release).methods) == answers[0]


def test_codex_harness_refuses_a_scenario_file_with_an_unknown_release(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(dumps(dataclasses.replace(load_builtin("plain"), release="0.150.0")))
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--scenario", str(path), "--target", "fake"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 2, out  # an invalid scenario, the file named (a usage error before)
    assert f"{path}: release:" in out.stderr and "(0.163.0, 0.169.0, 0.171.0)" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("release", RELEASES)
def test_every_builtin_scenario_holds_its_contracts_on_every_profile(release: str, tmp_path: Path) -> None:
    """In process, every built-in scenario the fake plays: frames valid against the release's own pin, the
    trace verdict its [expect] (with the release's overrides) declares, every other contract."""
    from fake_server.catalogue import builtin_names

    failed = []
    for name in builtin_names():
        scenario = load_builtin(name)
        if not scenario.supports("fake")[0]:
            continue
        run = run_one(scenario, "fake", work_root=tmp_path, release=release)
        failed += [(name, c.contract, c.name, c.detail[:200]) for c in run.checks if c.status == "fail"]
    assert not failed


@pytest.mark.parametrize("transcript", RECORDINGS)
def test_each_profile_is_structurally_its_recorded_release(transcript: str, tmp_path: Path) -> None:
    """Without the binaries: the fake's profile against the recorded server side, as ``diff`` compares them."""
    from contracts.fidelity import diff_server_sides, render

    release, _, name = transcript.partition("/transcripts/")
    lines = [orjson.loads(line) for line in (DATA / transcript).read_bytes().splitlines()]
    real = [e["msg"] for e in lines if e.get("dir") == "s2c" and "msg" in e]
    record = play(load_builtin(name.removesuffix(".jsonl")), "fake", work_dir=tmp_path, release=release)
    fake = [e.frame for e in record.wire if e.dir == "s2c"]
    differences = diff_server_sides(fake, real, collapse_deltas=True)
    assert not differences, render(differences)


# --- a known server bug follows the release's learned switch, never its version string ---------------------

PER_SWITCH = """
name = "per_switch"
description = "per switch"
[[turns]]
input = "hi"
[expect]
server_trace = "closed"
[expect.switch.abort_leaves_tools_open]
server_trace = "violation"
[expect.switch."input_while_streaming=waits"]
server_exit = 0
"""


def test_expect_switch_blocks_follow_the_switches_not_the_version() -> None:
    s = loads(PER_SWITCH)
    on = {"abort_leaves_tools_open": True, "input_while_streaming": "abandons"}
    for version in ("0.169.0", "0.170.0", "0.169.1", None):
        assert s.expect.for_release(version, on).server_trace == "violation"
        assert s.expect.for_release(version, {"abort_leaves_tools_open": False}).server_trace == "closed"
        assert s.expect.for_release(version).server_trace == "closed"  # no profile: no switch is on
    assert s.expect.for_release("0.150.0", {"input_while_streaming": "waits"}).server_exit == 0
    assert s.expect.for_release("0.150.0", on).server_exit is None
    assert loads(dumps(s)).expect == s.expect
    with pytest.raises(ScenarioError) as info:
        loads(PER_SWITCH.replace('"input_while_streaming=waits"', '"Bad Switch"'))
    assert info.value.key == "expect.switch.Bad Switch"


def test_no_builtin_scenario_names_a_release_for_a_known_bug() -> None:
    for name in builtin_names():
        assert not load_builtin(name).expect.releases, name


@pytest.mark.parametrize("switch", [True, False])
def test_an_unnamed_release_gets_the_verdict_of_its_switch(switch: bool, tmp_path: Path) -> None:
    """0.170.0 played with 0.169.0's switches gets 0.169.0's verdict: the same behaviour, the same verdict."""
    scenario = load_builtin("approval_cancel")
    profile = dataclasses.replace(profiles.get("0.169.0"), release="0.170.0", abort_leaves_tools_open=switch)
    record = play(scenario, "fake", work_dir=tmp_path, release=profile)
    assert record.expect.server_trace == ("violation" if switch else "closed")
    assert [f"{c.contract}: {c.name}" for c in run_all(record) if c.status == "fail"] == []


def test_the_switches_of_a_release_come_from_its_folder() -> None:
    assert profiles.switches_of("0.169.0")["abort_leaves_tools_open"] is True
    assert profiles.switches_of("0.171.0")["abort_leaves_tools_open"] is False
    assert profiles.switches_of("0.169.1") == {} and profiles.switches_of(None) == {}


CLI = (sys.executable, "-m", "harness.cli")


def test_run_and_record_take_a_store(tmp_path: Path) -> None:
    """``run --store`` finds a learned release the fake plays; it gets the verdict of 0.169.0 (same switches)."""
    store = store_with_unnamed_release(tmp_path / "store")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEX_", "FAKE_CODEX_"))}
    for version in ("0.170.0", "0.169.0"):
        done = subprocess.run(
            [*CLI, "run", "--target", "fake", "--scenario", "approval_cancel", "--store", str(store)],
            env={**env, profiles.RELEASE_ENV: version},
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
        assert done.returncode == 0 and "RESULT: PASS" in done.stdout, (version, done.stdout[-2000:], done.stderr)
    for command in ("run", "record"):
        missing = subprocess.run(
            [*CLI, command, "--scenario", "approval_cancel", "--out", "x.jsonl", "--store", str(tmp_path / "no")],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
        assert missing.returncode == 3 and "not a directory" in missing.stderr, (command, missing.stderr)


@pytest.mark.parametrize("value", ["waits", "abandons"])
def test_expected_usage_follows_the_learned_switch(value: str, tmp_path: Path) -> None:
    """A release that lets the stream finish before a steer bills both replies: its truth says so, by the switch."""
    profile = dataclasses.replace(profiles.get("0.163.0"), release="0.161.0", input_while_streaming=value)
    record = play(load_builtin("steer"), "fake", work_dir=tmp_path, release=profile)
    usage = record.expect.turns[0].usage
    assert usage is not None and (usage.input, usage.cache_read, usage.output) == (
        (110, 140, 30) if value == "waits" else (50, 100, 10)
    )
    assert [f"{c.contract}: {c.name}: {c.detail}" for c in run_all(record) if c.status == "fail"] == []


def test_switch_turns_are_checked_and_round_trip() -> None:
    text = PER_SWITCH + '[[expect.switch."input_while_streaming=waits".turns]]\nstatus = "completed"\n'
    s = loads(text)
    assert s.expect.for_release(None, {"input_while_streaming": "waits"}).turns[0].status == "completed"
    assert loads(dumps(s)).expect == s.expect
    with pytest.raises(ScenarioError) as info:
        loads(text + '[[expect.switch."input_while_streaming=waits".turns]]\nstatus = "completed"\n')
    assert info.value.key == "expect.switch.input_while_streaming=waits.turns"


@pytest.mark.parametrize("target", ["fake", "fake-process"])
def test_run_with_an_unknown_fake_release_is_a_usage_error_said_once(
    target: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: every scenario failed `runner / play` with the fake's traceback in its detail, exit 1."""
    from harness.cli import main

    monkeypatch.setenv(profiles.RELEASE_ENV, "9.9.9")
    assert main(["run", "--target", target, "--scenario", "plain"]) == 3
    err = capsys.readouterr().err
    assert "$FAKE_CODEX_RELEASE: no release profile '9.9.9'" in err and "Traceback" not in err
