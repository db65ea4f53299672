"""Probe steps that name the session's working directory (``${cwd}``), earlier answers
(``${answer.<step>.<path>}``) and wait for a notification (``until``); ``[[client.files]]`` in the work dir."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import paths

from contracts import probe_refs
from contracts.record import SessionRecord
from contracts.scenario_file import ScenarioError, dumps, loads
from harness.cli import main
from harness.runner import play

HEAD = 'description = "x"\n'

BAD = {
    "unknown placeholder": ('[[client.probe]]\nsend = "a"\nparams = { p = "${thred}" }', "unknown placeholder"),
    "unclosed": ('[[client.probe]]\nsend = "a"\nparams = { p = "${cwd" }', "unclosed"),
    "in a raw line": ('[[client.probe]]\nraw = "${nope}"', "unknown placeholder"),
    "a later step": (
        '[[client.probe]]\nsend = "a"\nparams = { p = "${answer.1.x}" }\n[[client.probe]]\nsend = "b"',
        "a step taken before this one",
    ),
    "itself": ('[[client.probe]]\nid = "me"\nsend = "a"\nparams = { p = "${answer.me.x}" }', "taken before"),
    "an unknown id": ('[[client.probe]]\nsend = "a"\nparams = { p = "${answer.fork.thread.id}" }', "taken before"),
    "a later point": (
        '[[client.probe]]\nat = "end"\nid = "e"\nsend = "a"\n'
        '[[client.probe]]\nat = "thread"\nsend = "b"\nparams = { p = "${answer.e.x}" }',
        "taken before",
    ),
    "no path": ('[[client.probe]]\nsend = "a"\n[[client.probe]]\nsend = "b"\nparams = { p = "${answer.0}" }', "unkn"),
    "a bad path part": (
        '[[client.probe]]\nsend = "a"\n[[client.probe]]\nsend = "b"\nparams = { p = "${answer.0.a b}" }',
        "not a key or an index",
    ),
    "too deep": (
        '[[client.probe]]\nsend = "a"\n[[client.probe]]\nsend = "b"\nparams = { p = "${answer.0' + ".a" * 17 + '}" }',
        "at most 16 path parts",
    ),
    "duplicate ids": ('[[client.probe]]\nid = "a"\nsend = "x"\n[[client.probe]]\nid = "a"\nsend = "y"', "different id"),
    "bad id": ('[[client.probe]]\nid = "1st"\nsend = "x"', "a step name"),
    "empty until": ('[[client.probe]]\nsend = "x"\nuntil = ""', "notification"),
    "absolute file": ('[[client.files]]\npath = "/etc/passwd"\ntext = "x"', "relative path"),
    "file leaves the workdir": ('[[client.files]]\npath = "sub/../../x"\ntext = "x"', "cannot leave"),
    "dot file part": ('[[client.files]]\npath = "./x"\ntext = "x"', "cannot leave"),
    "backslash": ('[[client.files]]\npath = "a\\\\b"\ntext = "x"', "backslashes"),
    "big file": ('[[client.files]]\npath = "a"\ntext = "' + "x" * (64 * 1024 + 1) + '"', "at most 65536 bytes"),
    "too many files": ("".join(f'[[client.files]]\npath = "f{i}"\ntext = ""\n' for i in range(33)), "at most 32"),
    "clashing files": ('[[client.files]]\npath = "a"\ntext = ""\n[[client.files]]\npath = "a/b"\ntext = ""', "clash"),
    "file without text": ('[[client.files]]\npath = "a"', "required"),
    "no_wait on a raw line": ('[[client.probe]]\nraw = "x"\nno_wait = true', "no_wait only with send"),
    "an answer never waited for": (
        '[[client.probe]]\nid = "a"\nsend = "x"\nno_wait = true\n'
        '[[client.probe]]\nsend = "y"\nparams = { p = "${answer.a.x}" }',
        "a step that waits for its answer",
    ),
    "play_turns off without probes": ('[client]\nplay_turns = false\n[[turns]]\ninput = "hi"', "play_turns"),
    "slow approvals": ('[client]\napproval_delay_ms = 60001\n[[client.probe]]\nsend = "x"', "between 0 and 60000"),
    "unknown file key": ('[[client.files]]\npath = "a"\ntext = ""\nmode = 7', "a known key"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_references_and_files_are_refused_at_load(case: str) -> None:
    body, expected = BAD[case]
    if (
        "[[client.probe]]" not in body and "play_turns" not in body
    ):  # files alone: a step so the scenario has something to do
        body += '\n[[client.probe]]\nsend = "x"'
    with pytest.raises(ScenarioError, match=expected):
        loads(HEAD + body + "\n", "p.toml")


def test_a_bad_reference_is_exit_2_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(HEAD + BAD["an unknown id"][0] + "\n")
    assert main(["run", "--target", "fake", "--scenario", str(bad)]) == 2
    assert "taken before" in capsys.readouterr().err
    assert main(["record", "--codex", "/bin/true", "--scenario", str(bad), "--out", str(tmp_path / "x.jsonl")]) == 2


GOOD = (
    HEAD
    + """
[[client.files]]
path = "hello.txt"
text = "hello world\\n"

[[client.files]]
path = "sub/notes.md"
text = "# notes\\n"

[[client.probe]]
send = "fs/readFile"
params = { path = "${cwd}/hello.txt" }

[[client.probe]]
id = "fork"
send = "thread/fork"
params = { threadId = "${thread}" }

[[client.probe]]
send = "thread/read"
params = { threadId = "${answer.fork.thread.id}" }

[[client.probe]]
send = "fs/readDirectory"
params = { path = "${cwd}/sub" }

[[client.probe]]
raw = '{"id": "r", "method": "thread/read", "params": {"threadId": "${answer.1.thread.id}"}}'
"""
)


def _sent(record: SessionRecord) -> list[dict[str, Any]]:
    return [
        e.frame
        for e in record.wire
        if e.dir == "c2s" and isinstance(e.frame, dict) and "method" in e.frame and "id" in e.frame
    ]


def _answer(record: SessionRecord, request_id: Any) -> dict[str, Any]:
    return next(
        e.frame
        for e in record.wire
        if e.dir == "s2c" and isinstance(e.frame, dict) and "method" not in e.frame and e.frame.get("id") == request_id
    )


def test_the_references_round_trip_through_a_file() -> None:
    scenario = loads(GOOD, "good.toml")
    again = loads(dumps(scenario), "again.toml")
    assert again.client == scenario.client and len(scenario.client.files) == 2


@pytest.mark.parametrize("target", ["fake", "fake-process"])
def test_cwd_files_and_answers_are_resolved_when_sent(tmp_path: Path, target: str) -> None:
    record = play(loads(GOOD, "good.toml"), target, work_dir=tmp_path)
    assert record.client_errors == []
    sent = {f["id"]: f for f in _sent(record)}
    read_file = next(f for f in sent.values() if f["method"] == "fs/readFile")
    cwd = read_file["params"]["path"].removesuffix("/hello.txt")
    assert "${" not in read_file["params"]["path"] and Path(cwd).is_dir()
    assert "result" in _answer(record, read_file["id"])  # the file was there on the target
    fork = next(f for f in sent.values() if f["method"] == "thread/fork")
    fork_id = _answer(record, fork["id"])["result"]["thread"]["id"]
    read = next(f for f in sent.values() if f["method"] == "thread/read")
    assert read["params"]["threadId"] == fork_id
    assert _answer(record, "r")["result"]["thread"]["id"] == fork_id  # the raw line's placeholder too


def test_an_unresolved_reference_fails_the_session_with_a_clear_message(tmp_path: Path) -> None:
    text = (
        HEAD
        + '[[client.probe]]\nid = "bad"\nsend = "thread/read"\nparams = { threadId = "nope" }\n'
        + '[[client.probe]]\nsend = "thread/read"\nparams = { threadId = "${answer.bad.thread.id}" }\n'
        + '[[client.probe]]\nid = "ok"\nsend = "thread/loaded/list"\nparams = {}\n'
        + '[[client.probe]]\nsend = "thread/read"\nparams = { threadId = "${answer.ok.nothing.here}" }\n'
    )
    record = play(loads(text, "p.toml"), "fake", work_dir=tmp_path)
    assert record.client_errors == [
        "scenario: probe step 1 (send thread/read): step bad was answered with an error or not at all"
    ]
    assert [f["method"] for f in _sent(record)][-1] == "thread/read"  # the first one only: nothing after it
    assert sum(1 for f in _sent(record) if f["method"] == "thread/read") == 1


def test_two_identical_steps_keep_two_answers(tmp_path: Path) -> None:
    """Steps are told apart by position: the second of two equal thread/start steps has its own answer."""
    start = '[[client.probe]]\nsend = "thread/start"\nparams = {}\n'
    read = '[[client.probe]]\nsend = "thread/read"\nparams = { threadId = "${answer.1.thread.id}" }\n'
    text = HEAD + start + start + read
    record = play(loads(text, "p.toml"), "fake", work_dir=tmp_path)
    assert record.client_errors == []
    starts = {f["id"] for f in _sent(record) if f["method"] == "thread/start"}
    answers = [e.frame for e in record.wire if e.dir == "s2c" and isinstance(e.frame, dict) and "result" in e.frame]
    started = [f["result"]["thread"]["id"] for f in answers if f.get("id") in starts]
    reads = [f for f in _sent(record) if f["method"] == "thread/read"]
    assert len(reads) == 1 and reads[0]["params"]["threadId"] == started[-1] != started[-2]


def test_a_missing_path_names_where_it_stopped() -> None:
    ref = probe_refs.parse("answer.s.thread.turns.3.id")
    assert isinstance(ref, probe_refs.AnswerRef) and ref.path == ("thread", "turns", 3, "id")
    with pytest.raises(probe_refs.RefError, match=r"has no thread\.turns\.3"):
        probe_refs.lookup({"thread": {"turns": []}}, ref)


def test_until_waits_for_the_notification(tmp_path: Path) -> None:
    text = (
        HEAD
        + '[[client.probe]]\nid = "t"\nsend = "turn/start"\n'
        + 'params = { threadId = "${thread}", input = [{ type = "text", text = "hi" }] }\nuntil = "turn/completed"\n'
        + '[[client.probe]]\nsend = "thread/read"\nparams = { threadId = "${thread}", includeTurns = true }\n'
    )
    record = play(loads(text, "p.toml"), "fake", work_dir=tmp_path)
    methods = [e.frame.get("method") for e in record.wire if isinstance(e.frame, dict)]
    assert methods.index("turn/completed") < methods.index("thread/read")


@given(st.recursive(st.text(max_size=8) | st.integers(), lambda c: st.lists(c, max_size=3), max_leaves=8))
def test_values_without_placeholders_are_left_alone(value: Any) -> None:
    if "${" in str(value):
        return
    assert probe_refs.substitute(value, lambda ref: pytest.fail(f"resolved {ref}")) == value


def test_a_placeholder_inside_a_string_becomes_text() -> None:
    resolve = {"cwd": "/w", "thread": "t1"}.__getitem__
    assert probe_refs.substitute({"p": "${cwd}/a", "q": ["${thread}"], "n": 3}, resolve) == {
        "p": "/w/a",
        "q": ["t1"],
        "n": 3,
    }
    with pytest.raises(probe_refs.RefError, match="cannot be put inside a string"):
        probe_refs.substitute("x${cwd}", lambda ref: {"a": 1})


BUSY = (
    HEAD
    + """
[[turns]]
input = "Say hello"

[[turns.responses]]

[[turns.responses.items]]
type = "message"
text = "a b c d "
deltas = ["a ", "b ", "c ", "d "]
delay_ms = 100

[client]
play_turns = false

[[client.probe]]
id = "turn"
send = "turn/start"
params = { threadId = "${thread}", input = [{ type = "text", text = "Say hello" }] }
until = "item/agentMessage/delta"

[[client.probe]]
send = "turn/steer"
params = { threadId = "${thread}", input = [{ type = "text", text = "x" }], expectedTurnId = "wrong" }
no_wait = true

[[client.probe]]
send = "turn/steer"
params = { threadId = "${thread}", input = [{ type = "text", text = "y" }], expectedTurnId = "${answer.turn.turn.id}" }
until = "turn/completed"
"""
)


@pytest.mark.parametrize("target", ["fake", "fake-process"])
def test_probes_start_the_turn_and_steer_inside_it(tmp_path: Path, target: str) -> None:
    record = play(loads(BUSY, "busy.toml"), target, work_dir=tmp_path)
    assert record.client_errors == [] and record.results == []  # play_turns = false: the client started none
    sent = [f["id"] for f in _sent(record)]
    assert sent[-2:] == [4, 5]
    assert "expected active turn id `wrong`" in str(_answer(record, 4)["error"])
    assert "result" in _answer(record, 5)  # the right turn id, resolved from the turn/start answer


def test_no_wait_sends_the_next_step_before_the_answer(tmp_path: Path) -> None:
    text = (
        HEAD
        + '[[methods]]\nname = "thread/loaded/list"\ndelay_ms = 2000\n'
        + '[[client.probe]]\nsend = "thread/loaded/list"\nparams = {}\nno_wait = true\n'
        + '[[client.probe]]\nsend = "thread/read"\nparams = { threadId = "${thread}" }\n'
    )
    record = play(loads(text, "p.toml"), "fake", work_dir=tmp_path)
    order = [(e.dir, e.frame["id"]) for e in record.wire if isinstance(e.frame, dict) and e.frame.get("id") in (3, 4)]
    assert order == [("c2s", 3), ("c2s", 4), ("s2c", 4), ("s2c", 3)]  # and the late answer is still awaited
    assert record.client_errors == []


def test_a_steer_while_the_approval_is_pending(tmp_path: Path) -> None:
    """``approval_delay_ms``: the user answers late, so a steer action lands while the approval is pending."""
    path = paths.DATA / "real" / "scenarios" / "pending_steer_during_approval.toml"
    record = play(loads(path.read_text(), str(path)), "fake", work_dir=tmp_path)
    assert record.client_errors == []
    timeline = [
        (e.t, e.dir, e.frame.get("method"), e.frame.get("id"))
        for e in record.wire
        if isinstance(e.frame, dict) and e.dir in ("c2s", "s2c")
    ]
    asked = next(t for t, d, m, _ in timeline if m == "item/commandExecution/requestApproval")
    steered = next(t for t, d, m, _ in timeline if m == "turn/steer")
    answered = next(t for t, d, m, i in timeline if d == "c2s" and m is None and i == 0)
    assert asked <= steered < answered and answered - asked >= 0.3
