"""``codex-harness record`` (its masking, exit codes) and the client probe steps on the fakes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_reference_set import REPO

from contracts.expect import Expect
from contracts.record import SessionRecord, WireEntry
from contracts.scenario_file import ScenarioError, dumps, loads
from harness.cli import main
from harness.runner import play
from harness.transcript import Masker, transcript

PROBES = REPO / "tests" / "data" / "real" / "scenarios"


# --- masking ---------------------------------------------------------------------------------------


def test_masks_only_machine_values() -> None:
    run = Path("/tmp/rec-x/run")
    frames = [
        {"method": "remoteControl/status/changed", "params": {"serverName": "box7", "installationId": "abc-123"}},
        {
            "id": 1,
            "result": {
                "userAgent": "codex_harness/0.171.0 (Debian 12.0.0; x86_64) xterm (codex_harness; 0.1.0)",
                "codexHome": "/tmp/rec-x/run/codex-harness-real-k2j_9/codex_home",
            },
        },
        {"method": "item/started", "params": {"item": {"id": "call_1", "processId": "4242", "cwd": "/RUN/workdir"}}},
    ]
    record = SessionRecord("s", "real", Expect(), meta={"started_at": 100.0})
    record.wire = [WireEntry(100.5 + i, "s2c", frame=f) for i, f in enumerate(frames)]
    record.wire.append(WireEntry(104.0, "c2s", raw="this is not json", error="raw_line", size=16))
    record.wire.append(WireEntry(104.5, "note", note="stdin closed"))
    lines = transcript(record, [run], hostname="box7")
    assert [line["t"] for line in lines] == [0.5, 1.5, 2.5, 4.0, 4.5]
    status, init, item, raw, note = (line["msg"] for line in lines)
    assert status["params"] == {"serverName": "<hostname>", "installationId": "<installation-id>"}
    assert init["result"]["codexHome"] == "/RUN/codex_home"
    assert init["result"]["userAgent"] == (
        "codex_harness/0.171.0 (<os> <os-version>; <arch>) <terminal> (codex_harness; 0.1.0)"
    )
    assert item["params"]["item"] == {"id": "call_1", "processId": "<pid>", "cwd": "/RUN/workdir"}  # ids stay
    assert raw == {"_raw": "this is not json"} and note == {"note": "stdin closed"}


def test_a_value_that_only_contains_the_hostname_stays() -> None:
    masker = Masker([], hostname="vm")
    assert masker.value({"text": "a vm here", "host": "vm"}) == {"text": "a vm here", "host": "<hostname>"}


# --- exit codes --------------------------------------------------------------------------------------


def test_a_fake_only_scenario_cannot_be_recorded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["record", "--codex", "/bin/true", "--scenario", "crash_mid_turn", "--out", str(tmp_path / "x.jsonl")])
    assert code == 2 and "can only be produced by the fake" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()


def test_an_invalid_scenario_file_is_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('description = "x"\n[[client.probe]]\nraw = "a"\nclose_stdin = true\n')
    assert main(["record", "--codex", "/bin/true", "--scenario", str(bad), "--out", str(tmp_path / "x.jsonl")]) == 2


def test_an_output_that_cannot_be_written_is_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "dir.jsonl").mkdir()
    code = main(["record", "--codex", "/bin/true", "--scenario", "plain", "--out", str(tmp_path / "dir.jsonl")])
    assert code == 3 and "not a regular file" in capsys.readouterr().err
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    out = str(tmp_path / "x.jsonl")
    code = main(["record", "--scenario", "plain", "--out", out, "--trace-out", str(tmp_path / "busy")])
    assert code == 3 and (tmp_path / "busy" / "notes.txt").read_text() == "mine"


def test_no_binary_is_exit_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CODEX_BIN", raising=False)
    missing = str(tmp_path / "no-codex")
    assert main(["record", "--codex", missing, "--scenario", "plain", "--out", str(tmp_path / "x.jsonl")]) == 3


#: A fast scenario: the handshake of a server that never answers it properly is given up on after 1 s.
_FAST = """name = "fast_plain"
description = "plain, a 1 s request timeout"
[[turns]]
input = "Say hello"
[[turns.responses]]
[[turns.responses.items]]
type = "message"
text = "Hello!"
[client]
request_timeout_ms = 1000
"""
#: Binaries that answer --version like codex-cli 0.171.0 and the handshake with garbage.
_GARBAGE = {
    "not-json": "while read -r line; do echo 'this is not json {'; done",
    "result-not-an-object": (
        f"exec {sys.executable} -c 'import json,sys\n"
        "for line in sys.stdin:\n"
        '    print(json.dumps({\"id\": json.loads(line).get(\"id\"), \"result\": \"garbage\"}), flush=True)\n\''
    ),
}


@pytest.mark.parametrize("kind", sorted(_GARBAGE))
def test_a_handshake_answered_with_garbage_is_not_recorded(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The transcript of a server that answered the handshake with garbage is no reference: exit 1 (it was 0)."""
    binary = tmp_path / "codex"
    binary.write_text(f'#!/bin/sh\ncase "$1" in --version) echo "codex-cli 0.171.0"; exit 0;; esac\n{_GARBAGE[kind]}\n')
    binary.chmod(0o755)
    scenario = tmp_path / "fast.toml"
    scenario.write_text(_FAST)
    out = tmp_path / "x.jsonl"
    code = main(["record", "--codex", str(binary), "--scenario", str(scenario), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "did not answer initialize with a result" in err, err
    assert "not JSON-RPC frames" in err or kind != "not-json", err
    assert not out.exists()


def test_handshake_problem_names_garbage_after_a_good_handshake() -> None:
    from harness.commands.record import handshake_problem

    def rec(*entries: WireEntry) -> SessionRecord:
        return SessionRecord("s", "real", Expect(), wire=list(entries))

    init = WireEntry(0.0, "c2s", frame={"id": 1, "method": "initialize", "params": {}})
    good = WireEntry(0.1, "s2c", frame={"id": 1, "result": {"userAgent": "x"}})
    start = WireEntry(0.2, "c2s", frame={"id": 2, "method": "thread/start", "params": {}})
    started = WireEntry(0.3, "s2c", frame={"id": 2, "result": {"thread": {"id": "t"}}})
    junk = WireEntry(0.4, "s2c", raw="\x1b]52;c;AAAA\x07", error="invalid_json", size=12)
    assert handshake_problem(rec(init, good, start, started)) is None
    problem = handshake_problem(rec(init, good, start, started, junk))
    assert problem is not None and "1 line(s) that are not JSON-RPC frames" in problem and "\x1b" not in problem
    assert "thread/start" in str(handshake_problem(rec(init, good, start)))
    assert handshake_problem(rec(junk), handshake=False) is not None  # probes alone: garbage still counts
    assert handshake_problem(rec(), handshake=False) is None


# --- probe steps in scenario files ----------------------------------------------------------------------

BAD_PROBES = {
    "two kinds": ('send = "x"\nraw = "y"', "exactly one of send, raw, close_stdin"),
    "no kind": ('at = "start"', "exactly one of send, raw, close_stdin"),
    "params without send": ('raw = "y"\nparams = {}', "params only with send"),
    "line break": ('raw = "a\\nb"', "one line"),
    "bad point": ('at = "later"\nraw = "y"', "one of start, thread, end"),
    "long wait": ('raw = "y"\nwait_ms = 60001', "between 0 and 60000"),
    "close not last": ('close_stdin = true\n[[client.probe]]\nraw = "y"', "the last step"),
}


@pytest.mark.parametrize("case", sorted(BAD_PROBES))
def test_bad_probe_steps_are_refused_at_load(case: str) -> None:
    body, expected = BAD_PROBES[case]
    with pytest.raises(ScenarioError, match=expected):
        loads(f'description = "x"\n[[client.probe]]\n{body}\n', "p.toml")


def test_handshake_off_needs_no_turns() -> None:
    text = 'description = "x"\n[client]\nhandshake = false\n[[turns]]\ninput = "hi"\n'
    with pytest.raises(ScenarioError, match=r"client\.handshake"):
        loads(text, "p.toml")


def test_probes_round_trip_through_a_file() -> None:
    scenario = loads((PROBES / "misc_requests.toml").read_text(), "misc_requests.toml")
    again = loads(dumps(scenario), "again.toml")
    assert again.client == scenario.client
    assert scenario.client.probes[0].params == {}  # an empty params table is kept, not dropped


# --- probe steps played ----------------------------------------------------------------------------------


def _errors(record: SessionRecord) -> list[str]:
    return [e.frame["error"]["message"] for e in record.wire if e.dir == "s2c" and e.frame and "error" in e.frame]


def test_request_probes_on_the_in_process_fake(tmp_path: Path) -> None:
    scenario = loads((PROBES / "misc_requests.toml").read_text(), "misc_requests.toml")
    record = play(scenario, "fake", work_dir=tmp_path)
    errors = _errors(record)
    assert errors[:2] == ["Not initialized", "Already initialized"]
    assert "no active turn to interrupt" in errors  # ${thread} became the thread the probe started
    assert record.client_errors == []


@pytest.mark.parametrize("target", ["fake", "fake-process"])
def test_raw_lines_and_stdin_close(tmp_path: Path, target: str) -> None:
    framing = loads((PROBES / "framing.toml").read_text(), str(PROBES / "framing.toml"))
    record = play(framing, target, work_dir=tmp_path / "framing")
    raws = [e.raw for e in record.wire if e.dir == "c2s" and e.frame is None]
    assert raws[2] == "this is not json" and len(raws) == 6
    answered = {e.frame.get("id") for e in record.wire if e.dir == "s2c" and e.frame and "method" not in e.frame}
    assert {"init-1", 77, "x"} <= answered
    eof = loads((PROBES / "stdin_eof.toml").read_text(), str(PROBES / "stdin_eof.toml"))
    record = play(eof, target, work_dir=tmp_path / "eof")
    notes = [e.note for e in record.wire if e.dir == "note"]
    assert notes[0] == "stdin closed" and any(n.startswith("exit status 0 after") for n in notes)
