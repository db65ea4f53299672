"""Every client request of 0.171.0 beyond the turn core: the fake answers it as the real binary does.

The probes in tests/data/real/0.171.0/probes were recorded on the real binary (their README says
how); each test here replays them on the fake and requires, for every request of one method, an
answer with the same skeleton (contracts.skeleton: key sets, JSON types, nulls, empty arrays, error
code and message, ids and the run's paths normalised). Under ``real_codex`` the same probes are
replayed on the real binary live and compared with the fake's replay. Every stable method's fake
answer also validates against the pinned schema, and none is "not supported yet".
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import probe_replay
import pytest
from probe_replay import Probe, Replay
from support import paths as where

from contracts import schema_store
from contracts.protocol_index import Union, build_index
from contracts.scenario import Scenario
from contracts.skeleton import answer_skeleton, differences
from contracts.validator import Validator
from fake_server.catalogue import load_builtin
from fake_server.profiles import default as default_profile

# Probes whose notifications around each answer are compared too (not goal and thread_actions: there
# 0.171.0 starts turns of its own after thread/goal/set, compact/start, review/start and shellCommand,
# which the fake does not; see docs/real-binary.md).
NOTIFICATION_PROBES = (
    "account_login",
    "config_account",
    "experimental",
    "fs_search",
    "plugins_skills",
    "threads_after_turn",
    "threads_fresh",
)
# Notifications whose place the real server does not fix, or that belong to a turn's stream.
UNORDERED = frozenset(
    {
        "configWarning",
        "warning",
        "remoteControl/status/changed",
        "account/rateLimits/updated",
        "windowsSandbox/setupCompleted",  # background work: lands a few requests later
    }
)


def _scenario() -> Scenario:
    return load_builtin("plain")


@functools.cache
def _fake_replay(name: str, workdir: str) -> Replay:
    return probe_replay.play_fake(probe_replay.load(name), _scenario(), Path(workdir))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("probe") / "workdir"
    root.mkdir()
    return probe_replay.make_workdir(root)


def _methods() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name in probe_replay.names():
        for frame in probe_replay.load(name).requests():
            found.setdefault(frame["method"], [])
            if name not in found[frame["method"]]:
                found[frame["method"]].append(name)
    return found


METHODS = _methods()


def _compare(probe: Probe, replay: Replay, method: str | None = None) -> list[str]:
    paths = list(replay.paths.items())
    out: list[str] = []
    for request in probe.requests():
        if method is not None and request["method"] != method:
            continue
        recorded = probe.answer(request["id"])
        replayed = next((f for f in replay.frames if f.get("id") == request["id"] and "method" not in f), None)
        label = f"{probe.name} #{request['id']} {request['method']}"
        if recorded is None:
            out.append(f"{label}: the recording has no answer")
            continue
        if replayed is None:
            out.append(f"{label}: no answer")
            continue
        expected = answer_skeleton(recorded, [(RECORDED, RECORDED) for RECORDED in replay.paths.values()])
        got = answer_skeleton(replayed, paths)
        out += [f"{label}: {d}" for d in differences(expected, got)]
    return out


def _notes_after(frames: list[dict[str, Any]], request_id: Any, upto_ids: set[Any]) -> list[str]:
    """Notification methods written from the answer to ``request_id`` until the next answer."""
    out: list[str] = []
    seen = False
    for frame in frames:
        if "method" not in frame and "id" in frame:
            if seen and frame.get("id") in upto_ids:
                break
            if frame.get("id") == request_id:
                seen = True
            continue
        if seen and "id" not in frame and frame.get("method") not in UNORDERED:
            out.append(frame["method"])
    return out


@pytest.mark.parametrize("method", sorted(METHODS))
def test_fake_answers_like_the_recorded_real_binary(method: str, workdir: Path) -> None:
    problems: list[str] = []
    for name in METHODS[method]:
        probe = probe_replay.load(name)
        problems += _compare(probe, _fake_replay(name, str(workdir)), method)
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("name", NOTIFICATION_PROBES)
def test_fake_notifies_like_the_recorded_real_binary(name: str, workdir: Path) -> None:
    probe = probe_replay.load(name)
    replay = _fake_replay(name, str(workdir))
    ids = {r["id"] for r in probe.requests()}
    problems = []
    for request in probe.requests():
        if request["method"] in ("turn/start", "initialize"):
            continue
        real = _notes_after(probe.received, request["id"], ids - {request["id"]})
        fake = _notes_after(replay.frames, request["id"], ids - {request["id"]})
        if real != fake:
            problems.append(f"#{request['id']} {request['method']}: real {real}, fake {fake}")
    assert problems == [], "\n".join(problems)


def test_every_probe_answer_differs_when_a_key_goes_missing() -> None:
    """The skeleton comparison is not blind: `{}` where the real answer has keys fails."""
    probe = probe_replay.load("config_account")
    recorded = next(f for f in probe.received if f.get("id") == 3 and "result" in f)
    assert differences(answer_skeleton(recorded), answer_skeleton({"id": 3, "result": {}}))
    dropped = {"id": 3, "result": {**recorded["result"], "data": [{**recorded["result"]["data"][0], "hidden": None}]}}
    assert differences(answer_skeleton(recorded), answer_skeleton(dropped))


# --- every stable method: a schema-valid answer or the real error, never "not supported yet" -----


def _stable_methods() -> list[str]:
    bundle = schema_store.load_bundle("0.171.0", False)
    return sorted(build_index(bundle).methods[Union.CLIENT_REQUEST])


def _minimal_params(method: str, thread_id: str, cwd: str) -> dict[str, Any]:
    from fake_server.surface.schema_answer import smallest_instance

    bundle = schema_store.load_bundle("0.171.0", True)
    entry = build_index(bundle).methods[Union.CLIENT_REQUEST][method]
    definitions = bundle["ClientRequest.json"]["definitions"]
    if not entry.params_refs:
        return {}
    params = smallest_instance(definitions[entry.params_refs[0]], definitions) or {}
    for key in ("threadId",):
        if key in params:
            params[key] = thread_id
    for key in ("path", "sourcePath", "destinationPath", "pluginPath", "savePath"):
        if key in params:
            params[key] = f"{cwd}/hello.txt"
    if "roots" in params:
        params["roots"] = [cwd]
    return params


def _session(workdir: Path, experimental: bool) -> tuple[Any, str]:
    from support.virtual import VirtualServer

    from fake_server.engine import Engine

    server = VirtualServer(_scenario())
    server.engine = Engine(_scenario(), cwd=str(workdir), codex_home=str(workdir.parent / "codex_home"))
    caps = {"experimentalApi": experimental}
    server.send(
        {
            "id": "i",
            "method": "initialize",
            "params": {"clientInfo": {"name": "t", "version": "1"}, "capabilities": caps},
        }
    )
    server.send({"id": "s", "method": "thread/start", "params": {}})
    server.run_until(lambda f: f.get("id") == "s")
    thread_id = next(f for f in server.frames if f.get("id") == "s")["result"]["thread"]["id"]
    text = [{"type": "text", "text": "hi"}]
    server.send({"id": "t", "method": "turn/start", "params": {"threadId": thread_id, "input": text}})
    assert server.run_until(lambda f: f.get("method") == "turn/completed")
    return server, thread_id


SKIP_IN_SWEEP = {"initialize", "thread/start", "turn/start", "turn/steer", "turn/interrupt", "thread/resume"}


@pytest.mark.parametrize("experimental", [False, True], ids=["stable", "experimental"])
def test_every_method_gets_a_schema_valid_answer_or_a_real_error(experimental: bool, workdir: Path) -> None:
    bundle_methods = _stable_methods()
    if experimental:
        bundle_methods = sorted(default_profile().methods.experimental)
    validator = Validator.for_release("0.171.0", experimental=True)
    server, thread_id = _session(workdir, experimental)
    problems = []
    for n, method in enumerate(m for m in bundle_methods if m not in SKIP_IN_SWEEP):
        rid = f"m{n}"
        server.send({"id": rid, "method": method, "params": _minimal_params(method, thread_id, str(workdir))})
        answer = server.run_until(lambda f, rid=rid: f.get("id") == rid and "method" not in f, within_ms=60_000)
        if answer is None:
            problems.append(f"{method}: no answer")
            continue
        error = answer.get("error")
        if error is not None:
            if "is not supported yet" in str(error.get("message")):
                problems.append(f"{method}: {error}")
            continue
        violations = validator.validate(answer, "s2c", method)
        if violations:
            problems.append(f"{method}: {violations[0]}")
    assert problems == [], "\n".join(problems)


def test_experimental_methods_stay_behind_the_gate(workdir: Path) -> None:
    server, _ = _session(workdir, experimental=False)
    server.send({"id": "x", "method": "thread/search", "params": {"searchTerm": "a"}})
    answer = server.run_until(lambda f: f.get("id") == "x")
    assert answer is not None and answer["error"]["message"] == "thread/search requires experimentalApi capability"


@pytest.mark.parametrize("name", [n for n in probe_replay.names() if n != "goal"])
async def test_fake_codex_answers_the_probe_like_the_recording(name: str, tmp_path: Path) -> None:
    """The same answers from a fake-codex process (the goal probe waits seconds for 0.171.0's own turns)."""
    probe = probe_replay.load(name)
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    plain = Path(_scenario().source or "")
    replay = await probe_replay.play_fake_codex(probe, plain, workdir)
    assert _compare(probe, replay) == []


# --- the real binary, live ---------------------------------------------------------------------


@pytest.mark.real_codex
@pytest.mark.parametrize("name", probe_replay.names())
async def test_fake_and_real_answer_the_probe_alike(name: str, codex_bin: Path, workdir: Path) -> None:
    probe = probe_replay.load(name)
    real = await probe_replay.play_real(probe, _scenario(), codex_bin)
    fake = _fake_replay(name, str(workdir))
    live = Probe(name, probe.steps, [_unmap(f, real) for f in real.frames])
    problems = _compare(live, fake)
    assert problems == [], "\n".join(problems)


def _unmap(frame: dict[str, Any], replay: Replay) -> dict[str, Any]:
    from probe_replay import fill

    return fill(frame, {}, replay.paths)


def test_the_docs_table_of_methods_is_current() -> None:
    """docs/real-binary.md holds exactly the generated table (probe_replay.methods_table)."""
    docs = (where.REPO / "docs" / "real-binary.md").read_text()
    start = "<!-- generated: methods (tests/probe_replay.py methods_table) -->\n"
    table = docs[docs.index(start) + len(start) : docs.index("<!-- end: methods -->")]
    assert table == probe_replay.methods_table(_stable_methods())
    assert "not supported yet" not in table.replace("list_turns is not supported yet", "").replace(
        "thread/items/list is not supported yet", ""
    )


@pytest.mark.parametrize("release", ["0.163.0", "0.169.0", "0.171.0"])
@pytest.mark.parametrize(
    ("method", "params", "answer"),
    [
        # observed on 0.163.0 and 0.171.0: a variant without params (schema `null`, serde's unit) takes `{}`
        ("account/logout", {}, {"result": {}}),
        ("windowsSandbox/readiness", {}, {"result": {"status": "notConfigured"}}),
        # ...and refuses any other value as not a unit, in serde's words
        ("configRequirements/read", {"a": 1}, {"error": "Invalid request: invalid type: map, expected unit"}),
        ("configRequirements/read", 5, {"error": "Invalid request: invalid type: integer `5`, expected unit"}),
        ("configRequirements/read", [], {"error": "Invalid request: invalid type: sequence, expected unit"}),
        ("configRequirements/read", "x", {"error": 'Invalid request: invalid type: string "x", expected unit'}),
    ],
)
def test_a_method_without_params_takes_an_empty_map_as_the_real_server_does(
    release: str, method: str, params: Any, answer: dict[str, Any], workdir: Path
) -> None:
    from support.virtual import VirtualServer

    from fake_server import profiles
    from fake_server.engine import Engine

    server = VirtualServer(_scenario())
    server.engine = Engine(_scenario(), cwd=str(workdir), codex_home=str(workdir), profile=profiles.get(release))
    server.send({"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}})
    server.send({"id": 1, "method": method, "params": params})
    server.settle()
    got = next(f for f in server.frames if f.get("id") == 1)
    if "error" in answer:
        assert got.get("error", {}).get("message") == answer["error"], got
    else:
        assert got.get("result") == answer["result"], got
