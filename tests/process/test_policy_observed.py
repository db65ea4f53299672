"""The fake follows the client's approval settings as the real binary does (issue: "observe, then play").

``tests/data/real/<release>/policy/observed.json`` is what the real binary did under each ``approvalPolicy`` ×
``sandbox`` × ``approvalsReviewer`` (given in ``thread/start``, as ``turn/start`` overrides, in ``config.toml``
and with ``-c``) with a command, an escalated command and a patch inside / outside the work directory
(``python -m harness.learn.policy_observe``). The release's ``policy.json`` is its table; fake-codex is observed
the same way and must play every case as the real binary did, on every run; under ``real_codex`` the live
binary is observed again and compared with the recording.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from support import paths

from contracts import releases
from contracts.expect import Expect, ExpectTurn
from contracts.played_path import played
from contracts.record import TurnResult, WireEntry
from contracts.scenario import CommandItem, FileChangeItem
from fake_server import policy as fake_policy
from harness.learn import policy, policy_observe

DATA = paths.DATA / "real"
#: Every release with a policy observation (each shipped folder has one).
RELEASES = sorted(p.parent.parent.name for p in DATA.glob("*/policy/observed.json"))
RELEASE = releases.default_version()
#: Cases the fake does not play as the real binary, each with its reason (none today).
NOT_PLAYED: dict[str, str] = {}


def _observed(release: str = RELEASE) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads((DATA / release / "policy" / "observed.json").read_bytes())
    return data


def client_view(turn: dict[str, Any]) -> dict[str, Any]:
    """What a client sees of one observed turn: the outcome, the requests, the reviews, the turn's status.

    Left out: whether the file was written (the fake writes none), the command's own exit (the fake plays the
    scripted one; the real command fails in a read-only sandbox), the model requests (the client sees none).
    """
    reviews = [(r["method"], r["status"], r["action"], tuple(r["fields"])) for r in turn.get("reviews", [])]
    return {
        "outcome": policy.outcome(turn),
        "requests": turn.get("requests"),
        "reviews": reviews,
        "notes": turn.get("review_notes"),
        "status": turn.get("status"),
    }


def differences(real: dict[str, Any], other: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for case, turns in real.items():
        if case in NOT_PLAYED or case not in other:
            continue
        mine = other[case]
        if "failed" in turns or "failed" in mine:
            # a server that refuses a setting at start: the same exit and the same words
            said = {k: turns.get(k) for k in ("failed", "exit", "said")}
            if said != {k: mine.get(k) for k in ("failed", "exit", "said")}:
                out.append(f"{case}: real {said}, other {mine}")
            continue
        if turns["thread/start"] != mine["thread/start"]:
            out.append(f"{case}: thread/start {mine['thread/start']}, real {turns['thread/start']}")
        for action in policy.ACTIONS:
            want, got = client_view(turns[action]), client_view(mine[action])
            if want != got:
                out.append(f"{case}: {action}: {got}, real {want}")
    return out


# --- the data -------------------------------------------------------------------------------------


def test_every_shipped_release_has_its_observation_and_table() -> None:
    shipped = [r.version for r in releases.known() if r.shipped]
    assert set(shipped) <= set(RELEASES)
    assert all(releases.get(v).has(fake_policy.POLICY_FILE) for v in shipped)


@pytest.mark.parametrize("release", RELEASES)
def test_the_observation_covers_the_matrix(release: str) -> None:
    observed = _observed(release)
    assert {c.name for c in policy_observe.cases()} <= set(observed)
    failed = {c: t for c, t in observed.items() if "failed" in t}
    # config.toml and -c refuse "untrusted" (thread/start takes it): the server exits before it answers
    assert set(failed) == {"config: untrusted / workspace-write / user", "flag: untrusted / workspace-write / user"}
    assert all(t["exit"] == 1 and "untrusted" in t["said"] for t in failed.values())


@pytest.mark.parametrize("release", RELEASES)
def test_the_release_table_is_the_observations(release: str) -> None:
    """policy.json in the release folder is what the observation says (harness.learn.policy writes it)."""
    table = releases.get(release).data(fake_policy.POLICY_FILE)
    learned = policy.table(_observed(release), release, "")
    keys = ("outcomes", "aliases", "refused_at_start")
    assert [table[k] for k in keys] == [learned[k] for k in keys]
    assert set(table["outcomes"]["never / workspace-write / user"].values()) == {"run", "reject"}


@pytest.mark.parametrize("release", RELEASES)
def test_where_a_setting_is_given_changes_nothing_on_the_real_binary(release: str) -> None:
    assert policy.disagreements(_observed(release)) == []


def test_the_real_binary_asks_none_under_never_and_reviews_under_auto_review() -> None:
    """The facts the fake must play, read from the recording (not typed)."""
    observed = _observed()
    never = observed["thread: never / read-only / user"]
    assert all(not never[a]["requests"] for a in policy.ACTIONS)
    assert policy.outcome(never["command_escalated"]) == "reject"
    workspace = observed["thread: on-request / workspace-write / user"]
    assert policy.outcome(workspace["patch_inside"]) == "run"
    assert workspace["patch_outside"]["requests"] == ["item/fileChange/requestApproval"]
    review = observed["thread: on-request / read-only / auto_review"]["command_escalated"]
    assert review["requests"] == [] and policy.outcome(review) == "review"


# --- the fake against the recording -----------------------------------------------------------------


@pytest.fixture(scope="module")
def fake_observed() -> dict[str, Any]:
    return policy_observe.observe_fake(jobs=2)


def test_the_fake_plays_every_observed_setting(fake_observed: dict[str, Any]) -> None:
    assert differences(_observed(), fake_observed) == []


@pytest.mark.parametrize("release", [r for r in RELEASES if r != RELEASE])
def test_each_release_profile_plays_its_own_observation(release: str) -> None:
    """The other profiles, with the settings in thread/start (in process: quick)."""
    fake = policy_observe.observe_fake(only="thread: ", jobs=2, release=release)
    real = {c: t for c, t in _observed(release).items() if c.startswith("thread: ")}
    assert len(fake) == len(real) and differences(real, fake) == []


def test_the_fake_reads_the_policy_it_plays_from_the_release_folder() -> None:
    table = {"outcomes": {"never / read-only / user": {"command_escalated": "ask"}}}
    settings = fake_policy.Settings("never", "read-only", "user")
    escalated = CommandItem(command="x", approval=True)
    assert fake_policy.outcome(table, settings, escalated, "/w") == "ask"
    assert fake_policy.outcome(None, settings, escalated, "/w") == "ask"  # no table: the scenario's flag
    assert fake_policy.outcome(None, settings, CommandItem(command="x"), "/w") == "run"


def test_settings_name_the_table_rows() -> None:
    granular = {"granular": {"sandbox_approval": False, "rules": True, "mcp_elicitations": True}}
    assert fake_policy.Settings(granular, "read-only", "guardian_subagent").key() == (
        "granular-no-sandbox-approval / read-only / auto_review"
    )
    settings = fake_policy.Settings()
    settings.override({"approvalPolicy": "never", "sandboxPolicy": {"type": "workspaceWrite"}})
    assert settings.key() == "never / workspace-write / user"
    assert fake_policy.action(FileChangeItem(path="a/b.txt", content=""), "/w") == "patch_inside"
    assert fake_policy.action(FileChangeItem(path="/w/../x.txt", content=""), "/w") == "patch_outside"
    assert fake_policy.action(FileChangeItem(path="/wx/y.txt", content=""), "/w") == "patch_outside"


# --- the truth follows the played path -----------------------------------------------------------------


def _wire(*frames: dict[str, Any]) -> list[WireEntry]:
    return [WireEntry(t=float(i), dir="s2c", frame=f) for i, f in enumerate(frames)]


def _completed(turn_id: str, status: str) -> dict[str, Any]:
    return {"method": "turn/completed", "params": {"threadId": "th", "turn": {"id": turn_id, "status": status}}}


CANCELLED = Expect(turns=(ExpectTurn(status="aborted", server_status="interrupted"),))


def test_a_turn_the_server_asked_nothing_in_is_judged_by_its_end() -> None:
    results = [TurnResult(index=0, status="completed", turn_id="t1")]
    expect, notes = played(CANCELLED, {"approval_turns": [0]}, _wire(_completed("t1", "completed")), results)
    assert expect.turns[0].status == "completed" and expect.turns[0].server_status == "completed"
    assert expect.turns[0].usage is None and len(notes) == 1


def test_a_turn_that_was_asked_keeps_its_truth() -> None:
    asked = {"id": 0, "method": "item/commandExecution/requestApproval", "params": {"turnId": "t1"}}
    results = [TurnResult(index=0, status="completed", turn_id="t1")]
    wire = _wire(asked, _completed("t1", "completed"))
    assert played(CANCELLED, {"approval_turns": [0]}, wire, results) == (CANCELLED, [])
    # a turn that scripts no approval, or one whose end is not on the wire, keeps its truth too
    assert played(CANCELLED, {"approval_turns": []}, _wire(_completed("t1", "completed")), results)[1] == []
    assert played(CANCELLED, {"approval_turns": [0]}, [], results)[1] == []


# --- the live binary -------------------------------------------------------------------------------------

LIVE_CASES = (
    "thread: never / workspace-write / user",
    "thread: on-request / read-only / auto_review",
    "turn: untrusted / read-only / user",
    "flag: never / workspace-write / user",
)


@pytest.mark.real_codex
def test_the_live_binary_still_does_what_was_recorded(codex_bin: Path, fake_observed: dict[str, Any]) -> None:
    live: dict[str, Any] = {}
    for case in LIVE_CASES:
        live |= policy_observe.observe_real(codex_bin, only=case)
    assert set(live) >= set(LIVE_CASES)
    recorded = {c: t for c, t in _observed().items() if c in live}
    assert differences(recorded, live) == []
    assert differences(live, fake_observed) == []


# --- the settings stay with the thread --------------------------------------------------------------------


def test_resume_and_the_home_store_keep_the_threads_settings() -> None:
    import trio

    from fake_server import home_store
    from fake_server.inprocess import serve_in_process

    granular = {"granular": {"sandbox_approval": True, "rules": True, "mcp_elicitations": False}}

    async def play() -> tuple[dict[str, Any], dict[str, Any]]:
        sc = policy_observe.scenario(Path("/RUN/outside"))
        async with serve_in_process(sc, cwd="/RUN/workdir") as fake:
            conn = policy_observe.Conn(fake)
            await conn.call("initialize", {"clientInfo": {"name": "t", "version": "0"}, "capabilities": {}})
            await conn.send({"method": "initialized"})
            params = {"approvalPolicy": granular, "approvalsReviewer": "auto_review", "sandbox": "workspace-write"}
            started, _ = await conn.call("thread/start", params)
            thread_id = started["result"]["thread"]["id"]
            text = [{"type": "text", "text": "hi"}]
            await conn.call("turn/start", {"threadId": thread_id, "input": text}, until="turn/completed")
            resumed, _ = await conn.call("thread/resume", {"threadId": thread_id})
            return started["result"], resumed["result"]

    started, resumed = trio.run(play)
    for answer in (started, resumed):
        assert answer["approvalsReviewer"] == "auto_review"
        assert answer["approvalPolicy"]["granular"]["sandbox_approval"] is True
    stored = {
        "thread_id": "t",
        "cwd": "/w",
        "created_ms": 0,
        "approval_policy": granular,
        "sandbox": "read-only",
        "reviewer": "auto_review",
        "model": "m",
        "preview": "",
        "turns": [],
        "history_len": 0,  # the head line of a thread file (the history is a line of its own)
        "first_turn": None,
    }
    thread, _ = home_store._thread_of(stored, "t")
    assert (thread.approval_policy, thread.reviewer) == (granular, "auto_review")
    with pytest.raises(ValueError):
        home_store._thread_of({**stored, "approval_policy": {"other": 1}}, "t")


def test_a_denying_reviewer_declines_the_call_and_the_scenario_file_names_it() -> None:
    """``[config] auto_review = "deny"``: the review ends ``denied`` and the command is declined, nothing asked."""
    from dataclasses import replace

    import trio

    from contracts.scenario_file import ScenarioError, loads
    from fake_server.inprocess import serve_in_process

    text = 'description = "d"\n[config]\nauto_review = "deny"\n[[turns]]\ninput = "x"\n'
    assert loads(text, name="t").config.auto_review == "deny"
    with pytest.raises(ScenarioError):
        loads(text.replace('"deny"', '"maybe"'), name="t")
    base = policy_observe.scenario(Path("/RUN/outside"))
    sc = replace(base, turns=base.turns[1:2], config=replace(base.config, auto_review="deny"))

    async def play() -> list[dict[str, Any]]:
        async with serve_in_process(sc, cwd="/RUN/workdir") as fake:
            conn = policy_observe.Conn(fake)
            await conn.call("initialize", {"clientInfo": {"name": "t", "version": "0"}, "capabilities": {}})
            await conn.send({"method": "initialized"})
            started, _ = await conn.call("thread/start", {"approvalsReviewer": "auto_review"})
            turn = {"threadId": started["result"]["thread"]["id"], "input": [{"type": "text", "text": "x"}]}
            _, seen = await conn.call("turn/start", turn, until="turn/completed")
            return seen

    seen = trio.run(play)
    assert not [m for m in seen if "id" in m]
    reviewed = [m["params"]["review"]["status"] for m in seen if m["method"] == "item/autoApprovalReview/completed"]
    assert reviewed == ["denied"]
    items = [m["params"]["item"] for m in seen if m["method"] == "item/completed"]
    assert [i["status"] for i in items if i["type"] == "commandExecution"] == ["declined"]


def test_an_outside_clients_home_holds_what_the_real_targets_would() -> None:
    """The fake reads the approval policy from the home the harness writes: the real target's (on-request forced
    when a step needs an approval), so a client that sets nothing meets the same policy on both."""
    from contracts.scenario import ModelResponse, Scenario, ServerConfig, TurnScript
    from harness.targets.real import home_config

    asks = TurnScript(responses=(ModelResponse(items=(CommandItem(command="x", approval=True),)),))
    never = Scenario(name="s", description="", turns=(asks,), config=ServerConfig(approval_policy="never"))
    assert home_config(never).approval_policy == "on-request"
    untrusted = Scenario(name="s", description="", turns=(asks,), config=ServerConfig(approval_policy="untrusted"))
    assert home_config(untrusted).approval_policy == "untrusted"  # the real target refuses it; the fake exits on it
