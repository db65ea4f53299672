"""``release learn`` without a binary: what it derives from recordings, and the engine behaviours it can set.

The derivations read the project's real recordings (tests/data/real/<release>/): learned from a release's own
bundles and answers, they give what the shipped folder of that release says. The two engine behaviours a
learned release needs that the shipped ones did not: input while the model streams that waits for the response
to finish (``input_while_streaming = "waits"``), and no notification the release's pin lacks.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import orjson
import pytest
from support import paths

from contracts import releases
from contracts.fidelity import server_frames
from fake_server import profiles
from fake_server.profiles import SWITCHES
from harness import scenario_lookup
from harness.learn import derive
from harness.learn.sessions import EXTRA, reference_entries
from harness.runner import play

REAL = paths.DATA / "real"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def _shapes(frames: list[Any]) -> list[str]:
    out = []
    for frame in frames:
        if not isinstance(frame, dict) or "method" not in frame:
            continue
        item = (frame.get("params") or {}).get("item") or {}
        out.append(f"{frame['method']}/{item['type']}" if "type" in item else frame["method"])
    return [m for m in out if m not in ("account/rateLimits/updated", "warning", "remoteControl/status/changed")]


def _paths(value: Any, at: str = "") -> set[str]:
    if isinstance(value, dict):
        return {p for k, v in value.items() for p in _paths(v, f"{at}.{k}")} | {at}
    if isinstance(value, list):
        return {p for v in value for p in _paths(v, f"{at}[]")} | {at}
    return {at}


# --- derive ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("release", ["0.163.0", "0.169.0", "0.171.0"])
def test_the_trace_format_learned_from_its_bundles_is_the_shipped_one(release: str) -> None:
    bundles = sorted(p for p in (REAL / release / "trace-bundles").iterdir() if p.is_dir())
    learned = derive.trace_format(bundles)
    shipped = releases.get(release).description["trace"]
    assert learned is not None
    assert {k: learned[k] for k in ("schema", "payload_files", "closing_event")} == {
        k: shipped[k] for k in ("schema", "payload_files", "closing_event")
    }
    assert sorted(map(tuple, learned["not_written"])) == sorted(map(tuple, shipped.get("not_written", [])))


def test_no_bundle_no_trace_format(tmp_path: Path) -> None:
    assert derive.trace_format([tmp_path / "missing", tmp_path]) is None


@pytest.mark.parametrize("release", ["0.163.0", "0.171.0"])
def test_the_methods_beyond_the_schema_learned_from_the_unknown_variant_answer(release: str) -> None:
    frames = server_frames(_lines(REAL / release / "probes" / "misc_requests.jsonl"))
    listed = derive.deserializer_list(frames)
    assert listed is not None
    pinned = [m for m in releases.get(release).methods.client if m in set(listed)]
    shipped = releases.get(release).description["methods"].get("beyond_schema", {})
    beyond = derive.beyond_schema(listed, [m for m in pinned if m not in shipped.get("names", [])])
    assert beyond == shipped


def test_beyond_schema_of_a_list_the_pin_covers_is_empty() -> None:
    assert derive.beyond_schema(["a", "b"], ["a", "b"]) == {}
    assert derive.beyond_schema(["x", "a"], ["a"]) == {"names": ["x"]}
    assert derive.deserializer_list([{"id": 1, "error": {"message": "nothing to see"}}]) is None


def test_the_answers_learned_from_probes_are_the_shipped_ones() -> None:
    """0.171.0's answers.json was recorded from its probes: learned again from them, every answer they ask."""
    probes = [_lines(p) for p in sorted((REAL / "0.171.0" / "probes").glob("*.jsonl"))]
    shipped = releases.get("0.171.0").data("answers.json")
    learned = derive.answers(probes, list(shipped))
    assert learned, "no answer learned"
    for key, value in learned.items():  # the same fields (a config's hash and origins follow its file)
        assert _paths(value) == _paths(shipped[key]), key


def test_answers_take_the_runs_paths_as_variables() -> None:
    lines = [
        {"dir": "c2s", "msg": {"id": 1, "method": "config/read", "params": {"includeLayers": True}}},
        {"dir": "s2c", "msg": {"id": 1, "result": {"p": "/RUN/workdir/x", "h": "/RUN/codex_home", "u": "http://127.0.0.1:4242/v1"}}},
        {"dir": "c2s", "msg": {"id": 2, "method": "skills/list", "params": {}}},
        {"dir": "s2c", "msg": {"id": 2, "error": {"code": -32600, "message": "no"}}},
    ]
    learned = derive.answers([lines], ["config/read+layers", "config/read", "skills/list"])
    assert learned == {"config/read+layers": {"p": "${cwd}/x", "h": "${codex_home}", "u": "${base_url}"}}


ITEM = {"id": "i", "type": "agentMessage"}


def test_fields_the_fake_writes_and_the_release_never_does() -> None:
    wire_real = [
        ("c2s", {"id": 1, "method": "thread/start"}),
        ("s2c", {"id": 1, "result": {"thread": {"id": "t", "cliVersion": "x"}}}),
        ("s2c", {"method": "item/completed", "params": {"item": {"id": "i", "type": "agentMessage"}}}),
    ]
    wire_fake = [
        ("c2s", {"id": 1, "method": "thread/start"}),
        ("s2c", {"id": 1, "result": {"thread": {"id": "t", "cliVersion": "x", "attachedToThreadId": None}}}),
        ("s2c", {"method": "item/completed", "params": {"item": {**ITEM, "startedAtMs": 1}, "contentTokenCount": 0}}),
        ("s2c", {"method": "thread/readState/changed", "params": {"threadId": "t"}}),
    ]
    real = derive.field_sets(derive.server_frames(wire_real))
    fake = derive.field_sets(derive.server_frames(wire_fake))
    assert derive.not_written(fake, real) == [
        ["item", "startedAtMs"],
        ["item/completed", "contentTokenCount"],
        ["thread", "attachedToThreadId"],
    ]
    assert derive.only_real(fake, real) == []


def test_a_map_keyed_by_ids_has_no_fields() -> None:
    """``thread/list``'s ``readStates`` is keyed by thread id: the ids are entries, never fields not written."""
    ids = ("01a22b4c-2808-7090-89a8-49f11d63ce11", "01a23669-2dd2-7603-a2a8-f70457465e9a")
    fake = derive.field_sets([("thread/list", {"id": 1, "result": {"readStates": {ids[0]: {"unread": True}}}})])
    real = derive.field_sets([("thread/list", {"id": 1, "result": {"readStates": {ids[1]: {"unread": 1, "x": 2}}}})])
    assert derive.not_written(fake, real) == []
    assert derive.only_real(fake, real) == [["readStates[]", "x"]]


def test_the_reference_listing_is_read_and_a_bad_line_refused(tmp_path: Path) -> None:
    entries = reference_entries()
    assert ("transcripts", "plain", "plain_two_turns") in entries
    assert all(extra in entries for extra in EXTRA)
    bad = tmp_path / "ref.txt"
    bad.write_text("transcripts only_two\n")
    with pytest.raises(Exception, match="is not 'set name scenario'"):
        reference_entries(bad)
    link = tmp_path / "link.txt"
    link.symlink_to(REAL / "reference.txt")
    with pytest.raises(Exception, match="--reference"):
        reference_entries(link)  # never read through a link
    with pytest.raises(Exception, match="--reference"):
        reference_entries(tmp_path / "missing.txt")


# --- what the engine can now play ---------------------------------------------------------------------------


def test_every_switch_has_its_neutral_among_its_values() -> None:
    for name, switch in SWITCHES.items():
        assert switch.neutral in switch.values, name


@pytest.mark.parametrize(("value", "finished_first"), [("abandons", False), ("waits", True)])
def test_input_while_streaming(value: str, finished_first: bool, tmp_path: Path) -> None:
    """``waits``: the streamed reply completes (its item, its usage) before the steer's user message;
    ``abandons`` (every shipped release): the steer's user message comes while the reply is still open."""
    profile = dataclasses.replace(profiles.get("0.163.0"), input_while_streaming=value)
    record = play(scenario_lookup.resolve("steer"), "fake", work_dir=tmp_path, release=profile)
    shapes = _shapes([e.frame for e in record.wire if e.dir == "s2c"])
    second_user = [i for i, s in enumerate(shapes) if s == "item/started/userMessage"][1]
    first_done = shapes.index("item/completed/agentMessage")
    assert (first_done < second_user) is finished_first, shapes
    usage_before = "thread/tokenUsage/updated" in shapes[:second_user]
    assert usage_before is finished_first


def test_no_notification_the_release_cannot_send(tmp_path: Path) -> None:
    """A release whose pin lacks ``thread/readState/changed`` never gets it from the engine; a scripted
    fault's notification is sent whatever the pin says."""
    scenario = scenario_lookup.resolve("experimental_optout")
    full = profiles.get("0.163.0")
    sent = [(e.frame or {}).get("method") for e in play(scenario, "fake", work_dir=tmp_path / "a", release=full).wire]
    assert "thread/readState/changed" in sent

    class Older(type(full.origin)):  # type: ignore[misc]
        notifications = full.origin.notifications - {"thread/readState/changed"}

    older = dataclasses.replace(full, origin=Older(full.release, full.origin.root, full.origin.description))
    sent = [(e.frame or {}).get("method") for e in play(scenario, "fake", work_dir=tmp_path / "b", release=older).wire]
    assert "thread/readState/changed" not in sent
    unknown = scenario_lookup.resolve("unknown_notification")
    sent = [e.frame for e in play(unknown, "fake", work_dir=tmp_path / "c", release=older).wire if e.dir == "s2c"]
    methods = {f.get("method") for f in sent if isinstance(f, dict)}
    assert methods - older.notifications - {None}, "the fault's notification was not sent"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--codex", "/nonexistent/codex"], "codex binary not found"),
        (["--codex", "/bin/true", "--store", str(releases.SHIPPED_ROOT)], "never written"),
    ],
)
def test_release_learn_usage_errors_exit_3(args: list[str], said: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    store = [] if "--store" in args else ["--store", str(tmp_path / "store")]
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli", "release", "learn", *args, *store],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 3, out
    assert said in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "store").exists()
